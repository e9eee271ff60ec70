"""rlctl's lines and `rlctl export`'s bad outputs, without a coordinator:
the progress line (no ETA once a run is finished, small returns with three
significant digits), reasons whose line breaks are shown as indented lines
while every other control character stays escaped, and `export -o` with a
directory, /dev/null or a path under /proc: one error line naming the path,
exit 2, no file left behind; the rl_local export ran is named; and rlctl starts without Optuna.
Bad arguments and security settings are exit 2 naming the flag before any
call (a client certificate without its key, which gRPC would abort on; a
token or certificate off loopback without --tls-ca; --timeout and
--interval not in (0, a day]; --name with --prefix); `top` shows a gang's
rank 0 figures; `metrics` counts the points in the range asked for; Ctrl-C
is exit 130 without a traceback."""

import argparse
import contextlib
import io
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

import rlctl
import rlctl_metrics
from rlservice import Client, ClientError, Security, TelemetryClient, export_policy
from rlservice.protos import common_pb2, coordinator_pb2, telemetry_pb2


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


def run_rlctl(args, cwd=None, env=None):
    """rlctl in a process of its own (gRPC may abort one): its exit code
    (negative: the signal that ended it) and stderr."""
    code = "import sys, rlctl; sys.exit(rlctl.main(sys.argv[1:]))"
    here = os.path.dirname(os.path.abspath(rlctl.__file__))
    path = os.pathsep.join(p for p in [here, os.environ.get("PYTHONPATH")] if p)
    done = subprocess.run([sys.executable, "-c", code] + args, cwd=cwd,
                          env=dict(os.environ, PYTHONPATH=path, **(env or {})),
                          capture_output=True, text=True, timeout=60)
    return done.returncode, done.stderr


class SecurityTest(unittest.TestCase):

    def setUp(self):
        self.dir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        self.pem = os.path.join(self.dir, "some.pem")  # read, never parsed
        with open(self.pem, "w") as f:
            f.write("not a certificate\n")
        self.token = os.path.join(self.dir, "user.token")
        with open(self.token, "w") as f:
            f.write("secret\n")

    def test_a_certificate_without_its_key_is_bad_input_not_an_abort(self):
        # gRPC aborts the process (SIGABRT, "assertion failed:
        # pem_key_cert_pair->private_key != nullptr") on a half pair.
        for given, missing in (("--tls-cert", "--tls-key"), ("--tls-key", "--tls-cert")):
            code, err = run_rlctl(["--coordinator", "127.0.0.1:1", "--timeout", "1",
                                   "--tls-ca", self.pem, given, self.pem, "list"])
            self.assertEqual(code, 2, err)
            self.assertEqual(len(err.splitlines()), 1, err)
            self.assertIn(f"rlctl: error: {given} (or RL_TLS_", err)
            self.assertIn(f"given without {missing}", err)
        # The same from the environment, and from the Python client.
        code, err = run_rlctl(["--coordinator", "127.0.0.1:1", "--tls-ca", self.pem, "list"],
                              env={"RL_TLS_CERT": self.pem})
        self.assertEqual(code, 2, err)
        self.assertIn("RL_TLS_CERT) given without --tls-key", err)
        script = ("from rlservice import Client, ClientError, Security\n"
                  "try:\n"
                  f"    Client('127.0.0.1:1', security=Security(tls_ca={self.pem!r}, "
                  f"tls_cert={self.pem!r}))\n"
                  "except ClientError as e:\n"
                  "    print(e.code, e)\n")
        done = subprocess.run([sys.executable, "-c", script], env=os.environ.copy(),
                              capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("None --tls-cert", done.stdout)

    def test_a_token_or_certificate_off_loopback_needs_a_ca(self):
        for security, named in (
                (Security(token_file=self.token), "--token-file (or RL_TOKEN_FILE) given"),
                (Security(tls_cert=self.pem, tls_key=self.pem), "--tls-cert/--tls-key given")):
            with self.assertRaises(ClientError) as e:
                Client("node1.invalid:50051", security=security)
            self.assertIsNone(e.exception.code)  # bad input: exit 2
            self.assertIn(named, str(e.exception))
            self.assertIn("without --tls-ca", str(e.exception))
            with self.assertRaisesRegex(ValueError, "without --tls-ca"):
                TelemetryClient("10.0.0.1:50052", security=security)
        code, err = run_rlctl(["--coordinator", "10.0.0.1:50051", "--token-file", self.token,
                               "list"])
        self.assertEqual(code, 2, err)
        self.assertIn("rlctl: error: --token-file (or RL_TOKEN_FILE) given for 10.0.0.1:50051",
                      err)
        # Loopback (local credentials carry the token), --insecure (plaintext
        # without a token, as documented) and a CA are as before; no call is made.
        for target, security in (
                ("127.0.0.1:50051", Security(token_file=self.token)),
                ("[::1]:50051", Security(tls_cert=self.pem, tls_key=self.pem)),
                ("node1.invalid:50051", Security(token_file=self.token, insecure=True)),
                ("node1.invalid:50051", Security(token_file=self.token, tls_ca=self.pem))):
            Client(target, security=security).close()

    def test_the_embedded_coordinators_token_found_here_is_left_out_off_loopback(self):
        os.makedirs(os.path.join(self.dir, "runs", "auth"))
        shutil.copy(self.token, os.path.join(self.dir, "runs", "auth", "user.token"))
        cwd = os.getcwd()
        os.chdir(self.dir)
        saved = os.environ.pop("RL_TOKEN_FILE", None)
        try:
            found = Security.from_env()
            given = Security.from_env(token_file=self.token)
        finally:
            os.chdir(cwd)
            if saved is not None:
                os.environ["RL_TOKEN_FILE"] = saved
        self.assertEqual((found.token_file, found.token_file_found),
                         (os.path.join("runs", "auth", "user.token"), True))
        self.assertEqual((given.token_file, given.token_file_found), (self.token, False))
        Client("node1.invalid:50051", security=found).close()


class ArgumentsTest(unittest.TestCase):

    def refused(self, args):
        """rlctl's stderr for `args`, which argparse must refuse (exit 2)
        before any client is made."""
        err = io.StringIO()
        with mock.patch.object(rlctl, "Client") as client, \
                contextlib.redirect_stderr(err), self.assertRaises(SystemExit) as e:
            rlctl.main(["--coordinator", "127.0.0.1:1", "--insecure"] + args)
        self.assertEqual(e.exception.code, 2, err.getvalue())
        client.assert_not_called()
        return err.getvalue()

    def test_timeout_is_positive_finite_and_at_most_a_day(self):
        for value in ("inf", "nan", "-1", "0", "1e10", "86401", "soon"):
            err = self.refused(["--timeout", value, "list"])
            self.assertIn(f"argument --timeout: expected seconds > 0 and at most 86400 "
                          f"(a day), got '{value}'", err)
        self.assertEqual(rlctl.positive_seconds("86400"), 86400.0)
        self.assertEqual(rlctl.positive_seconds("0.25"), 0.25)

    def test_top_interval_is_positive_finite(self):
        for value in ("0", "-2", "inf", "nan"):
            self.assertIn("argument --interval: expected seconds > 0",
                          self.refused(["top", "--interval", value]))

    def test_metrics_name_and_prefix_exclude_each_other(self):
        err = self.refused(["metrics", "run-000001", "--name", "learner/loss",
                            "--prefix", "actor/"])
        self.assertIn("argument --prefix: not allowed with argument --name", err)


class InterruptTest(unittest.TestCase):

    def test_ctrl_c_is_exit_130_without_a_traceback(self):
        out, err = io.StringIO(), io.StringIO()
        with mock.patch.object(rlctl, "watch", side_effect=KeyboardInterrupt), \
                contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = rlctl.main(["--coordinator", "127.0.0.1:1", "--insecure", "watch",
                                   "run-000001"])
            except KeyboardInterrupt:
                code = "KeyboardInterrupt out of main"
        self.assertEqual(code, 130)
        self.assertEqual(err.getvalue(), "rlctl: interrupted\n")


class FakeTelemetryStub:
    """TelemetryService's Query: the same series for every run."""

    def __init__(self, series):
        self.series = series

    def Query(self, request, timeout=None):
        response = telemetry_pb2.QueryResponse()
        for name, labels, last in self.series:
            if request.names and name not in request.names:
                continue
            s = response.series.add(name=name)
            s.labels.update(labels)
            s.buckets.add(min_step=1, max_step=64, count=3, last=last)
        return response


class FakeCoordinator:
    address = "127.0.0.1:50051"

    def list(self, states=()):
        return [make_run(common_pb2.RUNNING)]

    def workers(self):
        return []


class TopTest(unittest.TestCase):

    def frame(self, series):
        tclient = TelemetryClient("127.0.0.1:1", security=Security(insecure=True))
        self.addCleanup(tclient.close)
        tclient._stub = FakeTelemetryStub(series)
        lines = rlctl.top_frame(FakeCoordinator(), tclient).splitlines()
        header = re.split(r"\s{2,}", lines[1].strip())  # "ENV STEPS" is one column
        return dict(zip(header, lines[2].split()))

    def test_a_gang_of_learners_shows_rank_0s_figures(self):
        # Each learner of a gang labels its figures {rank=N}.
        row = self.frame([(name, {"rank": str(rank)}, value * (rank + 1))
                          for rank in (0, 1)
                          for name, value in (("learner/steps_per_second", 1200.0),
                                              ("learner/mean_return", 475.2),
                                              ("learner/policy_lag", 1.5))])
        self.assertEqual((row["SPS"], row["RETURN"], row["LAG"]), ("1200", "475.2", "1.5"))
        # One learner: the bare series, as before.
        row = self.frame([("learner/steps_per_second", {}, 900.0),
                          ("learner/mean_return", {}, 20.5)])
        self.assertEqual((row["SPS"], row["RETURN"], row["LAG"]), ("900", "20.5", "-"))


class FakeSeries:
    """list_series and query (buckets=1) of one run: `points` {name: steps}."""

    address = "127.0.0.1:50052"

    def __init__(self, points):
        self.points = points

    def list_series(self, run_id):
        return [{"run_id": run_id, "name": name, "labels": {}, "num_points": len(steps),
                 "last_step": max(steps)} for name, steps in self.points.items()]

    def query(self, run_id, since=None, min_step=0, max_step=0, buckets=0):
        out = []
        for name, steps in self.points.items():
            kept = [s for s in steps if s >= min_step and (max_step == 0 or s <= max_step)]
            out.append({"name": name, "labels": {}, "buckets": [
                {"min_step": min(kept), "max_step": max(kept), "count": len(kept),
                 "last": float(max(kept))}] if kept else []})
        return out


class MetricsSeriesTableTest(unittest.TestCase):

    def table(self, **kwargs):
        args = argparse.Namespace(**dict(dict(run_id="run-000001", min_step=0, max_step=0),
                                         **kwargs))
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rlctl_metrics.metrics_series_table(
                FakeSeries({"learner/loss": range(1, 101), "learner/kl": range(1, 11)}),
                args, None)
        return {line.split()[0]: line.split()[2] for line in out.getvalue().splitlines()[1:]}

    def test_points_are_those_in_the_range_asked_for(self):
        self.assertEqual(self.table(), {"learner/kl": "10", "learner/loss": "100"})
        self.assertEqual(self.table(min_step=91), {"learner/loss": "10"})
        self.assertEqual(self.table(min_step=5, max_step=8),
                         {"learner/kl": "4", "learner/loss": "4"})


if __name__ == "__main__":
    unittest.main()
