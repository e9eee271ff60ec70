"""rlctl league on the matches a real rl_local run with a league block
writes (LightCycles-v0, 8192 steps): every version rated, the trained
policy's versions with the env steps of their first game. Builds rl_local
(LibTorch): tagged torch, out of the README's quick suite."""

import contextlib
import io
import os
import subprocess
import tempfile
import textwrap
import unittest

import rlctl


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


class RealRunTest(unittest.TestCase):

    def test_a_league_run_writes_matches_rlctl_rates(self):
        with tempfile.TemporaryDirectory() as d:
            run_file = os.path.join(d, "run.yaml")
            write(run_file, textwrap.dedent("""\
                env:
                  id: LightCycles-v0
                  plugin: light_cycles
                  kwargs: {size: 6, opponent: self}
                  agents_per_env: 2
                  observation_size: 242
                  num_discrete_actions: 3
                envs_per_actor: 16
                segment_length: 32
                total_env_steps: 8192
                policy: {hidden_sizes: [16]}
                league: {snapshot_interval: 4}
                """))
            done = subprocess.run(
                ["trainer/rl_local", "train", f"--run={run_file}", f"--run_dir={d}/run",
                 "--progress=false"],
                capture_output=True, text=True, timeout=600)
            self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
            self.assertIn("league: pool v0-v4 (5 versions, pfsp)", done.stdout)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                self.assertEqual(rlctl.main(["league", f"{d}/run"]), 0)
            text = out.getvalue()
            # 16 updates, a version frozen every 4: the trained policy
            # played its games as versions 1-4 (the fifth froze at the end).
            self.assertRegex(text, r"^\d+ matches, 5 versions\n")
            self.assertRegex(text, r"\nv0 +- ")
            self.assertRegex(text, r"\nv4 +6144 ")


if __name__ == "__main__":
    unittest.main()
