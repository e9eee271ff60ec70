"""TelemetryClient and `rlctl metrics` / `rlctl top` against the real
telemetry service: (a) telemetry_main alone, fed known points through Ingest;
(b) the embedded system (coordinator with local workers and its telemetry
child) training CartPole."""

import contextlib
import csv
import io
import itertools
import math
import os
import queue
import shutil
import sys
import tempfile
import threading
import time
import unittest

import grpc
import yaml
from google.protobuf import json_format

import rlctl
import test_util
from rlservice.security import make_channel
from rlservice import Client, ClientError, TelemetryClient
from rlservice.protos import common_pb2
from rlservice.protos import telemetry_pb2, telemetry_pb2_grpc

NOT_FOUND = grpc.StatusCode.NOT_FOUND


def run_rlctl(*argv):
    """(exit code, stdout, stderr) of rlctl.main(argv), in this process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = rlctl.main(list(argv))
    return code, out.getvalue(), err.getvalue()


class StandaloneTelemetryTest(unittest.TestCase):
    """telemetry_main alone; points written with the generated stubs."""

    RUN = "run-metrics-1"

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        port_file = os.path.join(cls.dir, "port")
        cls.telemetry = test_util.start(
            ["telemetry/telemetry_main", "--port=0", f"--port_file={port_file}",
             "--http_port=0", f"--http_port_file={cls.dir}/http_port",
             f"--store={cls.dir}/telemetry.db", f"--tensorboard_dir={cls.dir}/tb"],
            os.path.join(cls.dir, "telemetry.log"))
        try:
            port = test_util.read_port_file(port_file, cls.telemetry, what="telemetry_main")
        except RuntimeError:
            test_util.stop(cls.telemetry)
            raise
        cls.address = f"127.0.0.1:{port}"
        cls.channel = make_channel(cls.address)
        cls.stub = telemetry_pb2_grpc.TelemetryServiceStub(cls.channel)
        cls.incarnations = itertools.count(1)

        # Wall times: old points an hour ago, recent ones now.
        cls.now_ns = time.time_ns() // 1000 * 1000
        cls.old_ns = cls.now_ns - 3600 * 10**9
        # learner/loss: steps 10..100, value step / 3 (not exact in decimal);
        # the first five an hour old.
        cls.loss = [(s, cls.old_ns + s if s <= 50 else cls.now_ns + s, s / 3)
                    for s in range(10, 101, 10)]
        points = [telemetry_pb2.MetricPoint(name="learner/loss", step=s, wall_time_ns=w,
                                            value=v) for s, w, v in cls.loss]
        # actor/episode_return from two actors: actor=0 step, actor=1 3 * step.
        for actor, factor in ((0, 1), (1, 3)):
            for s in (10, 20, 30, 40):
                points.append(telemetry_pb2.MetricPoint(
                    name="actor/episode_return", step=s, wall_time_ns=cls.now_ns + s,
                    value=factor * s, labels={"actor": str(actor)}))
        # A NaN in the middle: buckets' mean/min/max skip it.
        for s, v in ((1, 1.0), (2, float("nan")), (3, 3.0)):
            points.append(telemetry_pb2.MetricPoint(name="learner/with_nan", step=s,
                                                    wall_time_ns=cls.now_ns, value=v))
        # Split over two batches of one stream.
        cls.ingest(cls.RUN, [points[:7], points[7:]])

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        code = test_util.stop(cls.telemetry)
        shutil.rmtree(cls.dir, ignore_errors=True)
        assert code == 0, f"telemetry_main exited with {code}"

    @classmethod
    def ingest(cls, run_id, batches):
        """Sends `batches` (lists of points) on one Ingest stream of a new
        emitter incarnation; returns once the last is acknowledged."""
        incarnation = next(cls.incarnations)
        requests = [telemetry_pb2.MetricBatch(sequence_number=i + 1, run_id=run_id,
                                              source="test/0", incarnation=incarnation,
                                              points=points)
                    for i, points in enumerate(batches)]
        acked = 0
        for ack in cls.stub.Ingest(iter(requests), timeout=30):
            acked = max(acked, ack.acked_sequence_number)
        assert acked == len(batches), f"acked {acked} of {len(batches)} batches"

    def client(self):
        client = TelemetryClient(self.address)
        self.addCleanup(client.close)
        return client

    # --- TelemetryClient ----------------------------------------------------

    def test_query_raw(self):
        series = self.client().query(self.RUN, names=["learner/loss"])
        self.assertEqual(len(series), 1)
        self.assertEqual(series[0]["name"], "learner/loss")
        self.assertEqual(series[0]["labels"], {})
        points = series[0]["points"]
        self.assertEqual([(p.step, p.value) for p in points],
                         [(s, v) for s, _, v in self.loss])
        for p, (_, wall_ns, _) in zip(points, self.loss):
            self.assertAlmostEqual(p.wall_time, wall_ns / 1e9, delta=1e-6)
        # A step range, and a single name as a string.
        series = self.client().query(self.RUN, names="learner/loss", min_step=30,
                                     max_step=50)
        self.assertEqual([p.step for p in series[0]["points"]], [30, 40, 50])

    def test_query_prefix_and_since(self):
        client = self.client()
        names = {(s["name"], tuple(sorted(s["labels"].items())))
                 for s in client.query(self.RUN, prefix="actor/")}
        self.assertEqual(names, {("actor/episode_return", (("actor", "0"),)),
                                 ("actor/episode_return", (("actor", "1"),))})
        recent = client.query(self.RUN, names=["learner/loss"], since=600)
        self.assertEqual([p.step for p in recent[0]["points"]], [60, 70, 80, 90, 100])
        import datetime
        recent = client.query(self.RUN, names=["learner/loss"],
                              since=datetime.datetime.now() - datetime.timedelta(minutes=10))
        self.assertEqual(len(recent[0]["points"]), 5)
        everything = client.query(self.RUN, names=["learner/loss"], since=7200)
        self.assertEqual(len(everything[0]["points"]), 10)

    def test_query_buckets(self):
        series = self.client().query(self.RUN, names=["learner/loss"], buckets=2)
        buckets = series[0]["buckets"]
        self.assertNotIn("points", series[0])
        # [10, 100] in two buckets of width 46: steps 10..50 and 60..100.
        self.assertEqual([(b["min_step"], b["max_step"], b["count"]) for b in buckets],
                         [(10, 50, 5), (60, 100, 5)])
        self.assertAlmostEqual(buckets[0]["mean"], 10.0)
        self.assertEqual(buckets[0]["min"], 10 / 3)
        self.assertEqual(buckets[0]["max"], 50 / 3)
        self.assertEqual(buckets[0]["last"], 50 / 3)
        self.assertAlmostEqual(buckets[1]["mean"], 80 / 3)
        self.assertEqual(buckets[1]["last"], 100 / 3)

    def test_nan_in_buckets(self):
        series = self.client().query(self.RUN, names=["learner/with_nan"], buckets=1)
        (b,) = series[0]["buckets"]
        self.assertEqual((b["count"], b["min"], b["max"], b["mean"], b["last"]),
                         (3, 1.0, 3.0, 2.0, 3.0))
        raw = self.client().query(self.RUN, names=["learner/with_nan"])[0]["points"]
        self.assertTrue(math.isnan(raw[1].value))

    def test_aggregation_across_actors(self):
        client = self.client()
        for aggregation, factor in (("mean", 2), ("sum", 4), ("max", 3), ("min", 1)):
            series = client.query(self.RUN, names=["actor/episode_return"],
                                  aggregate_labels=["actor"], aggregation=aggregation)
            self.assertEqual(len(series), 1, aggregation)
            self.assertEqual(series[0]["labels"], {})
            self.assertEqual([(p.step, p.value) for p in series[0]["points"]],
                             [(s, factor * s) for s in (10, 20, 30, 40)], aggregation)
        (series,) = client.query(self.RUN, names=["actor/episode_return"], buckets=1,
                                 aggregate_labels=["actor"])
        (b,) = series["buckets"]
        self.assertEqual((b["count"], b["min"], b["max"], b["mean"], b["last"]),
                         (8, 10.0, 120.0, 50.0, 80.0))
        with self.assertRaises(ClientError):
            client.query(self.RUN, names=["actor/episode_return"], aggregation="median")

    def test_raw_series_in_step_windows(self):
        client = self.client()
        for window_points in (None, 3, 7, 100):
            points = []
            for s in client.raw_series(self.RUN, prefix="learner/", window_points=window_points):
                points += [(s.name, p.step, p.value) for p in s.points]
            self.assertEqual(len(points), 13, window_points)
            self.assertEqual(len(set((n, st) for n, st, _ in points)), 13, window_points)
            self.assertEqual([v for n, _, v in points if n == "learner/loss"],
                             [v for _, _, v in self.loss], window_points)
        pieces = list(client.raw_series(self.RUN, names=["learner/loss"], window_points=3))
        self.assertGreater(len(pieces), 2)

    def test_list_series_and_latest(self):
        client = self.client()
        series = client.list_series(self.RUN)
        by_key = {(s["name"], s["labels"].get("actor")): s for s in series}
        self.assertEqual(set(by_key), {("learner/loss", None), ("learner/with_nan", None),
                                       ("actor/episode_return", "0"),
                                       ("actor/episode_return", "1")})
        loss = by_key[("learner/loss", None)]
        self.assertEqual((loss["run_id"], loss["num_points"], loss["last_step"]),
                         (self.RUN, 10, 100))
        self.assertEqual(len(client.list_series(self.RUN, prefix="actor/")), 2)
        self.assertIn(self.RUN, {s["run_id"] for s in client.list_series()})
        self.assertEqual(client.list_series("run-404"), [])
        self.assertEqual(
            client.latest(self.RUN, ["learner/loss", "actor/episode_return", "no/such"]),
            {"learner/loss": 100 / 3, "actor/episode_return{actor=0}": 40.0,
             "actor/episode_return{actor=1}": 120.0})

    def test_unknown_run_and_unreachable(self):
        with self.assertRaises(ClientError) as e:
            self.client().query("run-404", names=["learner/loss"])
        self.assertEqual(e.exception.code, NOT_FOUND)
        with self.assertRaises(ClientError) as e:
            TelemetryClient("127.0.0.1:1", timeout=2).query(self.RUN)
        self.assertEqual(e.exception.code, grpc.StatusCode.UNAVAILABLE)
        self.assertIn("no telemetry service at 127.0.0.1:1", str(e.exception))

    def test_watch(self):
        got = queue.Queue()
        client = TelemetryClient(self.address)
        stream = client.watch("run-watch", names=["learner/live"])

        def tail():
            try:
                for point in stream:
                    got.put(point)
                    stream.close()  # cancels the call
                    return
            except ClientError as e:
                got.put(e)

        thread = threading.Thread(target=tail, daemon=True)
        thread.start()
        # The watch starts asynchronously: send points until one comes back.
        point = None
        for step in range(1, 50):
            self.ingest("run-watch", [[telemetry_pb2.MetricPoint(
                name="learner/live", step=step, wall_time_ns=time.time_ns(), value=0.5)]])
            try:
                point = got.get(timeout=0.5)
                break
            except queue.Empty:
                pass
        self.assertIsInstance(point, dict)
        self.assertEqual((point["name"], point["value"]), ("learner/live", 0.5))
        thread.join(timeout=10)
        client.close()

    # --- rlctl metrics --------------------------------------------------------

    def rlctl(self, *argv):
        return run_rlctl("--telemetry", self.address, *argv)

    def test_rlctl_series_table(self):
        code, out, _ = self.rlctl("metrics", self.RUN)
        self.assertEqual(code, 0)
        lines = out.splitlines()
        self.assertEqual(lines[0].split(), ["NAME", "LABELS", "POINTS", "LAST", "STEP",
                                            "LAST", "VALUE"])
        rows = {tuple(line.split()[:2]): line.split()[2:] for line in lines[1:]}
        self.assertEqual(rows[("learner/loss", "-")], ["10", "100", "33.3333"])
        self.assertEqual(rows[("actor/episode_return", "actor=1")], ["4", "40", "120"])
        self.assertEqual(rows[("learner/with_nan", "-")], ["3", "3", "3"])
        # --since: only series with points in the window.
        code, out, _ = self.rlctl("metrics", self.RUN, "--since", "2h")
        self.assertEqual(len(out.splitlines()), 5)

    def test_rlctl_bucket_table(self):
        code, out, _ = self.rlctl("metrics", self.RUN, "--name", "learner/loss",
                                  "--buckets", "2")
        self.assertEqual(code, 0)
        lines = out.splitlines()
        self.assertEqual(lines[0], "learner/loss")
        self.assertEqual(lines[1].split(), ["STEPS", "COUNT", "MEAN", "MIN", "MAX", "LAST"])
        self.assertEqual(lines[2].split(), ["10-50", "5", "10", "3.33333", "16.6667",
                                            "16.6667"])
        self.assertEqual(len(lines), 4)
        # Default: about 20 buckets (here one per point), per actor series.
        code, out, _ = self.rlctl("metrics", self.RUN, "--prefix", "actor/")
        self.assertEqual(code, 0)
        self.assertIn("actor/episode_return {actor=0}", out)
        self.assertIn("actor/episode_return {actor=1}", out)
        self.assertEqual(sum(1 for line in out.splitlines() if line.startswith("40 ")), 2)

    def test_rlctl_csv(self):
        code, out, _ = self.rlctl("metrics", self.RUN, "--name", "learner/loss",
                                  "--name", "actor/episode_return", "--csv")
        self.assertEqual(code, 0)
        rows = list(csv.DictReader(io.StringIO(out)))
        self.assertEqual(list(rows[0]), ["run", "name", "labels", "step", "wall_time",
                                         "value"])
        loss = [r for r in rows if r["name"] == "learner/loss"]
        self.assertEqual([(r["run"], r["labels"], int(r["step"]), float(r["value"]))
                          for r in loss], [(self.RUN, "", s, v) for s, _, v in self.loss])
        self.assertEqual([r["wall_time"] for r in loss],
                         [f"{w // 10**9}.{w % 10**9:09d}" for _, w, _ in self.loss])
        actor1 = [(int(r["step"]), float(r["value"])) for r in rows
                  if r["labels"] == "actor=1"]
        self.assertEqual(actor1, [(s, 3.0 * s) for s in (10, 20, 30, 40)])
        self.assertEqual(len(rows), 18)
        # --since keeps the recent half of learner/loss.
        code, out, _ = self.rlctl("metrics", self.RUN, "--name", "learner/loss", "--csv",
                                  "--since", "10m")
        self.assertEqual(code, 0)
        self.assertEqual([int(r["step"]) for r in csv.DictReader(io.StringIO(out))],
                         [60, 70, 80, 90, 100])
        # NaN round-trips as "nan".
        code, out, _ = self.rlctl("metrics", self.RUN, "--name", "learner/with_nan", "--csv")
        values = [float(r["value"]) for r in csv.DictReader(io.StringIO(out))]
        self.assertEqual(values[0], 1.0)
        self.assertTrue(math.isnan(values[1]))

    def test_rlctl_errors(self):
        code, _, err = self.rlctl("metrics", "run-404")
        self.assertEqual(code, 3)
        self.assertIn("run-404 has no metrics", err)
        code, _, err = self.rlctl("metrics", "run-404", "--name", "learner/loss", "--csv")
        self.assertEqual(code, 3)
        code, _, err = self.rlctl("metrics", self.RUN, "--name", "no/such")
        self.assertEqual(code, 3)
        code, _, err = self.rlctl("metrics", self.RUN, "--since", "10 parsecs")
        self.assertEqual(code, 2)
        self.assertIn("--since", err)
        code, _, err = run_rlctl("--telemetry", "127.0.0.1:1", "--timeout", "2", "metrics",
                                 self.RUN)
        self.assertEqual(code, 4)
        self.assertIn("no telemetry service at 127.0.0.1:1", err)


class EmbeddedSystemTest(unittest.TestCase):
    """The coordinator with local workers and its telemetry child."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        port_file = os.path.join(cls.dir, "port")
        telemetry_port_file = os.path.join(cls.dir, "telemetry_port")
        cls.log_path = os.path.join(cls.dir, "coordinator.log")
        cls.coordinator = test_util.start(
            ["coordinator/coordinator_main", "--port=0", f"--port_file={port_file}",
             f"--telemetry_port_file={telemetry_port_file}",
             f"--telemetry_http_port_file={cls.dir}/telemetry_http_port",
             f"--store={cls.dir}/c.db", f"--runs_dir={cls.dir}/runs",
             f"--log_dir={cls.dir}/logs", "--local_workers=learners=1,actors=1"],
            cls.log_path)
        try:
            port = test_util.read_port_file(port_file, cls.coordinator, what="coordinator")
            telemetry_port = test_util.read_port_file(telemetry_port_file, cls.coordinator,
                                                      what="coordinator (telemetry port)")
        except RuntimeError:
            test_util.stop(cls.coordinator)
            raise
        cls.address = f"127.0.0.1:{port}"
        cls.telemetry_address = f"127.0.0.1:{telemetry_port}"
        # The embedded coordinator locks its doors with tokens it made.
        os.environ["RL_TOKEN_FILE"] = f"{cls.dir}/runs/auth/user.token"

    @classmethod
    def tearDownClass(cls):
        os.environ.pop("RL_TOKEN_FILE", None)
        code = test_util.stop(cls.coordinator)
        shutil.rmtree(cls.dir, ignore_errors=True)
        assert code == 0, f"coordinator exited with {code}"

    def fail_with_logs(self, message):
        logs = [f"--- coordinator.log\n{test_util.tail(self.log_path)}"]
        log_dir = os.path.join(self.dir, "logs")
        for name in sorted(os.listdir(log_dir)) if os.path.isdir(log_dir) else ():
            logs.append(f"--- {name}\n{test_util.tail(os.path.join(log_dir, name), 15)}")
        self.fail(message + "\n" + "\n".join(logs))

    def test_top_and_metrics_of_a_training_run(self):
        client = Client(self.address)
        telemetry = TelemetryClient(self.telemetry_address, timeout=5)
        self.addCleanup(client.close)
        self.addCleanup(telemetry.close)
        # CartPole with a budget it will not finish during the test.
        with open("examples/cartpole.yaml") as f:
            spec = json_format.ParseDict(yaml.safe_load(f), common_pb2.RunSpec())
        spec.total_env_steps = 50_000_000
        spec.ClearField("target_return")
        run = client.submit(spec)  # a RunSpec built by a program
        run_id = run.run_id

        deadline = time.monotonic() + 120
        state = None
        while True:
            state = client.get(run_id)
            if state.state in (4, 5, 6):  # SUCCEEDED, FAILED, CANCELLED
                self.fail_with_logs(f"run ended: {state}")
            if state.state == 3:  # RUNNING
                try:
                    if telemetry.latest(run_id, ["learner/steps_per_second",
                                                 "learner/policy_loss"]).keys() == {
                            "learner/steps_per_second", "learner/policy_loss"}:
                        break
                except ClientError as e:
                    if e.code not in (NOT_FOUND, grpc.StatusCode.UNAVAILABLE):
                        raise
            if time.monotonic() > deadline:
                self.fail_with_logs(f"no learner/steps_per_second points; run {state}")
            time.sleep(0.5)

        # rlctl top --once: one frame, the run with a numeric SPS.
        code, out, err = run_rlctl("--coordinator", self.address, "--telemetry",
                                   self.telemetry_address, "top", "--once")
        self.assertEqual(code, 0, err)
        lines = out.splitlines()
        self.assertTrue(lines[0].startswith("rlctl top"), out)
        self.assertEqual(lines[1].split()[:5], ["RUN", "STATE", "ENV", "STEPS", "PROGRESS"])
        (row,) = [line.split() for line in lines if line.startswith(run_id)]
        self.assertEqual(row[1], "RUNNING", out)
        self.assertRegex(row[4], r"^\d+$", out)  # SPS
        self.assertGreater(int(row[4]), 0, out)
        self.assertRegex(row[3], r"^\d+\.\d%$", out)  # progress
        self.assertEqual(row[7], "2", out)  # a learner and an actor
        self.assertNotIn("warning", out)

        # Without a telemetry service: '-' and a one-line warning.
        code, out, err = run_rlctl("--coordinator", self.address, "--telemetry",
                                   "127.0.0.1:1", "top", "--once")
        self.assertEqual(code, 0, err)
        (row,) = [line.split() for line in out.splitlines() if line.startswith(run_id)]
        self.assertEqual(row[4], "-", out)
        self.assertIn("warning: no telemetry service at 127.0.0.1:1", out)

        code, out, err = run_rlctl("--telemetry", self.telemetry_address, "metrics", run_id,
                                   "--name", "learner/policy_loss", "--csv")
        self.assertEqual(code, 0, err)
        rows = list(csv.DictReader(io.StringIO(out)))
        self.assertGreater(len(rows), 0)
        self.assertEqual({(r["run"], r["name"]) for r in rows},
                         {(run_id, "learner/policy_loss")})
        for r in rows:
            self.assertGreater(int(r["step"]), 0)
            float(r["value"])

        # The actor's points come in their own batches (every second, and
        # only once its first episodes ended): poll for them.
        deadline = time.monotonic() + 60
        while True:
            code, out, err = run_rlctl("--telemetry", self.telemetry_address, "metrics", run_id)
            self.assertEqual(code, 0, err)
            if "actor/episode_return" in out or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        self.assertIn("learner/steps_per_second", out)
        self.assertIn("actor/episode_return", out)

        client.cancel(run_id)
        done = client.wait(run_id, timeout=60)
        self.assertEqual(done.state, 6)  # CANCELLED
        code, out, err = run_rlctl("--coordinator", self.address, "--telemetry",
                                   self.telemetry_address, "top", "--once")
        self.assertEqual(code, 0, err)
        self.assertNotIn(run_id, out)


if __name__ == "__main__":
    # bazel test --test_filter=PATTERN: only the tests whose names match.
    only = os.environ.get("TESTBRIDGE_TEST_ONLY")
    unittest.main(argv=[sys.argv[0]] + (["-k", only] if only else []))
