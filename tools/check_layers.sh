#!/usr/bin/env bash
# The folder layering of ../shared/ARCHITECTURE.md, checked on the includes:
# peers never include each other, shared code never includes a component.
#
#   tools/check_layers.sh [ROOT]     exit 1 and list every offending line
set -euo pipefail
ROOT="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
cd "$ROOT"

# folder : include prefixes it must not use
RULES=(
  "common:testing/ envs/ runspec/ policy/ worker/ actor/ learner/ coordinator/ telemetry/ trainer/"
  "testing:actor/ learner/ coordinator/ telemetry/ trainer/"
  "envs:runspec/ policy/ worker/ actor/ learner/ coordinator/ telemetry/ trainer/"
  "runspec:policy/ worker/ actor/ learner/ coordinator/ telemetry/ trainer/"
  "policy:envs/ runspec/ worker/ actor/ learner/ coordinator/ telemetry/ trainer/"
  "worker:envs/ runspec/ policy/ actor/ learner/ coordinator/ telemetry/ trainer/"
  "actor:learner/ coordinator/ trainer/"
  "learner:actor/ coordinator/ trainer/ envs/batched_env envs/builtin_env_plugin envs/env_batch envs/env_plugin envs/plugin_api envs/shard_pool"
  "coordinator:envs/ policy/ worker/ actor/ learner/ trainer/"
  "telemetry:envs/ runspec/ policy/ worker/ actor/ learner/ coordinator/ trainer/"
  "telemetry/client:telemetry/downsample telemetry/http_api telemetry/metric_store telemetry/point_chunk telemetry/stream_ledger telemetry/telemetry_ telemetry/tfevents telemetry/watch_backlog telemetry/web"
)

status=0
for rule in "${RULES[@]}"; do
  folder="${rule%%:*}"
  [[ -d "$folder" ]] || continue
  for prefix in ${rule#*:}; do
    # Tests may use what they test against (e.g. worker/ tests against the
    # coordinator core); the rule is for the libraries and binaries.
    hits="$(grep -rn --include='*.h' --include='*.cc' --include='*.cu' \
      "^#include \"${prefix}" "$folder" | grep -v '_test\.cc:' || true)"
    if [[ -n "$hits" ]]; then
      echo "layering: ${folder}/ must not include ${prefix}:" >&2
      echo "$hits" >&2
      status=1
    fi
  done
done
if ((status == 0)); then echo "layering: ok"; fi
exit "$status"
