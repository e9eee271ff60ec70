"""The telemetry web page in a real browser.

Starts //telemetry:telemetry_main, feeds it metrics through the gRPC Ingest
stream (waiting for the acknowledgement), then loads the page in Debian's
headless Chromium and checks the DOM it renders (run list, series list, the
SVG chart's points, the error text for an unknown run) and a screenshot.

Fails when no Chromium is installed (tools/setup.sh installs Debian's;
set $CHROMIUM to pick another binary).
"""

import html.parser
import json
import math
import os
import queue
import shutil
import subprocess
import tempfile
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request

import grpc

from proto import telemetry_pb2
from proto import telemetry_pb2_grpc

RUN = "run-000042"
OTHER_RUN = "run-000043"
# A run of two policies, red and blue, older than RUN.
POLICY_RUN = "run-000041"
BASE_WALL_NS = 1_763_780_000_000_000_000
SYSTEM_T0 = 1_763_780_000  # Unix seconds
# coordinator/queue_wait_seconds is stored with a run's metrics at its
# wall-clock Unix milliseconds (coordinator/queue_wait.h).
QUEUE_WAIT_STEP_MS = 1_795_000_000_000
CHROMIUM_TIMEOUT_S = 90


def find_chromium():
    for candidate in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser",
                      "google-chrome"):
        if candidate and shutil.which(candidate):
            return shutil.which(candidate)
    return None


def expected_buckets(lo, hi, buckets):
    """Non-empty buckets of a series with a point at every step in [lo, hi]
    (telemetry/downsample.cc: width rounded up so `buckets` cover the span)."""
    width = (hi - lo) // buckets + 1
    return (hi - lo) // width + 1


class Element:

    def __init__(self, tag, attrs):
        self.tag = tag
        self.attrs = attrs
        self.text = ""

    @property
    def classes(self):
        return self.attrs.get("class", "").split()


class DomParser(html.parser.HTMLParser):
    """Every element of a dumped DOM with its attributes and text content."""

    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link",
            "meta", "source", "track", "wbr"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.elements = []
        self._open = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        e = Element(tag, {k: (v if v is not None else "") for k, v in attrs})
        self.elements.append(e)
        if tag == "script":
            self._in_script = True
        if tag not in self.VOID:
            self._open.append(e)

    def handle_startendtag(self, tag, attrs):
        self.elements.append(Element(tag, {k: (v or "") for k, v in attrs}))

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False
        for i in range(len(self._open) - 1, -1, -1):
            if self._open[i].tag == tag:
                del self._open[i:]
                break

    def handle_data(self, data):
        if self._in_script:
            return
        for e in self._open:
            e.text += data


class Dom:

    def __init__(self, text):
        parser = DomParser()
        parser.feed(text)
        parser.close()
        self.text = text
        self.elements = parser.elements

    def by_id(self, id_):
        for e in self.elements:
            if e.attrs.get("id") == id_:
                return e
        return None

    def by_class(self, cls, tag=None):
        return [e for e in self.elements
                if cls in e.classes and (tag is None or e.tag == tag)]

    def body(self):
        return next(e for e in self.elements if e.tag == "body")

    def run_steps(self):
        """Each run card's shown env steps (span.run-step[data-step]), by run."""
        steps, run = {}, None
        for e in self.elements:
            if e.tag == "li":
                run = e.attrs.get("data-run") if "run" in e.classes else None
                if run is not None:
                    steps[run] = []
            elif run is not None and "run-step" in e.classes:
                steps[run].append(e.attrs.get("data-step"))
        return steps


class BrowserTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.chromium = find_chromium()
        if not cls.chromium:
            raise AssertionError(
                "no chromium found: run tools/setup.sh (installs Debian's "
                "chromium) or set $CHROMIUM")
        cls.dir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        cls.outputs = (os.environ.get("TEST_UNDECLARED_OUTPUTS_DIR") or
                       os.environ.get("TEST_TMPDIR") or cls.dir)
        os.makedirs(cls.outputs, exist_ok=True)
        cls.home = os.path.join(cls.dir, "home")
        os.makedirs(cls.home)
        cls.browser_runs = 0

        port_file = os.path.join(cls.dir, "grpc_port")
        http_port_file = os.path.join(cls.dir, "http_port")
        cls.log_path = os.path.join(cls.dir, "telemetry.log")
        cls.log = open(cls.log_path, "w")
        cls.server = subprocess.Popen(
            ["telemetry/telemetry_main", "--port=0", f"--port_file={port_file}",
             "--http_port=0", f"--http_port_file={http_port_file}",
             f"--store={cls.dir}/telemetry.sqlite",
             f"--tensorboard_dir={cls.dir}/tensorboard"],
            stdout=cls.log, stderr=subprocess.STDOUT)
        try:
            cls.grpc_port = cls.wait_port_file(port_file)
            cls.http_port = cls.wait_port_file(http_port_file)
            cls.base = f"http://127.0.0.1:{cls.http_port}/"
            cls.ingest_metrics()
        except BaseException:
            cls.stop_server()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.stop_server()

    @classmethod
    def stop_server(cls):
        cls.server.terminate()
        try:
            cls.server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            cls.server.kill()
            cls.server.wait()
        cls.log.close()

    @classmethod
    def server_log(cls):
        cls.log.flush()
        with open(cls.log_path, errors="replace") as f:
            return f.read()[-4000:]

    @classmethod
    def wait_port_file(cls, path):
        deadline = time.monotonic() + 60
        while True:
            if os.path.exists(path):
                with open(path) as f:
                    text = f.read().strip()
                if text:
                    return int(text)
            if cls.server.poll() is not None:
                raise RuntimeError(
                    f"telemetry_main exited ({cls.server.returncode}):\n{cls.server_log()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"no port in {path}:\n{cls.server_log()}")
            time.sleep(0.05)

    # ---- metrics in ---------------------------------------------------------

    @classmethod
    def batches(cls):
        """(run, points) of each batch: a dense learner curve, per-actor
        returns, a short series with a NaN-only step, and another run."""
        def point(name, step, value, **labels):
            return telemetry_pb2.MetricPoint(
                name=name, step=step, wall_time_ns=BASE_WALL_NS + step * 1_000_000,
                value=value, labels=labels)

        loss = [point("learner/policy_loss", s, 2.0 * math.exp(-s / 300.0) +
                      0.1 * math.sin(s / 7.0)) for s in range(0, 1000)]
        returns = [point("actor/episode_return", s, 10.0 + s / 5.0 + 3 * a, actor=str(a))
                   for a in (0, 1) for s in range(0, 500)]
        grad = [point("learner/grad_norm", s, float("nan") if s == 5 else 1.0 + s)
                for s in range(0, 10)]
        other = [point("learner/policy_loss", s, 1.0) for s in range(0, 20)]
        queue_wait = [point("coordinator/queue_wait_seconds", QUEUE_WAIT_STEP_MS, 2.5)]
        mean_return = [point("learner/mean_return", s, 20.0 + s) for s in range(0, 50)]
        speed = [point("learner/steps_per_second", s, 5000.0) for s in range(0, 30)]
        # The system run's steps are Unix seconds (coordinator_process.cc).
        census = [point("coordinator/runs_running", SYSTEM_T0 + 5 * i, float(i % 3))
                  for i in range(0, 120)]
        # Two actors' returns of each policy, 2 apart: their mean is
        # base + step; the learner's mean return is the first policy's.
        older = -10**15
        policies = [telemetry_pb2.MetricPoint(
            name="actor/episode_return", step=s, wall_time_ns=BASE_WALL_NS + older + s,
            value=base + s + (2 * a - 1), labels={"actor": str(a), "policy": name})
            for name, base in (("red", 10.0), ("blue", 50.0)) for a in (0, 1)
            for s in range(0, 100)]
        policies += [telemetry_pb2.MetricPoint(
            name="learner/mean_return", step=s, wall_time_ns=BASE_WALL_NS + older + s,
            value=10.0 + s, labels={"policy": "red"}) for s in range(0, 100)]
        return [
            (RUN, loss[:500]),
            (RUN, loss[500:] + grad),
            (RUN, returns),
            (RUN, mean_return + speed),
            (OTHER_RUN, other + queue_wait),
            ("system", census),
            (POLICY_RUN, policies),
        ]

    @classmethod
    def ingest_metrics(cls):
        cls.expected_points = {}
        channel = grpc.secure_channel(f"127.0.0.1:{cls.grpc_port}", grpc.local_channel_credentials())
        stub = telemetry_pb2_grpc.TelemetryServiceStub(channel)
        requests = queue.Queue()
        sent = 0
        incarnation = int(time.time() * 1e6)

        def request_iterator():
            while True:
                item = requests.get()
                if item is None:
                    return
                yield item

        responses = stub.Ingest(request_iterator(), timeout=60)
        try:
            for run, points in cls.batches():
                sent += 1
                requests.put(telemetry_pb2.MetricBatch(
                    sequence_number=sent, run_id=run, source="web-test",
                    incarnation=incarnation, points=points))
                for p in points:
                    key = (run, p.name)
                    cls.expected_points[key] = cls.expected_points.get(key, 0) + 1
            acked = 0
            for ack in responses:
                acked = max(acked, ack.acked_sequence_number)
                if acked >= sent:
                    break
            if acked < sent:
                raise RuntimeError(f"Ingest acknowledged {acked} of {sent} batches")
        finally:
            requests.put(None)
            channel.close()

    # ---- helpers --------------------------------------------------------------

    def api(self, path):
        try:
            with urllib.request.urlopen(self.base + path, timeout=10) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def view_url(self, **params):
        return self.base + "#" + urllib.parse.urlencode(params, safe="/")

    def chromium_run(self, args, url):
        type(self).browser_runs += 1
        profile = os.path.join(self.dir, f"profile-{self.browser_runs}")
        env = dict(os.environ, HOME=self.home,
                   XDG_CONFIG_HOME=os.path.join(self.home, ".config"),
                   XDG_CACHE_HOME=os.path.join(self.home, ".cache"))
        cmd = [self.chromium, "--headless", "--no-sandbox", "--disable-gpu",
               "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check",
               "--disable-extensions", "--disable-background-networking", "--mute-audio",
               "--hide-scrollbars", f"--user-data-dir={profile}",
               "--virtual-time-budget=5000"] + args + [url]
        try:
            proc = subprocess.run(cmd, env=env, capture_output=True,
                                  timeout=CHROMIUM_TIMEOUT_S)
        except subprocess.TimeoutExpired as e:
            self.fail(f"chromium timed out after {CHROMIUM_TIMEOUT_S}s on {url}\n"
                      f"stderr:\n{(e.stderr or b'').decode(errors='replace')[-4000:]}")
        finally:
            shutil.rmtree(profile, ignore_errors=True)
        stderr = "\n".join(  # without the noise of a machine without D-Bus
            line for line in proc.stderr.decode(errors="replace").splitlines()
            if "dbus" not in line)[-4000:]
        self.assertEqual(proc.returncode, 0,
                         f"chromium failed on {url}\nstderr:\n{stderr}")
        return proc.stdout.decode(errors="replace"), stderr

    def dump_dom(self, url):
        out, stderr = self.chromium_run(["--dump-dom"], url)
        self.assertIn("</html>", out, f"no DOM from chromium for {url}\nstderr:\n{stderr}")
        return Dom(out), stderr

    def context(self, dom, stderr):
        error = dom.by_id("error")
        return (f"\n#error: {error.text if error else None!r}\n"
                f"chromium stderr:\n{stderr}\nserver log:\n{self.server_log()}")

    # ---- tests ----------------------------------------------------------------

    def test_api_lists_the_runs(self):
        status, runs = self.api("api/runs")
        self.assertEqual(status, 200, runs)
        by_id = {r["run_id"]: r for r in runs["runs"]}
        self.assertIn(RUN, by_id)
        # The proto3 JSON mapping: int64 fields are decimal strings.
        self.assertEqual(by_id[RUN]["num_points"], str(sum(
            n for (run, _), n in self.expected_points.items() if run == RUN)))
        status, body = self.api("api/series?run=run-nope")
        self.assertEqual(status, 404)
        self.assertEqual(body, {"error": "run run-nope has no metrics"})
        status, body = self.api(f"api/query?run={RUN}&name=x&buckets=0")
        self.assertEqual(status, 400)
        self.assertEqual(body, {"error": "parameter buckets: outside [1, 10000]"})

    def test_api_query_follows_the_proto3_json_mapping(self):
        status, body = self.api(
            f"api/query?run={RUN}&name=learner/grad_norm&buckets=10")
        self.assertEqual(status, 200, body)
        (series,) = body["series"]
        self.assertEqual(series["name"], "learner/grad_norm")
        self.assertEqual(series["points"], [])
        by_step = {b["min_step"]: b for b in series["buckets"]}
        self.assertEqual(sorted(by_step, key=int), [str(s) for s in range(10)])
        # Step 5 holds only NaN: min/max/mean over no finite point are NaN.
        self.assertEqual(by_step["5"], {"min_step": "5", "max_step": "5",
                                        "count": "1", "min": "NaN", "max": "NaN",
                                        "mean": "NaN", "last": "NaN"})
        self.assertEqual(by_step["3"]["mean"], 4.0)

    def test_run_view_lists_runs_series_and_draws_the_chart(self):
        buckets = 50
        dom, stderr = self.dump_dom(
            self.view_url(run=RUN, metric="learner/policy_loss", buckets=buckets))
        ctx = self.context(dom, stderr)

        runs = {e.attrs["data-run"]: e for e in dom.by_class("run", "li")}
        self.assertIn(RUN, runs, ctx)
        self.assertIn(OTHER_RUN, runs, ctx)
        self.assertIn("selected", runs[RUN].classes, ctx)
        self.assertIn(RUN, runs[RUN].text)

        names = [e.attrs["data-name"] for e in dom.by_class("series", "li")]
        self.assertEqual(sorted(names), ["actor/episode_return", "learner/grad_norm",
                                         "learner/mean_return", "learner/policy_loss",
                                         "learner/steps_per_second"], ctx)

        self.assertEqual(dom.by_id("chart-title").text.strip(), "learner/policy_loss", ctx)
        self.assertIsNotNone(dom.by_id("chart"), ctx)
        expected = expected_buckets(0, 999, buckets)
        self.assertEqual(expected, 50)
        status, query = self.api(
            f"api/query?run={RUN}&name=learner/policy_loss&buckets={buckets}")
        self.assertEqual(status, 200, query)
        self.assertEqual(len(query["series"][0]["buckets"]), expected)
        means = dom.by_class("mean-line", "path")
        self.assertEqual(len(means), 1, ctx)
        self.assertEqual(means[0].attrs.get("data-points"), str(expected), ctx)
        self.assertEqual(means[0].attrs["d"].count("L"), expected - 1, ctx)
        lasts = dom.by_class("last-line", "path")
        self.assertEqual([e.attrs.get("data-points") for e in lasts], [str(expected)], ctx)
        bands = dom.by_class("band", "path")
        self.assertEqual(len(bands), 1, ctx)
        self.assertTrue(bands[0].attrs.get("d", "").endswith("Z"), ctx)
        self.assertEqual([e.text for e in dom.by_class("x-label")], ["step"], ctx)
        self.assertEqual([e.text for e in dom.by_class("y-label")], ["value"], ctx)
        self.assertGreater(len(dom.by_class("tick")), 4, ctx)

        self.assertEqual(dom.by_id("error").text, "", ctx)
        self.assertNotEqual(dom.body().attrs.get("data-state"), "error", ctx)

    def test_default_bucket_count(self):
        dom, stderr = self.dump_dom(self.view_url(run=RUN, metric="learner/policy_loss"))
        means = dom.by_class("mean-line", "path")
        self.assertEqual([e.attrs.get("data-points") for e in means],
                         [str(expected_buckets(0, 999, 200))], self.context(dom, stderr))

    def test_labelled_series_and_aggregate(self):
        dom, stderr = self.dump_dom(self.view_url(run=RUN, metric="actor/episode_return"))
        ctx = self.context(dom, stderr)
        means = dom.by_class("mean-line", "path")
        self.assertEqual(len(means), 2, ctx)
        self.assertEqual(sorted(e.attrs["data-labels"] for e in dom.by_class("series", "g")),
                         ["actor=0", "actor=1"], ctx)
        for e in means:
            self.assertEqual(e.attrs.get("data-points"),
                             str(expected_buckets(0, 499, 200)), ctx)

        dom, stderr = self.dump_dom(
            self.view_url(run=RUN, metric="actor/episode_return", aggregate="actor"))
        ctx = self.context(dom, stderr)
        means = dom.by_class("mean-line", "path")
        self.assertEqual(len(means), 1, ctx)
        self.assertEqual(means[0].attrs.get("data-points"),
                         str(expected_buckets(0, 499, 200)), ctx)
        self.assertIn("mean over actor", dom.by_id("chart-title").text, ctx)

    def test_non_finite_bucket_leaves_a_gap(self):
        # Steps 0..9 in 10 buckets; step 5 holds only NaN, so its mean is
        # "NaN".
        dom, stderr = self.dump_dom(
            self.view_url(run=RUN, metric="learner/grad_norm", buckets=10))
        ctx = self.context(dom, stderr)
        means = dom.by_class("mean-line", "path")
        self.assertEqual(len(means), 1, ctx)
        self.assertEqual(means[0].attrs.get("data-buckets"), "10", ctx)
        self.assertEqual(means[0].attrs.get("data-points"), "9", ctx)
        self.assertEqual(means[0].attrs["d"].count("M"), 2, ctx)  # two segments
        self.assertEqual(dom.by_id("error").text, "", ctx)

    def test_no_hash_selects_a_run_and_metric(self):
        dom, stderr = self.dump_dom(self.base)
        ctx = self.context(dom, stderr)
        # Newest first, the system run last; the newest is opened.
        self.assertEqual([e.attrs["data-run"] for e in dom.by_class("run", "li")],
                         [OTHER_RUN, RUN, POLICY_RUN, "system"], ctx)
        selected = [e.attrs["data-run"] for e in dom.by_class("run", "li")
                    if "selected" in e.classes]
        self.assertEqual(selected, [OTHER_RUN], ctx)
        chosen = [e.attrs["data-name"] for e in dom.by_class("series", "li")
                  if "selected" in e.classes]
        # Its series at env steps, not its queue wait's one wall-clock point.
        self.assertEqual(chosen, ["learner/policy_loss"], ctx)
        self.assertEqual(dom.by_id("chart-title").text.strip(), chosen[0], ctx)
        self.assertGreaterEqual(len(dom.by_class("mean-line", "path")), 1, ctx)

    def test_the_run_named_in_the_url_opens(self):
        for url in (self.base + f"?run={RUN}", self.base + f"#token=t0k&run={RUN}"):
            dom, stderr = self.dump_dom(url)
            ctx = self.context(dom, stderr)
            selected = [e.attrs["data-run"] for e in dom.by_class("run", "li")
                        if "selected" in e.classes]
            self.assertEqual(selected, [RUN], url + ctx)
            chosen = [e.attrs["data-name"] for e in dom.by_class("series", "li")
                      if "selected" in e.classes]
            self.assertEqual(chosen, ["learner/mean_return"], url + ctx)

    def test_a_run_shows_its_env_step_not_a_wall_clock_one(self):
        # OTHER_RUN's largest step is its queue wait's Unix milliseconds:
        # its card shows no step ("1.8e3G") until its series say its env
        # step, as when it is selected.
        dom, stderr = self.dump_dom(self.view_url(run=RUN))
        ctx = self.context(dom, stderr)
        self.assertEqual(dom.run_steps(), {RUN: ["999"], OTHER_RUN: [], POLICY_RUN: ["99"],
                                           "system": []}, ctx)
        dom, stderr = self.dump_dom(self.view_url(run=OTHER_RUN, metric="learner/policy_loss"))
        ctx = self.context(dom, stderr)
        self.assertEqual(dom.run_steps()[OTHER_RUN], ["19"], ctx)
        runs = " ".join(e.text for e in dom.by_class("run", "li"))
        self.assertNotRegex(runs, r"step [\d.]+G", ctx)
        # The queue wait's series says when, not "step 1.8e3G".
        waits = [e for e in dom.by_class("series", "li")
                 if e.attrs["data-name"] == "coordinator/queue_wait_seconds"]
        self.assertEqual(len(waits), 1, ctx)
        self.assertIn(" · at ", waits[0].text, ctx)
        self.assertNotIn("step", waits[0].text, ctx)

    def test_the_script_is_a_file_and_no_inline_script_may_run(self):
        with urllib.request.urlopen(self.base, timeout=10) as r:
            page = r.read().decode()
            policy = r.headers["Content-Security-Policy"]
        directives = {d.split()[0]: d.split()[1:] for d in policy.split(";") if d.strip()}
        self.assertEqual(directives["script-src"], ["'self'"], policy)
        self.assertIn('<script src="index.js"></script>', page)
        self.assertEqual(page.count("<script"), 1, "an inline script in the page")
        with urllib.request.urlopen(self.base + "index.js", timeout=10) as r:
            self.assertEqual(r.headers["Content-Type"], "text/javascript; charset=utf-8")
            script = r.read().decode()
        self.assertIn('"use strict";', script)
        self.assertNotIn("<script", script)

    def test_a_run_opens_on_its_return(self):
        # Not its alphabetically first series (actor/episode_return here).
        dom, stderr = self.dump_dom(self.view_url(run=RUN))
        ctx = self.context(dom, stderr)
        chosen = [e.attrs["data-name"] for e in dom.by_class("series", "li")
                  if "selected" in e.classes]
        self.assertEqual(chosen, ["learner/mean_return"], ctx)
        self.assertEqual(dom.by_id("chart").attrs.get("data-x-axis"), "step", ctx)

    def test_the_run_at_a_glance_shows_several_series_at_once(self):
        dom, stderr = self.dump_dom(self.view_url(run=RUN, metric="learner/policy_loss"))
        ctx = self.context(dom, stderr)
        cards = dom.by_class("glance", "div")
        # The series people look for that this run has, in that order; the
        # per-actor returns as one curve (their mean).
        self.assertEqual([c.attrs.get("data-name") for c in cards],
                         ["learner/mean_return", "actor/episode_return",
                          "learner/steps_per_second"], ctx)
        lines = dom.by_class("glance-line", "path")
        self.assertEqual(len(lines), 3, ctx)
        self.assertTrue(all(int(l.attrs["data-points"]) >= 2 for l in lines), ctx)
        values = [e.text.strip() for e in dom.by_class("glance-value", "div")]
        self.assertEqual(values[0], "69", ctx)      # the last mean return
        self.assertEqual(values[2], "5000", ctx)    # steps/s
        # The main chart still shows the metric asked for.
        self.assertEqual(dom.by_id("chart-title").text.strip(), "learner/policy_loss", ctx)

    def test_a_run_of_several_policies_shows_each_policy_at_a_glance(self):
        dom, stderr = self.dump_dom(self.view_url(run=POLICY_RUN))
        ctx = self.context(dom, stderr)
        cards = dom.by_class("glance", "div")
        # The actors' returns: a card per policy, each the mean over the
        # actors; the learner's mean return is red's.
        self.assertEqual([(c.attrs.get("data-name"), c.attrs.get("data-policy")) for c in cards],
                         [("learner/mean_return", "red"), ("actor/episode_return", "blue"),
                          ("actor/episode_return", "red")], ctx)
        self.assertEqual([e.text.strip() for e in dom.by_class("glance-policy", "div")],
                         ["policy red", "policy blue", "policy red"], ctx)
        self.assertEqual([e.text.strip() for e in dom.by_class("glance-value", "div")],
                         ["109", "149", "109"], ctx)
        # Merged over the actors by the API, the returns are one series per
        # policy.
        status, body = self.api(f"api/query?run={POLICY_RUN}&name=actor/episode_return"
                                "&buckets=1&aggregate=actor")
        self.assertEqual(status, 200, body)
        self.assertEqual(sorted(s["labels"]["policy"] for s in body["series"]),
                         ["blue", "red"])
        status, body = self.api(f"api/query?run={POLICY_RUN}&name=actor/episode_return"
                                "&buckets=1&aggregate=actor,policy")
        self.assertEqual(status, 200, body)
        (merged,) = body["series"]
        self.assertEqual(merged["buckets"][0]["count"], "400")
        # What a policy card charts (a click): the returns merged over the
        # actors, a curve per policy; both policies' cards are selected.
        dom, stderr = self.dump_dom(self.view_url(
            run=POLICY_RUN, metric="actor/episode_return", aggregate="actor"))
        ctx = self.context(dom, stderr)
        self.assertEqual([c.attrs.get("data-policy") for c in dom.by_class("glance", "div")
                          if "selected" in c.classes], ["blue", "red"], ctx)
        self.assertEqual(sorted(e.attrs["data-labels"] for e in dom.by_class("series", "g")),
                         ["policy=blue", "policy=red"], ctx)

    def test_other_runs_are_overlaid_for_comparison(self):
        dom, stderr = self.dump_dom(self.view_url(
            run=RUN, metric="learner/policy_loss", compare=f"{OTHER_RUN},system"))
        ctx = self.context(dom, stderr)
        groups = [e for e in dom.by_class("series", "g")]
        self.assertEqual([g.attrs.get("data-run") for g in groups], [RUN, OTHER_RUN], ctx)
        self.assertEqual(groups[1].attrs.get("data-labels"), OTHER_RUN, ctx)
        self.assertEqual(dom.by_id("chart").attrs.get("data-series"), "2", ctx)
        lines = {e.attrs.get("data-points") for e in dom.by_class("mean-line", "path")}
        self.assertEqual(len(dom.by_class("mean-line", "path")), 2, ctx)
        # The other run has 20 points of it (one per step, 200 buckets).
        self.assertIn("20", lines, ctx)
        # A compared run without this metric is named, not an error.
        missing = [e for e in dom.by_class("missing", "span")]
        self.assertEqual([e.attrs.get("data-run") for e in missing], ["system"], ctx)
        self.assertIn("no learner/policy_loss", missing[0].text, ctx)
        self.assertNotEqual(dom.body().attrs.get("data-state"), "error", ctx)
        # Each other run offers the compare toggle.
        toggles = {e.attrs["data-run"]: e for e in dom.by_class("overlay-toggle", "input")}
        self.assertEqual(sorted(toggles), sorted([OTHER_RUN, POLICY_RUN, "system"]), ctx)

    def test_wall_clock_steps_get_a_time_axis(self):
        dom, stderr = self.dump_dom(
            self.view_url(run="system", metric="coordinator/runs_running"))
        ctx = self.context(dom, stderr)
        self.assertEqual(dom.by_id("chart").attrs.get("data-x-axis"), "time", ctx)
        labels = [e.text.strip() for e in dom.by_class("x-label", "text")]
        self.assertEqual(labels, ["time (wall clock)"], ctx)
        x_ticks = [e.text.strip() for e in dom.by_class("tick", "text")
                   if e.attrs.get("text-anchor") == "middle"]
        self.assertGreaterEqual(len(x_ticks), 3, ctx)
        for tick in x_ticks:  # clock times, not "1.76G" steps
            self.assertRegex(tick, r"\d:\d\d", ctx)
            self.assertNotIn("G", tick, ctx)

    def test_unknown_run_shows_the_error(self):
        dom, stderr = self.dump_dom(self.view_url(run="run-nope", metric="x/y"))
        ctx = self.context(dom, stderr)
        error = dom.by_id("error")
        self.assertIsNotNone(error, ctx)
        self.assertIn("visible", error.classes, ctx)
        self.assertIn("run-nope", error.text, ctx)
        self.assertIn("404", error.text, ctx)
        self.assertEqual(dom.body().attrs.get("data-state"), "error", ctx)
        self.assertEqual(dom.by_class("mean-line", "path"), [], ctx)
        # The run list still loads.
        self.assertIn(RUN, [e.attrs["data-run"] for e in dom.by_class("run", "li")], ctx)

    def test_screenshot(self):
        path = os.path.join(self.outputs, "telemetry_page.png")
        if os.path.exists(path):
            os.remove(path)
        _, stderr = self.chromium_run(
            [f"--screenshot={path}", "--window-size=1200,800"],
            self.view_url(run=RUN, metric="learner/policy_loss"))
        self.assertTrue(os.path.exists(path), f"no screenshot\nstderr:\n{stderr}")
        with open(path, "rb") as f:
            data = f.read()
        self.assertEqual(data[:8], b"\x89PNG\r\n\x1a\n", "not a PNG")
        self.assertGreater(len(data), 10_000, f"screenshot too small\nstderr:\n{stderr}")
        print(f"\nscreenshot: {path} ({len(data)} bytes)")


if __name__ == "__main__":
    unittest.main()
