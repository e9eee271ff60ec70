#!/usr/bin/env bash
# Env steps/s of one run with several policies beside the same run with one
# (issue 50 item 6), in rl_local on this machine: LightCycles-v0, 1M steps,
# plain self-play (examples/multi_agent/light_cycles.yaml), two policies
# (light_cycles_two_policies.yaml: red and blue, one player each) and a
# league (light_cycles_league.yaml), interleaved over ROUNDS rounds, one
# run at a time. Prints each run's env steps/s and time split, then the
# ratios of the medians.
#
#   bash bench/policies_speed.sh       # 3 rounds
#   bash bench/policies_speed.sh 5
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
ROUNDS="${1:-3}"
TMP="$(mktemp -d /tmp/policies_speed.XXXXXX)"
trap 'rm -rf "$TMP"' EXIT
bazel build --config=opt //trainer:rl_local >"$TMP/build.log" 2>&1 ||
  { cat "$TMP/build.log"; exit 1; }
RL_LOCAL="$(bazel info --config=opt bazel-bin 2>/dev/null)/trainer/rl_local"

declare -A RATES
printf '%-13s %5s %12s  %s\n' run round "steps/s" "time split"
for round in $(seq 1 "$ROUNDS"); do
  for kind in one_policy two_policies league; do
    case "$kind" in
      one_policy) file=light_cycles.yaml ;;
      two_policies) file=light_cycles_two_policies.yaml ;;
      league) file=light_cycles_league.yaml ;;
    esac
    sed 's/^total_env_steps: .*/total_env_steps: 1000000/' \
      "examples/multi_agent/$file" >"$TMP/$kind.yaml"
    "$RL_LOCAL" train --run="$TMP/$kind.yaml" --run_dir="$TMP/$kind-$round" \
      --progress=false >"$TMP/$kind-$round.log" 2>&1 ||
      { tail -20 "$TMP/$kind-$round.log"; exit 1; }
    rate=$(sed -n 's/.* s, \([0-9]*\) steps\/s.*/\1/p' "$TMP/$kind-$round.log")
    split=$(sed -n 's/^time: //p' "$TMP/$kind-$round.log")
    printf '%-13s %5d %12d  %s\n' "$kind" "$round" "$rate" "$split"
    RATES[$kind]="${RATES[$kind]:-} $rate"
    rm -rf "$TMP/$kind-$round"
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
one=$(echo "${RATES[one_policy]}" | median)
two=$(echo "${RATES[two_policies]}" | median)
league=$(echo "${RATES[league]}" | median)
echo "median steps/s: one policy $one, two policies $two, league $league"
echo "two policies / one: $(echo "scale=3; $two / $one" | bc)x (goal >= 0.9x)"
echo "league / one: $(echo "scale=3; $league / $one" | bc)x"
