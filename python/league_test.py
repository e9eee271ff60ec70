"""rlctl league: OpenSkill ratings of a league's versions from the matches
a run wrote. The ratings of made-up matches (each version beating every
older one) rise version by version; draws and losses are counted;
malformed files are named by line, and rlctl exits 2 on them (and on
--every below 1). (A real
rl_local league run rated by rlctl: league_run_test.py.)"""

import contextlib
import io
import os
import tempfile
import unittest

import rlctl
from rlservice import league


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


class RatingsTest(unittest.TestCase):

    def test_each_version_beating_the_older_ones_rates_higher(self):
        matches = []
        steps = 0
        for learner in range(1, 6):
            for opponent in range(learner):
                for _ in range(20):
                    steps += 64
                    matches.append((steps, learner, opponent, 1.0))
        ratings = league.rate(matches)
        self.assertEqual([r.version for r in ratings], [0, 1, 2, 3, 4, 5])
        mus = [r.mu for r in ratings]
        self.assertEqual(mus, sorted(mus), mus)
        self.assertGreater(mus[-1] - mus[0], 10)
        self.assertEqual(ratings[5].won, 100)
        self.assertEqual(ratings[0].games, 100)  # as everyone's opponent
        self.assertEqual(ratings[1].first_step, 64)

    def test_draws_and_losses(self):
        ratings = league.rate([(0, 1, 0, 0.0), (0, 1, 0, -1.0), (0, 1, 0, 1.0), (0, 1, 1, 1.0)])
        one = ratings[1]
        self.assertEqual((one.won, one.drew, one.lost), (1, 1, 1))
        self.assertIn("33.3%  33.3%  33.3%", league.format_ratings(ratings))

    def test_members_are_rated_beside_the_versions(self):
        # Every version loses to member 1 (version -1) and beats version 0.
        matches = [(64 * i, v, o, r) for i, (v, o, r) in enumerate(
            [(v, -1, -1.0) for v in range(1, 4) for _ in range(10)] +
            [(v, 0, 1.0) for v in range(1, 4) for _ in range(10)])]
        ratings = league.rate(matches)
        self.assertEqual([r.version for r in ratings], [-1, 0, 1, 2, 3])
        member = ratings[0]
        self.assertEqual((member.games, member.first_step), (30, -1))
        self.assertGreater(member.mu, max(r.mu for r in ratings[1:]))
        table = league.format_ratings(ratings)
        self.assertRegex(table, r"\nm1 +- ")
        self.assertIn("\nv3 ", table)
        # Members, then every second version from v0 (and the last).
        shown = [line.split()[0] for line in league.format_ratings(ratings, every=2).splitlines()[1:]]
        self.assertEqual(shown, ["m1", "v0", "v2", "v3"])

    def test_malformed_files_are_named_by_line(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "matches.csv")
            write(path, "env_steps,learner_version,opponent_version,learner_return\n1,1,0,x\n")
            with self.assertRaisesRegex(ValueError, r"matches.csv:2: not a match: '1,1,0,x'"):
                league.read_matches(path)
            write(path, "steps,who\n")
            with self.assertRaisesRegex(ValueError, r"matches.csv:1: expected the header"):
                league.read_matches(path)
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                self.assertEqual(rlctl.main(["league", d]), 2)
            self.assertIn("cannot read the league's matches", err.getvalue())

    def test_every_must_be_at_least_one(self):
        # --every 0 was shown as --every 1.
        with tempfile.TemporaryDirectory() as d:
            for value in ("0", "-3", "x"):
                err = io.StringIO()
                with contextlib.redirect_stderr(err), self.assertRaises(SystemExit) as e:
                    rlctl.main(["league", d, "--every", value])
                self.assertEqual(e.exception.code, 2)
                self.assertIn(f"argument --every: expected a whole number >= 1, got '{value}'",
                              err.getvalue())


if __name__ == "__main__":
    unittest.main()
