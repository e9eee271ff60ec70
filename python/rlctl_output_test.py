"""rlctl's lines and `rlctl export`'s bad outputs, without a coordinator:
the progress line (no ETA once a run is finished, small returns with three
significant digits), reasons whose line breaks are shown as indented lines
while every other control character stays escaped, and `export -o` with a
directory, /dev/null or a path under /proc: one error line naming the path,
exit 2, no file left behind; the rl_local export ran is named; and rlctl starts without Optuna."""

import contextlib
import io
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import unittest

import rlctl
from rlservice import ClientError, export_policy
from rlservice.protos import common_pb2, coordinator_pb2


def make_run(state, env_steps=5000, total=10000, mean_return=475.2, reason=""):
    run = coordinator_pb2.Run(run_id="run-000007", state=state, failure_reason=reason)
    run.spec.total_env_steps = total
    run.spec.env.id = "CartPole-v1"
    run.progress.env_steps = env_steps
    run.progress.steps_per_second = 1000
    run.progress.mean_return = mean_return
    run.progress.policy_version = 12
    return run


class ImportTest(unittest.TestCase):

    def test_rlctl_starts_without_optuna(self):
        # Optuna is for `rlctl sweep --optuna` alone: a machine without it
        # (a GPU box's own Python) still submits and watches runs.
        code = ("import sys; sys.modules['optuna'] = None\n"
                "import rlctl\n"
                "print(rlctl.progress_line.__name__)")
        out = subprocess.run([sys.executable, "-c", code], env=os.environ.copy(),
                             capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.strip(), "progress_line")


class ProgressLineTest(unittest.TestCase):

    def test_eta_while_running_none_once_finished(self):
        self.assertIn("| ETA 5s", rlctl.progress_line(make_run(common_pb2.RUNNING)))
        for state in (common_pb2.SUCCEEDED, common_pb2.FAILED, common_pb2.CANCELLED):
            line = rlctl.progress_line(make_run(state))
            self.assertNotIn("ETA", line)
            self.assertTrue(line.endswith("| v12"), line)

    def test_small_returns_show_three_significant_digits(self):
        nan = float("nan")
        shown = {value: rlctl.progress_line(make_run(common_pb2.RUNNING, mean_return=value))
                 for value in (475.24, 12.34, 9.876, 0.0123, -0.5, nan)}
        self.assertIn("return(100) 475.2 |", shown[475.24])
        self.assertIn("return(100) 12.3 |", shown[12.34])
        self.assertIn("return(100) 9.88 |", shown[9.876])
        self.assertIn("return(100) 0.0123 |", shown[0.0123])
        self.assertIn("return(100) -0.500 |", shown[-0.5])
        self.assertIn("return(100) - |", shown[nan])

    def test_a_run_without_progress_shows_no_return(self):
        # A run that failed before its learner reported anything: its
        # progress is the proto's zeros, not a mean return of 0.
        line = rlctl.progress_line(make_run(common_pb2.FAILED, env_steps=0, mean_return=0))
        self.assertIn("return(100) - |", line)
        run = make_run(common_pb2.RUNNING, mean_return=0)
        run.progress.episodes = 40
        self.assertIn("return(100) 0.00 |", rlctl.progress_line(run))


    def test_several_policies_show_each_ones_return(self):
        run = make_run(common_pb2.RUNNING, mean_return=0.52)
        for name, value, episodes in (("red", 0.52, 40), ("blue", -0.31, 40), ("green", 0, 0)):
            p = run.progress.policies.add()
            p.name, p.mean_return, p.episodes = name, value, episodes
        self.assertIn("return(100) red 0.520, blue -0.310, green - |",
                      rlctl.progress_line(run))


class ReasonTest(unittest.TestCase):

    def test_line_breaks_are_lines_other_controls_stay_escaped(self):
        reason = "learner exited 1:\nerror: update 3: loss is nan\r\n\x1b[2Jdone\rx\n"
        run = make_run(common_pb2.FAILED, reason=reason)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rlctl.print_run(run)
        shown = out.getvalue()
        self.assertNotIn("\\n", shown)
        self.assertIn("reason: learner exited 1:\n    error: update 3: loss is nan\n"
                      "    \\x1b[2Jdone\\rx", shown)
        self.assertNotIn("\x1b", shown)
        self.assertNotIn("\r", shown)
        self.assertTrue(shown.endswith("\\rx\n"), shown)  # no empty last line
        # text() itself still shows every control character escaped.
        self.assertEqual(rlctl.text("a\nb"), "a\\nb")

    def test_long_reasons_are_cut(self):
        shown = rlctl.text_lines("x\n" * 5000)
        self.assertTrue(shown.endswith("... (1000+ characters)"), shown[-40:])
        self.assertLessEqual(shown.count("\n"), 500)


class ExportOutputTest(unittest.TestCase):

    def setUp(self):
        self.dir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        # A stand-in rl_local: writes --output, then fails as a failed export
        # would, or succeeds as rl_local does.
        self.rl_local = os.path.join(self.dir, "rl_local")
        with open(self.rl_local, "w") as f:
            f.write('#!/bin/sh\nfor a; do case "$a" in --output=*) out="${a#--output=}";; '
                    'esac; done\necho partial > "$out"\n'
                    'if [ -n "$FAIL" ]; then echo "error: cannot write the sidecar" >&2; '
                    'exit 1; fi\necho "{}" > "$out.json"\necho "exported x to $out"\n')
        os.chmod(self.rl_local, stat.S_IRWXU)
        saved = os.environ.get("RL_LOCAL")
        os.environ["RL_LOCAL"] = self.rl_local
        self.addCleanup(lambda: os.environ.__setitem__("RL_LOCAL", saved) if saved
                        else os.environ.pop("RL_LOCAL", None))

    def export(self, output):
        """rlctl export against no coordinator: exit code, stdout, stderr."""
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = rlctl.main(["--coordinator", "127.0.0.1:1", "--insecure", "--timeout", "1",
                               "export", "run-000001", "-o", output])
        return code, out.getvalue(), err.getvalue()

    def assert_refused(self, output, words):
        code, out, err = self.export(output)
        self.assertEqual(code, 2, err)
        self.assertEqual(out, "")
        self.assertEqual(len(err.splitlines()), 1, err)
        self.assertTrue(err.startswith(f"rlctl: error: output {output}"), err)
        self.assertIn(words, err)
        self.assertNotIn("Traceback", err)

    def test_a_directory_is_refused(self):
        self.assert_refused(self.dir, "is a directory")
        self.assertEqual(sorted(os.listdir(self.dir)), ["rl_local"])

    def test_dev_null_is_refused_and_no_sidecar_is_made(self):
        self.assert_refused("/dev/null", "not a regular file")
        self.assertFalse(os.path.exists("/dev/null.json"))

    def test_proc_and_sys_are_refused(self):
        self.assert_refused("/proc/policy.pt", "under /proc")
        self.assert_refused("/proc/self/status", "under /proc")
        self.assert_refused("/sys/policy.pt", "under /sys")

    def test_a_missing_directory_is_named(self):
        self.assert_refused(os.path.join(self.dir, "no", "policy.pt"), "does not exist")

    def test_a_bad_rl_local_is_bad_input(self):
        os.environ["RL_LOCAL"] = os.path.join(self.dir, "missing")
        code, _, err = self.export(os.path.join(self.dir, "policy.pt"))
        self.assertEqual(code, 2)
        self.assertIn(f"$RL_LOCAL={self.dir}/missing is not an executable file", err)

    def test_a_failed_export_leaves_no_file_and_names_its_rl_local(self):
        class Runs:  # the coordinator's answer to GetRun
            def get(self, run_id):
                run = make_run(common_pb2.SUCCEEDED)
                run.run_id = run_id
                run.checkpoint_dir = "/nowhere/run-000001"
                return run

        output = os.path.join(self.dir, "policy.pt")
        os.environ["FAIL"] = "1"
        try:
            done = export_policy(Runs(), "run-000001", output)
        finally:
            del os.environ["FAIL"]
        self.assertEqual(done.returncode, 1)
        self.assertFalse(os.path.exists(output))
        self.assertFalse(os.path.exists(output + ".json"))
        # A file that was there before is not removed.
        with open(output, "w") as f:
            f.write("old")
        os.environ["FAIL"] = "1"
        try:
            export_policy(Runs(), "run-000001", output)
        finally:
            del os.environ["FAIL"]
        self.assertTrue(os.path.exists(output))
        # rlctl export says which rl_local it ran.
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            self.assertEqual(rlctl.export(Runs(), type("Args", (), dict(
                run_id="run-000001", output=output, checkpoint=None, format="onnx",
                sampled=False))), 0)
        self.assertEqual(out.getvalue().splitlines(),
                         [f"rl_local: {self.rl_local} ($RL_LOCAL)", f"exported x to {output}"])
        self.assertTrue(os.path.exists(output + ".json"))

    def test_no_run_checkpoint_directory_is_not_found(self):
        class Runs:
            def get(self, run_id):
                return make_run(common_pb2.QUEUED)

        with self.assertRaises(ClientError) as e:
            export_policy(Runs(), "run-000007", os.path.join(self.dir, "policy.pt"))
        self.assertEqual(e.exception.code.name, "NOT_FOUND")


if __name__ == "__main__":
    unittest.main()
