"""The telemetry service's outputs read by other people's tools.

- TensorBoard: points ingested through gRPC end up in the service's per-run
  event files, read back with TensorBoard's own EventAccumulator (PyPI).
- Prometheus: /metrics of the telemetry service, a coordinator and a learner
  parsed with prometheus_client's text parser.
"""

import glob
import math
import os
import subprocess
import tempfile
import time
import unittest
import urllib.request

import grpc
from prometheus_client.parser import text_string_to_metric_families
from tensorboard.backend.event_processing import event_accumulator

from proto import telemetry_pb2
from proto import telemetry_pb2_grpc


class Process:
    """A child process with a log, stopped with SIGTERM."""

    def __init__(self, argv, log_path):
        self.log_path = log_path
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(argv, stdout=self.log,
                                     stderr=subprocess.STDOUT)

    def wait_port(self, path, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if os.path.exists(path):
                with open(path) as f:
                    text = f.read().strip()
                if text:
                    return int(text)
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"no port in {path}:\n{self.text()}")

    def text(self):
        self.log.flush()
        with open(self.log_path, errors="replace") as f:
            return f.read()[-3000:]

    def stop(self):
        self.proc.terminate()
        try:
            return self.proc.wait(timeout=30)
        finally:
            self.log.close()


def wait_for(condition, what, timeout=60):
    """Polls `condition` until it returns a true value, which is returned;
    fails naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.1)


def scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics",
                                timeout=10) as r:
        content_type = r.headers["Content-Type"]
        body = r.read().decode()
    families = {f.name: f for f in text_string_to_metric_families(body)}
    return content_type, families


class EndpointsTest(unittest.TestCase):

    def setUp(self):
        self.dir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            if p.proc.poll() is None:
                p.stop()

    def start(self, argv, name):
        p = Process(argv, os.path.join(self.dir, name + ".log"))
        self.procs.append(p)
        return p

    def test_tensorboard_reads_the_services_event_files(self):
        tb = os.path.join(self.dir, "tensorboard")
        t = self.start(["telemetry/telemetry_main", "--port=0",
                        f"--port_file={self.dir}/port", "--http_port=0",
                        f"--http_port_file={self.dir}/http",
                        f"--store={self.dir}/t.db", f"--tensorboard_dir={tb}"],
                       "telemetry")
        port = t.wait_port(f"{self.dir}/port")
        http_port = t.wait_port(f"{self.dir}/http")
        batch = telemetry_pb2.MetricBatch(
            sequence_number=1, run_id="run-tb", source="test", incarnation=1)
        for step in range(50):
            batch.points.add(name="learner/policy_loss", step=step,
                             wall_time_ns=1_700_000_000_000_000_000 + step,
                             value=0.5 * step)
            batch.points.add(name="actor/episode_return", step=step,
                             wall_time_ns=1_700_000_000_000_000_000 + step,
                             value=float(step), labels={"actor": "1"})
        batch.points.add(name="learner/policy_loss", step=50,
                         value=float("nan"))
        channel = grpc.secure_channel(f"127.0.0.1:{port}", grpc.local_channel_credentials())
        acks = telemetry_pb2_grpc.TelemetryServiceStub(channel).Ingest(
            iter([batch]), timeout=30)
        self.assertEqual(max(a.acked_sequence_number for a in acks), 1)

        run_dir = os.path.join(tb, "run-tb")

        def all_points_readable():
            # The service writes event files on a thread of its own, after
            # the acknowledgement: the run's directory may not exist yet
            # (EventAccumulator then raises DirectoryDeletedError).
            if not glob.glob(os.path.join(run_dir, "events.out.tfevents.*")):
                return None
            acc = event_accumulator.EventAccumulator(run_dir).Reload()
            tags = acc.Tags()["scalars"]
            if ("learner/policy_loss" in tags and
                    "actor/episode_return/actor=1" in tags and
                    len(acc.Scalars("learner/policy_loss")) == 51 and
                    len(acc.Scalars("actor/episode_return/actor=1")) == 50):
                return acc
            return None

        acc = wait_for(all_points_readable, f"101 points in {run_dir}")
        self.assertTrue(glob.glob(os.path.join(run_dir, "events.out.tfevents.*")))
        self.assertEqual(acc.file_version, 2.0)
        loss = acc.Scalars("learner/policy_loss")
        self.assertEqual([e.step for e in loss], list(range(51)))
        self.assertEqual([e.value for e in loss[:50]],
                         [0.5 * s for s in range(50)])
        self.assertTrue(math.isnan(loss[50].value))
        self.assertAlmostEqual(loss[3].wall_time, 1_700_000_000.000000003, 6)
        returns = acc.Scalars("actor/episode_return/actor=1")
        self.assertEqual(len(returns), 50)
        self.assertEqual(returns[7].value, 7.0)

        content_type, families = scrape(http_port)
        self.assertIn("version=0.0.4", content_type)
        self.assertEqual(
            families["telemetry_stored_points"].samples[0].value, 101)
        self.assertEqual(t.stop(), 0)

    def test_coordinator_and_learner_serve_metrics(self):
        c = self.start(["coordinator/coordinator_main", "--port=0",
                        f"--port_file={self.dir}/cport",
                        f"--store={self.dir}/c.db",
                        f"--runs_dir={self.dir}/runs", "--metrics_port=0",
                        f"--metrics_port_file={self.dir}/cmetrics"],
                       "coordinator")
        c.wait_port(f"{self.dir}/cport")
        content_type, families = scrape(c.wait_port(f"{self.dir}/cmetrics"))
        self.assertIn("version=0.0.4", content_type)
        states = {s.labels["state"]: s.value
                  for s in families["coordinator_runs"].samples}
        self.assertEqual(states.get("QUEUED"), 0)
        self.assertIn("process_resident_memory_bytes", families)
        self.assertIn("telemetry_emitter_points", families)

        learner = self.start(["learner/learner_main",
                              "--run=examples/cartpole.yaml", "--port=0",
                              f"--port_file={self.dir}/lport",
                              "--metrics_port=0",
                              f"--metrics_port_file={self.dir}/lmetrics"],
                             "learner")
        learner.wait_port(f"{self.dir}/lport")
        _, families = scrape(learner.wait_port(f"{self.dir}/lmetrics"))
        steps = families["learner_env_steps"].samples
        self.assertEqual(steps[0].labels["run"], "cartpole")
        self.assertEqual(steps[0].value, 0)
        self.assertEqual(families["learner_connected_actors"].type, "gauge")
        self.assertEqual(c.stop(), 0)


if __name__ == "__main__":
    unittest.main()
