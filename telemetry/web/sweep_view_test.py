"""The telemetry page's sweep view and run details, in headless Chromium.

Starts a real coordinator (no workers: its runs wait QUEUED) and submits a
sweep of three learning rates to it, starts //telemetry:telemetry_main
pointed at it, feeds each trial's run a learner/mean_return curve, then
checks the page: the sweep listed, its trials best first, the parameter
against the score as points, the trials' curves overlaid, and the selected
run's state, history and run file from the coordinator.
"""

import os
import shutil
import subprocess
import tempfile
import time
import unittest
import urllib.parse

import grpc

import browser_test
from proto import coordinator_pb2
from proto import coordinator_pb2_grpc
from proto import telemetry_pb2
from proto import telemetry_pb2_grpc

SWEEP = b"""
name: lr
base: {env: {id: CartPole-v1}, total_env_steps: 100000}
method: grid
parameters:
  ppo.learning_rate: {values: [0.001, 0.002, 0.003]}
metric: {series: learner/mean_return, goal: max}
concurrency: 3
"""
# Population-based training: its title names the round, its trials'
# table has their runs and lineage.
PBT = b"""
name: pbt
base: {env: {id: CartPole-v1}, total_env_steps: 100000}
method: pbt
max_trials: 2
parameters:
  ppo.learning_rate: {distribution: log_uniform, min: 1.0e-4, max: 1.0e-2}
metric: {series: learner/mean_return, goal: max}
concurrency: 2
pbt: {interval_steps: 25000}
"""
# The last mean return of each trial's run, by learning rate.
FINAL = {0.001: 100.0, 0.002: 200.0, 0.003: 150.0}


class SweepViewTest(unittest.TestCase):
    chromium_run = browser_test.BrowserTest.chromium_run
    dump_dom = browser_test.BrowserTest.dump_dom
    browser_runs = 0

    @classmethod
    def setUpClass(cls):
        cls.chromium = browser_test.find_chromium()
        if not cls.chromium:
            raise AssertionError("no chromium found: run tools/setup.sh or set $CHROMIUM")
        cls.dir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        cls.home = os.path.join(cls.dir, "home")
        os.makedirs(cls.home)
        cls.processes = []
        try:
            coordinator_port = cls.start("coordinator", [
                "coordinator/coordinator_main", "--port=0",
                f"--store={cls.dir}/c.db", f"--runs_dir={cls.dir}/runs"])
            cls.submit_sweep(coordinator_port)
            grpc_port = cls.start("telemetry", [
                "telemetry/telemetry_main", "--port=0", "--http_port=0",
                f"--http_port_file={cls.dir}/http_port",
                f"--store={cls.dir}/telemetry.sqlite",
                f"--tensorboard_dir={cls.dir}/tensorboard",
                f"--coordinator=127.0.0.1:{coordinator_port}"])
            cls.http_port = cls.wait_port(f"{cls.dir}/http_port", cls.processes[-1][1])
            cls.base = f"http://127.0.0.1:{cls.http_port}/"
            cls.ingest(grpc_port)
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        for _, process, log in reversed(cls.processes):
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            log.close()
        cls.processes = []
        shutil.rmtree(cls.dir, ignore_errors=True)

    @classmethod
    def start(cls, name, argv):
        """Starts `argv` with --port_file; its port."""
        port_file = f"{cls.dir}/{name}_port"
        log = open(f"{cls.dir}/{name}.log", "w")
        process = subprocess.Popen(argv + [f"--port_file={port_file}"],
                                   stdout=log, stderr=subprocess.STDOUT)
        cls.processes.append((name, process, log))
        return cls.wait_port(port_file, process)

    @classmethod
    def wait_port(cls, path, process):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if os.path.exists(path):
                with open(path) as f:
                    text = f.read().strip()
                if text:
                    return int(text)
            if process.poll() is not None:
                raise RuntimeError(f"{process.args[0]} exited ({process.returncode}): "
                                   f"{cls.logs()}")
            time.sleep(0.05)
        raise RuntimeError(f"no port in {path}: {cls.logs()}")

    @classmethod
    def logs(cls):
        out = []
        for name, _, log in cls.processes:
            log.flush()
            with open(log.name, errors="replace") as f:
                out.append(f"--- {name}:\n{f.read()[-3000:]}")
        return "\n".join(out)

    @classmethod
    def submit_sweep(cls, port):
        with grpc.secure_channel(f"127.0.0.1:{port}",
                                 grpc.local_channel_credentials()) as channel:
            stub = coordinator_pb2_grpc.RunServiceStub(channel)
            sweep = stub.SubmitSweep(coordinator_pb2.SubmitSweepRequest(
                sweep_file=SWEEP, sweep_file_name="lr.yaml"), timeout=30)
            pbt = stub.SubmitSweep(coordinator_pb2.SubmitSweepRequest(
                sweep_file=PBT, sweep_file_name="pbt.yaml"), timeout=30)
        cls.sweep_id = sweep.sweep_id
        cls.trial_runs = {t.parameters["ppo.learning_rate"].number_value: t.run_id
                          for t in sweep.trials}
        assert all(cls.trial_runs.values()), sweep
        cls.pbt = pbt
        assert all(t.round_run_ids for t in pbt.trials), pbt

    @classmethod
    def ingest(cls, port):
        with grpc.secure_channel(f"127.0.0.1:{port}",
                                 grpc.local_channel_credentials()) as channel:
            stub = telemetry_pb2_grpc.TelemetryServiceStub(channel)
            batches = []
            for n, (lr, run) in enumerate(sorted(cls.trial_runs.items())):
                points = [telemetry_pb2.MetricPoint(
                    name="learner/mean_return", step=s * 1000,
                    wall_time_ns=browser_test.BASE_WALL_NS + s * 1_000_000,
                    value=FINAL[lr] * (s + 1) / 20) for s in range(20)]
                batches.append(telemetry_pb2.MetricBatch(
                    sequence_number=n + 1, run_id=run, source="sweep-view-test",
                    incarnation=int(time.time() * 1e6), points=points))
            acked = 0
            for ack in stub.Ingest(iter(batches), timeout=60):
                acked = max(acked, ack.acked_sequence_number)
                if acked >= len(batches):
                    break
        assert acked >= len(batches), acked

    def context(self, dom, stderr):
        error = dom.by_id("error")
        return (f"\n#error: {error.text if error else None!r}\nchromium stderr:\n"
                f"{stderr}\n{self.logs()}")

    def wait_listed(self, sweep_id):
        """Until api/sweeps has the sweep (the telemetry service polls the
        coordinator every 2 s)."""
        deadline = time.monotonic() + 30
        while True:
            with urllib.request.urlopen(self.base + "api/sweeps", timeout=10) as r:
                body = r.read().decode()
            if sweep_id in body or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        self.assertIn(sweep_id, body)

    def test_a_sweep_shows_its_trials_scores_and_curves(self):
        self.wait_listed(self.sweep_id)
        self.wait_listed(self.pbt.sweep_id)
        best = self.trial_runs[0.002]
        others = [self.trial_runs[0.001], self.trial_runs[0.003]]
        url = self.base + "#" + urllib.parse.urlencode(
            {"run": best, "metric": "learner/mean_return", "compare": ",".join(others),
             "sweep": self.sweep_id}, safe="/,")
        dom, stderr = self.dump_dom(url)
        ctx = self.context(dom, stderr)
        self.assertNotEqual(dom.body().attrs.get("data-state"), "error", ctx)
        self.assertEqual(sorted(e.attrs.get("data-sweep") for e in dom.by_class("sweep", "li")),
                         sorted([self.sweep_id, self.pbt.sweep_id]), ctx)
        # The trials, best first by their last mean return (no coordinator
        # score: nothing trained them).
        rows = [e.attrs.get("data-run") for e in dom.by_class("trial", "tr")]
        self.assertEqual(rows, [best, self.trial_runs[0.003], self.trial_runs[0.001]], ctx)
        # The learning rate against the score, one point per trial.
        points = {e.attrs["data-run"]: (e.attrs["data-x"], e.attrs["data-y"])
                  for e in dom.by_class("point", "circle")}
        self.assertEqual(points, {run: (str(lr), str(int(FINAL[lr])))
                                  for lr, run in self.trial_runs.items()}, ctx)
        # The three trials' curves in the chart.
        groups = [g.attrs.get("data-run") for g in dom.by_class("series", "g")]
        self.assertEqual(sorted(groups), sorted(self.trial_runs.values()), ctx)
        # The selected run as the coordinator has it: waiting, its history
        # and its run file.
        details = dom.by_id("run-details")
        self.assertIsNotNone(details, ctx)
        self.assertEqual(details.attrs.get("data-state"), "QUEUED", ctx)
        run_file = dom.by_class("run-file", "pre")
        self.assertEqual(len(run_file), 1, ctx)
        self.assertIn('"learning_rate": 0.002', run_file[0].text, ctx)
        # Its first state change, in words: not the enum's unset value.
        history = [(e.attrs.get("data-from"), e.attrs.get("data-to"), e.text)
                   for e in dom.elements if e.tag == "li" and "data-from" in e.attrs]
        self.assertEqual([h[:2] for h in history], [("submitted", "QUEUED")], ctx)
        self.assertIn("submitted → QUEUED", history[0][2], ctx)
        self.assertNotIn("RUN_STATE_", dom.text, ctx)

    def test_tensorboard_gets_each_trials_hyperparameters(self):
        # TensorBoard's own reader and the HParams plugin's message.
        from tensorboard.backend.event_processing import event_file_loader
        from tensorboard.plugins.hparams import plugin_data_pb2

        def session_start(run):
            directory = os.path.join(self.dir, "tensorboard", run)
            if not os.path.isdir(directory):
                return None
            for name in sorted(os.listdir(directory)):
                loader = event_file_loader.EventFileLoader(os.path.join(directory, name))
                for event in loader.Load():
                    for value in event.summary.value:
                        if value.tag == "_hparams_/session_start_info":
                            self.assertEqual(value.metadata.plugin_data.plugin_name, "hparams")
                            data = plugin_data_pb2.HParamsPluginData.FromString(
                                value.metadata.plugin_data.content)
                            return data.session_start_info
            return None

        deadline = time.monotonic() + 30
        found = {}
        while time.monotonic() < deadline and len(found) < len(self.trial_runs):
            for lr, run in self.trial_runs.items():
                if run not in found:
                    info = session_start(run)
                    if info is not None:
                        found[run] = (lr, info)
            time.sleep(0.2)
        self.assertEqual(sorted(found), sorted(self.trial_runs.values()), self.logs())
        for run, (lr, info) in found.items():
            self.assertAlmostEqual(info.hparams["ppo.learning_rate"].number_value, lr)
            self.assertEqual(info.hparams["sweep"].string_value, self.sweep_id)
            self.assertTrue(info.group_name.startswith(self.sweep_id + "/config-"))


    def test_a_pbt_sweep_shows_its_round_and_each_trials_runs(self):
        self.wait_listed(self.pbt.sweep_id)
        url = self.base + "#" + urllib.parse.urlencode(
            {"run": self.pbt.trials[0].run_id, "metric": "learner/mean_return",
             "sweep": self.pbt.sweep_id}, safe="/,")
        dom, stderr = self.dump_dom(url)
        ctx = self.context(dom, stderr)
        title = dom.by_id("sweep-title")
        self.assertIsNotNone(title, ctx)
        self.assertIn("population-based training: round 1 of 4", title.text, ctx)
        headers = [e.text for e in dom.elements if e.tag == "th"]
        self.assertIn("lineage", headers, ctx)
        cells = sorted(e.text for e in dom.by_class("rounds", "div"))
        self.assertEqual(cells, sorted(f"runs {t.run_id}" for t in self.pbt.trials), ctx)


if __name__ == "__main__":
    unittest.main()
