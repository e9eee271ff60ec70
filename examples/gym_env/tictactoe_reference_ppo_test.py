"""The reference PPO (tictactoe_reference_ppo.py) still learns: 64 updates
against random moves win most of 1,000 games (a fixed seed, so the same
games every run: 89.1% when written)."""

import unittest

import tictactoe_reference_ppo as reference


class ReferencePpoTest(unittest.TestCase):

    def test_it_learns_to_beat_random_moves(self):
        outcomes = reference.judge(reference.train(seed=1, total=65536, mode="random"))
        self.assertEqual(sum(outcomes.values()), 1000)
        self.assertGreaterEqual(outcomes["won"], 800, outcomes)


if __name__ == "__main__":
    unittest.main()
