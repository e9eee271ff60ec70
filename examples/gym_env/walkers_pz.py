"""Walkers: a PettingZoo Parallel env whose agents leave the game early, for
the Gymnasium bridge's env.agents_leave (docs/multi_agent.md, "Agents that
leave early"); the game of examples/multi_agent/walkers_env.cc. Each of
`walkers` walkers (default 3) has a track of its own of `length` cells
(default 8): cell 0 is a cliff, the last cell the goal; walker k starts in
cell 1 + k. Each step every walker still in the game steps left (0) or
right (1); reaching the goal pays +1 and falling off the cliff -1, and
either ends that walker's episode: it leaves env.agents while the others
walk on. A walker observes its cell as a one-hot (float32 [length]).

    env:
      id: walkers_pz:parallel_env
      plugin: gymnasium
      kwargs: {walkers: 3, length: 8}
      agents_per_env: 3
      agents_leave: true
      observation_size: 8
      num_discrete_actions: 2
"""

import functools

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv


class Walkers(ParallelEnv):
    metadata = {"name": "walkers_v0", "render_modes": []}

    def __init__(self, walkers=3, length=8, max_steps=50):
        walkers, length = int(walkers), int(length)
        if not 2 <= walkers <= 16 or not walkers + 3 <= length <= 64:
            raise ValueError(f"walkers 2 to 16 (got {walkers}) on tracks of "
                             f"walkers + 3 to 64 cells (got {length})")
        self.length = length
        self.max_steps = int(max_steps)
        self.possible_agents = [f"walker_{k}" for k in range(walkers)]
        self.agents = []
        self._at = {}
        self._steps = 0

    @functools.lru_cache(maxsize=None)
    def observation_space(self, agent):
        return spaces.Box(0.0, 1.0, (self.length,), np.float32)

    @functools.lru_cache(maxsize=None)
    def action_space(self, agent):
        return spaces.Discrete(2)

    def _observe(self, agent):
        obs = np.zeros(self.length, np.float32)
        obs[self._at[agent]] = 1
        return obs

    def reset(self, seed=None, options=None):
        self.agents = list(self.possible_agents)
        self._at = {a: 1 + k for k, a in enumerate(self.agents)}
        self._steps = 0
        return ({a: self._observe(a) for a in self.agents},
                {a: {} for a in self.agents})

    def step(self, actions):
        self._steps += 1
        rewards, term, trunc = {}, {}, {}
        for agent in self.agents:
            self._at[agent] += 1 if int(actions[agent]) == 1 else -1
            at_goal = self._at[agent] == self.length - 1
            rewards[agent] = 1.0 if at_goal else -1.0 if self._at[agent] == 0 else 0.0
            term[agent] = rewards[agent] != 0.0
            trunc[agent] = not term[agent] and self._steps >= self.max_steps
        obs = {a: self._observe(a) for a in self.agents}
        infos = {a: {} for a in self.agents}
        self.agents = [a for a in self.agents if not (term[a] or trunc[a])]
        return obs, rewards, term, trunc, infos


def parallel_env(**kwargs):
    return Walkers(**kwargs)
