"""`rlctl workers` prints each worker's device self-checks: '-' where none
ran, 'N passed', or 'K FAILED' with each failure and its reason below."""

import contextlib
import io
import unittest

import rlctl
from rlservice.protos import coordinator_pb2


def worker(name, checks):
    w = coordinator_pb2.Worker(worker_id=name, alive=True)
    w.capabilities.role = coordinator_pb2.LEARNER
    w.capabilities.devices.append("cuda:0")
    for check, passed, detail in checks:
        w.device_checks.add(check=check, passed=passed, detail=detail)
    return w


class WorkersTest(unittest.TestCase):

    def test_device_checks_are_summed_up_and_failures_named(self):
        workers = [
            worker("learner-0", []),
            worker("learner-1", [("updating on cuda:0 mlp float32", True, ""),
                                 ("acting on cuda:0 mlp", True, "")]),
            worker("learner-2", [("updating on cuda:0 mlp float32", True, ""),
                                 ("acting on cuda:0 mlp", False,
                                  "values differ by 0.3")]),
        ]
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rlctl.print_workers(workers)
        lines = out.getvalue().splitlines()
        self.assertIn("CHECKS", lines[0])
        column = lines[0].index("CHECKS")
        self.assertEqual(lines[1][column:].split()[0], "-")
        self.assertEqual(lines[2][column:column + 9].strip(), "2 passed")
        self.assertEqual(lines[3][column:column + 9].strip(), "1 FAILED")
        self.assertEqual(lines[4], "  self-check FAILED: acting on cuda:0 mlp: "
                         "values differ by 0.3")
        self.assertEqual(len(lines), 5)


if __name__ == "__main__":
    unittest.main()
