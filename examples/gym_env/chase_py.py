"""Chase, written as a Gymnasium env in your own Python file.

An agent on a line at x in [-1, 1] chases a goal placed at random.
Observation: [x, goal - x]. Actions: 0 left, 1 stay, 2 right (a step of
step_size). Reward: +1 and the episode ends within goal_radius of the goal,
else -0.01 a step. The run file names `chase_py:make` with
`plugin: gymnasium`; this folder must be on PYTHONPATH where the actors run.
"""

import gymnasium as gym
import numpy as np


class Chase(gym.Env):
    def __init__(self, step_size=0.1, goal_radius=0.05):
        if not 0 < step_size <= 1:
            raise ValueError("step_size: must be in (0, 1]")
        self.step_size = step_size
        self.goal_radius = goal_radius
        self.observation_space = gym.spaces.Box(-2.0, 2.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(3)

    def _obs(self):
        return np.array([self.x, self.goal - self.x], np.float32)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.x = self.np_random.uniform(-1, 1)
        self.goal = self.x
        while abs(self.goal - self.x) <= self.goal_radius:
            self.goal = self.np_random.uniform(-1, 1)
        return self._obs(), {}

    def step(self, action):
        self.x = float(np.clip(self.x + (int(action) - 1) * self.step_size,
                               -1, 1))
        reached = abs(self.goal - self.x) <= self.goal_radius
        return self._obs(), 1.0 if reached else -0.01, reached, False, {}


def make(**kwargs):
    return Chase(**kwargs)
