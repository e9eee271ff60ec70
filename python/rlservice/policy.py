"""A run's trained policy, out of the service: exported (through `rl_local
export`, which reads the run's checkpoint) and loaded as a callable on numpy
arrays (onnxruntime, no PyTorch needed).

    import rlservice
    policy = rlservice.load_policy("run-000001")      # the newest checkpoint
    actions, values = policy(obs)                      # obs: [B, *shape]
    # a recurrent policy (policy.core) carries its state:
    state = policy.initial_state(B)
    actions, values, state = policy(obs, state=state)  # zero rows at episode starts
"""
import json
import os
import shutil
import subprocess
import tempfile

import grpc
from google.protobuf import json_format

from rlservice.client import Client, ClientError


# Where rl_local is looked for, in this order: $RL_LOCAL (an explicit choice;
# if it names no executable, that is the error), this checkout's optimised
# build (`bazel build --config=opt //trainer:rl_local`, the README's, which
# stays in bazel-out/k8-opt whatever bazel-bin points at since), rl_local on
# PATH, and last whatever this checkout's bazel-bin holds (another config's
# build, e.g. --config=asan).
_CHECKOUT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_OPT_BUILD = os.path.join("bazel-out", "k8-opt", "bin", "trainer", "rl_local")
_BAZEL_BIN = os.path.join("bazel-bin", "trainer", "rl_local")

RL_LOCAL_NOT_FOUND = ("rl_local was not found ($RL_LOCAL, this checkout's "
                      f"{_OPT_BUILD}, PATH, {_BAZEL_BIN}: "
                      "bazel build --config=opt //trainer:rl_local)")


def _executable(path):
    return bool(path) and os.path.isfile(path) and os.access(path, os.X_OK)


def locate_rl_local():
    """(path, where) of the rl_local to run, `where` saying how it was found
    ("$RL_LOCAL", "this checkout's optimised build", "PATH", "this
    checkout's bazel-bin"); ClientError (bad input) if $RL_LOCAL names no
    executable or none is found."""
    explicit = os.environ.get("RL_LOCAL")
    if explicit:
        if not _executable(explicit):
            raise ClientError(f"$RL_LOCAL={explicit} is not an executable file")
        return os.path.abspath(explicit), "$RL_LOCAL"
    candidates = [(os.path.join(_CHECKOUT, _OPT_BUILD), "this checkout's optimised build"),
                  (shutil.which("rl_local"), "PATH"),
                  (os.path.join(_CHECKOUT, _BAZEL_BIN), "this checkout's bazel-bin")]
    for path, where in candidates:
        if _executable(path):
            return os.path.abspath(path), where
    raise ClientError(RL_LOCAL_NOT_FOUND)


# Trees of the kernel's pseudo-filesystems and device nodes: a policy file
# written there is lost, or worse, and its sidecar left as a stray file.
_NOT_FOR_FILES = {"/proc": "a kernel pseudo-filesystem", "/sys": "a kernel pseudo-filesystem",
                  "/dev": "devices, not files"}


def check_output_path(output):
    """ClientError (bad input) naming `output` and what is wrong with it as
    the place of an exported policy and its sidecar (`output`.json): none
    given, a directory, not a regular file (/dev/null, a pipe), under /proc,
    /sys or /dev (but /dev/shm), a directory that is missing or not
    writable."""
    if not output:
        raise ClientError("no output file given (-o FILE, e.g. -o policy.pt)")
    for path in (output, output + ".json"):
        if os.path.isdir(path):
            raise ClientError(f"output {path} is a directory; give a file name "
                              f"(e.g. -o {os.path.join(output, 'policy.pt')})"
                              if path == output else
                              f"output {output}: its sidecar {path} is a directory")
        if os.path.lexists(path) and not os.path.isfile(path):
            raise ClientError(f"output {path} is not a regular file (a device, pipe, socket "
                              "or dangling link); give a file name (e.g. -o policy.pt)")
    real = os.path.realpath(output)
    for root, what in _NOT_FOR_FILES.items():
        if ((real == root or real.startswith(root + "/"))
                and not real.startswith("/dev/shm/")):
            raise ClientError(f"output {output} is under {root}, which holds {what}; "
                              "give a file in a directory of yours (e.g. -o policy.pt)")
    for path in (output, output + ".json"):
        if os.path.isfile(path) and not os.access(path, os.W_OK):
            raise ClientError(f"output {path} exists and is not writable")
    directory = os.path.dirname(real)
    if not os.path.isdir(directory):
        raise ClientError(f"output {output}: directory {os.path.dirname(output) or directory} "
                          "does not exist")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise ClientError(f"output {output}: directory {directory} is not writable")


def export_policy(client, run_id, output, *, checkpoint=None, fmt="torchscript",
                  sampled=False, rl_local=None, policy_name=None):
    """Writes run `run_id`'s policy (its newest checkpoint, or number
    `checkpoint`; in a run of several policies the first, or the one named
    `policy_name`) to `output` as `fmt` ("torchscript" or "onnx"), with
    `output`.json naming its inputs and outputs. Runs `rl_local export`
    (`rl_local`, default locate_rl_local()'s), which must see the run's
    checkpoint directory (run it where the learner wrote it, or on the shared
    filesystem). Returns rl_local's CompletedProcess (check its returncode;
    0 is done; when it fails, neither file is left behind unless it was
    there before); ClientError if `output` is no place for the files (code
    None: bad input), rl_local is missing, or the run or its checkpoint
    directory is (NOT_FOUND)."""
    check_output_path(output)
    if rl_local is None:
        rl_local = locate_rl_local()[0]
    run = client.get(run_id)
    if not run.checkpoint_dir:
        raise ClientError(f"run {run.run_id} has no checkpoint directory",
                          grpc.StatusCode.NOT_FOUND)
    directory = run.checkpoint_dir
    if checkpoint is not None:
        directory = os.path.join(run.checkpoint_dir, "checkpoints", "ckpt-%012d" % checkpoint)
    new_files = [p for p in (output, output + ".json") if not os.path.lexists(p)]
    with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="rlctl-run-") as spec:
        spec.write(json_format.MessageToJson(run.spec, preserving_proto_field_name=True))
        spec.flush()
        command = [rl_local, "export", f"--run={spec.name}", f"--checkpoint={directory}",
                   f"--format={fmt}", f"--output={output}"]
        if sampled:
            command.append("--sampled")
        if policy_name:
            command.append(f"--policy_name={policy_name}")
        try:
            done = subprocess.run(command, capture_output=True, text=True, check=False)
        except OSError as e:
            raise ClientError(f"cannot run {rl_local}: {e.strerror or e}") from None
    if done.returncode != 0:  # no half-written policy without its sidecar
        for path in new_files:
            try:
                os.remove(path)
            except OSError:  # not written, or not ours to remove
                pass
    return done


class Policy:
    """An exported ONNX policy as a callable: policy(obs[, mask][, state]) ->
    (actions, values[, next_state]), numpy in and out, as the sidecar
    (`sidecar`, a dict) names them."""

    def __init__(self, path):
        import onnxruntime  # pinned in tools/requirements.txt
        with open(path + ".json") as f:
            self.sidecar = json.load(f)
        self._session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        self._inputs = {i.name: i for i in self._session.get_inputs()}
        self.state_size = 0
        if "state" in self._inputs:
            self.state_size = int(self._inputs["state"].shape[1])

    def initial_state(self, batch):
        """Zeros [batch, state_size]: a recurrent policy's state at episode
        starts (None without a core)."""
        import numpy as np
        return np.zeros((batch, self.state_size), np.float32) if self.state_size else None

    def __call__(self, obs, mask=None, state=None):
        import numpy as np
        obs_input = self._inputs["obs"]
        dtype = np.uint8 if obs_input.type == "tensor(uint8)" else np.float32
        obs = np.asarray(obs, dtype=dtype)
        obs = obs.reshape([obs.shape[0]] + list(obs_input.shape[1:]))
        feeds = {"obs": obs}
        if "mask" in self._inputs:
            if mask is None:
                raise ValueError("mask: this policy takes action masks "
                                 f"({self._inputs['mask'].shape})")
            feeds["mask"] = np.asarray(mask, dtype=np.uint8)
        elif mask is not None:
            raise ValueError("mask: this policy takes no action masks")
        if self.state_size:
            if state is None:
                raise ValueError(f"state: this policy is recurrent; pass a state of "
                                 f"[B, {self.state_size}] (initial_state(B) at episode starts)")
            feeds["state"] = np.asarray(state, dtype=np.float32)
        return tuple(self._session.run(None, feeds))


def load_policy(run_id, *, client=None, checkpoint=None, sampled=False, directory=None):
    """Run `run_id`'s trained policy (newest checkpoint, or number
    `checkpoint`; sampled or most likely actions) as a Policy: exported to
    ONNX in `directory` (default: a fresh temporary one) and loaded in
    onnxruntime. `client` defaults to Client() ($RL_COORDINATOR)."""
    own = client is None
    client = client or Client()
    try:
        directory = directory or tempfile.mkdtemp(prefix="rl-policy-")
        path = os.path.join(directory, f"{run_id}.onnx")
        done = export_policy(client, run_id, path, checkpoint=checkpoint, fmt="onnx",
                             sampled=sampled)
        if done.returncode != 0:
            raise ClientError(f"exporting {run_id}: {done.stderr.strip()}")
        return Policy(path)
    finally:
        if own:
            client.close()
