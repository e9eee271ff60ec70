"""walkers_pz.py is a PettingZoo Parallel env by PettingZoo's own API test,
and its walkers leave one by one."""

import unittest

from pettingzoo.test import parallel_api_test

import walkers_pz


class WalkersTest(unittest.TestCase):

    def test_passes_pettingzoos_parallel_api_test(self):
        parallel_api_test(walkers_pz.parallel_env(), num_cycles=500)

    def test_walkers_that_arrive_leave_while_the_others_walk_on(self):
        env = walkers_pz.parallel_env(walkers=3, length=8)
        env.reset(seed=1)
        left = []
        for step in range(1, 7):
            _, rewards, term, _, _ = env.step({a: 1 for a in env.agents})
            left += [(step, a, rewards[a]) for a in term if term[a]]
        # From cells 1, 2, 3 to the goal in cell 7.
        self.assertEqual(left, [(4, "walker_2", 1.0), (5, "walker_1", 1.0),
                                (6, "walker_0", 1.0)])
        self.assertEqual(env.agents, [])


if __name__ == "__main__":
    unittest.main()
