#!/usr/bin/env python3
"""Records PettingZoo's simple_spread_v3 for //envs/games:mpe_spread_test.

Each episode: PettingZoo's parallel env reset with a seed, the agents' and
landmarks' starting positions read from its world, then every step's moves
(seeded random ones), each agent's observation and reward and whether the
episode was truncated. The C++ test places its own world at those positions
and replays the moves: every observation and reward must match. One
episode per N starts with the agents crowded together, so the contact
forces and the collision penalty are exercised. Run with the pinned
pettingzoo (tools/setup.sh):

  .venv/bin/python tools/record_mpe_golden.py envs/games/testdata/simple_spread_v3.txt
"""
import os
import sys
import warnings

import numpy as np

# pygame, which the MPE modules import, quiet on a machine without a desktop.
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
warnings.filterwarnings("ignore")
from pettingzoo.mpe import simple_spread_v3  # noqa: E402

# (N, local_ratio, max_cycles, seed, crowded)
EPISODES = [
    (3, 0.5, 25, 0, False),
    (3, 0.5, 25, 1, False),
    (3, 0.5, 25, 2, True),
    (4, 0.25, 30, 3, True),
    (2, 1.0, 10, 4, False),
]


def values(xs, fmt):
    return " ".join(fmt % x for x in np.asarray(xs).ravel())


def record(out, n, local_ratio, max_cycles, seed, crowded):
    env = simple_spread_v3.parallel_env(
        N=n, local_ratio=local_ratio, max_cycles=max_cycles,
        continuous_actions=False)
    env.reset(seed=seed)
    world = env.unwrapped.world
    if crowded:
        # Agents 0.1 apart along a zigzag: every pair closer than 0.3 (but
        # the first and fourth of N = 4, 0.304 apart) starts in contact.
        for i, agent in enumerate(world.agents):
            agent.state.p_pos = np.array([0.1 * i, 0.05 * (i % 2)])
    names = env.possible_agents
    rng = np.random.default_rng(100 + seed)
    out.write("episode %d %.17g %d\n" % (n, local_ratio, max_cycles))
    out.write("agents %s\n" % values(
        [a.state.p_pos for a in world.agents], "%.17g"))
    out.write("landmarks %s\n" % values(
        [lm.state.p_pos for lm in world.landmarks], "%.17g"))
    for _ in range(max_cycles):
        moves = rng.integers(0, 5, size=n)
        if crowded and rng.random() < 0.5:
            moves[:] = 0  # let the contact forces act alone
        obs, rewards, terms, truncs, _ = env.step(
            {name: int(m) for name, m in zip(names, moves)})
        assert not any(terms.values())
        out.write("step %s\n" % values(moves, "%d"))
        out.write("obs %s\n" % values([obs[a] for a in names], "%.9g"))
        out.write("rewards %s\n" % values([rewards[a] for a in names],
                                          "%.17g"))
        out.write("truncated %d\n" % int(all(truncs.values())))
    env.close()


def main():
    with open(sys.argv[1], "w") as out:
        out.write("# PettingZoo %s simple_spread_v3, tools/record_mpe_golden.py\n"
                  % __import__("pettingzoo").__version__)
        for episode in EPISODES:
            record(out, *episode)


if __name__ == "__main__":
    main()
