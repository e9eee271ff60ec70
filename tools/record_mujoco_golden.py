#!/usr/bin/env python3
"""Records Gymnasium's MuJoCo v5 transitions for //envs/mujoco:golden_test.

For each environment: a few trajectories of random actions from a seeded
reset, each step's action, observation, reward, terminated flag and the
state after it (qpos, qvel), with the trajectory's starting state. The C++
test puts its own mjData in that starting state (as Gymnasium's set_state
does) and replays the actions: every observation and state must match.
Run with the pinned gymnasium and mujoco (tools/setup.sh):

  .venv/bin/python tools/record_mujoco_golden.py envs/mujoco/testdata
"""
import os
import sys

import gymnasium as gym
import mujoco
import numpy as np

ENVS = [
    "Ant-v5", "HalfCheetah-v5", "Hopper-v5", "Humanoid-v5",
    "InvertedDoublePendulum-v5", "InvertedPendulum-v5", "Pusher-v5",
    "Reacher-v5", "Swimmer-v5", "Walker2d-v5",
]
TRAJECTORIES = 3
STEPS = 40


def line(key, values):
    values = np.asarray(values, dtype=np.float64).ravel()
    return "%s %d %s\n" % (key, values.size,
                           " ".join(repr(float(v)) for v in values))


def record(env_id, out):
    env = gym.make(env_id).unwrapped  # no wrappers: the raw step
    rng = np.random.default_rng(12345)
    out.write("# %s, gymnasium %s, mujoco %s\n" %
              (env_id, gym.__version__, mujoco.__version__))
    for t in range(TRAJECTORIES):
        env.reset(seed=1000 + t)
        out.write("trajectory %s\n" % env_id)
        out.write(line("qpos", env.data.qpos))
        out.write(line("qvel", env.data.qvel))
        low, high = env.action_space.low, env.action_space.high
        for _ in range(STEPS):
            # Beyond the bounds too, now and then: ctrl is clamped by
            # MuJoCo, the control cost is not.
            action = rng.uniform(1.2 * low, 1.2 * high).astype(np.float32)
            obs, reward, terminated, _, _ = env.step(action)
            out.write(line("action", action))
            out.write(line("obs", obs))
            out.write(line("reward", [reward]))
            out.write(line("terminated", [float(terminated)]))
            out.write(line("next_qpos", env.data.qpos))
            out.write(line("next_qvel", env.data.qvel))
            if terminated:
                break
    env.close()


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "envs/mujoco/testdata"
    os.makedirs(out_dir, exist_ok=True)
    for env_id in ENVS:
        path = os.path.join(out_dir, env_id + ".txt")
        with open(path, "w") as out:
            record(env_id, out)
        print("wrote", path)


if __name__ == "__main__":
    main()
