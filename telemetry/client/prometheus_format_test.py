"""Scrapes metrics_demo_server (MetricsRegistry over prometheus-cpp, served by
HttpEndpoint over cpp-httplib) and parses /metrics with the official Python
client's parser, so the text format is checked by a reader other than the
writer."""

import math
import os
import shutil
import subprocess
import tempfile
import time
import unittest
import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


class PrometheusFormatTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        port_file = os.path.join(cls.dir, "port")
        cls.log = open(os.path.join(cls.dir, "server.log"), "w")
        cls.server = subprocess.Popen(
            ["telemetry/client/metrics_demo_server", "--port=0",
             f"--port_file={port_file}"],
            stdout=cls.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        port = ""
        # Poll for the port file (renamed into place when complete).
        while True:
            if os.path.exists(port_file):
                with open(port_file) as f:
                    port = f.read().strip()
            if port:
                break
            if time.monotonic() > deadline or cls.server.poll() is not None:
                raise RuntimeError("metrics_demo_server did not start")
            time.sleep(0.05)
        cls.base = "http://127.0.0.1:" + port

    @classmethod
    def tearDownClass(cls):
        cls.server.terminate()
        returncode = cls.server.wait(timeout=30)
        cls.log.close()
        shutil.rmtree(cls.dir, ignore_errors=True)
        if returncode != 0:
            raise AssertionError(f"server exited with {returncode} on SIGTERM")

    def scrape(self):
        with urllib.request.urlopen(self.base + "/metrics", timeout=10) as r:
            self.assertEqual(r.status, 200)
            self.assertEqual(r.headers["Content-Type"],
                             "text/plain; version=0.0.4; charset=utf-8")
            body = r.read()
            self.assertEqual(int(r.headers["Content-Length"]), len(body))
        text = body.decode("utf-8")
        return {f.name: f for f in text_string_to_metric_families(text)}

    def test_families_types_labels_and_values(self):
        families = self.scrape()

        # The parser names a counter family without its "_total" suffix.
        requests = families["demo_requests"]
        self.assertEqual(requests.type, "counter")
        self.assertEqual(requests.documentation, "Requests by path.")
        by_path = {s.labels["path"]: s.value for s in requests.samples}
        self.assertEqual(by_path, {
            "/plain": 3,
            "back\\slash": 1.5,
            'say "hi"': 2,
            "two\nlines": 4,
            'caf\u00e9 {a="b",c} \\"': 5,
        })
        self.assertTrue(all(s.name == "demo_requests_total"
                            for s in requests.samples))

        value = families["demo_value"]
        self.assertEqual(value.type, "gauge")
        by_kind = {s.labels["kind"]: s.value for s in value.samples}
        self.assertTrue(math.isnan(by_kind["nan"]))
        self.assertEqual(by_kind["pos_inf"], math.inf)
        self.assertEqual(by_kind["neg_inf"], -math.inf)
        self.assertEqual(by_kind["small"], 1.25e-7)
        self.assertEqual(by_kind["big"], -2e21)
        self.assertEqual(by_kind["third"], 1 / 3)  # round-trips exactly

        fixed = families["demo_bad_name"]
        self.assertEqual(fixed.type, "gauge")
        self.assertEqual(fixed.documentation, "Help with a \\ and a\nsecond line.")
        self.assertEqual([(s.labels, s.value) for s in fixed.samples], [({}, 42)])

        queue = families["demo_queue_depth"]
        self.assertEqual(queue.type, "gauge")
        self.assertEqual({s.labels["queue"]: s.value for s in queue.samples},
                         {"learner": 7, "actor": 0})

    def test_process_metrics(self):
        families = self.scrape()
        rss = families["process_resident_memory_bytes"]
        self.assertEqual(rss.type, "gauge")
        self.assertGreater(rss.samples[0].value, 1 << 20)
        cpu = families["process_cpu_seconds"]
        self.assertEqual(cpu.type, "counter")
        self.assertEqual(cpu.samples[0].name, "process_cpu_seconds_total")
        self.assertGreaterEqual(cpu.samples[0].value, 0)
        start = families["process_start_time_seconds"].samples[0].value
        self.assertLess(abs(start - time.time()), 3600)

    def test_other_routes(self):
        with urllib.request.urlopen(self.base + "/healthz", timeout=10) as r:
            self.assertEqual(r.read(), b"ok\n")
        with self.assertRaises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(self.base + "/nope", timeout=10)
        self.assertEqual(e.exception.code, 404)
        e.exception.close()
        request = urllib.request.Request(self.base + "/metrics", method="HEAD")
        with urllib.request.urlopen(request, timeout=10) as r:
            self.assertGreater(int(r.headers["Content-Length"]), 0)
            self.assertEqual(r.read(), b"")
        for method in ("POST", "PUT", "DELETE"):
            request = urllib.request.Request(self.base + "/metrics",
                                             data=b"x=1", method=method)
            with self.assertRaises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(request, timeout=10)
            self.assertEqual(e.exception.code, 405)
            self.assertEqual(e.exception.headers["Allow"], "GET, HEAD")
            e.exception.close()
        # The server still answers after all of that.
        self.assertIn("demo_value", self.scrape())


if __name__ == "__main__":
    unittest.main()
