"""Records the Gymnasium bridge's Atari (envs/gym_bridge/rl_atari.py,
CleanRLAtari: CleanRL's preprocessing, itself checked against Gymnasium's
wrappers by rl_atari_test) for envs/atari/atari_game_test.cc, which plays
the same actions through the native C++ game and compares every step:

    .venv/bin/python tools/record_atari_golden.py envs/atari/testdata

Each case: a game, its keyword arguments, the seed of the first reset and
the ALE random_seed ale-py derives from it, then one line per step:
action, reward, terminated, truncated, the game's return and length where
one ended (else "-"), and FNV-1a 64 of the stacked observation. Without
no-op starts (noop_max 0) both sides are deterministic: the no-op draws are
the one thing each side takes from its own random generator.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "envs", "gym_bridge"))
import rl_atari  # noqa: E402

CASES = (
    ("breakout", "ALE/Breakout-v5", {}, 3000),
    ("pong", "ALE/Pong-v5", {}, 2500),
    # A short game limit: ALE's truncation, several times over.
    ("pong_truncated", "ALE/Pong-v5",
     {"max_num_frames_per_episode": 1000}, 800),
    # The raw rewards, a stack of 2, frame skip 3, no episodic life.
    ("breakout_raw", "ALE/Breakout-v5",
     {"reward_clip": False, "stack_num": 2, "frame_skip": 3,
      "episodic_life": False}, 1500),
)
SEED = 3
MASK = (1 << 64) - 1


def fnv_fast(array):
    # FNV-1a 64 over the bytes in order.
    h = 1469598103934665603
    for b in np.ascontiguousarray(array).tobytes():
        h = ((h ^ b) * 1099511628211) & MASK
    return h


def record(out, name, ale_id, kwargs, steps):
    env = rl_atari.CleanRLAtari(ale_id, noop_max=0, **kwargs)
    ale_seed = int(np.int32(np.random.SeedSequence(SEED).generate_state(2)[1]))
    obs, _ = env.reset(seed=SEED)
    rng = np.random.default_rng(11)
    lines = [f"case {name} {ale_id} seed {SEED} ale_seed {ale_seed}",
             "kwargs " + " ".join(f"{k}={int(v)}" for k, v in kwargs.items()),
             f"reset {fnv_fast(obs)}"]
    for _ in range(steps):
        action = int(rng.integers(env.action_space.n))
        obs, reward, terminated, truncated, info = env.step(action)
        game = info.get("episode")
        game_text = (f"{game['r']:g} {game['l']}" if game is not None
                     else "- -")
        lines.append(f"{action} {reward:g} {int(terminated)} "
                     f"{int(truncated)} {game_text} {fnv_fast(obs)}")
        if terminated or truncated:
            obs, _ = env.reset()
            lines.append(f"reset {fnv_fast(obs)}")
    env.close()
    with open(os.path.join(out, name + ".txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print(name, len(lines), "lines")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "envs/atari/testdata"
    os.makedirs(out, exist_ok=True)
    for case in CASES:
        record(out, *case)


if __name__ == "__main__":
    main()
