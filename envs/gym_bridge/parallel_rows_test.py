"""The bridge's PettingZoo path (parallel_rows.py, through gym_bridge.py):
copies end together at the time limit with their last observations kept,
and an agent that leaves early, agents with different spaces and AEC
(turn-based) envs are refused naming what is wrong."""

import importlib.util
import os
import sys
import types
import unittest

import numpy as np
from gymnasium import spaces
from pettingzoo.utils.env import AECEnv

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "gym_env"))
import rendezvous_pz  # noqa: E402

# As gym_bridge.cc loads them: gym_bridge.py with parallel_rows.py's text.
_spec = importlib.util.spec_from_file_location(
    "rl_gym_bridge", os.path.join(HERE, "gym_bridge.py"))
bridge = importlib.util.module_from_spec(_spec)
with open(os.path.join(HERE, "parallel_rows.py")) as _f:
    bridge._PARALLEL_ROWS_PY = _f.read()
_spec.loader.exec_module(bridge)


class Leaver(rendezvous_pz.Rendezvous):
    """walker_1 is knocked out at the first step; walker_0 plays on."""

    def step(self, actions):
        obs, rewards, term, trunc, infos = super().step(actions)
        term["walker_1"] = True
        self.agents = ["walker_0"]
        return obs, rewards, term, trunc, infos


class Lopsided(rendezvous_pz.Rendezvous):
    def action_space(self, agent):
        return spaces.Discrete(3 if agent == "walker_0" else 4)


class TurnBased(AECEnv):
    possible_agents = ["a", "b"]

    def observation_space(self, agent):
        return spaces.Discrete(2)

    def action_space(self, agent):
        return spaces.Discrete(2)


_module = types.ModuleType("parallel_rows_fixtures")
_module.leaver = Leaver
_module.lopsided = Lopsided
_module.turn_based = TurnBased
sys.modules["parallel_rows_fixtures"] = _module


class ParallelRowsTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        os.environ["RL_PYTHON_ENV_MODULES"] = "rendezvous_pz,parallel_rows_fixtures"

    def make(self, name, rows, kwargs=None):
        return bridge.make(name, rows, kwargs or {}, 0, 3)

    def buffers(self, rows, size):
        return (np.zeros(rows * size, np.float32), np.zeros(rows, np.float32),
                np.zeros(rows, np.uint8), np.zeros(rows, np.uint8),
                np.full(rows * size, -1, np.float32))

    def test_the_time_limit_cuts_every_agent_and_keeps_last_observations(self):
        env = self.make("rendezvous_pz:parallel_env", 4,
                        {"cells": 9, "max_steps": 3})
        self.assertEqual(bridge.agents(env), (2, ["walker_0", "walker_1"]))
        obs, rewards, term, trunc, final = self.buffers(4, 18)
        bridge.reset_into(env, 3, memoryview(obs))
        # Both walk right: the distance between them never changes.
        right = np.full(4, 2, np.int64)
        for _ in range(3):
            before = obs.copy()
            bridge.step_into(env, memoryview(right), memoryview(obs),
                             memoryview(rewards), memoryview(term),
                             memoryview(trunc), memoryview(final))
        self.assertEqual(list(trunc), [1, 1, 1, 1])
        self.assertEqual(list(term), [0, 0, 0, 0])
        final = final.reshape(4, 18)
        before = before.reshape(4, 18)
        for row in range(4):
            # One-hots of the two walkers, each moved one cell right.
            self.assertEqual(final[row].sum(), 2)
            self.assertTrue(np.array_equal(final[row][:9],
                                           np.roll(before[row][:9], 1)))

    def test_an_agent_that_leaves_early_is_refused(self):
        env = self.make("parallel_rows_fixtures:leaver", 2)
        obs, rewards, term, trunc, _ = self.buffers(2, 18)
        bridge.reset_into(env, 1, memoryview(obs))
        with self.assertRaisesRegex(ValueError,
                                    "walker_1 left the game while the others"):
            bridge.step_into(env, memoryview(np.ones(2, np.int64)),
                             memoryview(obs), memoryview(rewards),
                             memoryview(term), memoryview(trunc), None)

    def test_agents_with_different_spaces_are_refused(self):
        with self.assertRaisesRegex(ValueError, "agent walker_1 has spaces"):
            self.make("parallel_rows_fixtures:lopsided", 2)

    def test_rows_that_are_not_whole_environments_are_refused(self):
        with self.assertRaisesRegex(ValueError,
                                    "num_envs 3 is not a multiple of the "
                                    "PettingZoo env's 2 agents"):
            self.make("rendezvous_pz:parallel_env", 3)

    def test_turn_based_envs_and_async_are_refused(self):
        with self.assertRaisesRegex(ValueError, "AEC"):
            self.make("parallel_rows_fixtures:turn_based", 2)
        with self.assertRaisesRegex(ValueError, "steps in the actor's process"):
            self.make("rendezvous_pz:parallel_env", 2,
                      {"vectorization_mode": "async"})


if __name__ == "__main__":
    unittest.main()
