"""A league run (RunSpec.league) through the service: real coordinator,
learner and actor processes (LightCycles-v0, 32768 steps). The actors keep
the frozen versions and play them; their segments carry only the trained
seats' rows yet count every row's steps; the learner writes the games to
<run_dir>/league/matches.csv, which `rlctl league` rates."""

import contextlib
import csv
import io
import os
import textwrap
import unittest

import rlctl
import test_util
from rlservice import Client, state_name

RUN_FILE = textwrap.dedent("""\
    name: league-through-the-service
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
    policy: {hidden_sizes: [16]}
    resources: {num_actors: 2}
    league: {snapshot_interval: 4, pool_size: 3}
    """)


class LeagueServiceTest(test_util.EmbeddedServiceTest):

    def test_the_actors_play_the_frozen_versions_the_learner_keeps_the_games(self):
        run_file = os.path.join(self.dir, "league.yaml")
        with open(run_file, "w") as f:
            f.write(RUN_FILE)
        c = Client(self.address)
        run = c.wait(c.submit(run_file), timeout=600)
        self.assertEqual(state_name(run.state), "SUCCEEDED",
                         run.failure_reason + "\n" + self.logs("*actor*")[-3000:])
        # Every row's steps count: each segment used (the learner's ledger
        # names them) is 16 x 32 = 512 env steps, though it carries 8 rows.
        with open(os.path.join(self.dir, "runs", run.run_id, "segments.rank0.log")) as f:
            used = sum(len(line.split()) - 2 for line in f if line.startswith("update "))
        self.assertEqual(run.progress.env_steps, 512 * used)
        self.assertGreaterEqual(run.progress.env_steps, 32768)
        actors = self.logs("*actor*")
        # An actor that connects late begins its league with the version it
        # first received (the learner does not wait for it), numbered as
        # the snapshot it stands for.
        for actor in (0, 1):
            self.assertRegex(actors, rf"actor {actor} of run {run.run_id}: league of frozen "
                             r"versions from policy version \d+ \(league version \d+; a "
                             r"version every 4 updates, pool of 3, pfsp sampling\); segments "
                             r"carry the 8 trained seats' rows")
        path = os.path.join(self.dir, "runs", run.run_id, "league", "matches.csv")
        with open(path, newline="") as f:
            matches = list(csv.DictReader(f))
        self.assertGreater(len(matches), 50)
        learner_versions = {int(m["learner_version"]) for m in matches}
        opponents = {int(m["opponent_version"]) for m in matches}
        # A version freezes every 4 updates (v1-v7 at least); the trained
        # policy plays as the next one. The pool keeps the last 3, so the
        # last version's games are against recent ones (version 0 early).
        last = max(learner_versions)
        self.assertTrue(set(range(1, 8)) <= learner_versions <= set(range(1, 17)),
                        learner_versions)
        self.assertIn(0, opponents)
        self.assertTrue(max(opponents) < last, (opponents, last))
        late = [int(m["opponent_version"]) for m in matches if int(m["learner_version"]) == last]
        self.assertTrue(late and min(late) >= last - 4, (late, last))
        for m in matches:
            self.assertIn(float(m["learner_return"]), (-1.0, 0.0, 1.0))
        # The episodes the learner counted are the trained seats' games.
        self.assertLessEqual(run.progress.episodes, len(matches))
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            self.assertEqual(rlctl.main(["league", os.path.dirname(os.path.dirname(path))]), 0)
        self.assertRegex(out.getvalue(), rf"^{len(matches)} matches, {last + 1} versions\n")


if __name__ == "__main__":
    unittest.main()
