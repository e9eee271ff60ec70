"""Model-based sweeps: Optuna's samplers choose the trials of a coordinator
sweep (method: external), the coordinator runs them (docs/sweeps.md).

    from rlservice import Client
    from rlservice.sweeps import optuna_search
    sweep, study = optuna_search(Client(), "examples/sweeps/cartpole_lr_tpe.yaml")

Ask/tell: the sweep file's `parameters` are Optuna's search space; each
configuration Optuna asks for goes to the coordinator (AddSweepTrial) as
soon as the sweep's `concurrency` allows, and is told back with its score
(the mean over its seeds' succeeded trials) once its trials ended. A
configuration the coordinator's early stopping cut is told PRUNED, one that
failed FAIL. The coordinator keeps the sweep (a restart of it loses
nothing; the driver polls through it as wait_sweep does); the study lives
in this process.
"""

import json
import math

import optuna
from google.protobuf import json_format, struct_pb2

from rlservice.client import DEFAULT_RETRY_FOR_S, ClientError, check_poll, state_name

_FINAL = ("SUCCEEDED", "FAILED", "CANCELLED")


def _value(value):
    """A google.protobuf.Value as plain Python."""
    return json_format.MessageToDict(value)


def search_space(spec):
    """{path: optuna distribution} of a SweepSpec's parameters: uniform and
    log_uniform are FloatDistribution, int an IntDistribution, values a
    CategoricalDistribution of their JSON texts (so lists can be choices)."""
    space = {}
    for path in sorted(spec.parameters):
        p = spec.parameters[path]
        if p.values:
            space[path] = optuna.distributions.CategoricalDistribution(
                [json.dumps(_value(v), sort_keys=True) for v in p.values])
        elif p.distribution == "int":
            space[path] = optuna.distributions.IntDistribution(
                math.ceil(p.min), math.floor(p.max))
        else:
            space[path] = optuna.distributions.FloatDistribution(
                p.min, p.max, log=p.distribution == "log_uniform")
    return space


def _parameters(space, params):
    """Optuna's params as the coordinator's {path: Value}."""
    out = {}
    for path, value in params.items():
        if isinstance(space[path], optuna.distributions.CategoricalDistribution):
            value = json.loads(value)
        out[path] = json_format.ParseDict(value, struct_pb2.Value())
    return out


def _outcome(trials, maximize):
    """(optuna state name, value) of one configuration's ended trials."""
    scores = [t.score for t in trials
              if state_name(t.state) == "SUCCEEDED" and not math.isnan(t.score)]
    if scores:
        return "COMPLETE", sum(scores) / len(scores)
    if any("stopped early" in t.reason for t in trials):
        return "PRUNED", None
    return "FAIL", None


def make_sampler(sampler, seed):
    """An Optuna sampler: `sampler` itself, or "tpe" (also None) or
    "random" seeded with `seed`."""
    if sampler is None or sampler == "tpe":
        return optuna.samplers.TPESampler(seed=seed)
    if sampler == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if isinstance(sampler, str):
        raise ValueError(f"sampler: tpe or random (got {sampler!r})")
    return sampler


def optuna_search(client, sweep_file, sampler=None, seed=None, idempotency_key="",
                  on_update=None, poll_s=1.0, timeout=None, *, retry_for=DEFAULT_RETRY_FOR_S,
                  on_unavailable=None, on_reconnect=None):
    """Submits `sweep_file` (method: external) and drives it with Optuna
    until it ends: `sampler` an Optuna sampler, or "tpe" (the default) or
    "random" seeded with `seed` (default: the sweep file's seed).
    Returns (the ended Sweep, the optuna Study). `on_update(sweep, study)`
    is called after each poll that changed something. The sweep is polled
    every `poll_s` seconds through coordinator restarts, as wait_sweep
    does (`retry_for`, `on_unavailable`, `on_reconnect`). ClientError for a
    sweep file that is not external, or a coordinator error (DEADLINE_EXCEEDED
    after `timeout` seconds); ValueError for a bad `poll_s` or `retry_for`,
    before anything is sent."""
    check_poll(poll_s, retry_for)
    sweep = client.submit_sweep(sweep_file, idempotency_key)
    spec = sweep.spec
    if spec.method != "external":
        client.cancel_sweep(sweep)
        raise ClientError(
            f"{sweep_file}: method: Optuna chooses the trials of a sweep of "
            f"method external (got {spec.method!r}); the coordinator draws "
            "grid and random sweeps itself (rlctl sweep submit)")
    maximize = spec.metric.goal != "min"
    study = optuna.create_study(
        direction="maximize" if maximize else "minimize",
        sampler=make_sampler(sampler, int(spec.seed) if seed is None else seed),
        study_name=sweep.sweep_id)
    space = search_space(spec)
    asked = {}    # configuration -> optuna trial
    told = set()
    seen = None
    for sweep in client.poll_sweep(sweep.sweep_id, poll_s, timeout, retry_for=retry_for,
                                   on_unavailable=on_unavailable, on_reconnect=on_reconnect):
        by_config = {}
        for t in sweep.trials:
            by_config.setdefault(t.config, []).append(t)
        for config, trials in sorted(by_config.items()):
            if config in told or config not in asked:
                continue
            if len(trials) < spec.seeds_per_config or not all(
                    state_name(t.state) in _FINAL for t in trials):
                continue
            state, value = _outcome(trials, maximize)
            study.tell(asked[config], value,
                       state=getattr(optuna.trial.TrialState, state))
            told.add(config)
        if state_name(sweep.state) in _FINAL:
            if on_update is not None:
                on_update(sweep, study)
            return sweep, study
        unfinished = sum(1 for trials in by_config.values()
                         if not all(state_name(t.state) in _FINAL for t in trials))
        configs = len(by_config)
        while configs < spec.max_trials and unfinished < spec.concurrency:
            trial = study.ask(space)
            sweep = client.add_sweep_trial(
                sweep.sweep_id, _parameters(space, trial.params))
            asked[configs] = trial
            configs += 1
            unfinished += 1
        now = sweep.SerializeToString()
        if on_update is not None and now != seen:
            on_update(sweep, study)
        seen = now
