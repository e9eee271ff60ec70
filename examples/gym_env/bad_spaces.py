"""A Gymnasium env whose action space the bridge cannot pass (a Tuple):
the bridge's tests check the message."""

import gymnasium as gym
import numpy as np


class TupleActions(gym.Env):
    def __init__(self):
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Tuple(
            (gym.spaces.Discrete(2), gym.spaces.Discrete(3)))

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action):
        return np.zeros(2, np.float32), 0.0, False, False, {}


def make():
    return TupleActions()


def broken(**kwargs):
    raise RuntimeError("this env cannot be made")


class DictObservations(gym.Env):
    """A Dict observation (flattened by the bridge: its layout is logged)."""

    def __init__(self):
        self.observation_space = gym.spaces.Dict({
            "position": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
            "room": gym.spaces.Discrete(3),
        })
        self.action_space = gym.spaces.Discrete(2)

    def _obs(self):
        return {"position": np.array([0.5, -0.5], np.float32), "room": 2}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return self._obs(), {}

    def step(self, action):
        return self._obs(), 0.0, True, False, {}


def make_dict():
    return DictObservations()


class MultiActions(gym.Env):
    """MultiDiscrete([3, 2]) actions, or MultiBinary(3) with binary=True;
    the observation echoes the last action."""

    def __init__(self, binary=False):
        self.binary = binary
        self.action_space = (gym.spaces.MultiBinary(3) if binary
                             else gym.spaces.MultiDiscrete([3, 2]))
        size = 3 if binary else 2
        self.observation_space = gym.spaces.Box(0.0, 2.0, (size,), np.float32)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(self.observation_space.shape, np.float32), {}

    def step(self, action):
        return np.asarray(action, np.float32), 0.0, False, False, {}


def make_multi(**kwargs):
    return MultiActions(**kwargs)
