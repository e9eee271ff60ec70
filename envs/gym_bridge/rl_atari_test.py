"""rl_atari's one-layer CleanRLAtari against Gymnasium's wrapper stack
(make_wrapped: AtariPreprocessing, RecordEpisodeStatistics, EpisodicLife,
FireReset, TransformReward, FrameStackObservation): the same observations,
rewards, flags and game statistics, step for step, through lives, games
and resets, on Breakout (lives, FIRE) and Pong (no lives)."""

import os
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rl_atari  # noqa: E402


class RlAtariTest(unittest.TestCase):

    def check_same(self, ale_id, steps, **kwargs):
        lean = rl_atari.make(ale_id, **kwargs)
        ref = rl_atari.make_wrapped(ale_id, **kwargs)
        self.assertEqual(lean.observation_space, ref.observation_space)
        self.assertEqual(lean.action_space, ref.action_space)
        a, _ = lean.reset(seed=7)
        b, _ = ref.reset(seed=7)
        np.testing.assert_array_equal(a, b)
        rng = np.random.default_rng(3)
        lives = games = 0
        for t in range(steps):
            action = int(rng.integers(lean.action_space.n))
            a, ra, ta, ua, ia = lean.step(action)
            b, rb, tb, ub, ib = ref.step(action)
            np.testing.assert_array_equal(a, b, err_msg=f"step {t}")
            self.assertEqual((ra, ta, ua), (rb, tb, ub), f"step {t}")
            self.assertEqual("episode" in ia, "episode" in ib, f"step {t}")
            if "episode" in ia:
                games += 1
                self.assertEqual(ia["episode"]["r"], ib["episode"]["r"])
                self.assertEqual(ia["episode"]["l"], ib["episode"]["l"])
            if ta or ua:
                lives += 1
                a, _ = lean.reset()
                b, _ = ref.reset()
                np.testing.assert_array_equal(a, b, err_msg=f"reset after {t}")
        return lives, games

    def test_breakout_lives_and_games(self):
        lives, games = self.check_same("ALE/Breakout-v5", 2500)
        self.assertGreater(games, 5)
        self.assertGreater(lives, 4 * games)  # 5 lives a game

    def test_pong_and_other_settings(self):
        lives, games = self.check_same("ALE/Pong-v5", 2000)
        self.assertGreater(games, 0)
        self.check_same("ALE/Breakout-v5", 600, episodic_life=False,
                        reward_clip=False, noop_max=0, frame_skip=3,
                        stack_num=2, fire_reset=False)


if __name__ == "__main__":
    unittest.main()
