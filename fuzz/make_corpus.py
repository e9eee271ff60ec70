#!/usr/bin/env python3
"""Writes the seed corpora under fuzz/corpus/<target>/ (checked in).

Small valid inputs, one per file: protos in text format (the fuzz targets
parse binary, then text), run files as they are, event files as TFRecords.
Run again after changing it: python3 fuzz/make_corpus.py
"""
import os
import struct

ROOT = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data):
    d = os.path.join(ROOT, "corpus", target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def octal(b):
    return "".join("\\%03o" % c for c in b)


def tensor(dtype, shape, data):
    dims = " ".join("shape: %d" % s for s in shape)
    return 'dtype: %s %s data: "%s"' % (dtype, dims, octal(data))


def floats(values):
    return struct.pack("<%df" % len(values), *values)


# --- run files -------------------------------------------------------------
for name in ["cartpole.yaml", "pendulum.yaml", "pendulum.json"]:
    with open(os.path.join(ROOT, "..", "examples", name), "rb") as f:
        write("run_file_fuzzer", name, f.read())
write("run_file_fuzzer", "small.yaml",
      "name: small\nenv: {id: CartPole-v1}\nenvs_per_actor: 4\n"
      "segment_length: 16\ntotal_env_steps: 640\n"
      "ppo: {num_epochs: 2, num_minibatches: 2}\npolicy: {hidden_sizes: [32]}\n")
with open(os.path.join(ROOT, "..", "examples", "plugin_env", "chase.yaml"),
          "rb") as f:
    write("run_file_fuzzer", "plugin.yaml", f.read())
write("run_file_fuzzer", "gymnasium.yaml",
      "env: {id: 'chase_py:make', plugin: gymnasium, observation_size: 2,\n"
      "      continuous_action_size: 2, action_low: -1, action_high: 1,\n"
      "      kwargs: {a: [1, {b: null}], c: 'x', d: true}}\n")
write("run_file_fuzzer", "uint8.yaml",
      "env: {id: Pixels-v0, plugin: libpixel_plugin.so,\n"
      "      observation_shape: [84, 84, 4], observation_dtype: uint8,\n"
      "      num_discrete_actions: 6}\nenvs_per_actor: 8\n")
write("run_file_fuzzer", "anchors.yaml",
      "name: &n a\nenv: {id: Pendulum-v1}\nppo: &p {gamma: 0.9}\n"
      "resources: {num_actors: 2}\n")

# --- tensor codec ----------------------------------------------------------
write("tensor_codec_fuzzer", "float32.txtpb",
      tensor("DTYPE_FLOAT32", [2, 2], floats([1, 2, 3, 4])))
write("tensor_codec_fuzzer", "int64.txtpb",
      tensor("DTYPE_INT64", [3], struct.pack("<3q", 1, -1, 7)))
write("tensor_codec_fuzzer", "bool.txtpb", tensor("DTYPE_BOOL", [2], b"\0\1"))
write("tensor_codec_fuzzer", "half_scalar.txtpb",
      tensor("DTYPE_FLOAT16", [], b"\0\x3c"))
write("tensor_codec_fuzzer", "empty.txtpb", tensor("DTYPE_UINT8", [0, 5], b""))

# --- learner segments: CartPole, 4 steps x 2 envs (the fuzzer's run) -------
T, N, OBS = 4, 2, 4


CARTPOLE = ('env { id: "CartPole-v1" max_episode_steps: 500 '
            "observation_size: 4 num_discrete_actions: 2 }")
# The fuzzer's second run: a plugin's uint8 [2, 2, 1] images.
PIXELS = ('env { id: "Pixels-v0" plugin: "libpixel_plugin.so" '
          "observation_size: 4 num_discrete_actions: 4 reward_low: -inf "
          'reward_high: inf observation_shape: [2, 2, 1] '
          'observation_dtype: "uint8" }')


def _numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def segment(seq, actions, env=CARTPOLE):
    f32 = "DTYPE_FLOAT32"
    if env == PIXELS:
        obs = lambda n: tensor("DTYPE_UINT8", n, bytes(range(0, 255, 8))[:_numel(n)])
    else:
        obs = lambda n: tensor(f32, n, floats([0.01] * _numel(n)))
    parts = [
        'run_id: "fuzz" actor_id: 0 sequence_number: %d policy_version: 1' % seq,
        env,
        "observations { %s }" % obs([T, N, OBS]),
        "actions { %s }" % tensor("DTYPE_INT64", [T, N], struct.pack("<%dq" % (T * N), *actions)),
        "log_probs { %s }" % tensor(f32, [T, N], floats([-0.69] * (T * N))),
        "values { %s }" % tensor(f32, [T, N], floats([0.5] * (T * N))),
        "rewards { %s }" % tensor(f32, [T, N], floats([1] * (T * N))),
        "terminated { %s }" % tensor("DTYPE_BOOL", [T, N], bytes([0] * (T * N - 1) + [1])),
        "truncated { %s }" % tensor("DTYPE_BOOL", [T, N], bytes(T * N)),
        "truncated_values { %s }" % tensor(f32, [T, N], floats([0] * (T * N))),
        "next_observations { %s }" % obs([N, OBS]),
        "next_values { %s }" % tensor(f32, [N], floats([0] * N)),
        "episode_returns: 4 episode_lengths: 4 actor_incarnation: 7",
    ]
    return "\n".join(parts) + "\n"


write("learner_segment_fuzzer", "segment1.txtpb", segment(1, [0, 1] * 4))
write("learner_segment_fuzzer", "segment2.txtpb", segment(2, [1, 1, 0, 0] * 2))
write("learner_segment_fuzzer", "segment3_uint8.txtpb",
      segment(1, [0, 3, 2, 1] * 2, env=PIXELS))

# --- telemetry ingest ------------------------------------------------------
write("telemetry_ingest_fuzzer", "batch.txtpb",
      'sequence_number: 1 run_id: "r1" source: "learner/0" incarnation: 3\n'
      'points { name: "learner/policy_loss" step: 10 wall_time_ns: '
      "1700000000000000000 value: 0.25 }\n"
      'points { name: "actor/sps" step: 10 wall_time_ns: 1700000000000000000 '
      'value: 1200 labels { key: "actor" value: "3" } }\n')
write("telemetry_ingest_fuzzer", "resend.txtpb",
      'sequence_number: 1 run_id: "r1" source: "learner/0" incarnation: 3\n'
      'points { name: "learner/policy_loss" step: 10 value: 0.25 }\n')
write("telemetry_ingest_fuzzer", "dropped.txtpb",
      'sequence_number: 5 run_id: "r2" source: "actor/1" dropped_points: 9\n')

# --- coordinator: first byte picks the call --------------------------------
SPEC = ('spec { name: "c" env { id: "CartPole-v1" } envs_per_actor: 4 '
        "segment_length: 16 total_env_steps: 640 "
        "resources { num_actors: 1 } }")
write("coordinator_request_fuzzer", "submit.txtpb", "s" + SPEC + ' idempotency_key: "k1"\n')
write("coordinator_request_fuzzer", "list.txtpb", "lpage_size: 10 states: QUEUED\n")
write("coordinator_request_fuzzer", "get.txtpb", 'grun_id: "run-1"\n')
write("coordinator_request_fuzzer", "cancel.txtpb", 'crun_id: "run-1"\n')
write("coordinator_request_fuzzer", "register.txtpb",
      'rworker_name: "w1" address: "127.0.0.1:1" capabilities { role: '
      'ACTOR cpus: 4 devices: "cpu" memory_bytes: 8000000000 }\n')
write("coordinator_request_fuzzer", "heartbeat.txtpb", 'hworker_id: "w-1" lease_epoch: 1\n')
write("coordinator_request_fuzzer", "report.txtpb",
      'pworker_id: "w-1" assignment_id: 1 finished: true error: "x"\n')
write("coordinator_request_fuzzer", "tick.txtpb", "t")
SWEEP = ("name: lr\nbase: {env: {id: CartPole-v1}, total_env_steps: 4000}\n"
         "method: external\nmax_trials: 3\n"
         "parameters: {ppo.learning_rate: {distribution: log_uniform, "
         "min: 1.0e-4, max: 1.0e-2}, policy.activation: {values: [tanh, relu]}}\n"
         "metric: {series: learner/mean_return}\n"
         "early_stopping: {kind: asha, first_rung_steps: 1000}\n")
write("coordinator_request_fuzzer", "sweep_submit.txtpb",
      "w" + 'sweep_file: "' + SWEEP.replace("\n", "\\n") +
      '" sweep_file_name: "lr.yaml" idempotency_key: "s1"\n')
write("coordinator_request_fuzzer", "sweep_add.txtpb",
      'asweep_id: "sweep-000001" parameters { key: "ppo.learning_rate" '
      'value { number_value: 0.001 } } parameters { key: "policy.activation" '
      'value { string_value: "relu" } }\n')
write("coordinator_request_fuzzer", "sweep_cancel.txtpb", 'xsweep_id: "sweep-000001"\n')
write("coordinator_request_fuzzer", "sweep_get.txtpb", 'ysweep_id: "sweep-000001"\n')


# --- tfevents --------------------------------------------------------------
def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def record(data):
    n = struct.pack("<Q", len(data))
    return n + struct.pack("<I", masked(n)) + data + struct.pack("<I", masked(data))


def varint(v):
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        out += bytes([b | (0x80 if v else 0)])
        if not v:
            return out


def event_scalar(step, tag, value):
    # Event{wall_time=1 (double), step=2, summary=5{value=1{tag=1, simple_value=2}}}
    val = b"\x0a" + varint(len(tag)) + tag + b"\x15" + struct.pack("<f", value)
    summ = b"\x0a" + varint(len(val)) + val
    return (b"\x09" + struct.pack("<d", 1.7e9) + b"\x10" + varint(step) +
            b"\x2a" + varint(len(summ)) + summ)


version = b"\x09" + struct.pack("<d", 1.7e9) + b"\x1a\x0dbrain.Event:2"
write("tfevents_reader_fuzzer", "version_only", record(version))
write("tfevents_reader_fuzzer", "scalars",
      record(version) + record(event_scalar(1, b"loss", 0.5)) +
      record(event_scalar(2, b"loss", 0.25)))
write("tfevents_reader_fuzzer", "empty_record", record(b""))
