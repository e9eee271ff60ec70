"""The bridge's PettingZoo path (parallel_rows.py, through gym_bridge.py):
copies end together at the time limit with their last observations kept;
turn-based (AEC) games move one agent at a time through action masks; an
agent that leaves early, agents with different spaces and an AEC env
without a Discrete action space are refused naming what is wrong."""

import importlib.util
import os
import sys
import tempfile
import types
import unittest

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv
from pettingzoo.utils.env import AECEnv

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "gym_env"))
import rendezvous_pz  # noqa: E402
import tictactoe_aec  # noqa: E402

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


class Dropout(ParallelEnv):
    """Agent b's episode ends (terminated) at step 1, a's at step 3; 1 a
    step while in the game; each observes the steps so far."""
    metadata = {"name": "dropout_v0"}
    possible_agents = ["a", "b"]

    def __init__(self):
        self.agents = []
        self.steps = 0

    def observation_space(self, agent):
        return spaces.Box(0.0, 10.0, (1,), np.float32)

    def action_space(self, agent):
        return spaces.Discrete(2)

    def _obs(self):
        return {x: np.array([self.steps], np.float32) for x in self.agents}

    def reset(self, seed=None, options=None):
        self.agents = list(self.possible_agents)
        self.steps = 0
        return self._obs(), {x: {} for x in self.agents}

    def step(self, actions):
        assert set(actions) == set(self.agents), (actions, self.agents)
        self.steps += 1
        ends = {"a": 3, "b": 1}
        term = {x: self.steps == ends[x] for x in self.agents}
        rewards = {x: 1.0 for x in self.agents}
        obs = self._obs()
        self.agents = [x for x in self.agents if not term[x]]
        trunc = {x: False for x in term}
        return obs, rewards, term, trunc, {x: {} for x in term}


class Lopsided(rendezvous_pz.Rendezvous):
    def action_space(self, agent):
        return spaces.Discrete(3 if agent == "walker_0" else 4)


class TurnBased(AECEnv):
    """Turn-based, with a Box action: not one masks can pass."""
    possible_agents = ["a", "b"]
    agent_selection = "a"

    def observation_space(self, agent):
        return spaces.Discrete(2)

    def action_space(self, agent):
        return spaces.Box(-1, 1, (2,))

    def observe(self, agent):
        return 0


_module = types.ModuleType("parallel_rows_fixtures")
_module.leaver = Leaver
_module.dropout = Dropout
_module.lopsided = Lopsided
_module.turn_based = TurnBased
sys.modules["parallel_rows_fixtures"] = _module


class ParallelRowsTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        os.environ["RL_PYTHON_ENV_MODULES"] = (
            "rendezvous_pz,parallel_rows_fixtures,tictactoe_aec,"
            "pettingzoo.mpe.*")

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
                                    "walker_1 left the game while the others "
                                    "play on: set env.agents_leave: true"):
            bridge.step_into(env, memoryview(np.ones(2, np.int64)),
                             memoryview(obs), memoryview(rewards),
                             memoryview(term), memoryview(trunc), None)

    def test_agents_that_leave_early_are_padding_where_the_run_allows(self):
        env = self.make("parallel_rows_fixtures:dropout", 2)
        bridge.allow_leaving(env)
        obs, rewards, term, trunc, final = self.buffers(2, 1)
        alive = np.zeros(2, np.uint8)
        bridge.reset_into(env, 1, memoryview(obs))
        got = []
        finals = []
        for _ in range(3):
            final[:] = -1
            bridge.step_into(env, memoryview(np.ones(2, np.int64)),
                             memoryview(obs), memoryview(rewards),
                             memoryview(term), memoryview(trunc),
                             memoryview(final), alive_out=memoryview(alive))
            got.append((list(rewards), list(term), list(trunc), list(alive),
                        list(obs)))
            finals.append(list(final))
        self.assertEqual(got, [
            ([1, 1], [0, 1], [0, 0], [1, 0], [1, 1]),  # b leaves
            ([1, 0], [0, 0], [0, 0], [1, 0], [2, 1]),  # b padding, last obs
            ([1, 0], [1, 0], [0, 0], [1, 1], [0, 0]),  # a ends: both reset
        ])
        # Each one's last observation, at its own end.
        self.assertEqual(finals, [[-1, 1], [-1, -1], [3, -1]])
        # A turn-based game's agents cannot leave.
        aec = self.make("tictactoe_aec:env", 2)
        with self.assertRaisesRegex(ValueError, "env.agents_leave: only a "
                                    "PettingZoo Parallel env"):
            bridge.allow_leaving(aec)

    def test_agents_with_different_spaces_are_refused(self):
        with self.assertRaisesRegex(ValueError, "agent walker_1 has spaces"):
            self.make("parallel_rows_fixtures:lopsided", 2)

    def test_rows_that_are_not_whole_environments_are_refused(self):
        with self.assertRaisesRegex(ValueError,
                                    "num_envs 3 is not a multiple of the "
                                    "PettingZoo env's 2 agents"):
            self.make("rendezvous_pz:parallel_env", 3)

    def test_turn_based_games_move_one_agent_at_a_time_through_masks(self):
        env = self.make("tictactoe_aec:env", 4)
        self.assertEqual(bridge.agents(env), (2, ["player_0", "player_1"]))
        self.assertEqual(bridge.action_mask_size(env), 9)
        obs, rewards, term, trunc, final = self.buffers(4, 19)
        masks = np.zeros(4 * 9, np.uint8)
        bridge.reset_into(env, 3, memoryview(obs), memoryview(masks))
        m = masks.reshape(4, 9)
        # player_0 moves first anywhere; player_1 waits (action 0 only).
        waiting = [1, 0, 0, 0, 0, 0, 0, 0, 0]
        self.assertEqual(m.tolist(), [[1] * 9, waiting, [1] * 9, waiting])

        def step(actions):
            bridge.step_into(env, memoryview(np.array(actions, np.int64)),
                             memoryview(obs), memoryview(rewards),
                             memoryview(term), memoryview(trunc),
                             memoryview(final), None, None, memoryview(masks))

        # Copy 0: 4, 0, 2, 1, 6 (player_0 wins on the diagonal 2-4-6).
        # Copy 1: 0, 3, 1, 4, 2 (player_0 wins on the top row). A waiting
        # row's action (0) is not played.
        step([4, 0, 0, 0])
        o = obs.reshape(4, 19)
        self.assertEqual(o[0][4], 1)      # player_0's own mark
        self.assertEqual(o[1][9 + 4], 1)  # the opponent's, seen by player_1
        self.assertEqual(o[:, 18].tolist(), [0, 1, 0, 1])  # player_1 to move
        self.assertEqual(m[0].tolist(), waiting)
        self.assertEqual(m[1].tolist(), [1, 1, 1, 1, 0, 1, 1, 1, 1])
        self.assertEqual(m[3].tolist(), [0, 1, 1, 1, 1, 1, 1, 1, 1])
        for actions in ([0, 0, 0, 3], [2, 0, 1, 0], [0, 1, 0, 4]):
            step(actions)
            self.assertEqual(list(term), [0, 0, 0, 0])
            self.assertEqual(list(rewards), [0, 0, 0, 0])
        step([6, 0, 2, 0])
        self.assertEqual(list(rewards), [1, -1, 1, -1])
        self.assertEqual(list(term), [1, 1, 1, 1])
        self.assertEqual(list(trunc), [0, 0, 0, 0])
        f = final.reshape(4, 19)
        self.assertEqual(f[0][[2, 4, 6]].tolist(), [1, 1, 1])
        self.assertEqual(f[1][[9 + 2, 9 + 4, 9 + 6]].tolist(), [1, 1, 1])
        # The next games started in the same step, player_0 to move.
        self.assertEqual(obs.reshape(4, 19)[:, :18].sum(), 0)
        self.assertEqual(obs.reshape(4, 19)[:, 18].tolist(), [1, 0, 1, 0])
        self.assertEqual(m.tolist(), [[1] * 9, waiting, [1] * 9, waiting])
        # A move the mask forbids is refused, naming the agent.
        step([4, 0, 4, 0])
        with self.assertRaisesRegex(ValueError, "player_1 of environment 0 "
                                    "played 4, which its action mask"):
            step([0, 4, 0, 5])

    def test_one_agent_against_random_moves(self):
        env = self.make("tictactoe_aec:env", 3, {"opponent": "random"})
        self.assertEqual(bridge.agents(env), (1, ["player_0"]))
        obs, rewards, term, trunc, final = self.buffers(3, 19)
        masks = np.zeros(3 * 9, np.uint8)
        bridge.reset_into(env, 5, memoryview(obs), memoryview(masks))
        ended = 0
        for _ in range(40):
            # The first cell the mask allows: always a legal move.
            moves = masks.reshape(3, 9).argmax(axis=1).astype(np.int64)
            bridge.step_into(env, memoryview(moves), memoryview(obs),
                             memoryview(rewards), memoryview(term),
                             memoryview(trunc), memoryview(final), None,
                             None, memoryview(masks))
            ended += int(term.sum())
            self.assertTrue(set(rewards.tolist()) <= {-1.0, 0.0, 1.0})
        self.assertGreater(ended, 10)

    def test_mpe_simple_spread_rows_are_pettingzoos_own_steps(self):
        # PettingZoo's own cooperative game (docs/multi_agent.md, "A
        # published cooperative task"): two copies as six rows, stepped
        # beside two copies of the game itself with the same seeds (copy c
        # is reset with seed + c) and the same random moves, for two
        # episodes of 25 steps.
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            from pettingzoo.mpe import simple_spread_v3
        kwargs = {"N": 3, "local_ratio": 0.5, "max_cycles": 25}
        # The game calls pygame.init(): the bridge has SDL headless, so
        # nothing reaches the actor's stderr (SDL writes to the fd itself).
        self.assertEqual(os.environ.get("SDL_VIDEODRIVER"), "dummy")
        with tempfile.TemporaryFile() as err:
            saved = os.dup(2)
            os.dup2(err.fileno(), 2)
            try:
                env = bridge.make(
                    "pettingzoo.mpe.simple_spread_v3:parallel_env", 6,
                    kwargs, 0, 3)
            finally:
                os.dup2(saved, 2)
                os.close(saved)
            err.seek(0)
            self.assertNotIn(b"XDG_RUNTIME_DIR", err.read())
        names = ["agent_0", "agent_1", "agent_2"]
        self.assertEqual(bridge.agents(env), (3, names))
        games = [simple_spread_v3.parallel_env(**kwargs) for _ in range(2)]
        want = [g.reset(seed=7 + c)[0] for c, g in enumerate(games)]
        obs, rewards, term, trunc, final = self.buffers(6, 18)
        bridge.reset_into(env, 7, memoryview(obs))

        def rows(per_copy):
            return np.concatenate([per_copy[c][x] for c in range(2)
                                   for x in names])

        np.testing.assert_array_equal(obs, rows(want))
        rng = np.random.default_rng(0)
        total = np.zeros(6)
        for t in range(1, 51):
            moves = rng.integers(0, 5, 6)
            steps = [g.step({x: int(moves[3 * c + k])
                             for k, x in enumerate(names)})
                     for c, g in enumerate(games)]
            bridge.step_into(env, memoryview(moves), memoryview(obs),
                             memoryview(rewards), memoryview(term),
                             memoryview(trunc), memoryview(final))
            want_rewards = [steps[c][1][x] for c in range(2) for x in names]
            np.testing.assert_allclose(rewards, want_rewards, rtol=1e-6)
            total += rewards
            self.assertEqual(list(term), [0] * 6)
            self.assertEqual(list(trunc), [int(t % 25 == 0)] * 6)
            if t % 25 == 0:
                # The last observations go out as the finals; both copies
                # start again, the game's own generator going on.
                np.testing.assert_allclose(
                    final, rows([s[0] for s in steps]), rtol=1e-6)
                self.assertEqual([g.agents for g in games], [[], []])
                np.testing.assert_array_equal(
                    obs, rows([g.reset()[0] for g in games]))
            else:
                np.testing.assert_allclose(
                    obs, rows([s[0] for s in steps]), rtol=1e-6)
        # Agents of one copy share half their reward: each pays the
        # landmarks' distances, its own collisions apart.
        self.assertTrue((total < 0).all())

    def test_what_turn_based_games_cannot_be_and_async_are_refused(self):
        with self.assertRaisesRegex(ValueError, "action space must be Discrete"):
            self.make("parallel_rows_fixtures:turn_based", 2)
        with self.assertRaisesRegex(ValueError, "steps in the actor's process"):
            self.make("rendezvous_pz:parallel_env", 2,
                      {"vectorization_mode": "async"})


if __name__ == "__main__":
    unittest.main()
