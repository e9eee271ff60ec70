"""Writes envs/atari/testdata/area_resize_golden.bin: OpenCV's INTER_AREA
resize (cv2.resize, as Gymnasium's AtariPreprocessing and EnvPool call it)
of frames that envs/atari/frame_ops_test.cc makes the same way, for the
C++ resize to match byte for byte.

    .venv/bin/python tools/gen_atari_frame_golden.py

Frames: 210x160 uint8 from a 31-bit LCG (x = x * 1103515245 + 12345 mod
2^31, byte = x >> 16 & 255) seeded 1, 2 and 3, then a horizontal and a
vertical gradient; each resized to 84x84 and to 105x80 (a whole-number
scale's neighbour, 110x84); the outputs concatenated in that order.
"""
import os
import sys

import cv2
import numpy as np

H, W = 210, 160
SIZES = [(84, 84), (84, 110)]  # (width, height) as cv2 takes them


def lcg_frame(seed):
    x = seed
    out = np.empty(H * W, dtype=np.uint8)
    for i in range(H * W):
        x = (x * 1103515245 + 12345) % (1 << 31)
        out[i] = (x >> 16) & 255
    return out.reshape(H, W)


def frames():
    yield from (lcg_frame(s) for s in (1, 2, 3))
    yield np.tile((np.arange(W) * 255 // (W - 1)).astype(np.uint8), (H, 1))
    yield np.tile((np.arange(H) * 255 // (H - 1)).astype(np.uint8)[:, None], (1, W))


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = os.path.join(root, "envs/atari/testdata/area_resize_golden.bin")
    with open(out, "wb") as f:
        for frame in frames():
            for size in SIZES:
                f.write(cv2.resize(frame, size, interpolation=cv2.INTER_AREA).tobytes())
    print(f"{out}: cv2 {cv2.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
