#!/usr/bin/env bash
# `make bench`: runs rlx_bench and the PyTorch peer at the same thread count and
# prints one table (bench/compare.py). Numbers are reported, never asserted.
#
#   scripts/bench.sh [BUILD_DIR]
#   RLX_BENCH_THREADS=N    threads for both sides (default 2)
#   RLX_BENCH_FILTER=RE    only benchmarks whose name matches RE (grep -E, both sides)
#   RLX_BENCH_MIN_TIME=S   seconds per repetition for rlx_bench (default 0.1)
#   RLX_BENCH_REPS=N       repetitions (rlx reports their median; default 5)
#   RLX_BENCH_NO_TORCH=1   skip the torch peer
set -euo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")/.." && pwd)
threads=${RLX_BENCH_THREADS:-2}
filter=${RLX_BENCH_FILTER:-.}
min_time=${RLX_BENCH_MIN_TIME:-0.1}
reps=${RLX_BENCH_REPS:-5}
out="$build/bench-results"
mkdir -p "$out"

# Same thread count everywhere. rlx pins OpenBLAS to one thread itself and
# uses its own pool; torch matmuls use OpenBLAS' pool, convs and element-wise
# ops OpenMP. PASSIVE keeps idle OpenMP threads from spinning on the cores
# OpenBLAS needs.
export RLX_BENCH_THREADS=$threads OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
export MKL_NUM_THREADS=$threads OMP_WAIT_POLICY=PASSIVE

bench_bin="$build/bench/rlx_bench"
[[ -x $bench_bin ]] || { echo "bench.sh: $bench_bin not built" >&2; exit 1; }

echo "== machine: $(nproc) CPUs, load before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
echo "== threads=$threads; rlx: min_time=${min_time}s x $reps repetitions (median)" >&2
start=$(date +%s)
rm -f "$out"/rlx-*.json "$out"/torch-*.json
# One family at a time, rlx then torch back to back, so on a shared machine
# both sides of a row see about the same background load.
files=()
for family in membw sgemm 'softmax|layer_norm|add|mul|gelu|gelu_tanh|silu' conv attention; do
  tag=${family%%|*}
  # Benchmark's POSIX regex has no look-ahead: list the family, filter here,
  # and hand both sides the exact names (they contain no regex metacharacters).
  names=$("$bench_bin" --benchmark_list_tests --benchmark_filter="^($family)/" |
    sed 's|/real_time$||' | grep -E -- "$filter" | paste -sd'|' || true)
  [[ -n $names ]] || continue
  rx="^($names)(/real_time)?\$"
  echo "== $tag" >&2
  "$bench_bin" --benchmark_format=json --benchmark_filter="$rx" \
    --benchmark_min_time="$min_time" --benchmark_repetitions="$reps" \
    --benchmark_report_aggregates_only=true >"$out/rlx-$tag.json"
  files+=("$out/rlx-$tag.json")
  if [[ ${RLX_BENCH_NO_TORCH:-0} != 1 ]]; then
    if /usr/bin/python3 "$here/bench/torch_peer.py" --threads "$threads" \
        --filter "$rx" --out "$out/torch-$tag.json"; then
      files+=("$out/torch-$tag.json")
    else
      echo "bench.sh: torch peer failed for $tag; its rows have no torch time" >&2
    fi
  fi
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

echo
/usr/bin/python3 "$here/bench/compare.py" "${files[@]}"
echo
echo "load average after: $load_after ($(nproc) CPUs); wall time $(($(date +%s) - start)) s;" \
  "JSON in $out/"
