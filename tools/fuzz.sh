#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ (clang-16, ASan + UBSan) and runs
# each for a bounded time over a copy of its seed corpus, after replaying
# its regression inputs (fuzz/regressions/<target>/: crashes found and fixed).
#
#   tools/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]    default 60, all targets
#
# Prints per target the executions (libFuzzer's final stats) and crashes
# found; exits 1 if any target crashed (its input is kept under the work
# directory, printed). Bazel runs with its own output base
# ($RL_FUZZ_OUTPUT_BASE): switching the compiler to clang would otherwise
# rebuild the main gcc build's cache. Its actions are also kept in a disk
# cache ($RL_FUZZ_DISK_CACHE), so a fresh clone (CI clones afresh every
# time) builds only what changed: 7-8 minutes on 2 cores otherwise. The
# cache holds build outputs only (nothing here runs as a Bazel test), so a
# fuzz run is never skipped; remove the folder to build from scratch.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

SECONDS_PER_TARGET="${1:-60}"
shift || true
TARGETS=("$@")
if ((${#TARGETS[@]} == 0)); then
  TARGETS=(
    run_file_fuzzer
    tensor_codec_fuzzer
    learner_segment_fuzzer
    telemetry_ingest_fuzzer
    coordinator_request_fuzzer
    tfevents_reader_fuzzer
  )
fi
OUTPUT_BASE="${RL_FUZZ_OUTPUT_BASE:-$HOME/.cache/rl-fuzz-base}"
WORK="${RL_FUZZ_WORK:-$(mktemp -d -t rl-fuzz.XXXXXX)}"
DISK_CACHE="${RL_FUZZ_DISK_CACHE:-$HOME/.cache/rl-fuzz-disk-cache}"
BAZEL=(bazel "--output_base=$OUTPUT_BASE")

command -v clang-16 >/dev/null || {
  echo "fuzz: clang-16 missing (tools/setup.sh installs it)" >&2
  exit 1
}
labels=()
for t in "${TARGETS[@]}"; do labels+=("//fuzz:$t"); done
"${BAZEL[@]}" build --config=fuzz --disk_cache="$DISK_CACHE" "${labels[@]}"
BIN="$("${BAZEL[@]}" info --config=fuzz bazel-bin 2>/dev/null)/fuzz"

# Every UBSan finding is fatal (also built with -fno-sanitize-recover).
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
summary=()
failed=0
for t in "${TARGETS[@]}"; do
  dir="$WORK/$t"
  rm -rf "$dir"
  mkdir -p "$dir/corpus" "$dir/artifacts"
  cp fuzz/corpus/"$t"/* "$dir/corpus/"
  asan="abort_on_error=0"
  case "$t" in
    # LibTorch allocates caches it never frees (its allocator, op registry,
    # thread pools); LeakSanitizer would report them at exit of any run.
    tensor_codec_fuzzer | learner_segment_fuzzer) asan+=":detect_leaks=0" ;;
  esac
  crashes=0
  regressions=(fuzz/regressions/"$t"/*)
  if [[ -e "${regressions[0]}" ]]; then
    # Given files, libFuzzer runs each once instead of fuzzing.
    if ! ASAN_OPTIONS="$asan" "$BIN/$t" "${regressions[@]}" \
      >"$dir/regressions.log" 2>&1; then
      echo "fuzz: $t fails a regression input; see $dir/regressions.log" >&2
      crashes=$((crashes + 1))
    fi
  fi
  status=0
  ASAN_OPTIONS="$asan" "$BIN/$t" -max_total_time="$SECONDS_PER_TARGET" \
    -print_final_stats=1 -timeout=30 -rss_limit_mb=4096 \
    -artifact_prefix="$dir/artifacts/" "$dir/corpus" \
    >"$dir/fuzz.log" 2>&1 || status=$?
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/fuzz.log" |
    tail -1)"
  found="$(find "$dir/artifacts" -type f | wc -l)"
  if ((status != 0)) && ((found == 0)); then found=1; fi
  crashes=$((crashes + found))
  if ((crashes > 0)); then
    failed=1
    echo "fuzz: $t crashed; log $dir/fuzz.log, inputs $dir/artifacts/" >&2
    tail -40 "$dir/fuzz.log" >&2
  fi
  summary+=("$(printf '%-28s executions %10s  crashes %d' "$t" \
    "${execs:-?}" "$crashes")")
done
echo "fuzz: ${SECONDS_PER_TARGET}s per target (work directory $WORK)"
printf '  %s\n' "${summary[@]}"
exit "$failed"
