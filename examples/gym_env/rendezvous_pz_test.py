"""rendezvous_pz.py is a PettingZoo Parallel env by PettingZoo's own API
test, and its game pays what its docstring says."""

import unittest

import numpy as np
from pettingzoo.test import parallel_api_test

import rendezvous_pz


class RendezvousTest(unittest.TestCase):

    def test_passes_pettingzoos_parallel_api_test(self):
        parallel_api_test(rendezvous_pz.parallel_env(cells=9), num_cycles=500)

    def test_walkers_that_meet_end_the_episode_together(self):
        env = rendezvous_pz.parallel_env(cells=5, max_steps=40)
        obs, _ = env.reset(seed=3)
        self.assertEqual(obs["walker_0"].shape, (10,))
        # walker_1 stays; walker_0 walks right round the ring to it.
        for step in range(1, 6):
            obs, rewards, term, trunc, _ = env.step({"walker_0": 2,
                                                     "walker_1": 1})
            if term["walker_0"]:
                break
        self.assertTrue(term["walker_0"] and term["walker_1"])
        self.assertEqual(rewards, {"walker_0": 0.95, "walker_1": 0.95})
        self.assertEqual(env.agents, [])
        self.assertTrue(np.array_equal(obs["walker_0"][:5], obs["walker_1"][:5]))

    def test_a_game_too_long_is_cut(self):
        env = rendezvous_pz.parallel_env(cells=9, max_steps=3)
        env.reset(seed=1)
        for _ in range(3):
            # Both walk right: the distance between them never changes.
            _, _, term, trunc, _ = env.step({"walker_0": 2, "walker_1": 2})
        self.assertEqual(trunc, {"walker_0": True, "walker_1": True})
        self.assertEqual(term, {"walker_0": False, "walker_1": False})


if __name__ == "__main__":
    unittest.main()
