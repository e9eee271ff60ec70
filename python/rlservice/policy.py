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

from google.protobuf import json_format

from rlservice.client import Client, ClientError


def find_rl_local():
    """rl_local's path: $RL_LOCAL, on PATH, or this checkout's bazel-bin."""
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [os.environ.get("RL_LOCAL"), shutil.which("rl_local"),
                  os.path.join(os.path.dirname(os.path.dirname(here)), "bazel-bin", "trainer",
                               "rl_local")]
    for path in candidates:
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def export_policy(client, run_id, output, *, checkpoint=None, fmt="torchscript",
                  sampled=False):
    """Writes run `run_id`'s policy (its newest checkpoint, or number
    `checkpoint`) to `output` as `fmt` ("torchscript" or "onnx"), with
    `output`.json naming its inputs and outputs. Runs `rl_local export`, which
    must see the run's checkpoint directory (run it where the learner wrote it,
    or on the shared filesystem). Returns rl_local's CompletedProcess (check
    its returncode; 0 is done); ClientError if rl_local or the run's checkpoint
    directory is missing."""
    rl_local = find_rl_local()
    if rl_local is None:
        raise ClientError("export runs rl_local, which was not found ($RL_LOCAL, PATH, "
                          "bazel-bin/trainer/rl_local: bazel build //trainer:rl_local)")
    run = client.get(run_id)
    if not run.checkpoint_dir:
        raise ClientError(f"run {run.run_id} has no checkpoint directory")
    directory = run.checkpoint_dir
    if checkpoint is not None:
        directory = os.path.join(run.checkpoint_dir, "checkpoints", "ckpt-%012d" % checkpoint)
    with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="rlctl-run-") as spec:
        spec.write(json_format.MessageToJson(run.spec, preserving_proto_field_name=True))
        spec.flush()
        command = [rl_local, "export", f"--run={spec.name}", f"--checkpoint={directory}",
                   f"--format={fmt}", f"--output={output}"]
        if sampled:
            command.append("--sampled")
        return subprocess.run(command, capture_output=True, text=True, check=False)


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
