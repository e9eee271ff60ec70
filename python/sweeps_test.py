"""Optuna's TPE sampler choosing a coordinator sweep's trials (ask/tell
through AddSweepTrial), against the real coordinator with local workers:
examples/sweeps/cartpole_lr_tpe.yaml to a best trial that solved CartPole,
Optuna told each configuration's score, and `rlctl sweep get` showing it."""

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
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            self.assertEqual(rlctl.main(["--coordinator", self.address, "sweep", "get",
                                         sweep.sweep_id]), 0)
        table = out.getvalue()
        print(table)
        self.assertIn(sweep.best_run_id, table)
        self.assertIn("ppo.learning_rate=", table)
        # A sweep the coordinator draws itself is not Optuna's.
        with self.assertRaises(ClientError) as e:
            optuna_search(c, "examples/sweeps/cartpole_lr.yaml")
        self.assertIn("method external", str(e.exception))


if __name__ == "__main__":
    unittest.main()
