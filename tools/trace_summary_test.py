"""tools/trace_summary.py on a made-up Kineto trace: the categories, the
GPU's busy share (overlapping kernels counted once) and the top lists."""

import gzip
import json
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                      "trace_summary.py")


def event(cat, name, ts, dur):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur}


TRACE = {"traceEvents": [
    event("cpu_op", "aten::addmm", 0, 400),
    event("cpu_op", "aten::addmm", 500, 400),
    event("cpu_op", "aten::mul", 900, 100),
    event("cuda_runtime", "cudaLaunchKernel", 10, 5),
    # GPU work: [100, 200) and [150, 250) overlap -> 150 us busy, plus
    # [800, 850): 200 us of the 1000 us span.
    event("kernel", "gemm", 100, 100),
    event("kernel", "gemm", 150, 100),
    event("gpu_memcpy", "Memcpy HtoD", 800, 50),
    {"ph": "i", "name": "instant", "ts": 5},  # not a complete event
]}


class TraceSummaryTest(unittest.TestCase):

    def summarise(self, path):
        return subprocess.run([sys.executable, SCRIPT, path, "--top", "2"],
                              check=True, capture_output=True,
                              text=True).stdout

    def test_plain_and_gzipped_traces_give_one_summary(self):
        with tempfile.TemporaryDirectory() as d:
            plain = os.path.join(d, "t.json")
            with open(plain, "w") as f:
                json.dump(TRACE, f)
            zipped = plain + ".gz"
            with gzip.open(zipped, "wt") as f:
                json.dump(TRACE, f)
            out = self.summarise(plain)
            self.assertEqual(out.replace(plain, "T"),
                             self.summarise(zipped).replace(zipped, "T"))
        self.assertIn("7 events over 1.0 ms", out)
        self.assertRegex(out, r"cpu_op\s+3\s+0\.90")
        self.assertRegex(out, r"kernel\s+2\s+0\.20")
        self.assertIn("GPU busy 20.0% of the span (3 kernels and copies)", out)
        cpu_top = out.split("top cpu_op by total time:")[1].split("top")[0]
        self.assertEqual([line.split()[-1] for line in cpu_top.strip().splitlines()],
                         ["aten::addmm", "aten::mul"])
        self.assertIn("2x  aten::addmm", cpu_top)

    def test_a_trace_without_complete_events_is_refused(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "empty.json")
            with open(path, "w") as f:
                json.dump({"traceEvents": [{"ph": "i", "ts": 1}]}, f)
            result = subprocess.run([sys.executable, SCRIPT, path],
                                    capture_output=True, text=True)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("no complete (ph X) events", result.stderr)


if __name__ == "__main__":
    unittest.main()
