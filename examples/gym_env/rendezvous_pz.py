"""Rendezvous: a cooperative PettingZoo Parallel env for the Gymnasium
bridge's multi-agent path (docs/multi_agent.md). Two agents on a ring of
`cells` cells must meet: each step both move left, stay or move right
(Discrete(3)); the episode ends (terminated, for both) when they stand in
one cell, or is cut at `max_steps`. Every step costs both -0.05 and the
meeting pays both +1, so the return rises as they meet sooner: on the run
file's ring of 15 cells, about -0.51 for random moves (check-env) and about
0.85 for agents that walk towards each other.
Each agent observes its own cell and the other's as one-hots (2 x cells
floats, its own first).

    env:
      id: rendezvous_pz:parallel_env
      plugin: gymnasium
      kwargs: {cells: 15, max_steps: 50}
      agents_per_env: 2
      observation_size: 30
      num_discrete_actions: 3
"""

import functools

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv


class Rendezvous(ParallelEnv):
    metadata = {"name": "rendezvous_v0", "render_modes": []}

    def __init__(self, cells=9, max_steps=40):
        if cells < 3:
            raise ValueError(f"cells: at least 3 (got {cells})")
        self.cells = int(cells)
        self.max_steps = int(max_steps)
        self.possible_agents = ["walker_0", "walker_1"]
        self.agents = []
        self._rng = np.random.default_rng()
        self._at = {}
        self._steps = 0

    @functools.lru_cache(maxsize=None)
    def observation_space(self, agent):
        return spaces.Box(0.0, 1.0, (2 * self.cells,), np.float32)

    @functools.lru_cache(maxsize=None)
    def action_space(self, agent):
        return spaces.Discrete(3)

    def _observe(self, agent):
        other = self.possible_agents[1 - self.possible_agents.index(agent)]
        obs = np.zeros(2 * self.cells, np.float32)
        obs[self._at[agent]] = 1
        obs[self.cells + self._at[other]] = 1
        return obs

    def reset(self, seed=None, options=None):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self.agents = list(self.possible_agents)
        first = int(self._rng.integers(self.cells))
        # Never in one cell at the start.
        second = (first + 1 + int(self._rng.integers(self.cells - 1))) % self.cells
        self._at = {"walker_0": first, "walker_1": second}
        self._steps = 0
        return ({a: self._observe(a) for a in self.agents},
                {a: {} for a in self.agents})

    def step(self, actions):
        for agent in self.agents:
            self._at[agent] = (self._at[agent] + int(actions[agent]) - 1) % self.cells
        self._steps += 1
        met = self._at["walker_0"] == self._at["walker_1"]
        cut = not met and self._steps >= self.max_steps
        reward = (1.0 if met else 0.0) - 0.05
        agents = self.agents
        obs = {a: self._observe(a) for a in agents}
        rewards = {a: reward for a in agents}
        terminations = {a: met for a in agents}
        truncations = {a: cut for a in agents}
        infos = {a: {} for a in agents}
        if met or cut:
            self.agents = []
        return obs, rewards, terminations, truncations, infos


def parallel_env(**kwargs):
    return Rendezvous(**kwargs)
