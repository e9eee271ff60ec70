"""Optuna's TPE sampler choosing a coordinator sweep's trials (ask/tell
through AddSweepTrial), against the real coordinator with local workers:
examples/sweeps/cartpole_lr_tpe.yaml to a best trial that solved CartPole,
Optuna told each configuration's score, and `rlctl sweep get` showing it;
and population-based training (examples/sweeps/cartpole_pbt.yaml) through
the Python client, rounds going on from the round before's checkpoints.
Without a coordinator: the Optuna driver polls through a coordinator
outage (a restart) as wait_sweep does, and refuses a bad poll interval
before submitting anything."""

import contextlib
import io
import math
import os
import shutil
import tempfile
import unittest

import grpc
import optuna

import rlctl
import test_util
from rlservice import Client, ClientError, Security, state_name
from rlservice.protos import common_pb2, coordinator_pb2
from rlservice.sweeps import optuna_search


class OptunaSweepTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        cls.coordinator, cls.address = test_util.start_coordinator(
            cls.dir, f"--log_dir={cls.dir}/logs", "--local_workers=learners=2,actors=2")
        os.environ["RL_TOKEN_FILE"] = f"{cls.dir}/runs/auth/user.token"

    @classmethod
    def tearDownClass(cls):
        os.environ.pop("RL_TOKEN_FILE", None)
        test_util.stop(cls.coordinator)
        shutil.rmtree(cls.dir, ignore_errors=True)

    def sweep_get(self, sweep_id):
        """What `rlctl sweep get SWEEP_ID` prints (printed here too)."""
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            self.assertEqual(rlctl.main(["--coordinator", self.address, "sweep", "get",
                                         sweep_id]), 0)
        print(out.getvalue())
        return out.getvalue()

    def test_tpe_chooses_the_trials_and_is_told_their_scores(self):
        c = Client(self.address)
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        sweep, study = optuna_search(c, "examples/sweeps/cartpole_lr_tpe.yaml",
                                     poll_s=0.5, timeout=1200)
        self.assertEqual(state_name(sweep.state), "SUCCEEDED", sweep.reason)
        self.assertIsInstance(study.sampler, optuna.samplers.TPESampler)
        self.assertEqual(len(sweep.trials), 8)
        self.assertEqual(len(study.trials), 8)
        for trial, asked in zip(sweep.trials, study.trials):
            # What Optuna asked for is what the coordinator ran.
            lr = trial.parameters["ppo.learning_rate"].number_value
            self.assertAlmostEqual(lr, asked.params["ppo.learning_rate"])
            self.assertTrue(1e-4 <= lr <= 1e-2)
            run = c.get(trial.run_id)
            self.assertAlmostEqual(run.spec.ppo.learning_rate, lr, places=6)
            # ... and it was told how that went.
            if state_name(trial.state) == "SUCCEEDED":
                self.assertEqual(asked.state, optuna.trial.TrialState.COMPLETE)
                self.assertAlmostEqual(asked.value, trial.score)
            elif "stopped early" in trial.reason:
                self.assertEqual(asked.state, optuna.trial.TrialState.PRUNED)
        best = c.get(sweep.best_run_id)
        self.assertGreaterEqual(best.progress.mean_return, 475)
        self.assertAlmostEqual(study.best_value,
                               max(t.score for t in sweep.trials
                                   if state_name(t.state) == "SUCCEEDED"))
        # The table rlctl prints, best first.
        table = self.sweep_get(sweep.sweep_id)
        self.assertIn(sweep.best_run_id, table)
        self.assertIn("ppo.learning_rate=", table)
        # A sweep the coordinator draws itself is not Optuna's.
        with self.assertRaises(ClientError) as e:
            optuna_search(c, "examples/sweeps/cartpole_lr.yaml")
        self.assertIn("method external", str(e.exception))

    def test_population_based_training_through_the_client(self):
        """examples/sweeps/cartpole_pbt.yaml through the Python client: its
        members' rounds are runs that go on from the round before's
        checkpoints; it ends with a member that solved CartPole, and rlctl
        shows each trial's runs and lineage."""
        c = Client(self.address)
        sweep = c.submit_sweep("examples/sweeps/cartpole_pbt.yaml")
        self.assertEqual(len(sweep.trials), 4)
        sweep = c.wait_sweep(sweep.sweep_id, timeout=1200, poll_s=0.5)
        self.assertEqual(state_name(sweep.state), "SUCCEEDED", sweep.reason)
        copies = 0
        for trial in sweep.trials:
            self.assertGreaterEqual(len(trial.round_run_ids), 1)
            self.assertEqual(trial.run_id, trial.round_run_ids[-1])
            copies += len(trial.lineage)
            for r, run_id in enumerate(trial.round_run_ids):
                run = c.get(run_id)
                self.assertEqual(state_name(run.state), "SUCCEEDED")
                if r > 0:  # from a run of the round before
                    self.assertTrue(run.start_from_run, run_id)
                    earlier = {t.round_run_ids[r - 1] for t in sweep.trials
                               if len(t.round_run_ids) >= r}
                    self.assertIn(run.start_from_run, earlier)
                if r < len(trial.round_run_ids) - 1:  # stopped at its round's end
                    self.assertEqual(run.stop_env_steps, 25000 * (r + 1))
                    self.assertGreaterEqual(run.progress.env_steps, run.stop_env_steps)
        self.assertGreaterEqual(copies, 1, "no member copied a better one")
        best = c.get(sweep.best_run_id)
        self.assertGreaterEqual(best.progress.mean_return, 475)
        table = self.sweep_get(sweep.sweep_id)
        self.assertIn("population-based training: ended in round", table)
        self.assertIn("lineage:", table)
        self.assertIn("copied trial", table)


class FakeRpcError(grpc.RpcError):
    def __init__(self, code, details):
        super().__init__(details)
        self._code, self._details = code, details

    def code(self):
        return self._code

    def details(self):
        return self._details


class OneTrialStub:
    """RunServiceStub's sweep calls for an external sweep of one
    configuration: GetSweep is UNAVAILABLE `outages` times first (a
    coordinator restart); the trial added succeeds, score 7.5, by the next
    poll."""

    def __init__(self, outages):
        self.outages = outages
        self.calls = []
        self.sweep = coordinator_pb2.Sweep(sweep_id="sweep-000001", state=common_pb2.RUNNING)
        spec = self.sweep.spec
        spec.method, spec.max_trials, spec.concurrency, spec.seeds_per_config = (
            "external", 1, 1, 1)
        spec.seed, spec.metric.series = 1, "learner/mean_return"
        spec.parameters["ppo.learning_rate"].distribution = "log_uniform"
        spec.parameters["ppo.learning_rate"].min = 1e-4
        spec.parameters["ppo.learning_rate"].max = 1e-2

    def SubmitSweep(self, request, timeout=None):
        self.calls.append("SubmitSweep")
        return coordinator_pb2.Sweep(sweep_id=self.sweep.sweep_id, state=self.sweep.state,
                                     spec=self.sweep.spec)

    def GetSweep(self, request, timeout=None):
        self.calls.append("GetSweep")
        if self.outages:
            self.outages -= 1
            raise FakeRpcError(grpc.StatusCode.UNAVAILABLE, "connection refused")
        if self.sweep.trials:
            for t in self.sweep.trials:
                t.state, t.score = common_pb2.SUCCEEDED, 7.5
            self.sweep.state, self.sweep.best_run_id = common_pb2.SUCCEEDED, "run-000001"
        return coordinator_pb2.Sweep.FromString(self.sweep.SerializeToString())

    def AddSweepTrial(self, request, timeout=None):
        self.calls.append("AddSweepTrial")
        n = len(self.sweep.trials)
        trial = self.sweep.trials.add(index=n, config=n, run_id=f"run-{n + 1:06d}",
                                      state=common_pb2.QUEUED, score=float("nan"))
        for path, value in request.parameters.items():
            trial.parameters[path].CopyFrom(value)
        return coordinator_pb2.Sweep.FromString(self.sweep.SerializeToString())


class OptunaOutageTest(unittest.TestCase):

    def setUp(self):
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.dir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        self.sweep_file = os.path.join(self.dir, "s.yaml")
        with open(self.sweep_file, "w") as f:
            f.write("method: external\n")  # the stub answers for the coordinator

    def client(self, stub):
        client = Client("127.0.0.1:1", timeout=1.0, security=Security(insecure=True))
        self.addCleanup(client.close)
        client._stub = stub
        return client

    def test_the_search_carries_on_through_a_coordinator_outage(self):
        stub = OneTrialStub(outages=1)
        events = []
        sweep, study = optuna_search(self.client(stub), self.sweep_file, poll_s=0.001,
                                     on_unavailable=events.append,
                                     on_reconnect=events.append)
        self.assertEqual(state_name(sweep.state), "SUCCEEDED")
        self.assertEqual(stub.calls, ["SubmitSweep", "GetSweep", "GetSweep", "AddSweepTrial",
                                      "GetSweep"])
        self.assertEqual([(t.state, t.value) for t in study.trials],
                         [(optuna.trial.TrialState.COMPLETE, 7.5)])
        self.assertEqual(len(events), 2)
        self.assertIn("unavailable (connection refused), retrying for up to 60 s", events[0])
        self.assertIn("reconnected", events[1])

    def test_an_outage_past_retry_for_ends_it_unavailable(self):
        stub = OneTrialStub(outages=1000)
        with self.assertRaises(ClientError) as e:
            optuna_search(self.client(stub), self.sweep_file, poll_s=0.001, retry_for=0)
        self.assertEqual(e.exception.code, grpc.StatusCode.UNAVAILABLE)
        self.assertIn("unreachable for 0 s (waiting for sweep-000001)", str(e.exception))

    def test_a_bad_interval_submits_nothing(self):
        stub = OneTrialStub(outages=0)
        for poll_s in (0, -1, float("inf"), float("nan")):
            with self.assertRaisesRegex(ValueError, "poll_s: must be > 0"):
                optuna_search(self.client(stub), self.sweep_file, poll_s=poll_s)
        self.assertEqual(stub.calls, [])


if __name__ == "__main__":
    unittest.main()
