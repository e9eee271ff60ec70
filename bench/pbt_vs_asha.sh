#!/usr/bin/env bash
# Population-based training beside ASHA on the same budget (issue 50 item
# 5): examples/sweeps/pendulum_pbt.yaml (5 members x 300k env steps) and
# pendulum_asha.yaml (16 trials, about 1.5M env steps in all) over the same
# three hyperparameters, for several sweep seeds. Per sweep: the best
# trial's score (learner/mean_return, best of its last 5 points), the mean
# of the final scores of the trials that trained the whole budget, the env
# steps the sweep used in all, its wall seconds, and what it found.
#
#   bash bench/pbt_vs_asha.sh          # sweep seeds 1 2 3
#   bash bench/pbt_vs_asha.sh 4 5      # other seeds
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
if (($# == 0)); then set -- 1 2 3; fi
TMP="$(mktemp -d /tmp/pbt_vs_asha.XXXXXX)"
trap 'rm -rf "$TMP"' EXIT
bazel build --config=opt //trainer:rl_local >"$TMP/build.log" 2>&1 ||
  { cat "$TMP/build.log"; exit 1; }
RL_LOCAL="$(bazel info --config=opt bazel-bin 2>/dev/null)/trainer/rl_local"
BASE="$ROOT/examples/sweeps/pendulum_300k.yaml"

printf '%-5s %4s %10s %16s %12s %7s  %s\n' method seed best "mean at budget" \
  env_steps wall_s "best configuration"
for seed in "$@"; do
  for method in pbt asha; do
    sweep="$TMP/$method-$seed.yaml"
    sed -e "s|^seed: .*|seed: $seed|" \
      -e "s|^base_run_file: .*|base_run_file: $BASE|" \
      "examples/sweeps/pendulum_$method.yaml" >"$sweep"
    start=$(date +%s.%N)
    "$RL_LOCAL" sweep --sweep="$sweep" --run_dir="$TMP/$method-$seed" \
      >"$TMP/$method-$seed.log" 2>&1 ||
      { tail -20 "$TMP/$method-$seed.log"; exit 1; }
    wall=$(echo "$(date +%s.%N) - $start" | bc)
    # The table: trial state score env_steps params...; then lineage, best.
    awk -v method="$method" -v seed="$seed" -v wall="$wall" '
      $1 == "trial" && $2 == "state" { table = 1; next }
      table && $1 ~ /^[0-9]+$/ {
        steps += $4
        if (best == "") best = $3
        if ($2 == "DONE") { sum += $3; n++ }
        next
      }
      $1 == "best:" {
        sub(/^best: /, ""); sub(/: learner\/mean_return.*/, "")
        found = $0
      }
      END {
        printf "%-5s %4d %10.1f %16.1f %12d %7.1f  %s\n", method, seed, best,
          n ? sum / n : 0, steps, wall, found
      }' "$TMP/$method-$seed.log"
  done
done
