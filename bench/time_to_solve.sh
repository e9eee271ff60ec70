#!/usr/bin/env bash
# Time to solve, from process start to exit: for each seed, the wall clock of
# `tools/train_local.sh RUN_FILE` (set-up check, opt build check, training
# until the run's target_return, the 100-episode evaluation) and of the
# `rl_local train` process alone, which is what train_local.sh runs to train
# (same binary, same flags). Per seed: wall times, env steps, solved or not;
# then medians and the goal's ratio (CartPole <= 2 s). A seed that used its
# step budget without solving counts as never solving for the medians.
#
#   bash bench/time_to_solve.sh                        # cartpole:5 acrobot:5 pendulum:5
#   bash bench/time_to_solve.sh cartpole:5 acrobot:1   # RUN[:SEEDS] of examples/RUN.yaml
#
# Each seed trains twice (train_local.sh, then rl_local alone); training is
# deterministic per seed, so both runs take the same env steps (printed for
# both). Not under `bazel run`: train_local.sh calls bazel itself.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
GOAL_S=2
if (($# == 0)); then set -- cartpole:5 acrobot:5 pendulum:5; fi

TMP="$(mktemp -d /tmp/time_to_solve.XXXXXX)"
trap 'rm -rf "$TMP"' EXIT
# train_local.sh builds too; building here first keeps a first-time build out
# of seed 1's figure. The opt binary by its own path: bazel-bin follows the
# last build of any configuration on this Bazel server.
bazel build --config=opt //trainer:rl_local >"$TMP/build.log" 2>&1 ||
  { cat "$TMP/build.log"; exit 1; }
RL_LOCAL="$(bazel info --config=opt bazel-bin 2>/dev/null)/trainer/rl_local"

# Median of numbers, one a line, printed with format $1; unsolved seeds are
# written as $NEVER.
NEVER=1e9
median() { sort -g | awk -v never="$NEVER" -v fmt="$1" '{ v[NR] = $1 } END {
  m = NR == 0 ? never : NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
  if (m >= never) print "never"; else printf fmt "\n", m }'; }
# "solved at N steps in S s" or "NOT solved after N steps in S s": N S yes|no
summary() {
  awk '$2 == "solved" && $3 == "at" { print $4, $7, "yes"; found = 1 }
       $2 == "NOT" && $3 == "solved" { print $5, $8, "no"; found = 1 }
       END { if (!found) print "-", "-", "failed" }' "$1"
}
# Wall seconds of a command, from just before it starts to just after it
# exits; its output goes to $1, each line prefixed with the time it arrived.
timed() {
  local log="$1" start end
  shift
  start=$EPOCHREALTIME
  echo "$start START" >"$log"
  "$@" 2>&1 | while IFS= read -r line; do
    echo "$EPOCHREALTIME $line"
  done >>"$log" || true
  end=$EPOCHREALTIME
  echo "$end EXIT" >>"$log"
  awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }'
}
# train_local.sh's wall in phases, from the times its lines arrived: set-up
# and build check (to bazel's last line), training (to rl_local's summary,
# written as it exits), evaluation (to the end): "S/T/E".
phases() {
  awk '$2 == "START" { t0 = $1 } /INFO: Build completed/ { b = $1 }
       / checkpoint: / { c = $1 } $2 == "EXIT" { e = $1 }
       END { if (b && c) printf "%.1f/%.1f/%.1f", b - t0, c - b, e - c;
             else print "-" }' "$1"
}

for arg in "$@"; do
  run="${arg%%:*}"
  seeds="${arg#*:}"
  [[ "$seeds" == "$arg" ]] && seeds=5
  base="examples/$run.yaml"
  target="$(awk '/^target_return:/ { print $2 }' "$base")"
  printf '\n== %s (%s), target_return %s (mean of the last 100 episodes), %d seed(s)\n' \
    "$run" "$base" "${target:-none}" "$seeds"
  printf '%-5s %12s %16s %11s %7s | %10s %10s %11s %7s\n' seed \
    train_local_s "set-up/train/eval" env_steps solved rl_local_s trainer_s \
    env_steps solved
  : >"$TMP/script_s"
  : >"$TMP/binary_s"
  : >"$TMP/steps"
  solved=0
  for seed in $(seq "$seeds"); do
    # train_local.sh trains into runs/<file name>: a name of its own.
    name="tts-$run-seed$seed"
    file="$TMP/$name.yaml"
    sed "s/^seed: .*/seed: $seed/" "$base" >"$file"
    grep -q "^seed: $seed\$" "$file" || echo "seed: $seed" >>"$file"

    script_s=$(timed "$TMP/script.log" tools/train_local.sh "$file" --progress=false)
    rm -rf "runs/$name"
    read -r steps _ reached < <(summary "$TMP/script.log")

    binary_s=$(timed "$TMP/binary.log" "$RL_LOCAL" train \
      --run="$file" --run_dir="$TMP/run-$seed" --progress=false)
    rm -rf "$TMP/run-$seed"
    read -r steps2 trainer_s reached2 < <(summary "$TMP/binary.log")

    printf '%-5s %12s %16s %11s %7s | %10s %10s %11s %7s\n' "$seed" \
      "$script_s" "$(phases "$TMP/script.log")" "$steps" "$reached" \
      "$binary_s" "$trainer_s" "$steps2" "$reached2"
    for log in script binary; do
      if grep -q -E ' (solved at|NOT solved after) ' "$TMP/$log.log"; then
        continue
      fi
      echo "seed $seed: no summary from the $log run; its last lines:" >&2
      tail -15 "$TMP/$log.log" >&2
    done
    if [[ "$reached2" == yes ]]; then
      solved=$((solved + 1))
      echo "$script_s" >>"$TMP/script_s"
      echo "$binary_s" >>"$TMP/binary_s"
      echo "$steps2" >>"$TMP/steps"
    else
      echo "$NEVER" | tee -a "$TMP/script_s" "$TMP/binary_s" >>"$TMP/steps"
    fi
  done
  m_script=$(median %.2f <"$TMP/script_s")
  m_binary=$(median %.2f <"$TMP/binary_s")
  m_steps=$(median %.0f <"$TMP/steps")
  printf 'rl_local: solved %d/%d, median env steps to solve %s\n' "$solved" "$seeds" "$m_steps"
  printf 'median wall, train_local.sh (set-up + build check + train + eval): %6s s\n' "$m_script"
  printf 'median wall, rl_local train process (start -> solved -> exit):     %6s s\n' "$m_binary"
  if [[ "$run" == cartpole && "$m_binary" != never ]]; then
    awk -v s="$m_script" -v b="$m_binary" -v g="$GOAL_S" 'BEGIN {
      printf "goal <= %g s from process start: rl_local %.2fx the goal (%s), train_local.sh %.2fx\n",
        g, b / g, b <= g ? "met" : "NOT met", s / g }'
  else
    echo "(no wall-clock goal stated for $run; the table is for reference)"
  fi
  if ((seeds < 5)); then
    echo "NOTE: $seeds seed(s) only (slow to solve here): the medians are rough"
  fi
done
