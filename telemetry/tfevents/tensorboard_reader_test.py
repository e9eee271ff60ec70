"""Event files from tfevents_write_tool, read back by TensorBoard's own reader
(the PyPI tensorboard package; without TensorFlow installed it uses its
tensorflow_stub record reader)."""

import math
import os
import shutil
import struct
import subprocess
import tempfile
import time
import unittest

import numpy as np
from tensorboard.backend.event_processing import event_accumulator
from tensorboard.backend.event_processing import event_file_loader
from tensorboard.compat import tf
from tensorboard.util import tensor_util

TOOL = "telemetry/tfevents/tfevents_write_tool"
WALL_TIME = 1700000000.125

# (command-line argument, tag, step, value as float32)
SCALARS = [
    ("loss/policy:0:0.1", "loss/policy", 0, np.float32(0.1)),
    ("loss/policy:1:nan", "loss/policy", 1, np.float32("nan")),
    ("reward:2:inf", "reward", 2, np.float32("inf")),
    ("reward:3:-inf", "reward", 3, np.float32("-inf")),
    ("reward:1099511627776:-2.5", "reward", 2**40, np.float32(-2.5)),
    ("a:b:4:1e-3", "a:b", 4, np.float32(1e-3)),  # a tag with a colon
    ("tiny:5:1e-45", "tiny", 5, np.float32(1e-45)),  # a denormal
]


def tool_path():
    # Runfiles: the test runs in the workspace's runfiles directory.
    if os.path.exists(TOOL):
        return TOOL
    return os.path.join(os.environ["TEST_SRCDIR"], "rl_service", TOOL)


def write_events(directory, args, wall_time=WALL_TIME, append=None):
    cmd = [tool_path(), f"--append={append}" if append else f"--dir={directory}"]
    if wall_time is not None:
        cmd.append(f"--wall_time_s={wall_time!r}")
    out = subprocess.run(cmd + list(args), check=True, capture_output=True, text=True)
    path = out.stdout.strip()
    assert os.path.isfile(path), path
    return path


def record_spans(data):
    """(start, length) of each TFRecord in `data` (framing only, no checks)."""
    spans, offset = [], 0
    while offset < len(data):
        (length,) = struct.unpack_from("<Q", data, offset)
        spans.append((offset, length))
        offset += 12 + length + 4
    return spans


def same_float32(got, want):
    got = np.float32(got)
    return (math.isnan(want) and math.isnan(got)) or got == want


class TensorBoardReaderTest(unittest.TestCase):

    def setUp(self):
        self.dir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_event_file_loader_reads_file_version_and_scalars(self):
        path = write_events(self.dir, [s[0] for s in SCALARS])
        self.assertIn("tfevents", os.path.basename(path))
        events = list(event_file_loader.EventFileLoader(path).Load())
        self.assertEqual(len(events), 1 + len(SCALARS))
        self.assertEqual(events[0].file_version, "brain.Event:2")
        self.assertFalse(events[0].HasField("summary"))
        for event, (arg, tag, step, value) in zip(events[1:], SCALARS):
            with self.subTest(arg=arg):
                self.assertEqual(event.wall_time, WALL_TIME)
                self.assertEqual(event.step, step)
                self.assertEqual(len(event.summary.value), 1)
                v = event.summary.value[0]
                self.assertEqual(v.tag, tag)
                # EventFileLoader migrates simple_value to a scalar tensor of
                # the "scalars" plugin.
                self.assertEqual(v.metadata.plugin_data.plugin_name, "scalars")
                got = tensor_util.make_ndarray(v.tensor)
                self.assertEqual(got.dtype, np.float32)
                self.assertEqual(got.shape, ())
                self.assertTrue(same_float32(got, value), f"{got} != {value}")

    def test_legacy_loader_sees_simple_value(self):
        path = write_events(self.dir, [s[0] for s in SCALARS])
        events = list(event_file_loader.LegacyEventFileLoader(path).Load())
        self.assertEqual(events[0].file_version, "brain.Event:2")
        for event, (arg, tag, step, value) in zip(events[1:], SCALARS):
            with self.subTest(arg=arg):
                v = event.summary.value[0]
                self.assertEqual(v.WhichOneof("value"), "simple_value")
                self.assertTrue(same_float32(v.simple_value, value))

    def test_event_accumulator_scalars(self):
        write_events(self.dir, [s[0] for s in SCALARS])
        acc = event_accumulator.EventAccumulator(self.dir).Reload()
        self.assertEqual(acc.file_version, 2.0)
        tags = sorted({s[1] for s in SCALARS})
        self.assertEqual(sorted(acc.Tags()["scalars"]), tags)
        for tag in tags:
            want = [s for s in SCALARS if s[1] == tag]
            got = acc.Scalars(tag)
            self.assertEqual([e.step for e in got], [s[2] for s in want], tag)
            for e, s in zip(got, want):
                self.assertEqual(e.wall_time, WALL_TIME)
                self.assertTrue(same_float32(e.value, s[3]), f"{tag}: {e.value}")

    def test_reopened_file_is_read_to_its_end(self):
        # The telemetry service closes the files of runs it has not written
        # to lately and appends to them later (event_file_cache.h).
        path = write_events(self.dir, ["x:0:1", "x:1:2"])
        self.assertEqual(write_events(None, ["x:2:3"], append=path), path)
        self.assertEqual(write_events(None, ["y:3:4"], append=path), path)
        self.assertEqual(os.listdir(self.dir), [os.path.basename(path)])
        events = list(event_file_loader.EventFileLoader(path).Load())
        self.assertEqual([e.file_version for e in events],
                         ["brain.Event:2", "", "", "", ""])
        acc = event_accumulator.EventAccumulator(self.dir).Reload()
        self.assertEqual([(e.step, e.value) for e in acc.Scalars("x")],
                         [(0, 1.0), (1, 2.0), (2, 3.0)])
        self.assertEqual([(e.step, e.value) for e in acc.Scalars("y")], [(3, 4.0)])

    def test_wall_time_defaults_to_now(self):
        before = time.time()
        path = write_events(self.dir, ["x:0:1"], wall_time=None)
        after = time.time()
        events = list(event_file_loader.EventFileLoader(path).Load())
        self.assertEqual(len(events), 2)
        for e in events:
            self.assertGreaterEqual(e.wall_time, before - 1)
            self.assertLessEqual(e.wall_time, after + 1)

    def test_corrupted_data_record_stops_the_reader(self):
        path = write_events(self.dir, ["x:0:1", "x:1:2", "x:2:3"])
        data = bytearray(open(path, "rb").read())
        spans = record_spans(data)
        self.assertEqual(len(spans), 4)
        start, _ = spans[2]  # the second scalar (x at step 1)
        data[start + 12 + 3] ^= 0x01
        with open(path, "wb") as f:
            f.write(data)

        if tf.__version__ == "stub":
            # The stub record reader checks the data CRC and raises.
            reader = tf.pywrap_tensorflow.PyRecordReader_New(path.encode(), 0, b"", None)
            reader.GetNext()
            reader.GetNext()
            with self.assertRaisesRegex(tf.errors.DataLossError, "failed event crc32 check"):
                reader.GetNext()

        # The loaders swallow DataLossError (they treat it as a record still
        # being written) and stop: only the events before the corrupted
        # record, no exception, and a later Load() never gets past it.
        loader = event_file_loader.EventFileLoader(path)
        events = list(loader.Load())
        self.assertEqual([e.step for e in events], [0, 0])
        self.assertEqual(events[0].file_version, "brain.Event:2")
        self.assertEqual(list(loader.Load()), [])

        acc = event_accumulator.EventAccumulator(self.dir).Reload()
        self.assertEqual([(e.step, e.value) for e in acc.Scalars("x")], [(0, 1.0)])

    def test_corrupted_length_is_caught_by_header_crc(self):
        path = write_events(self.dir, ["x:0:1", "x:1:2"])
        data = bytearray(open(path, "rb").read())
        start, _ = record_spans(data)[2]
        data[start] ^= 0x01
        with open(path, "wb") as f:
            f.write(data)
        if tf.__version__ == "stub":
            reader = tf.pywrap_tensorflow.PyRecordReader_New(path.encode(), 0, b"", None)
            reader.GetNext()
            reader.GetNext()
            with self.assertRaisesRegex(tf.errors.DataLossError, "failed header crc32 check"):
                reader.GetNext()
        events = list(event_file_loader.EventFileLoader(path).Load())
        self.assertEqual(len(events), 2)

    def test_bad_arguments(self):
        for args in (["nocolon"], ["x:1"], [":1:2"], ["x:one:2"], ["x:1:two"]):
            with self.subTest(args=args):
                r = subprocess.run([tool_path(), f"--dir={self.dir}"] + args,
                                   capture_output=True, text=True)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn("tag:step:value", r.stderr)
        r = subprocess.run([tool_path(), "x:1:2"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--dir", r.stderr)
        r = subprocess.run([tool_path(), f"--append={self.dir}/missing", "x:1:2"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 1)
        self.assertIn("missing", r.stderr)


if __name__ == "__main__":
    unittest.main()
