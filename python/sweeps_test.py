"""Optuna's TPE sampler choosing a coordinator sweep's trials (ask/tell
through AddSweepTrial), against the real coordinator with local workers:
examples/sweeps/cartpole_lr_tpe.yaml to a best trial that solved CartPole,
Optuna told each configuration's score, and `rlctl sweep get` showing it;
and population-based training (examples/sweeps/cartpole_pbt.yaml) through
the Python client, rounds going on from the round before's checkpoints."""

import contextlib
import io
import math
import os
import shutil
import tempfile
import unittest

import optuna

import rlctl
import test_util
from rlservice import Client, ClientError, state_name
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


if __name__ == "__main__":
    unittest.main()
