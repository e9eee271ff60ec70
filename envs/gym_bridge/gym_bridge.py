"""The Python half of the Gymnasium bridge (gym_bridge.cc runs this file in
its embedded interpreter): makes a Gymnasium vector env with same-step
autoreset and turns its spaces and steps into plain arrays. A function that
returns a PettingZoo Parallel env makes copies of it whose agents are the
vector env's rows (parallel_rows.py)."""

import importlib
import os

import gymnasium as gym
import numpy as np

# The bridge never draws. Games that open pygame anyway (PettingZoo's MPE
# calls pygame.init() in its constructor) get SDL's headless driver, so an
# actor without a desktop does not log "error: XDG_RUNTIME_DIR is invalid"
# for every copy, and pygame's greeting stays off the actor's stdout. An
# operator's own settings win.
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")


def _one_maker(factory, kwargs, max_steps, made=None):
    def make():
        env = made.pop() if made else factory(**kwargs)
        if max_steps > 0:
            env = gym.wrappers.TimeLimit(env, max_steps)
        return env

    return make


def _load_rl_atari():
    """The module rl_atari (rl_atari.py, compiled into the bridge beside
    this file as _RL_ATARI_PY): its ids, rl_atari:Breakout-v5 and the
    like, are ale-py's games preprocessed the CleanRL way."""
    import sys
    import types
    if "rl_atari" not in sys.modules:
        module = types.ModuleType("rl_atari")
        sys.modules["rl_atari"] = module
        try:
            exec(_RL_ATARI_PY, module.__dict__)
        except BaseException:
            del sys.modules["rl_atari"]
            raise


# Modules a run may name ("module:function", "module:Env-v0") unless the
# operator says otherwise: the project's own Atari preprocessing and ALE's
# registration.
_DEFAULT_MODULES = ("rl_atari", "ale_py")


def check_module_allowed(env_id, allowed=None):
    """Raises PermissionError unless the module env_id names before its ':'
    (which Gymnasium or the bridge would import, running its code) is one
    the operator allows: $RL_PYTHON_ENV_MODULES, comma-separated names,
    'pkg.*' for a package and its submodules, '*' for any; unset, only
    _DEFAULT_MODULES. Registered ids without a module ("CartPole-v1") come
    from packages the operator installed and always pass."""
    if ":" not in env_id:
        return
    module = env_id.split(":", 1)[0]
    if allowed is None:
        import os
        text = os.environ.get("RL_PYTHON_ENV_MODULES")
        allowed = ([p.strip() for p in text.split(",") if p.strip()]
                   if text is not None else list(_DEFAULT_MODULES))
    for pattern in allowed:
        if pattern == "*" or pattern == module:
            return
        if pattern.endswith(".*") and (module == pattern[:-2] or
                                       module.startswith(pattern[:-1])):
            return
    raise PermissionError(
        f"env.id {env_id!r}: module {module!r} is not one this worker may "
        f"import (allowed: {', '.join(allowed) or 'none'}); its operator "
        f"allows modules with the actor's --python_env_modules or "
        f"$RL_PYTHON_ENV_MODULES (docs/security.md)")


def make(env_id, num_envs, kwargs, max_steps, seed):
    """A vector env of num_envs copies of env_id: a registered id
    ("CartPole-v1", "ale_py:ALE/Pong-v5", "rl_atari:Breakout-v5") with
    kwargs, or "module:function" (a function of the user's module that
    returns a gymnasium.Env). The module must be allowed
    (check_module_allowed)."""
    check_module_allowed(env_id)
    if env_id.split(":", 1)[0] == "rl_atari":
        _load_rl_atari()
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
        # The first copy tells a PettingZoo Parallel env from a Gymnasium
        # one. It is not made twice: it becomes copy 0 (sync), or the one
        # AsyncVectorEnv makes in this process to read the spaces (async),
        # popped before the workers' makers are pickled.
        first = factory(**kwargs)
        rows = _parallel_rows()
        aec = rows.is_aec(first)
        if aec or rows.is_parallel(first):
            if mode == "async":
                first.close()
                raise ValueError(
                    "kwargs.vectorization_mode: a PettingZoo env steps in the "
                    "actor's process ('sync')")
            made = [first]
            env = (rows.AecRows if aec else rows.ParallelRows)(
                lambda: made.pop() if made else factory(**kwargs), num_envs,
                max_steps)
            env.action_space.seed(seed)
            return env
        made = [first]
        fns = [_one_maker(factory, kwargs, max_steps, made)] * num_envs
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
    if isinstance(env.single_action_space, _NESTED):
        try:
            kind, parts = action_layout(env.single_action_space)
        except ValueError:
            kind, parts = "", []  # spaces() says why it cannot pass
    if isinstance(env.single_action_space, _NESTED) and parts:
        at, text = 0, []
        for name, _, width in parts:
            text.append(f"{name or '-'} [{at}, {at + width})")
            at += width
        import sys
        print(f"[gym_bridge] {env_id}: the action is flattened to {at} "
              f"{'parts (MultiDiscrete)' if kind == 'discrete' else 'floats (Box)'}: "
              + ", ".join(text), file=sys.stderr)
    if isinstance(env.single_observation_space, _NESTED):
        parts = flat_layout(env.single_observation_space)
        at, text = 0, []
        for name, size in parts:
            text.append(f"{name or '-'} [{at}, {at + size})")
            at += size
        import sys
        print(f"[gym_bridge] {env_id}: the observation is flattened to "
              f"{at} floats: " + ", ".join(text), file=sys.stderr)
    return env


def _parallel_rows():
    """The module rl_parallel_rows (parallel_rows.py, compiled into the
    bridge beside this file as _PARALLEL_ROWS_PY): PettingZoo Parallel envs
    as rows."""
    import sys
    import types
    # Put in sys.modules before its code runs, so that two threads opening
    # envs at once share one module (the code runs again harmlessly where
    # the other thread is still running it).
    module = sys.modules.setdefault("rl_parallel_rows",
                                    types.ModuleType("rl_parallel_rows"))
    if not hasattr(module, "AecRows"):
        exec(_PARALLEL_ROWS_PY, module.__dict__)
    return module


def action_mask_size(env):
    """Mask elements per row the env writes (AecRows: its Discrete n), 0 for
    none."""
    return int(getattr(env, "action_mask_size", 0))


def _masks_into(env, masks_out):
    if masks_out is not None and action_mask_size(env) > 0:
        np.frombuffer(masks_out, np.uint8)[:] = env.action_masks.ravel()


def allow_leaving(env):
    """The run allows agents to leave early (env.agents_leave): a
    PettingZoo Parallel env's (ParallelRows) may; any other env refuses."""
    allow = getattr(env, "allow_leaving", None)
    if allow is None:
        raise ValueError(
            "env.agents_leave: only a PettingZoo Parallel env's agents can "
            "leave early through the bridge (this env has no allow_leaving)")
    allow()


def agents(env):
    """(agents per environment, their names): a ParallelRows' agents, else
    (1, [])."""
    return (int(getattr(env, "agents_per_env", 1)),
            list(getattr(env, "agent_names", [])))


_NESTED = (gym.spaces.Dict, gym.spaces.Tuple)
# Observations passed as their flattened vector (gymnasium.spaces.flatten):
# Dict and Tuple, and a bare Discrete or MultiDiscrete (one-hots, as inside
# a Dict) or MultiBinary (0/1 floats), e.g. FrozenLake-v1's state index.
_FLAT_OBS = _NESTED + (gym.spaces.Discrete, gym.spaces.MultiDiscrete,
                       gym.spaces.MultiBinary)


def flat_layout(space, prefix=""):
    """[(name, start, end)] of a Dict/Tuple observation flattened as
    gymnasium.spaces.flatten does: Dict keys in the space's order, Tuple
    items in order, Discrete as a one-hot, MultiDiscrete as one-hots."""
    if isinstance(space, gym.spaces.Dict):
        parts = []
        for key, sub in space.spaces.items():
            parts += flat_layout(sub, f"{prefix}{key}.")
        return parts
    if isinstance(space, gym.spaces.Tuple):
        parts = []
        for i, sub in enumerate(space.spaces):
            parts += flat_layout(sub, f"{prefix}{i}.")
        return parts
    return [(prefix.rstrip("."), gym.spaces.flatdim(space))]


def _leaves(space, prefix=""):
    """[(name, leaf space)] of a Dict/Tuple in flattening order."""
    if isinstance(space, gym.spaces.Dict):
        out = []
        for key, sub in space.spaces.items():
            out += _leaves(sub, f"{prefix}{key}.")
        return out
    if isinstance(space, gym.spaces.Tuple):
        out = []
        for i, sub in enumerate(space.spaces):
            out += _leaves(sub, f"{prefix}{i}.")
        return out
    return [(prefix.rstrip("."), space)]


def action_layout(space):
    """How a Dict/Tuple action space passes: ("discrete", [(name, leaf,
    parts)]) when every leaf is Discrete, MultiDiscrete or MultiBinary (one
    MultiDiscrete of their parts in order, Discrete as one part), ("box",
    [(name, leaf, size)]) when every leaf is a float Box (one Box of their
    elements in order). ValueError naming the leaves otherwise."""
    leaves = _leaves(space)
    discrete = (gym.spaces.Discrete, gym.spaces.MultiDiscrete,
                gym.spaces.MultiBinary)
    if all(isinstance(leaf, discrete) for _, leaf in leaves):
        parts = []
        for name, leaf in leaves:
            if isinstance(leaf, gym.spaces.Discrete):
                if int(leaf.start) != 0:
                    raise ValueError(f"action part {name}: Discrete spaces must "
                                     f"start at 0 (got {leaf})")
                parts.append((name, leaf, 1))
            elif isinstance(leaf, gym.spaces.MultiDiscrete):
                if np.any(np.asarray(leaf.start) != 0):
                    raise ValueError(f"action part {name}: MultiDiscrete spaces "
                                     f"must start at 0 (got {leaf})")
                parts.append((name, leaf, int(np.asarray(leaf.nvec).size)))
            else:
                parts.append((name, leaf, int(np.prod(leaf.shape))))
        return "discrete", parts
    if all(isinstance(leaf, gym.spaces.Box) and
           np.issubdtype(leaf.dtype, np.floating) for _, leaf in leaves):
        return "box", [(name, leaf, int(np.prod(leaf.shape)))
                       for name, leaf in leaves]
    kinds = ", ".join(f"{name or '-'}: {type(leaf).__name__}"
                      for name, leaf in leaves)
    raise ValueError(
        f"a {type(space).__name__} action mixing discrete and continuous parts "
        f"({kinds}): the service passes all-discrete ones as one "
        "MultiDiscrete and all-float-Box ones as one Box")


def _nvec_of(parts):
    nvec = []
    for _, leaf, _ in parts:
        if isinstance(leaf, gym.spaces.Discrete):
            nvec.append(int(leaf.n))
        elif isinstance(leaf, gym.spaces.MultiDiscrete):
            nvec += [int(v) for v in np.asarray(leaf.nvec).ravel()]
        else:
            nvec += [2] * int(np.prod(leaf.shape))
    return nvec


def unflatten_actions(space, flat, n):
    """A batch of n flat actions ([n, width], the layout of action_layout)
    as the vector env's batched Dict/Tuple action."""
    _, parts = action_layout(space)
    columns = iter(np.split(flat, np.cumsum([w for _, _, w in parts])[:-1],
                            axis=1))
    leaves = {}
    for name, leaf, _ in parts:
        column = next(columns)
        if isinstance(leaf, gym.spaces.Discrete):
            leaves[name] = column.reshape(n).astype(leaf.dtype, copy=False)
        else:
            leaves[name] = column.reshape((n,) + leaf.shape).astype(
                leaf.dtype, copy=False)

    def build(sub, prefix=""):
        if isinstance(sub, gym.spaces.Dict):
            return {key: build(s, f"{prefix}{key}.")
                    for key, s in sub.spaces.items()}
        if isinstance(sub, gym.spaces.Tuple):
            return tuple(build(s, f"{prefix}{i}.")
                         for i, s in enumerate(sub.spaces))
        return leaves[prefix.rstrip(".")]

    return build(space)


def flatten_batch(space, x, n):
    """A batch of n observations of `space` as float32 [n, flatdim]."""
    if isinstance(space, gym.spaces.Dict):
        return np.concatenate([flatten_batch(sub, x[key], n)
                               for key, sub in space.spaces.items()], axis=1)
    if isinstance(space, gym.spaces.Tuple):
        return np.concatenate([flatten_batch(sub, x[i], n)
                               for i, sub in enumerate(space.spaces)], axis=1)
    if isinstance(space, gym.spaces.Discrete):
        out = np.zeros((n, int(space.n)), np.float32)
        out[np.arange(n), np.asarray(x).reshape(n) - int(space.start)] = 1
        return out
    if isinstance(space, gym.spaces.MultiDiscrete):
        x = np.asarray(x).reshape(n, -1) - np.asarray(space.start).reshape(1, -1)
        cols = []
        for k, count in enumerate(np.asarray(space.nvec).ravel()):
            one = np.zeros((n, int(count)), np.float32)
            one[np.arange(n), x[:, k]] = 1
            cols.append(one)
        return np.concatenate(cols, axis=1)
    return np.asarray(x, np.float32).reshape(n, -1)


def _all_bytes(space):
    """Whether a Dict/Tuple's leaves are all uint8 Boxes."""
    return all(isinstance(leaf, gym.spaces.Box) and leaf.dtype == np.uint8
               for _, leaf in _leaves(space))


def obs_dtype(env):
    """What the bridge writes: uint8 for a uint8 Box (images stay bytes)
    and for a Dict/Tuple of them only, float32 for anything else (Dict and
    Tuple flattened to float32)."""
    space = env.single_observation_space
    if isinstance(space, gym.spaces.Box) and space.dtype == np.uint8:
        return np.uint8
    if isinstance(space, _NESTED) and _all_bytes(space):
        return np.uint8
    return np.float32


def _part(leaf):
    """describe(leaf) as a part of a flat observation: a scalar Box as
    shape (1,), a Discrete of any start as its n one-hot elements."""
    if isinstance(leaf, gym.spaces.Discrete):
        n = int(leaf.n)
        return ("discrete", (n,), [], [], n, "int64")
    kind, shape, low, high, n, dtype = describe(leaf)
    return (kind, shape or (1,), low, high, n, dtype)


def parts(env):
    """The named leaves of a Dict/Tuple observation and action, as the
    plugin ABI's space_parts lists them: ([(name, describe(leaf))], ...);
    [] for a space that is not a Dict or Tuple, and for one the ABI cannot
    list (over 64 leaves, a name over 64 characters, a leaf it cannot say;
    logged): its flat vector passes all the same. Nested names are dotted."""
    def of(space, what):
        if not isinstance(space, _NESTED):
            return []
        leaves = _leaves(space)
        why = ""
        if len(leaves) > 64:
            why = f"{len(leaves)} leaves (at most 64)"
        listed = []
        for name, leaf in leaves if not why else []:
            name = name or "-"
            try:
                part = _part(leaf)
            except ValueError as e:
                why = f"leaf {name}: {e}"
                break
            if len(name) > 64 or part[0] not in ("box", "discrete",
                                                  "multi_discrete",
                                                  "multi_binary"):
                why = f"leaf {name[:64]}: {part[0]}"
                break
            listed.append((name, part))
        if why:
            import sys
            print(f"[gym_bridge] the {what} space's parts are not listed "
                  f"({why}); it passes flat", file=sys.stderr)
            return []
        return listed
    return (of(env.single_observation_space, "observation"),
            of(env.single_action_space, "action"))


def observations(env, obs):
    """The vector env's observations as obs_dtype(env) [n * flatdim] (Dict
    and Tuple spaces flattened)."""
    space = env.single_observation_space
    if isinstance(space, _FLAT_OBS):
        flat = flatten_batch(space, obs, env.num_envs).ravel()
        return flat.astype(obs_dtype(env), copy=False)
    return np.asarray(obs, obs_dtype(env)).ravel()


def describe(space, flatten=False):
    """(kind, shape, low, high, n): kind is "box", "discrete" or the
    unsupported space's class name. A Dict or Tuple observation is a Box of
    its flattened parts (flat_layout) when `flatten`."""
    if flatten and isinstance(space, _FLAT_OBS):
        try:
            flat = gym.spaces.flatten_space(space)
        except NotImplementedError as e:
            return (type(space).__name__ + f" ({e})", (), [], [], 0, "")
        if not isinstance(flat, gym.spaces.Box):
            return (type(space).__name__, (), [], [], 0, "")
        # observations() writes float32 whatever the parts' dtypes, or
        # uint8 where every part is.
        flat = gym.spaces.Box(flat.low, flat.high, flat.shape,
                              np.uint8 if _all_bytes(space) else np.float32)
        space = flat
    if isinstance(space, gym.spaces.Box):
        return ("box", tuple(int(d) for d in space.shape),
                np.asarray(space.low, np.float64).ravel().tolist(),
                np.asarray(space.high, np.float64).ravel().tolist(), 0,
                str(space.dtype))
    if isinstance(space, gym.spaces.Discrete):
        if int(space.start) != 0:
            raise ValueError(f"Discrete spaces must start at 0 (got {space})")
        return ("discrete", (int(space.n),), [], [], int(space.n), "int64")
    if isinstance(space, _NESTED) and not flatten:  # an action
        try:
            kind, parts = action_layout(space)
        except ValueError as e:
            return (type(space).__name__ + f" ({e})", (), [], [], 0, "")
        if kind == "discrete":
            nvec = _nvec_of(parts)
            return ("multi_discrete", (len(nvec),), [], [], nvec, "int64")
        low = np.concatenate([np.asarray(leaf.low, np.float64).ravel()
                              for _, leaf, _ in parts])
        high = np.concatenate([np.asarray(leaf.high, np.float64).ravel()
                               for _, leaf, _ in parts])
        return ("box", (int(low.size),), low.tolist(), high.tolist(), 0,
                "float32")
    if isinstance(space, gym.spaces.MultiDiscrete) and not flatten:
        nvec = np.asarray(space.nvec).ravel()
        if np.any(np.asarray(space.start) != 0):
            raise ValueError(f"MultiDiscrete spaces must start at 0 (got {space})")
        return ("multi_discrete", (len(nvec),), [], [], [int(n) for n in nvec],
                "int64")
    if isinstance(space, gym.spaces.MultiBinary) and not flatten:
        return ("multi_binary", tuple(int(d) for d in np.atleast_1d(space.n)),
                [], [], 0, "int64")
    return (type(space).__name__, (), [], [], 0, "")


def space_of(env):
    return env.single_observation_space


def spaces(env):
    return (describe(env.single_observation_space, flatten=True),
            describe(env.single_action_space))


def reset_into(env, seed, obs_out, masks_out=None):
    """Resets every env; writes observations (obs_dtype) into obs_out (a
    writable buffer of the caller's), and action masks (uint8 [n, mask])
    into masks_out where the env has them."""
    obs, _ = env.reset(seed=seed)
    np.frombuffer(obs_out, obs_dtype(env))[:] = observations(env, obs)
    _masks_into(env, masks_out)


def episodic_life(env):
    """Whether the env's episodes are lives of longer games (rl_atari's
    EpisodicLife says so in its metadata): step_into then reports the
    games, from Gymnasium's RecordEpisodeStatistics under that wrapper."""
    return bool(env.metadata.get("episodic_life", False))


def _games_into(info, returns_out, lengths_out):
    """The games that ended at this step (info["episode"] of
    RecordEpisodeStatistics, under "final_info" with same-step autoreset)
    into returns_out float32 [n] and lengths_out int32 [n], 0 elsewhere."""
    returns = np.frombuffer(returns_out, np.float32)
    lengths = np.frombuffer(lengths_out, np.int32)
    returns[:] = 0
    lengths[:] = 0
    for source in (info, info.get("final_info", {})):
        if "episode" in source:
            rows = np.flatnonzero(source["_episode"])
            returns[rows] = np.asarray(source["episode"]["r"])[rows]
            lengths[rows] = np.asarray(source["episode"]["l"])[rows]


def step_into(env, actions, obs_out, rewards_out, terminated_out,
              truncated_out, final_out, returns_out=None, lengths_out=None,
              masks_out=None, alive_out=None):
    """One step with `actions` (a buffer: int64 for Discrete, float32 for
    Box), written into the caller's buffers: obs [n, obs] of obs_dtype,
    rewards float32 [n], flags uint8 [n], and final_out (or None) like obs
    in the rows of the envs whose episode ended; returns_out and
    lengths_out (or None) get the games that ended (episodic_life);
    masks_out (or None) the next step's action masks; alive_out (or None)
    each row's alive (agents that leave early, env.alive)."""
    space = env.single_action_space
    n = env.num_envs
    if isinstance(space, _NESTED):
        kind, _ = action_layout(space)
        flat = np.frombuffer(actions, np.int64 if kind == "discrete"
                             else np.float32).reshape(n, -1)
        actions = unflatten_actions(space, flat, n)
    elif isinstance(space, gym.spaces.Box):
        actions = np.frombuffer(actions, np.float32).reshape(
            (n,) + space.shape).astype(space.dtype, copy=False)
    elif isinstance(space, (gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)):
        actions = np.frombuffer(actions, np.int64).reshape(
            (n,) + space.shape).astype(space.dtype, copy=False)
    else:
        actions = np.frombuffer(actions, np.int64)
    obs, rewards, terminated, truncated, info = env.step(actions)
    terminated = np.asarray(terminated, bool)
    # A time limit reached on the terminal step is a termination (the ABI:
    # truncated is for a live episode that was cut).
    truncated = np.asarray(truncated, bool) & ~terminated
    dtype = obs_dtype(env)
    np.frombuffer(obs_out, dtype)[:] = observations(env, obs)
    np.frombuffer(rewards_out, np.float32)[:] = np.asarray(rewards, np.float32)
    np.frombuffer(terminated_out, np.uint8)[:] = terminated
    np.frombuffer(truncated_out, np.uint8)[:] = truncated
    if returns_out is not None:
        _games_into(info, returns_out, lengths_out)
    if final_out is not None and "final_obs" in info:
        final = np.frombuffer(final_out, dtype).reshape(n, -1)
        mask = info.get("_final_obs", np.ones(n, bool))
        nested = isinstance(space_of(env), _FLAT_OBS)
        for i in np.flatnonzero(mask):
            one = info["final_obs"][i]
            final[i] = (gym.spaces.flatten(space_of(env), one).astype(
                np.float32) if nested else np.asarray(one, dtype).ravel())
    _masks_into(env, masks_out)
    if alive_out is not None:
        np.frombuffer(alive_out, np.uint8)[:] = env.alive
