"""A run of several policies (RunSpec.policies) through the service: real
coordinator, learner and actor processes (LightCycles-v0, 2 actors, 32768
steps). One learner trains red and blue, each on its own player's rows; the
actors act with both; each policy's checkpoints are kept, numbered alike,
red's as the run's and blue's under <run_dir>/policies/blue. With
resources.learner_per_policy a second learner process trains blue, called
by the first; beside num_learners: 2, blue's gang of two learners (ranks
2-3) trains it, each member called by its rank of red's gang."""

import contextlib
import glob
import io
import os
import re
import signal
import subprocess
import textwrap
import time
import unittest

import onnx
from onnx import numpy_helper
import rlctl
import test_util
from rlservice import Client, state_name

RUN_FILE = textwrap.dedent("""\
    name: policies-through-the-service
    env:
      id: LightCycles-v0
      plugin: light_cycles
      kwargs: {size: 6, opponent: self}
      agents_per_env: 2
      observation_size: 242
      num_discrete_actions: 3
    envs_per_actor: 16
    segment_length: 32
    total_env_steps: 32768
    checkpoint_interval: 8
    policy: {hidden_sizes: [16]}
    resources: {num_actors: 2}
    policies:
      - {name: red, agents: [0]}
      - {name: blue, agents: [1], policy: {hidden_sizes: [8]}}
    """)


def red_and_blue_checkpoints(run_dir):
    """The names of red's (the run's) and blue's checkpoints, sorted."""
    return tuple(sorted(os.path.basename(p) for p in glob.glob(os.path.join(root, "ckpt-*")))
                 for root in (os.path.join(run_dir, "checkpoints"),
                              os.path.join(run_dir, "policies", "blue", "checkpoints")))


class PoliciesServiceTest(test_util.EmbeddedServiceTest):

    def test_one_learner_trains_both_policies_and_keeps_their_checkpoints(self):
        run_file = os.path.join(self.dir, "policies.yaml")
        with open(run_file, "w") as f:
            f.write(RUN_FILE)
        c = Client(self.address)
        run = c.wait(c.submit(run_file), timeout=600)
        self.assertEqual(state_name(run.state), "SUCCEEDED",
                         run.failure_reason + "\n" + self.logs("*actor*")[-3000:])
        self.assertGreaterEqual(run.progress.env_steps, 32768)
        # Red's episodes (its player's games) are the run's; each policy's
        # return and episodes are in the progress, in the run's order.
        self.assertGreater(run.progress.episodes, 0)
        self.assertEqual([p.name for p in run.progress.policies], ["red", "blue"])
        self.assertEqual(run.progress.policies[0].episodes, run.progress.episodes)
        self.assertEqual(run.progress.policies[0].mean_return, run.progress.mean_return)
        self.assertGreater(run.progress.policies[1].episodes, 0)
        for p in run.progress.policies:
            self.assertTrue(-1 <= p.mean_return <= 1, p)
        actors = self.logs("*actor*")
        for actor in (0, 1):
            self.assertIn(f"actor {actor} of run {run.run_id}: 2 policies act, each for its "
                          "agents", actors)
        run_dir = os.path.join(self.dir, "runs", run.run_id)

        def numbers(root):
            names = [os.path.basename(p) for p in glob.glob(os.path.join(root, "ckpt-*"))
                     if os.path.exists(os.path.join(p, "COMPLETE"))]
            return sorted(int(re.sub(r"\D", "", n)) for n in names)

        red = numbers(os.path.join(run_dir, "checkpoints"))
        blue = numbers(os.path.join(run_dir, "policies", "blue", "checkpoints"))
        self.assertTrue(red, os.listdir(run_dir))
        self.assertEqual(red, blue)
        # The last is the final update's (32768 / 1024 steps an update).
        self.assertGreaterEqual(red[-1], 32)
        # rlctl export takes a policy by name, with its own network (blue's
        # hidden layer has 8 units, red's 16).
        os.environ["RL_LOCAL"] = os.path.abspath("trainer/rl_local")
        for name, hidden in (("blue", 8), ("red", 16)):
            output = os.path.join(self.dir, f"{name}.onnx")
            out = io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                code = rlctl.main(["--coordinator", self.address, "export", run.run_id,
                                   "-o", output, "--format", "onnx", "--policy_name", name])
            self.assertEqual(code, 0, out.getvalue())
            self.assertIn(f"exported policy {name} of ", out.getvalue())
            # The first layer's weight: [hidden units, 242 observations].
            shapes = {tuple(t.dims) for t in onnx.load(output).graph.initializer}
            self.assertIn((hidden, 242), shapes, (name, shapes))
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            code = rlctl.main(["--coordinator", self.address, "export", run.run_id,
                               "-o", os.path.join(self.dir, "x.pt"), "--policy_name", "green"])
        self.assertNotEqual(code, 0)
        self.assertIn('has no policy "green" (its policies: red, blue)', out.getvalue())



class LearnerPerPolicyServiceTest(test_util.EmbeddedServiceTest):
    """resources.learner_per_policy: blue on a learner process of its own."""

    LOCAL_WORKERS = "learners=2,actors=2"

    def test_each_policy_trains_on_a_learner_of_its_own(self):
        self.check_blue_trains_on_its_own_learner("per_policy.yaml", RUN_FILE)

    def test_recurrent_policies_train_on_learners_of_their_own(self):
        # Every policy carries the run's core: blue's learner decodes its
        # rows' states from the run's learner's batch.
        self.check_blue_trains_on_its_own_learner(
            "recurrent.yaml", RUN_FILE.replace(
                "policy: {hidden_sizes: [16]}",
                "policy: {hidden_sizes: [16], core: gru, core_size: 8}"))

    def check_blue_trains_on_its_own_learner(self, name, text):
        """Runs `text` with resources.learner_per_policy; checks that blue
        trained on rank 1 (its checkpoints beside red's, its weights
        moving) and returns the last checkpoint's ONNX initializers."""
        run_file = os.path.join(self.dir, name)
        with open(run_file, "w") as f:
            f.write(text.replace("resources: {num_actors: 2}",
                                 "resources: {num_actors: 2, learner_per_policy: true}"))
        c = Client(self.address)
        run = c.wait(c.submit(run_file), timeout=600)
        learners = self.logs("*learner*")
        self.assertEqual(state_name(run.state), "SUCCEEDED",
                         run.failure_reason + "\n" + learners[-3000:])
        self.assertGreaterEqual(run.progress.env_steps, 32768)
        self.assertEqual([p.name for p in run.progress.policies], ["red", "blue"])
        self.assertGreater(run.progress.policies[1].episodes, 0)
        # Rank 1 trained blue, sent its rows by rank 0 (which did not train
        # it itself); the actors streamed to rank 0 alone.
        self.assertIn(f"training policy blue of run {run.run_id} for its learner (rank 0)",
                      learners)
        self.assertIn(f"policy blue of run {run.run_id}: its first update here, update 1 of "
                      "the run's learner", learners)
        actors = self.logs("*actor*")
        streams = set(re.findall(r"rollout stream to (\S+?):?\s", actors))
        self.assertEqual(len(streams), 1, actors[-2000:])
        run_dir = os.path.join(self.dir, "runs", run.run_id)
        red, blue = red_and_blue_checkpoints(run_dir)
        self.assertTrue(red, os.listdir(run_dir))
        self.assertEqual(red, blue)
        self.assertGreaterEqual(len(blue), 2, blue)
        # Its learner trained blue between them: the first kept checkpoint's
        # weights and the last's differ.
        weights = []
        for ckpt in (blue[0], blue[-1]):
            output = os.path.join(self.dir, f"blue-{ckpt}.onnx")
            subprocess.run(
                [os.path.abspath("trainer/rl_local"), "export", f"--run={run_file}",
                 "--checkpoint=" + os.path.join(run_dir, "policies", "blue", "checkpoints",
                                                ckpt),
                 "--format=onnx", f"--output={output}"],
                check=True, capture_output=True)
            weights.append({t.name: numpy_helper.to_array(t).tobytes()
                            for t in onnx.load(output).graph.initializer})
        self.assertEqual(weights[0].keys(), weights[1].keys())
        self.assertNotEqual(weights[0], weights[1])
        return weights[1]


class GangPerPolicyServiceTest(test_util.EmbeddedServiceTest):
    """resources.learner_per_policy beside num_learners: 2: red's gang of two
    (ranks 0-1, which the actors stream to) and blue's gang of two (ranks
    2-3), rank r sending blue's rows to blue's member r."""

    LOCAL_WORKERS = "learners=4,actors=2"

    def test_each_policy_trains_on_a_gang_of_its_own(self):
        run_file = os.path.join(self.dir, "gangs.yaml")
        with open(run_file, "w") as f:
            f.write(RUN_FILE.replace(
                "resources: {num_actors: 2}",
                "resources: {num_actors: 2, num_learners: 2, learner_per_policy: true}"))
        c = Client(self.address)
        run = c.wait(c.submit(run_file), timeout=900)
        learners = self.logs("*learner*")
        self.assertEqual(state_name(run.state), "SUCCEEDED",
                         run.failure_reason + "\n" + learners[-3000:])
        self.assertGreaterEqual(run.progress.env_steps, 32768)
        self.assertEqual([p.name for p in run.progress.policies], ["red", "blue"])
        self.assertGreater(run.progress.policies[1].episodes, 0)
        # Blue's two members met in a gang of their own and each made the
        # run's updates from its rank's rows.
        for member in (0, 1):
            self.assertRegex(learners, rf"joining learner gang {run.run_id}/\S+/policy/blue "
                             rf"as rank {member} of 2")
            self.assertIn(f"training policy blue of run {run.run_id} for its learner "
                          f"(rank {member})", learners)
        self.assertEqual(learners.count(
            f"policy blue of run {run.run_id}: its first update here, update 1 of "
            "the run's learner"), 2, learners[-3000:])
        # The actors streamed to red's two ranks.
        actors = self.logs("*actor*")
        streams = set(re.findall(r"rollout stream to (\S+?):?\s", actors))
        self.assertEqual(len(streams), 2, actors[-2000:])
        run_dir = os.path.join(self.dir, "runs", run.run_id)
        red, blue = red_and_blue_checkpoints(run_dir)
        self.assertTrue(red, os.listdir(run_dir))
        self.assertEqual(red, blue)

    def test_a_member_killed_is_placed_again_and_the_run_goes_on(self):
        run_file = os.path.join(self.dir, "gangs.yaml")
        with open(run_file, "w") as f:
            f.write(RUN_FILE.replace(
                "resources: {num_actors: 2}",
                "resources: {num_actors: 2, num_learners: 2, learner_per_policy: true}")
                    .replace("total_env_steps: 32768", "total_env_steps: 65536"))
        c = Client(self.address)
        run_id = c.submit(run_file).run_id
        run_dir = os.path.join(self.dir, "runs", run_id)
        # Blue's member 1 made updates and blue has a checkpoint.
        member_1 = f"training policy blue of run {run_id} for its learner (rank 1)"
        deadline = time.monotonic() + 600
        while (not red_and_blue_checkpoints(run_dir)[1]
               or not self.learner_logs_with(member_1)):
            run = c.get(run_id)
            self.assertNotIn(state_name(run.state), ("FAILED", "CANCELLED", "SUCCEEDED"),
                             run.failure_reason)
            self.assertLess(time.monotonic(), deadline, "blue's gang never checkpointed:\n" +
                            self.logs("*learner*")[-3000:])
            time.sleep(0.2)
        (victim,) = self.learner_logs_with(member_1)
        steps_before = c.get(run_id).progress.env_steps
        os.kill(self.worker_pid("learner_main", victim), signal.SIGKILL)
        run = c.wait(c.get(run_id), timeout=900)
        self.assertEqual(state_name(run.state), "SUCCEEDED",
                         run.failure_reason + "\n" + self.logs("*learner*")[-3000:])
        self.assertGreaterEqual(run.progress.env_steps, 65536)
        self.assertLess(steps_before, 65536)
        # The coordinator counted the lost member and placed the run's four
        # learners again; blue's gang met a second time, each member
        # resuming from the run's checkpoint.
        with open(os.path.join(self.dir, "coordinator.log")) as f:
            coordinator = f.read()
        self.assertRegex(coordinator, rf"run {run_id}: worker failure 1 of at most")
        self.assertNotRegex(coordinator, rf"run {run_id}: worker failure 2 of")
        learners = self.logs("*learner*")
        for member in (0, 1):
            self.assertGreaterEqual(len(re.findall(
                rf"joining learner gang {run_id}/\S+/policy/blue as rank {member} of 2",
                learners)), 2, learners[-3000:])
        red, blue = red_and_blue_checkpoints(run_dir)
        self.assertEqual(red, blue)

    def learner_logs_with(self, text):
        """The local learners (worker names) whose logs hold `text`."""
        names = []
        for path in sorted(glob.glob(os.path.join(self.dir, "logs", "local-learner-*.log"))):
            with open(path) as f:
                if text in f.read():
                    names.append(os.path.basename(path)[:-len(".log")])
        return names

if __name__ == "__main__":
    unittest.main()
