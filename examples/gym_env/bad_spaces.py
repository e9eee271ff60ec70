"""Gymnasium envs of the spaces the bridge's tests step: one whose action
space it cannot pass (a Tuple mixing Discrete and Box; the tests check the
message), Dict observations, MultiDiscrete / MultiBinary actions, and Dict
and Tuple actions (flattened to one MultiDiscrete or one Box)."""

import gymnasium as gym
import numpy as np


class TupleActions(gym.Env):
    def __init__(self):
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Tuple(
            (gym.spaces.Discrete(2), gym.spaces.Box(-1.0, 1.0, (1,), np.float32)))

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


class ByteDictObservations(DictObservations):
    """A Dict of uint8 Boxes only: it passes as bytes."""

    def __init__(self):
        super().__init__()
        self.observation_space = gym.spaces.Dict({
            "frame": gym.spaces.Box(0, 255, (2, 2, 1), np.uint8),
            "level": gym.spaces.Box(0, 255, (1,), np.uint8),
        })

    def _obs(self):
        return {"frame": np.arange(4, dtype=np.uint8).reshape(2, 2, 1) * 60,
                "level": np.array([7], np.uint8)}


def make_byte_dict():
    return ByteDictObservations()


class OddDictObservations(DictObservations):
    """A scalar Box and a Discrete starting at 1: flattened as Gymnasium
    does (1 element, a one-hot of 3), and listed as parts of [1] and [3]."""

    def __init__(self):
        super().__init__()
        self.observation_space = gym.spaces.Dict({
            "level": gym.spaces.Box(0.0, 1.0, (), np.float32),
            "room": gym.spaces.Discrete(3, start=1),
        })

    def _obs(self):
        return {"level": np.float32(0.25), "room": 2}


def make_odd_dict():
    return OddDictObservations()


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


class DictActions(gym.Env):
    """Dict actions, the observation echoing them flat: {"move":
    Discrete(3), "fire": MultiBinary(2)} (MultiDiscrete [2, 2, 3] through
    the bridge: Gymnasium orders a Dict's keys, fire first), or with
    box=True {"steer": Box(2), "throttle": Box(1)} (a Box of 3);
    tuple=True makes the same parts a Tuple, in their order ([3, 2, 2])."""

    def __init__(self, box=False, tuple=False):
        if box:
            parts = {"steer": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
                     "throttle": gym.spaces.Box(-1.0, 1.0, (1,), np.float32)}
        else:
            parts = {"move": gym.spaces.Discrete(3),
                     "fire": gym.spaces.MultiBinary(2)}
        self.action_space = (gym.spaces.Tuple(list(parts.values())) if tuple
                             else gym.spaces.Dict(parts))
        # A Dict's order is its space's (Gymnasium sorts a dict's keys).
        self.keys = [] if tuple else list(self.action_space.spaces)
        self.tuple = tuple
        self.observation_space = gym.spaces.Box(-1.0, 3.0, (3,), np.float32)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(3, np.float32), {}

    def step(self, action):
        values = action if self.tuple else [action[k] for k in self.keys]
        flat = np.concatenate([np.asarray(v, np.float32).ravel() for v in values])
        return flat, 0.0, False, False, {}


def make_dict_actions(**kwargs):
    return DictActions(**kwargs)

