#!/usr/bin/env bash
# `make fuzz`: builds the libFuzzer targets (clang, ASan + UBSan) in BUILD,
# writes their seed corpora and dictionaries (tests/fuzz/make_corpus.py) and
# runs each target for SECONDS. Fails when any target finds a crash, a hang,
# a leak, a sanitizer report or an exception other than rlx::Error; the
# reproducer is left in BUILD/artifacts/. New inputs the fuzzers find are kept
# in BUILD/corpus-found/<target>, so later runs start from them.
#
#   scripts/fuzz.sh [BUILD [SECONDS [RLX [TARGETS...]]]]
#     BUILD    the sanitized tree (build-asan, shared with make test-asan)
#     SECONDS  per target (60)
#     RLX      an rlx binary to export .mlpackage seeds with (build/rlx; optional)
#     TARGETS  a subset of: safetensors npy gguf graph_json torch_ir mlpackage onnx
#
# FUZZ_RUNS=N turns the time bound into an execution count (the long campaign
# issue 10 asks for): each target runs as JOBS processes of N / JOBS runs each,
# sharing the found-corpus, and the summary sums their executions; a SECONDS
# above 0 still caps each target's time.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${1:-build-asan}"
SECONDS_PER="${2:-60}"
RLX="${3:-build/rlx}"
shift $(( $# < 3 ? $# : 3 ))
TARGETS=("$@")
[ ${#TARGETS[@]} -eq 0 ] && TARGETS=(safetensors npy gguf graph_json torch_ir mlpackage onnx)
JOBS="${JOBS:-$(nproc)}"

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

start=$(date +%s)
if [ ! -f "$BUILD/build.ninja" ]; then
  # The tree `make test-asan` configures (it may be this one).
  scripts/configure-sanitize.sh "$BUILD" "${launcher[@]}" -DRLX_WERROR=ON -DRLX_BUILD_BENCH=OFF \
    >/dev/null
fi
cmake --build "$BUILD" --target rlx_fuzz -j "$JOBS"
built=$(date +%s)
echo "fuzz: targets built in $((built - start)) s"

python3 tests/fuzz/make_corpus.py "$BUILD/corpus" --rlx "$RLX"
mkdir -p "$BUILD/artifacts"

declare -A MAX_LEN=([safetensors]=4096 [npy]=4096 [gguf]=16384 [graph_json]=16384
                    [torch_ir]=16384 [mlpackage]=16384 [onnx]=16384)
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
failed=()
summary=()
for t in "${TARGETS[@]}"; do
  found="$BUILD/corpus-found/$t"
  mkdir -p "$found"
  dict=()
  [ -f "$BUILD/corpus/$t.dict" ] && dict=(-dict="$BUILD/corpus/$t.dict")
  log="$BUILD/artifacts/$t.log"
  rc=0
  bound=(-max_total_time="$SECONDS_PER")
  procs=1
  what="$SECONDS_PER s"
  if [ -n "${FUZZ_RUNS:-}" ]; then
    procs=$JOBS
    bound=(-runs=$(( FUZZ_RUNS / procs )))
    [ "$SECONDS_PER" -gt 0 ] && bound+=(-max_total_time="$SECONDS_PER")
    what="$FUZZ_RUNS runs in $procs processes"
    [ "$SECONDS_PER" -gt 0 ] && what+=", at most $SECONDS_PER s"
  fi
  echo "fuzz: $t for $what"
  t0=$(date +%s)
  pids=()
  for ((j = 0; j < procs; ++j)); do
    "$BUILD/fuzz_$t" "${bound[@]}" -max_len="${MAX_LEN[$t]}" -timeout=10 \
      -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$BUILD/artifacts/$t-" \
      "${dict[@]}" "$found" "$BUILD/corpus/$t" >"$log.$j" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  cat "$log".* >"$log" && rm -f "$log".*
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | awk '{s += $1} END {print s + 0}')
  speed=$(( execs / ( $(date +%s) - t0 + 1 ) ))
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 || true)
  summary+=("$(printf '%-12s %10s execs %7s exec/s  %s  rc %d' "$t" "${execs:-?}" "${speed:-?}" "$cov" "$rc")")
  if [ "$rc" -ne 0 ]; then
    failed+=("$t")
    echo "fuzz: $t FAILED (rc $rc); the end of $log:" >&2
    tail -n 40 "$log" >&2
  fi
done
echo "fuzz: done in $(( $(date +%s) - start )) s (build $((built - start)) s)"
printf '  %s\n' "${summary[@]}"
if [ ${#failed[@]} -ne 0 ]; then
  echo "fuzz: findings in ${failed[*]}; reproducers in $BUILD/artifacts/" >&2
  exit 1
fi
