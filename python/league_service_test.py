"""A league run (RunSpec.league) through the service: real coordinator,
learner and actor processes (LightCycles-v0, 32768 steps). The actors keep
the frozen versions and play them; their segments carry only the trained
seats' rows yet count every row's steps; a fixed member (the scripted
cycle as TorchScript) plays its share; the learner writes the games to
<run_dir>/league/matches.csv, which `rlctl league` rates, and emits the
same ratings (league/rating, league/member_rating) to telemetry. An actor
whose process is killed starts again with the league's pool, which the
learner keeps and sends it (PolicyUpdate.league_pool)."""

import contextlib
import csv
import io
import os
import re
import signal
import subprocess
import textwrap
import time
import unittest

import rlctl
import test_util
from rlservice import Client, TelemetryClient, state_name
from rlservice import league as lg

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
    league:
      snapshot_interval: 4
      pool_size: 3
      members: [{name: scripted, share: 0.25, policy_file: MEMBER}]
    """)


class LeagueServiceTest(test_util.EmbeddedServiceTest):

    WITH_TELEMETRY = True

    def test_the_actors_play_the_frozen_versions_the_learner_keeps_the_games(self):
        member = os.path.join(self.dir, "scripted_cycle.pt")
        subprocess.run(["examples/multi_agent/scripted_cycle", "--size=6",
                        f"--output={member}"], check=True, timeout=120)
        run_file = os.path.join(self.dir, "league.yaml")
        with open(run_file, "w") as f:
            f.write(RUN_FILE.replace("MEMBER", member))
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
                             r"versions from policy version \d+ \(league version \d+, \d+ "
                             r"earlier versions from the learner; pool v\d+-v\d+ "
                             r"\(\d+ versions, pfsp\), member scripted; a version every 4 "
                             r"updates, at most 3\); segments carry the 8 trained seats' rows")
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
        # The member, version -1, played about a quarter of the games.
        self.assertIn(-1, opponents)
        self.assertEqual(min(opponents), -1)
        member_games = sum(1 for m in matches if int(m["opponent_version"]) == -1)
        self.assertTrue(0.1 < member_games / len(matches) < 0.45, (member_games, len(matches)))
        self.assertTrue(max(opponents) < last, (opponents, last))
        late = [int(m["opponent_version"]) for m in matches
                if int(m["learner_version"]) == last and int(m["opponent_version"]) >= 0]
        self.assertTrue(late and min(late) >= last - 4, (late, last))
        for m in matches:
            self.assertIn(float(m["learner_return"]), (-1.0, 0.0, 1.0))
        # The episodes the learner counted are the trained seats' games.
        self.assertLessEqual(run.progress.episodes, len(matches))
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            self.assertEqual(rlctl.main(["league", os.path.dirname(os.path.dirname(path))]), 0)
        self.assertRegex(out.getvalue(), rf"^{len(matches)} matches, {last + 1} versions, 1 member\n")
        self.assertRegex(out.getvalue(), r"\nm1 ")
        # The learner rated the same games as rlctl does (OpenSkill): the
        # trained policy's last version and the member, in telemetry.
        ratings = {r.version: r for r in lg.rate(lg.read_matches(path))}
        telemetry = TelemetryClient(self.telemetry_address, timeout=5)
        self.addCleanup(telemetry.close)
        deadline = time.monotonic() + 60
        while True:
            series = {(s["name"], s["labels"].get("member", "")): s["points"]
                      for s in telemetry.query(run.run_id, prefix="league/")}
            got = {key: points[-1].value for key, points in series.items() if points}
            want = {("league/rating", ""): ratings[last].mu,
                    ("league/member_rating", "m1"): ratings[-1].mu}
            if all(key in got and abs(got[key] - value) < 1e-6 for key, value in want.items()):
                break
            if time.monotonic() > deadline:
                self.fail(f"telemetry's league ratings {got}, rlctl's {want}")
            time.sleep(0.5)

    def test_an_actor_that_starts_again_begins_with_the_leagues_pool(self):
        run_file = os.path.join(self.dir, "restart.yaml")
        with open(run_file, "w") as f:
            f.write(RUN_FILE.replace("total_env_steps: 32768", "total_env_steps: 100000000")
                    .replace("snapshot_interval: 4", "snapshot_interval: 2")
                    .replace("pool_size: 3", "pool_size: 4")
                    .replace("  members: [{name: scripted, share: 0.25, policy_file: MEMBER}]\n",
                             ""))
        c = Client(self.address)
        run_id = c.submit(run_file).run_id
        line = re.compile(rf"actor \d+ of run {run_id}: league of frozen versions from policy "
                          r"version \d+ \(league version (\d+), (\d+) earlier versions from "
                          r"the learner; pool v(\d+)-v(\d+) \((\d+) versions")
        # Versions 0-4 of the league at least (9 updates), and local-actor-0
        # playing its league: a process makes its league once.
        deadline = time.monotonic() + 300
        while ((run := c.get(run_id)).progress.policy_version < 10
               or not line.findall(self.logs("*actor-0*"))):
            self.assertNotIn(state_name(run.state), ("FAILED", "CANCELLED", "SUCCEEDED"),
                             run.failure_reason)
            self.assertLess(time.monotonic(), deadline,
                            f"no 9 updates with local-actor-0's league: {run}")
            time.sleep(0.2)
        before = len(line.findall(self.logs("*actor-0*")))
        os.kill(self.worker_pid("actor_main", "local-actor-0"), signal.SIGKILL)
        # The coordinator's local workers start it again; it joins the run.
        deadline = time.monotonic() + 300
        while len(line.findall(self.logs("*actor-0*"))) <= before:
            self.assertLess(time.monotonic(), deadline,
                            "local-actor-0 did not start its league again:\n" +
                            self.logs("*actor-0*")[-3000:])
            time.sleep(0.2)
        again = line.findall(self.logs("*actor-0*"))[-1]
        own, kept, oldest, newest, size = map(int, again)
        # Begun again at league version >= 4, it took the 3 versions the
        # learner kept before the one it was sent (pool_size 4 with its own,
        # which may be a newer one than that).
        self.assertGreaterEqual(own, 4)
        self.assertEqual((kept, newest, size), (3, own, 4), again)
        self.assertLessEqual(oldest, own - 3)
        self.assertEqual(state_name(c.get(run_id).state), "RUNNING")
        c.cancel(run_id)

if __name__ == "__main__":
    unittest.main()
