"""deploy/k8s rendered offline and checked.

The base and each overlay are rendered with Debian's kubectl 1.20 (its
built-in kustomize v2.0.3; tools/setup.sh unpacks it into the venv), every
rendered document is validated with `kubernetes-validate --strict` against
the schemas it ships (the oldest Kubernetes the manifests target, 1.27, the
first with gRPC probes on by default and GA, and the newest it ships), and
the properties the service relies on are asserted on the rendered objects.
Where another kubectl is on PATH (kustomize v4/v5), it must render the same.
No network, no cluster.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import yaml

TARGETS = ("base", "overlays/cpu", "overlays/gpu")
K8S_VERSIONS = ("1.27.0", "1.37.0")
PINNED_KUBECTL = os.path.join(
    sys.prefix, "opt", "kubernetes-client", "usr", "bin", "kubectl")
VALIDATOR = os.path.join(sys.prefix, "bin", "kubernetes-validate")
IMAGE = "rl-service:latest"
UID = 10001
# (workload, its gRPC port); every one of them serves grpc.health.v1.
GRPC_SERVERS = {"coordinator": 50051, "telemetry": 50052, "learner": 50061}
WORKLOAD_KINDS = ("Deployment", "StatefulSet")
GENERATED_NAME = re.compile(r"^run-files-[a-z0-9]{10}$")


def runfile(path):
    # Runfiles: the test runs in the workspace's runfiles directory.
    if os.path.exists(path):
        return path
    return os.path.join(os.environ["TEST_SRCDIR"], "rl_service", path)


def other_kubectl():
    """The first kubectl on PATH that is not the pinned one, or None.

    Set-up links the pinned one as .venv/bin/kubectl, which comes first on
    PATH in an activated venv; a kubectl after it is still compared.
    """
    pinned = os.path.realpath(PINNED_KUBECTL)
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        candidate = shutil.which("kubectl", path=directory or ".")
        if candidate and os.path.realpath(candidate) != pinned:
            return candidate
    return None


def render(kubectl, directory):
    """kubectl kustomize DIRECTORY -> (YAML text, list of objects)."""
    env = dict(os.environ, HOME=os.environ.get("TEST_TMPDIR", "/tmp"))
    env.pop("KUBECONFIG", None)
    out = subprocess.run([kubectl, "kustomize", directory], env=env,
                         capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise AssertionError(
            f"{kubectl} kustomize {directory} failed:\n{out.stderr}")
    return out.stdout, [d for d in yaml.safe_load_all(out.stdout) if d]


def quantity(value):
    """A Kubernetes quantity ("250m", "2", "4Gi", "1G") as a float."""
    units = {"m": 1e-3, "": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
             "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
    match = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", str(value))
    assert match and match.group(2) in units, f"bad quantity {value!r}"
    return float(match.group(1)) * units[match.group(2)]


def flags(container):
    """--name=value arguments of a container, as a dict."""
    result = {}
    for arg in container.get("args", []):
        name, _, value = arg.partition("=")
        result[name.lstrip("-")] = value
    return result


def normalized(docs):
    """Objects with generated-name hashes and env order (which kustomize
    versions merge differently; no env value refers to another) removed."""
    def walk(node):
        if isinstance(node, dict):
            out = {k: walk(v) for k, v in node.items()}
            if isinstance(out.get("env"), list):
                out["env"] = sorted(out["env"], key=lambda e: e["name"])
            return out
        if isinstance(node, list):
            return [walk(v) for v in node]
        if isinstance(node, str) and GENERATED_NAME.match(node):
            return "run-files-HASH"
        return node
    return sorted((walk(d) for d in docs),
                  key=lambda d: (d["kind"], d["metadata"]["name"]))


class ManifestsTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        for tool in (PINNED_KUBECTL, VALIDATOR):
            if not os.access(tool, os.X_OK):
                raise AssertionError(f"{tool} missing: run tools/setup.sh")
        # A real copy: runfiles are symlinks out of the tree, which kustomize
        # refuses as files outside the kustomization root.
        cls.tmp = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        cls.root = os.path.join(cls.tmp, "k8s")
        shutil.copytree(runfile("deploy/k8s"), cls.root, symlinks=False)
        cls.text = {}
        cls.docs = {}
        for target in TARGETS:
            cls.text[target], cls.docs[target] = render(
                PINNED_KUBECTL, os.path.join(cls.root, target))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    # --- helpers -----------------------------------------------------------

    def objects(self, target, kind):
        return {d["metadata"]["name"]: d for d in self.docs[target]
                if d["kind"] == kind}

    def workloads(self, target):
        return [d for d in self.docs[target] if d["kind"] in WORKLOAD_KINDS]

    def container(self, target, kind, name):
        pod = self.objects(target, kind)[name]["spec"]["template"]["spec"]
        (container,) = [c for c in pod["containers"] if c["name"] == name]
        return pod, container

    def validate(self, path, version, expect_ok=True):
        # Run beside the file, so that its lines name it short.
        out = subprocess.run(
            [VALIDATOR, "--strict", "--kubernetes-version", version,
             os.path.basename(path)],
            cwd=os.path.dirname(path), capture_output=True, text=True,
            timeout=120)
        lines = (out.stdout + out.stderr).strip().splitlines()
        print(f"\n$ kubernetes-validate --strict --kubernetes-version {version}"
              f" {os.path.basename(path)}")
        for line in lines:
            print(line)
        if expect_ok:
            self.assertEqual(out.returncode, 0, "\n".join(lines))
        return out.returncode, lines

    # --- schema validation -------------------------------------------------

    def test_every_rendered_document_validates_strictly(self):
        for target in TARGETS:
            # base.yaml, overlays_cpu.yaml, overlays_gpu.yaml
            path = os.path.join(self.tmp, target.replace("/", "_") + ".yaml")
            with open(path, "w") as f:
                f.write(self.text[target])
            for version in K8S_VERSIONS:
                with self.subTest(target=target, version=version):
                    _, lines = self.validate(path, version)
                    passed = [l for l in lines if " passed for resource " in l]
                    # Every document checked (an unknown kind is only a
                    # warning to the validator).
                    self.assertEqual(len(passed), len(self.docs[target]),
                                     "\n".join(lines))

    def test_strict_validation_rejects_an_unknown_field(self):
        # The control: a misspelt probe must fail, so --strict is in force.
        bad = self.text["overlays/gpu"].replace(
            "livenessProbe:", "livenesProbe:", 1)
        path = os.path.join(self.tmp, "misspelt.yaml")
        with open(path, "w") as f:
            f.write(bad)
        code, lines = self.validate(path, K8S_VERSIONS[-1], expect_ok=False)
        self.assertNotEqual(code, 0)
        self.assertTrue(any("livenesProbe" in l for l in lines), lines)

    # --- what the service relies on ----------------------------------------

    def test_objects(self):
        for target in TARGETS:
            with self.subTest(target=target):
                kinds = sorted((d["kind"], d["metadata"]["name"])
                               for d in self.docs[target])
                (configmap,) = self.objects(target, "ConfigMap")
                self.assertRegex(configmap, GENERATED_NAME)
                self.assertEqual(kinds, sorted([
                    ("ConfigMap", configmap),
                    ("Deployment", "actor"),
                    ("Service", "coordinator"),
                    ("Service", "learner"),
                    ("Service", "telemetry"),
                    ("ServiceAccount", "rl-service"),
                    ("StatefulSet", "coordinator"),
                    ("StatefulSet", "learner"),
                    ("StatefulSet", "telemetry"),
                ]))

    def test_containers_have_requests_and_limits(self):
        for target in TARGETS:
            for workload in self.workloads(target):
                pod = workload["spec"]["template"]["spec"]
                for c in pod.get("initContainers", []) + pod["containers"]:
                    with self.subTest(target=target, container=c["name"]):
                        resources = c["resources"]
                        for resource in ("cpu", "memory"):
                            request = quantity(resources["requests"][resource])
                            limit = quantity(resources["limits"][resource])
                            self.assertGreater(request, 0)
                            self.assertLessEqual(request, limit)

    def test_non_root_and_locked_down(self):
        for target in TARGETS:
            (account,) = self.objects(target, "ServiceAccount").values()
            self.assertIs(account["automountServiceAccountToken"], False)
            for workload in self.workloads(target):
                pod = workload["spec"]["template"]["spec"]
                with self.subTest(target=target, pod=workload["metadata"]["name"]):
                    self.assertEqual(pod["serviceAccountName"], "rl-service")
                    self.assertIs(pod["automountServiceAccountToken"], False)
                    context = pod["securityContext"]
                    self.assertIs(context["runAsNonRoot"], True)
                    self.assertEqual(context["runAsUser"], UID)
                    self.assertEqual(context["seccompProfile"]["type"],
                                     "RuntimeDefault")
                    for c in pod.get("initContainers", []) + pod["containers"]:
                        security = c["securityContext"]
                        self.assertIs(security["allowPrivilegeEscalation"], False)
                        self.assertIs(security["readOnlyRootFilesystem"], True)
                        self.assertEqual(security["capabilities"]["drop"], ["ALL"])
                        self.assertNotIn("privileged", security)
                        self.assertEqual(c["image"], IMAGE)
                        self.assertTrue(c["command"][0].startswith("/opt/rl/bin/"))
                        # The root file system is read-only: /tmp is a volume.
                        self.assertIn("/tmp", [m["mountPath"]
                                               for m in c["volumeMounts"]])

    def test_servers_have_grpc_health_probes_on_their_port(self):
        for target in TARGETS:
            for name, port in GRPC_SERVERS.items():
                with self.subTest(target=target, server=name):
                    _, c = self.container(target, "StatefulSet", name)
                    self.assertEqual(flags(c)["port"], str(port))
                    self.assertEqual(flags(c)["host"], "0.0.0.0")
                    self.assertIn({"name": "grpc", "containerPort": port},
                                  c["ports"])
                    for probe in ("startupProbe", "readinessProbe",
                                  "livenessProbe"):
                        # grpc.health.v1, overall status (service "").
                        self.assertEqual(c[probe]["grpc"], {"port": port}, probe)

    def test_actors_probe_their_metrics_endpoint(self):
        for target in TARGETS:
            with self.subTest(target=target):
                _, c = self.container(target, "Deployment", "actor")
                port = int(flags(c)["metrics_port"])
                self.assertIn({"name": "metrics", "containerPort": port},
                              c["ports"])
                for probe in ("readinessProbe", "livenessProbe"):
                    self.assertEqual(c[probe]["httpGet"],
                                     {"path": "/metrics", "port": "metrics"})

    def test_stores_on_persistent_volumes(self):
        for target in TARGETS:
            for name in ("coordinator", "telemetry"):
                with self.subTest(target=target, store=name):
                    workload = self.objects(target, "StatefulSet")[name]
                    self.assertEqual(workload["spec"]["replicas"], 1)
                    _, c = self.container(target, "StatefulSet", name)
                    claims = {t["metadata"]["name"]
                              for t in workload["spec"]["volumeClaimTemplates"]}
                    store_dir = os.path.dirname(flags(c)["store"])
                    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
                    self.assertIn(mounts.get(store_dir), claims,
                                  f"{store_dir} is not on a claimed volume")

    def test_addresses_resolve_to_headless_services(self):
        # coordinator-0.coordinator:50051 and telemetry-0.telemetry:50052 are
        # pod 0 of a StatefulSet through its headless governing Service.
        for target in TARGETS:
            services = self.objects(target, "Service")
            sets = self.objects(target, "StatefulSet")
            targets = set()
            for workload in self.workloads(target):
                for c in workload["spec"]["template"]["spec"]["containers"]:
                    for flag in ("coordinator", "telemetry"):
                        if flag in flags(c) and ":" in flags(c)[flag]:
                            targets.add(flags(c)[flag])
            self.assertEqual(targets, {"coordinator-0.coordinator:50051",
                                       "telemetry-0.telemetry:50052"})
            for address in targets:
                with self.subTest(target=target, address=address):
                    host, port = address.split(":")
                    pod, service = host.split(".")
                    workload = sets[pod.rsplit("-", 1)[0]]
                    self.assertEqual(workload["spec"]["serviceName"], service)
                    self.assertEqual(services[service]["spec"]["clusterIP"], "None")
                    self.assertIn(int(port), [p["port"] for p in
                                              services[service]["spec"]["ports"]])

    def test_service_selectors_match_pods(self):
        for target in TARGETS:
            pod_labels = {w["metadata"]["name"]:
                          w["spec"]["template"]["metadata"]["labels"]
                          for w in self.workloads(target)}
            for workload in self.workloads(target):
                selector = workload["spec"]["selector"]["matchLabels"]
                labels = pod_labels[workload["metadata"]["name"]]
                self.assertEqual(selector, {k: labels[k] for k in selector})
            for name, service in self.objects(target, "Service").items():
                with self.subTest(target=target, service=name):
                    selector = service["spec"]["selector"]
                    selected = [w for w, labels in pod_labels.items()
                                if all(labels.get(k) == v
                                       for k, v in selector.items())]
                    self.assertEqual(selected, [name])
                    # Headless: clients dial pod IPs, so the Service's port
                    # must be the container's.
                    _, c = self.container(target, "StatefulSet", name)
                    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
                    for port in service["spec"]["ports"]:
                        self.assertEqual(port["port"], ports[port["targetPort"]])

    def test_learners_stateful_set_with_headless_service(self):
        for target in TARGETS:
            with self.subTest(target=target):
                service = self.objects(target, "Service")["learner"]["spec"]
                workload = self.objects(target, "StatefulSet")["learner"]["spec"]
                self.assertEqual(service["clusterIP"], "None")
                self.assertIs(service["publishNotReadyAddresses"], True)
                self.assertEqual(workload["serviceName"], "learner")
                self.assertEqual(workload["podManagementPolicy"], "Parallel")
                _, c = self.container(target, "StatefulSet", "learner")
                f = flags(c)
                # Worker name = pod name (learner-<ordinal>), so rank = ordinal.
                self.assertEqual(f["worker_name"], "$(POD_NAME)")
                self.assertEqual(f["advertise_address"], "$(POD_IP)")
                env = {e["name"]: e for e in c["env"]}
                self.assertEqual(
                    env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"],
                    "metadata.name")
                self.assertEqual(
                    env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"],
                    "status.podIP")
                rendezvous = int(f["rendezvous_port"])
                self.assertIn({"name": "rendezvous", "containerPort": rendezvous},
                              c["ports"])
                self.assertIn(rendezvous, [p["port"] for p in service["ports"]])
                # Checkpoints go where the coordinator says:
                # <its --runs_dir>/<run id>, on a claimed volume.
                _, coordinator = self.container(target, "StatefulSet",
                                                "coordinator")
                mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
                claims = {t["metadata"]["name"]
                          for t in workload["volumeClaimTemplates"]}
                self.assertIn(mounts.get(flags(coordinator)["runs_dir"]), claims)

    def test_every_variable_in_args_is_defined(self):
        for target in TARGETS:
            for workload in self.workloads(target):
                for c in workload["spec"]["template"]["spec"]["containers"]:
                    env = {e["name"] for e in c.get("env", [])}
                    for arg in c.get("args", []):
                        for variable in re.findall(r"\$\((\w+)\)", arg):
                            self.assertIn(variable, env, f"{target}: {arg}")
                    # Sorting env in normalized() assumes this.
                    for e in c.get("env", []):
                        self.assertNotIn("$(", e.get("value", ""))

    def test_cpu_overlay_learners_are_guaranteed_whole_cores(self):
        # Requests == limits in every container, whole CPUs: Guaranteed QoS,
        # so that a kubelet with the static CPU manager policy gives each
        # learner cores of its own (gloo ranks sharing cores scale worse:
        # bench/learner_scaling_bench, "pinned").
        pod, _ = self.container("overlays/cpu", "StatefulSet", "learner")
        for c in pod["containers"]:
            with self.subTest(container=c["name"]):
                requests = c["resources"]["requests"]
                limits = c["resources"]["limits"]
                self.assertEqual(requests, limits)
                self.assertRegex(requests["cpu"], r"^[1-9][0-9]*$")

    def test_gpu_overlay_puts_each_learner_on_one_gpu_with_nccl(self):
        pod, c = self.container("overlays/gpu", "StatefulSet", "learner")
        self.assertEqual(c["resources"]["requests"]["nvidia.com/gpu"], "1")
        self.assertEqual(c["resources"]["limits"]["nvidia.com/gpu"], "1")
        env = {e["name"]: e.get("value") for e in c["env"]}
        self.assertEqual(env["NCCL_SOCKET_IFNAME"], "eth0")
        self.assertEqual(env["NCCL_DEBUG"], "WARN")
        self.assertIn("nvidia.com/gpu", [t["key"] for t in pod["tolerations"]])
        volumes = {v["name"]: v for v in pod["volumes"]}
        mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
        self.assertEqual(volumes[mounts["/dev/shm"]]["emptyDir"]["medium"],
                         "Memory")
        self.assertGreater(
            self.objects("overlays/gpu", "StatefulSet")["learner"]["spec"]["replicas"], 1)
        # Only GPU learners ask for GPUs.
        for target in TARGETS:
            for workload in self.workloads(target):
                for c in workload["spec"]["template"]["spec"]["containers"]:
                    if target == "overlays/gpu" and c["name"] == "learner":
                        continue
                    for kind in ("requests", "limits"):
                        self.assertNotIn("nvidia.com/gpu", c["resources"][kind],
                                         f"{target} {c['name']}")

    def test_threads_follow_cpu_limits(self):
        for target in TARGETS:
            for name, kind, variable in (
                    ("learner", "StatefulSet", "RL_TORCH_THREADS"),
                    ("actor", "Deployment", "RL_ENV_THREADS")):
                with self.subTest(target=target, workload=name):
                    _, c = self.container(target, kind, name)
                    env = {e["name"]: e.get("value") for e in c["env"]}
                    threads = int(env[variable])
                    self.assertGreaterEqual(threads, 1)
                    self.assertLessEqual(
                        threads, quantity(c["resources"]["limits"]["cpu"]))

    def test_run_files_are_the_examples(self):
        examples = os.path.dirname(runfile("examples/cartpole.yaml"))
        expected = {}
        for name in sorted(os.listdir(examples)):
            if name.endswith((".yaml", ".json")):
                with open(os.path.join(examples, name)) as f:
                    expected[name] = f.read()
        self.assertIn("cartpole.yaml", expected)
        for target in TARGETS:
            with self.subTest(target=target):
                ((name, configmap),) = self.objects(target, "ConfigMap").items()
                self.assertEqual(configmap["data"], expected,
                                 "deploy/k8s/base/runs/ differs from examples/: "
                                 "copy the run files again and list them in "
                                 "base/kustomization.yaml")
                pod, c = self.container(target, "StatefulSet", "coordinator")
                volumes = {v["name"]: v for v in pod["volumes"]}
                mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
                mount = mounts["/etc/rl/runs"]
                self.assertIs(mount["readOnly"], True)
                self.assertEqual(volumes[mount["name"]]["configMap"]["name"], name)

    def test_newer_kubectl_renders_the_same(self):
        kubectl = other_kubectl()
        if not kubectl:
            self.skipTest("no other kubectl on PATH")
        probe = subprocess.run([kubectl, "version", "--client"],
                               capture_output=True, text=True, timeout=60)
        if probe.returncode != 0:
            self.skipTest(f"{kubectl} does not run: {probe.stderr.strip()}")
        for target in TARGETS:
            with self.subTest(target=target, kubectl=kubectl):
                _, docs = render(kubectl, os.path.join(self.root, target))
                self.assertEqual(normalized(docs), normalized(self.docs[target]))


if __name__ == "__main__":
    unittest.main(verbosity=2)
