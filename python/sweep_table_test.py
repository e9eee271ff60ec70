"""rlctl's sweep views and the client's sweep calls, without a coordinator:
`rlctl sweep get`'s table (trials best first per metric.goal, unscored ones
last, parameters and reasons shown), `sweep list`'s lines, `sweep watch`'s
exit codes, the sweep file and the base run file it names as SubmitSweep
sends them (read_sweep_file, and the request submit_sweep builds), and
wait_sweep's polling through an outage, against a stub stand-in; a bad
--interval, or --sampler/--seed without --optuna, is exit 2 before
anything is submitted."""

import contextlib
import io
import json
import math
import os
import shutil
import tempfile
import unittest
from unittest import mock

import grpc

import rlctl
import rlctl_sweeps
from rlservice import Client, ClientError, Security, read_sweep_file
from rlservice.protos import common_pb2, coordinator_pb2

NAN = float("nan")


def make_sweep(scores, goal="max", state=common_pb2.RUNNING, best_run_id="", reason=""):
    """A Sweep with one trial per score (index i, run "run-<i>")."""
    sweep = coordinator_pb2.Sweep(sweep_id="sweep-000003", state=state, best_run_id=best_run_id,
                                  reason=reason, owner="alice")
    sweep.spec.name = "cartpole-lr"
    sweep.spec.metric.series = "learner/mean_return"
    sweep.spec.metric.goal = goal
    sweep.spec.metric.last_points = 5
    sweep.spec.early_stopping.kind = "asha"
    sweep.spec.early_stopping.first_rung_steps = 25000
    sweep.spec.early_stopping.reduction_factor = 2
    for i, score in enumerate(scores):
        trial = sweep.trials.add(index=i, config=i, run_id=f"run-{i}", score=score,
                                 env_steps=1000 * i)
        trial.state = common_pb2.QUEUED if math.isnan(score) else common_pb2.RUNNING
        trial.parameters["ppo.learning_rate"].number_value = 0.0001 * (i + 1)
    return sweep


def trial_rows(table):
    """The table's trial indices, top to bottom."""
    lines = table.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("TRIAL"))
    return [int(line.split()[0]) for line in lines[header + 1:]]


class SweepTableTest(unittest.TestCase):

    def test_best_first_by_max_with_unscored_last(self):
        table = rlctl_sweeps.sweep_table(make_sweep([10.0, NAN, 30.0, 20.0, NAN, 30.0]))
        # Ties by index; unscored (NaN) trials last, by index.
        self.assertEqual(trial_rows(table), [2, 5, 3, 0, 1, 4])

    def test_min_goal_puts_the_lowest_first(self):
        table = rlctl_sweeps.sweep_table(make_sweep([10.0, 30.0, NAN, -5.0, 20.0], goal="min"))
        self.assertEqual(trial_rows(table), [3, 0, 4, 1, 2])
        self.assertIn("metric: learner/mean_return (min, best of the last 5 points)", table)

    def test_header_names_state_best_run_reason_and_early_stopping(self):
        sweep = make_sweep([475.25, 20.0], state=common_pb2.SUCCEEDED, best_run_id="run-0")
        sweep.trials[0].state = sweep.trials[1].state = common_pb2.SUCCEEDED
        lines = rlctl_sweeps.sweep_table(sweep).splitlines()
        self.assertEqual(lines[0], "sweep-000003  cartpole-lr  SUCCEEDED  trials 2/2 done  "
                         "owner: alice")
        self.assertIn("(max, best of the last 5 points)", lines[1])
        self.assertIn("early stopping: asha (rungs at 25000 env steps x2)", lines[1])
        self.assertEqual(lines[2], "best run: run-0 (score 475.25)")
        self.assertTrue(lines[3].startswith("TRIAL"), lines)  # no reason line

        failed = make_sweep([NAN], state=common_pb2.FAILED,
                            reason="none of its 1 trials succeeded with a score")
        lines = rlctl_sweeps.sweep_table(failed).splitlines()
        self.assertEqual(lines[2], "best run: -")
        self.assertEqual(lines[3], "reason: none of its 1 trials succeeded with a score")

    def test_trial_columns(self):
        sweep = make_sweep([21.3, NAN])
        stopped = sweep.trials[0]
        stopped.state = common_pb2.CANCELLED
        stopped.rung_scores.extend([21.3, NAN])
        stopped.seed_offset = 1
        stopped.reason = ("stopped early at rung 1 (25000 env steps) by asha: score 21.30 is "
                          "not in the best 1/2 of the 8 trials that reached it")
        hidden = stopped.parameters["policy.hidden_sizes"].list_value.values
        hidden.add().number_value = 64
        hidden.add().number_value = 64
        stopped.parameters["policy.activation"].string_value = "relu"
        stopped.parameters["env.normalize"].bool_value = True
        sweep.trials[1].run_id = ""  # not submitted yet
        lines = rlctl_sweeps.sweep_table(sweep).splitlines()
        header = next(line for line in lines if line.startswith("TRIAL"))
        for column in ("RUN", "STATE", "ENV STEPS", "SCORE", "RUNGS", "PARAMETERS", "REASON"):
            self.assertIn(column, header)
        first, second = lines[-2], lines[-1]
        self.assertEqual(first.split()[:6], ["0", "run-0", "CANCELLED", "0", "21.3", "21.3,-"])
        self.assertIn("env.normalize=true policy.activation=relu policy.hidden_sizes=[64,64] "
                      "ppo.learning_rate=0.0001 seed+1", first)
        self.assertTrue(first.endswith(stopped.reason), first)
        self.assertEqual(second.split()[:6], ["1", "-", "QUEUED", "1000", "-", "-"])
        self.assertTrue(second.endswith("ppo.learning_rate=0.0002"), second)

    def test_pbt_shows_the_round_and_each_trials_lineage(self):
        sweep = make_sweep([40.0, 10.0])
        sweep.spec.method = "pbt"
        sweep.spec.early_stopping.kind = ""
        sweep.spec.base.total_env_steps = 300000
        sweep.spec.pbt.interval_steps = 30000
        sweep.spec.pbt.fraction = 0.25
        sweep.pbt_round = 1
        sweep.trials[0].round_run_ids.extend(["run-1", "run-3"])
        sweep.trials[1].round_run_ids.extend(["run-2", "run-4"])
        sweep.trials[1].lineage.append(
            "trial 1 at 30720 env steps: copied trial 0 (score 40, its own 10); "
            "ppo.learning_rate 0.001 -> 0.0012 (x1.2)")
        out = rlctl_sweeps.sweep_table(sweep)
        self.assertIn("population-based training: round 2 of 10 (every 30000 env steps; "
                      "the worst 0.25 copy the best)", out)
        lines = out.splitlines()
        at = lines.index("lineage:")
        self.assertEqual(lines[at + 1:], [
            "trial 0: runs run-1 run-3",
            "trial 1: runs run-2 run-4",
            "  trial 1 at 30720 env steps: copied trial 0 (score 40, its own 10); "
            "ppo.learning_rate 0.001 -> 0.0012 (x1.2)"])
        sweep.state = common_pb2.SUCCEEDED
        self.assertIn("population-based training: ended in round 2 of 10",
                      rlctl_sweeps.sweep_table(sweep))
        # Another method shows neither.
        sweep.spec.method = "random"
        self.assertNotIn("lineage:", rlctl_sweeps.sweep_table(sweep))
        self.assertNotIn("population-based", rlctl_sweeps.sweep_table(sweep))

    def test_network_strings_are_escaped(self):
        sweep = make_sweep([1.0], reason="\x1b[2Jgone")
        sweep.trials[0].reason = "evil\x1b]0;x\x07"
        sweep.trials[0].parameters["name"].string_value = "a\rb"
        table = rlctl_sweeps.sweep_table(sweep)
        for c in "\x1b\x07\r":
            self.assertNotIn(c, table)

    def test_no_trials(self):
        self.assertTrue(rlctl_sweeps.sweep_table(make_sweep([])).endswith("\nno trials"))

    def test_a_listing_without_trials_uses_the_counts(self):
        # ListSweeps leaves out the trials of older sweeps past its budget.
        bare = make_sweep([], state=common_pb2.SUCCEEDED, best_run_id="run-9")
        bare.trials_total, bare.trials_ended, bare.best_score = 40, 38, 487.5
        line = rlctl_sweeps.sweeps_table([bare]).splitlines()[1].split()
        self.assertIn("38/40", line)
        self.assertIn("487.5", line)

    def test_list_lines(self):
        done = make_sweep([3.0, 7.5, NAN], state=common_pb2.SUCCEEDED, best_run_id="run-1")
        done.trials[0].state = done.trials[1].state = common_pb2.SUCCEEDED
        done.trials[2].state = common_pb2.CANCELLED
        running = make_sweep([1.0, NAN])
        running.sweep_id = "sweep-000004"
        lines = rlctl_sweeps.sweeps_table([running, done]).splitlines()
        self.assertEqual(lines[0].split(), ["SWEEP", "STATE", "NAME", "TRIALS", "BEST", "RUN",
                                            "BEST", "SCORE"])
        self.assertEqual(lines[1].split(), ["sweep-000004", "RUNNING", "cartpole-lr", "0/2",
                                            "-", "-"])
        self.assertEqual(lines[2].split(), ["sweep-000003", "SUCCEEDED", "cartpole-lr", "3/3",
                                            "run-1", "7.5"])
        self.assertEqual(rlctl_sweeps.sweeps_table([]), "")


class FakeClient:
    def __init__(self, final):
        self.final = final

    def wait_sweep(self, sweep_id, on_update=None, **kwargs):
        on_update(self.final)
        return self.final


class SweepWatchTest(unittest.TestCase):

    def watch(self, sweep):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = rlctl_sweeps.watch_sweep(FakeClient(sweep), sweep.sweep_id, 60, 2.0)
        return code, out.getvalue()

    def test_exit_codes(self):
        code, out = self.watch(make_sweep([5.0], state=common_pb2.SUCCEEDED,
                                          best_run_id="run-0"))
        self.assertEqual(code, 0)
        self.assertIn("TRIAL", out)
        self.assertTrue(out.endswith("sweep-000003 SUCCEEDED: best run run-0 (score 5)\n"), out)
        code, out = self.watch(make_sweep([NAN], state=common_pb2.FAILED, reason="none succeeded"))
        self.assertEqual(code, 1)
        self.assertTrue(out.endswith("sweep-000003 FAILED: none succeeded\n"), out)
        code, _ = self.watch(make_sweep([NAN], state=common_pb2.CANCELLED))
        self.assertEqual(code, 1)

    def test_bad_interval_is_bad_input(self):
        with self.assertRaisesRegex(ValueError, "--interval: must be > 0"):
            rlctl_sweeps.watch_sweep(FakeClient(make_sweep([])), "sweep-000003", 60, 0)


class SweepArgumentsTest(unittest.TestCase):

    def refused(self, args):
        """rlctl's stderr for `args`: exit 2 (SystemExit, from argparse)
        with no client made, so nothing submitted."""
        err = io.StringIO()
        with mock.patch.object(rlctl, "Client") as client, \
                contextlib.redirect_stderr(err), self.assertRaises(SystemExit) as e:
            rlctl.main(["--coordinator", "127.0.0.1:1", "--insecure", "sweep"] + args)
        self.assertEqual(e.exception.code, 2, err.getvalue())
        client.return_value.submit_sweep.assert_not_called()
        client.assert_not_called()
        return err.getvalue()

    def test_a_bad_interval_submits_nothing(self):
        # Before: `sweep submit F --watch --interval 0` submitted, then exited
        # 2; `--optuna --interval -1` added trials, then died.
        for args in (["submit", "s.yaml", "--watch", "--interval", "0"],
                     ["submit", "s.yaml", "--optuna", "--interval", "-1"],
                     ["submit", "s.yaml", "--watch", "--interval", "inf"],
                     ["watch", "sweep-000003", "--interval", "nan"]):
            self.assertIn("argument --interval: expected seconds > 0", self.refused(args), args)

    def test_optuna_flags_without_optuna_are_refused(self):
        self.assertIn("rlctl sweep submit: error: --sampler: only with --optuna",
                      self.refused(["submit", "s.yaml", "--sampler", "random"]))
        self.assertIn("rlctl sweep submit: error: --seed: only with --optuna",
                      self.refused(["submit", "s.yaml", "--watch", "--seed", "3"]))


class ReadSweepFileTest(unittest.TestCase):

    def setUp(self):
        self.dir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.base = self.write("cartpole.yaml", "env: {id: CartPole-v1}\n")

    def write(self, name, data):
        path = os.path.join(self.dir, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data.encode())
        return path

    def test_base_run_file_is_read_beside_the_sweep_file(self):
        text = "name: s\nbase_run_file: ../cartpole.yaml\nmetric: {series: x}\n"
        path = self.write("sweeps/s.yaml", text)
        self.assertEqual(read_sweep_file(path),
                         (text.encode(), path, b"env: {id: CartPole-v1}\n"))
        # Relative to the sweep file, not to the working directory.
        cwd = os.getcwd()
        os.chdir(os.path.join(self.dir, "sweeps"))
        try:
            self.assertEqual(read_sweep_file("s.yaml")[1:],
                             ("s.yaml", b"env: {id: CartPole-v1}\n"))
        finally:
            os.chdir(cwd)

    def test_absolute_base_and_json(self):
        text = json.dumps({"base_run_file": self.base, "metric": {"series": "x"}})
        path = self.write("other/s.json", text)
        self.assertEqual(read_sweep_file(path), (text.encode(), path,
                                                 b"env: {id: CartPole-v1}\n"))

    def test_without_base_run_file_nothing_more_is_read(self):
        for name, text in [
                ("inline.yaml", "base: {env: {id: CartPole-v1}}\nmetric: {series: x}\n"),
                # Both: the coordinator names the conflict, not a missing file.
                ("both.yaml", "base: {}\nbase_run_file: missing.yaml\n"),
                ("number.yaml", "base_run_file: 3\n"),
                ("list.yaml", "- base_run_file\n"),
                # Not parsed here: sent as it is, for the coordinator's message.
                ("broken.yaml", "base_run_file: [\n"),
                ("broken.json", '{"base_run_file": '),
                ("deep.yaml", "base_run_file: " + "[" * 100000 + "]" * 100000 + "\n"),
                ("binary.yaml", "base_run_file: a\0b\n")]:
            path = self.write(name, text)
            self.assertEqual(read_sweep_file(path), (text.encode(), path, b""), name)

    def test_missing_files_are_named(self):
        path = self.write("s.yaml", "base_run_file: runs/missing.yaml\n")
        with self.assertRaises(ClientError) as e:
            read_sweep_file(path)
        self.assertIsNone(e.exception.code)
        missing = os.path.join(self.dir, "runs/missing.yaml")
        self.assertEqual(str(e.exception), f"cannot read base run file {missing} "
                         f"(base_run_file of {path}): No such file or directory")
        with self.assertRaisesRegex(ClientError, "^cannot read sweep file .*nope.yaml: No such"):
            read_sweep_file(os.path.join(self.dir, "nope.yaml"))
        with self.assertRaisesRegex(ClientError, "^cannot read sweep file"):
            read_sweep_file(self.dir)


class FakeRpcError(grpc.RpcError):
    def __init__(self, code, details):
        super().__init__(details)
        self._code, self._details = code, details

    def code(self):
        return self._code

    def details(self):
        return self._details


class FakeStub:
    """RunServiceStub's sweep calls: records requests, answers from a list
    (an exception in it is raised)."""

    def __init__(self, answers=()):
        self.requests = []
        self.answers = list(answers)

    def _answer(self, request, timeout=None):
        self.requests.append(request)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    SubmitSweep = GetSweep = CancelSweep = _answer


class ClientSweepTest(unittest.TestCase):

    def client(self, answers):
        client = Client("127.0.0.1:1", timeout=1.0, security=Security(insecure=True))
        self.addCleanup(client.close)
        client._stub = FakeStub(answers)
        return client

    def test_submit_sends_the_base_run_file(self):
        tmp = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        self.addCleanup(shutil.rmtree, tmp, True)
        with open(os.path.join(tmp, "base.yaml"), "w") as f:
            f.write("env: {id: CartPole-v1}\n")
        path = os.path.join(tmp, "s.yaml")
        with open(path, "w") as f:
            f.write("base_run_file: base.yaml\n")
        client = self.client([make_sweep([])])
        self.assertEqual(client.submit_sweep(path, idempotency_key="k").sweep_id, "sweep-000003")
        self.assertEqual(client._stub.requests, [coordinator_pb2.SubmitSweepRequest(
            sweep_file=b"base_run_file: base.yaml\n", sweep_file_name=path,
            base_run_file=b"env: {id: CartPole-v1}\n", idempotency_key="k")])

    def test_get_and_cancel_take_a_sweep_or_its_id(self):
        client = self.client([make_sweep([])])
        client.get_sweep("sweep-000003")
        client.cancel_sweep(make_sweep([]))
        self.assertEqual([r.sweep_id for r in client._stub.requests], ["sweep-000003"] * 2)

    def test_wait_polls_through_an_outage_and_reports_changes(self):
        first = make_sweep([NAN])
        later = make_sweep([12.0])
        final = make_sweep([12.0], state=common_pb2.SUCCEEDED, best_run_id="run-0")
        client = self.client([first, first, FakeRpcError(grpc.StatusCode.UNAVAILABLE, "down"),
                              later, final])
        updates, events = [], []
        result = client.wait_sweep(first, on_update=updates.append, poll_s=0.001,
                                   on_unavailable=events.append, on_reconnect=events.append)
        self.assertEqual(result, final)
        self.assertEqual(updates, [first, later, final])  # the repeat is not an update
        self.assertEqual(len(client._stub.requests), 5)
        self.assertEqual(len(events), 2)
        self.assertIn("unavailable (down), retrying for up to 60 s", events[0])
        self.assertIn("reconnected", events[1])

    def test_wait_errors(self):
        client = self.client([make_sweep([])])
        with self.assertRaises(ClientError) as e:
            client.wait_sweep("sweep-000003", timeout=0.05, poll_s=0.01)
        self.assertEqual(e.exception.code, grpc.StatusCode.DEADLINE_EXCEEDED)
        self.assertEqual(str(e.exception), "sweep sweep-000003 not finished after 0.05 s")

        client = self.client([FakeRpcError(grpc.StatusCode.UNAVAILABLE, "down")])
        with self.assertRaises(ClientError) as e:
            client.wait_sweep("sweep-000003", poll_s=0.01, retry_for=0)
        self.assertEqual(e.exception.code, grpc.StatusCode.UNAVAILABLE)
        self.assertIn("unreachable for 0 s (waiting for sweep-000003): down", str(e.exception))

        client = self.client([FakeRpcError(grpc.StatusCode.NOT_FOUND, "no sweep sweep-9")])
        with self.assertRaises(ClientError) as e:
            client.wait_sweep("sweep-9")
        self.assertEqual((e.exception.code, str(e.exception)),
                         (grpc.StatusCode.NOT_FOUND, "no sweep sweep-9"))
        with self.assertRaisesRegex(ValueError, "poll_s: must be > 0"):
            client.wait_sweep("sweep-9", poll_s=0)


if __name__ == "__main__":
    unittest.main()
