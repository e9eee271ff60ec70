"""tictactoe_aec.py is a PettingZoo AEC env by PettingZoo's own API test
(both opponents), and its games pay what its docstring says."""

import unittest

from pettingzoo.test import api_test

import tictactoe_aec


class TicTacToeTest(unittest.TestCase):

    def test_passes_pettingzoos_aec_api_test(self):
        api_test(tictactoe_aec.env(), num_cycles=200)
        api_test(tictactoe_aec.env("random"), num_cycles=200)

    def test_a_line_of_three_wins_for_one_and_loses_for_the_other(self):
        env = tictactoe_aec.env()
        env.reset(seed=1)
        for cell in (0, 3, 1, 4):
            self.assertEqual(env.observe(env.agent_selection)["observation"][18], 1)
            env.step(cell)
        env.step(2)  # player_0: the top row
        self.assertEqual(env.rewards, {"player_0": 1.0, "player_1": -1.0})
        self.assertTrue(all(env.terminations.values()))

    def test_the_mask_allows_the_empty_cells_only(self):
        env = tictactoe_aec.env("random")
        env.reset(seed=2)
        for _ in range(3):
            obs = env.observe("player_0")
            empty = (obs["observation"][:9] + obs["observation"][9:18]) == 0
            self.assertEqual(list(obs["action_mask"] == 1), list(empty))
            if env.terminations["player_0"]:
                break
            env.step(int(obs["action_mask"].argmax()))

    def test_an_unknown_opponent_is_refused(self):
        with self.assertRaisesRegex(ValueError, "kwargs.opponent"):
            tictactoe_aec.env("scripted")


if __name__ == "__main__":
    unittest.main()
