"""`rlctl workers` prints each worker's device self-checks: '-' where none
ran, 'N passed', or 'K FAILED' with each failure and its reason below; and
with a learner per policy, the policy each learner trains."""

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

    def test_a_learner_per_policy_names_the_policy_it_trains(self):
        def placed(name, rank, per_policy):
            w = worker(name, [])
            a = w.assignment
            a.run_id, a.rank, a.world_size = "run-000001", rank, 1
            a.spec.resources.learner_per_policy = per_policy
            a.spec.policies.add(name="red")
            a.spec.policies.add(name="blue")
            return w

        self.assertEqual(rlctl.assignment_text(placed("l0", 0, True)),
                         "run-000001 rank 0, policy red")
        self.assertEqual(rlctl.assignment_text(placed("l1", 1, True)),
                         "run-000001 rank 1, policy blue")
        # Gangs of two per policy: ranks 0-1 red's, 2-3 blue's.
        gang = placed("l3", 3, True)
        gang.assignment.spec.resources.num_learners = 2
        gang.assignment.world_size = 2
        self.assertEqual(rlctl.assignment_text(gang),
                         "run-000001 rank 3, policy blue 1/2")
        # One learner training every policy: no policy of its own.
        self.assertEqual(rlctl.assignment_text(placed("l0", 0, False)),
                         "run-000001 rank 0/1")
        run = coordinator_pb2.Run(run_id="run-000001")
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rlctl.print_placement(run, [placed("l1", 1, True), placed("l0", 0, True)])
        lines = out.getvalue().splitlines()
        self.assertEqual(lines[0], "placement:")
        self.assertTrue(lines[1].startswith("  learner rank 0, policy red "), lines[1])
        self.assertTrue(lines[2].startswith("  learner rank 1, policy blue "), lines[2])


if __name__ == "__main__":
    unittest.main()
