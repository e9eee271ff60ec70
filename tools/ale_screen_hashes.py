"""The screens the installed ale-py wheel (the Gymnasium bridge's ALE)
shows for a fixed play, as hashes that envs/atari/ale_test.cc compares
with ALE built from source (third_party/ale):

    .venv/bin/python tools/ale_screen_hashes.py

Each game from random_seed 1, sticky actions off, 5,000 steps cycling the
minimal action set every 8 steps (resetting when a game ends); the hash is
FNV-1a 64 over every step's grey screen (210x160 bytes).
"""
import os
import sys

import ale_py

GAMES = ("pong", "breakout")


def play(rom):
    ale = ale_py.ALEInterface()
    ale.setLoggerMode(ale_py.LoggerMode.Error)
    ale.setInt("random_seed", 1)
    ale.setFloat("repeat_action_probability", 0.0)
    ale.loadROM(rom)
    actions = ale.getMinimalActionSet()
    h, total, mask = 1469598103934665603, 0, (1 << 64) - 1
    for i in range(5000):
        if ale.game_over():
            ale.reset_game()
        total += ale.act(actions[(i // 8) % len(actions)])
        for c in ale.getScreenGrayscale().tobytes():
            h = ((h ^ c) * 1099511628211) & mask
    return ale.getEpisodeFrameNumber(), total, h


def main():
    roms = os.path.join(os.path.dirname(ale_py.__file__), "roms")
    for game in GAMES:
        frames, total, h = play(os.path.join(roms, game + ".bin"))
        print(f'{{"{game}", {frames}, {total:.0f}, {h}ull}},  // ale-py {ale_py.__version__}')
    return 0


if __name__ == "__main__":
    sys.exit(main())
