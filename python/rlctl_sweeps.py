"""rlctl sweep: submit (with --watch or --optuna), list, get, cancel and
watch sweeps run by the coordinator (docs/sweeps.md); their tables."""

import math
import sys

from rlservice.client import TERMINAL_STATES, state_name

from rlctl_format import format_table, text, text_lines


def score_text(score):
    """A trial's score: '-' before any (NaN)."""
    return "-" if math.isnan(score) else f"{score:.6g}"


def value_text(value):
    """A google.protobuf.Value, compactly: 0.0003123, 64, true, relu,
    [64,64]."""
    kind = value.WhichOneof("kind")
    if kind == "number_value":
        n = value.number_value
        if math.isfinite(n) and n == int(n) and abs(n) < 2**53:
            return str(int(n))
        return f"{n:.4g}"
    if kind == "string_value":
        return value.string_value
    if kind == "bool_value":
        return "true" if value.bool_value else "false"
    if kind == "list_value":
        return "[" + ",".join(value_text(v) for v in value.list_value.values) + "]"
    if kind == "struct_value":
        fields = value.struct_value.fields
        return "{" + ",".join(f"{k}:{value_text(fields[k])}" for k in sorted(fields)) + "}"
    return "null"


def parameters_text(trial):
    """'ppo.learning_rate=0.0003123 envs_per_actor=8', by path; a trial of a
    configuration's second seed onwards ends with 'seed+N'."""
    words = [f"{path}={value_text(trial.parameters[path])}"
             for path in sorted(trial.parameters)]
    if trial.seed_offset:
        words.append(f"seed+{trial.seed_offset}")
    return " ".join(words) or "-"


def minimises(sweep):
    """Whether a lower score is better (metric.goal "min"; the default is max)."""
    return sweep.spec.metric.goal.lower() == "min"


def trials_best_first(sweep):
    """The sweep's trials by score, best first per metric.goal; trials with
    no score yet (NaN) last; ties by index."""
    sign = 1.0 if minimises(sweep) else -1.0
    return sorted(sweep.trials, key=lambda t: (math.isnan(t.score),
                                               0.0 if math.isnan(t.score) else sign * t.score,
                                               t.index))


def trials_done(sweep):
    """Trials that ended (the coordinator's count where a listing left the
    trials out)."""
    if not sweep.trials:
        return sweep.trials_ended
    return sum(1 for t in sweep.trials if state_name(t.state) in TERMINAL_STATES)


def trials_total(sweep):
    return len(sweep.trials) or sweep.trials_total


def best_score_text(sweep):
    """The score of the sweep's best trial (best_run_id); '-' before one."""
    for t in sweep.trials:
        if sweep.best_run_id and t.run_id == sweep.best_run_id:
            return score_text(t.score)
    return score_text(sweep.best_score) if sweep.best_run_id else "-"


def early_stopping_text(spec):
    """'none', 'asha (rungs at 25000 env steps x2)', 'median (rungs every
    25000 env steps)'."""
    e = spec.early_stopping
    kind = e.kind or "none"
    if kind == "asha":
        return f"asha (rungs at {e.first_rung_steps} env steps x{e.reduction_factor or 3})"
    if kind == "median":
        return f"median (rungs every {e.first_rung_steps} env steps)"
    return text(kind)


def pbt_text(sweep):
    """'round 2 of 10 (every 30000 env steps; the worst 0.25 copy the best)'
    for a sweep of method pbt; '' for any other."""
    spec = sweep.spec
    if spec.method != "pbt":
        return ""
    interval = spec.pbt.interval_steps
    budget = spec.base.total_env_steps
    rounds = -(-budget // interval) if interval > 0 else 0
    where = ("ended in round" if state_name(sweep.state) in TERMINAL_STATES else "round")
    return (f"population-based training: {where} {sweep.pbt_round + 1} of {rounds} "
            f"(every {interval} env steps; the worst {spec.pbt.fraction:g} copy the best)")


def lineage_lines(sweep):
    """Method pbt: each trial's runs, round by round, and its weights'
    history (a line per copy), by trial index; [] for any other method."""
    if sweep.spec.method != "pbt":
        return []
    lines = []
    for t in sorted(sweep.trials, key=lambda t: t.index):
        runs = " ".join(t.round_run_ids) or "-"
        lines.append(f"trial {t.index}: runs {text(runs)}")
        lines += [f"  {text_lines(entry)}" for entry in t.lineage]
    return lines


def sweep_table(sweep):
    """`rlctl sweep get`: a header (the sweep, its state, best run, reason,
    metric and early stopping; pbt's round), then its trials best first
    (trials_best_first) with their runs, states, env steps, scores, scores at
    each rung, parameters and why they stopped early or failed; for pbt, each
    trial's runs and lineage."""
    spec = sweep.spec
    metric = spec.metric
    lines = [f"{text(sweep.sweep_id)}  {text(spec.name or '-')}  {state_name(sweep.state)}  "
             f"trials {trials_done(sweep)}/{trials_total(sweep)} done"
             + (f"  owner: {text(sweep.owner)}" if sweep.owner else ""),
             f"metric: {text(metric.series or '-')} ({text(metric.goal or 'max')}, best of the "
             f"last {max(metric.last_points, 1)} points)  "
             f"early stopping: {early_stopping_text(spec)}",
             "best run: " + (f"{text(sweep.best_run_id)} (score {best_score_text(sweep)})"
                             if sweep.best_run_id else "-")]
    if pbt_text(sweep):
        lines.append(pbt_text(sweep))
    if sweep.reason:
        lines.append(f"reason: {text_lines(sweep.reason)}")
    if not sweep.trials:
        lines.append("no trials")
        return "\n".join(lines)
    rows = [[str(t.index), t.run_id or "-", state_name(t.state), str(t.env_steps),
             score_text(t.score), ",".join(score_text(r) for r in t.rung_scores) or "-",
             parameters_text(t), t.reason]
            for t in trials_best_first(sweep)]
    lines += format_table(["TRIAL", "RUN", "STATE", "ENV STEPS", "SCORE", "RUNGS",
                           "PARAMETERS", "REASON"], rows, right=(0, 3, 4))
    lineage = lineage_lines(sweep)
    if lineage:
        lines += ["lineage:"] + lineage
    return "\n".join(lines)


def sweeps_table(sweeps):
    """`rlctl sweep list`: one line per sweep under a header (no lines for
    none)."""
    if not sweeps:
        return ""
    rows = [[s.sweep_id, state_name(s.state), s.spec.name or "-",
             f"{trials_done(s)}/{trials_total(s)}", s.best_run_id or "-", best_score_text(s)]
            for s in sweeps]
    return "\n".join(format_table(["SWEEP", "STATE", "NAME", "TRIALS", "BEST RUN",
                                    "BEST SCORE"], rows, right=(3, 5)))


def _sweep_milestones(sweep):
    """What a log (not a terminal) of `sweep watch` reprints the table for:
    the sweep's and its trials' states, runs, rungs and reasons, not every
    progress report."""
    return (sweep.state, sweep.best_run_id, sweep.reason, sweep.pbt_round,
            tuple((t.run_id, t.state, len(t.rung_scores), t.reason, len(t.lineage))
                  for t in sweep.trials))


def print_outage(message):
    """stderr: a coordinator outage started, or ended."""
    print(f"rlctl: {text(message)}", file=sys.stderr, flush=True)


def watch_sweep(client, sweep_id, retry_for, interval):
    """Reprints the sweep's table (sweep_table) whenever it changed, in place
    on a terminal, until the sweep ends (through coordinator restarts, for
    up to `retry_for` s of unavailability in a row); 0 if it SUCCEEDED."""
    if not interval > 0:
        raise ValueError("--interval: must be > 0")
    tty = sys.stdout.isatty()
    shown = [None]

    def show(sweep):
        if tty:
            sys.stdout.write("\033[H\033[2J" + sweep_table(sweep) + "\n")
            sys.stdout.flush()
        elif _sweep_milestones(sweep) != shown[0]:
            if shown[0] is not None:
                print()
            print(sweep_table(sweep), flush=True)
            shown[0] = _sweep_milestones(sweep)

    sweep = client.wait_sweep(sweep_id, on_update=show, poll_s=interval, retry_for=retry_for,
                              on_unavailable=print_outage, on_reconnect=print_outage)
    state = state_name(sweep.state)
    print(f"{text(sweep.sweep_id)} {state}"
          + (f": best run {text(sweep.best_run_id)} (score {best_score_text(sweep)})"
             if sweep.best_run_id else "")
          + (f": {text_lines(sweep.reason)}" if sweep.reason else ""))
    return 0 if state == "SUCCEEDED" else 1


def optuna_sweep(client, args):
    """`rlctl sweep submit FILE --optuna`: Optuna's sampler chooses the
    trials of the sweep (method: external) from here until it ends (through
    coordinator restarts, for up to --retry-for s of unavailability in a
    row), the table printed as `sweep watch` prints it; 0 if it SUCCEEDED."""
    from rlservice.sweeps import optuna_search  # Optuna only when asked for
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    shown = [None]

    def show(sweep, study):
        if _sweep_milestones(sweep) != shown[0]:
            if shown[0] is not None:
                print()
            print(sweep_table(sweep), flush=True)
            shown[0] = _sweep_milestones(sweep)

    sampler = args.sampler or "tpe"
    sweep, study = optuna_search(client, args.sweep_file, sampler=sampler,
                                 seed=args.seed, idempotency_key=args.key, on_update=show,
                                 poll_s=args.interval, retry_for=args.retry_for,
                                 on_unavailable=print_outage, on_reconnect=print_outage)
    state = state_name(sweep.state)
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    print(f"{text(sweep.sweep_id)} {state}: Optuna {sampler} told {len(study.trials)} "
          f"configurations ({len(done)} complete)"
          + (f", best run {text(sweep.best_run_id)} (score {best_score_text(sweep)})"
             if sweep.best_run_id else "")
          + (f": {text_lines(sweep.reason)}" if sweep.reason else ""))
    return 0 if state == "SUCCEEDED" else 1


def sweep_command(client, args):
    """`rlctl sweep submit|list|get|cancel|watch`."""
    if args.sweep_command == "submit" and args.optuna:
        return optuna_sweep(client, args)
    if args.sweep_command == "submit":
        sweep = client.submit_sweep(args.sweep_file, args.key)
        print(f"submitted {text(sweep.sweep_id)} ({text(sweep.spec.name or '-')}: "
              f"{len(sweep.trials)} trials, {sweep.spec.concurrency} at once)")
        return watch_sweep(client, sweep.sweep_id, args.retry_for,
                           args.interval) if args.watch else 0
    if args.sweep_command == "list":
        table = sweeps_table(client.list_sweeps())
        if table:
            print(table)
        return 0
    if args.sweep_command == "get":
        print(sweep_table(client.get_sweep(args.sweep_id)))
        return 0
    if args.sweep_command == "cancel":
        print(sweeps_table([client.cancel_sweep(args.sweep_id)]))
        return 0
    return watch_sweep(client, args.sweep_id, args.retry_for, args.interval)
