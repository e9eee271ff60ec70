"""The Python half of the Gymnasium bridge (gym_bridge.cc runs this file in
its embedded interpreter): makes a Gymnasium vector env with same-step
autoreset and turns its spaces and steps into plain arrays."""

import importlib

import gymnasium as gym
import numpy as np


def _one_maker(factory, kwargs, max_steps):
    def make():
        env = factory(**kwargs)
        if max_steps > 0:
            env = gym.wrappers.TimeLimit(env, max_steps)
        return env

    return make


def make(env_id, num_envs, kwargs, max_steps, seed):
    """A vector env of num_envs copies of env_id: a registered id
    ("CartPole-v1", "ale_py:ALE/Pong-v5") with kwargs, or "module:function"
    (a function of the user's module that returns a gymnasium.Env)."""
    kwargs = dict(kwargs)
    mode = kwargs.pop("vectorization_mode", "sync")
    if mode not in ("sync", "async"):
        raise ValueError(
            f"kwargs.vectorization_mode: 'sync' or 'async' (got {mode!r})")
    vector_kwargs = {"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}
    factory = None
    if ":" in env_id:
        module, name = env_id.split(":", 1)
        attr = getattr(importlib.import_module(module), name, None)
        if callable(attr) and not isinstance(attr, type(gym)):
            factory = attr
    if factory is not None:
        fns = [_one_maker(factory, kwargs, max_steps)] * num_envs
        if mode == "async":
            env = gym.vector.AsyncVectorEnv(fns, context="spawn", **vector_kwargs)
        else:
            env = gym.vector.SyncVectorEnv(fns, **vector_kwargs)
    else:
        if max_steps > 0:
            kwargs["max_episode_steps"] = max_steps
        env = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode=mode,
                           vector_kwargs=vector_kwargs, **kwargs)
    env.action_space.seed(seed)
    return env


def describe(space):
    """(kind, shape, low, high, n): kind is "box", "discrete" or the
    unsupported space's class name."""
    if isinstance(space, gym.spaces.Box):
        return ("box", tuple(int(d) for d in space.shape),
                np.asarray(space.low, np.float64).ravel().tolist(),
                np.asarray(space.high, np.float64).ravel().tolist(), 0,
                str(space.dtype))
    if isinstance(space, gym.spaces.Discrete):
        if int(space.start) != 0:
            raise ValueError(f"Discrete spaces must start at 0 (got {space})")
        return ("discrete", (int(space.n),), [], [], int(space.n), "int64")
    return (type(space).__name__, (), [], [], 0, "")


def spaces(env):
    return describe(env.single_observation_space), describe(
        env.single_action_space)


def reset_into(env, seed, obs_out):
    """Resets every env; writes float32 observations into obs_out (a
    writable buffer of the caller's)."""
    obs, _ = env.reset(seed=seed)
    np.frombuffer(obs_out, np.float32)[:] = np.asarray(
        obs, np.float32).ravel()


def step_into(env, actions, obs_out, rewards_out, terminated_out,
              truncated_out, final_out):
    """One step with `actions` (a buffer: int64 for Discrete, float32 for
    Box), written into the caller's buffers: obs float32 [n, obs], rewards
    float32 [n], flags uint8 [n], and final_out (or None) float32 [n, obs]
    in the rows of the envs whose episode ended."""
    space = env.single_action_space
    n = env.num_envs
    if isinstance(space, gym.spaces.Box):
        actions = np.frombuffer(actions, np.float32).reshape(
            (n,) + space.shape).astype(space.dtype, copy=False)
    else:
        actions = np.frombuffer(actions, np.int64)
    obs, rewards, terminated, truncated, info = env.step(actions)
    terminated = np.asarray(terminated, bool)
    # A time limit reached on the terminal step is a termination (the ABI:
    # truncated is for a live episode that was cut).
    truncated = np.asarray(truncated, bool) & ~terminated
    np.frombuffer(obs_out, np.float32)[:] = np.asarray(obs, np.float32).ravel()
    np.frombuffer(rewards_out, np.float32)[:] = np.asarray(rewards, np.float32)
    np.frombuffer(terminated_out, np.uint8)[:] = terminated
    np.frombuffer(truncated_out, np.uint8)[:] = truncated
    if final_out is not None and "final_obs" in info:
        final = np.frombuffer(final_out, np.float32).reshape(n, -1)
        mask = info.get("_final_obs", np.ones(n, bool))
        for i in np.flatnonzero(mask):
            final[i] = np.asarray(info["final_obs"][i], np.float32).ravel()
