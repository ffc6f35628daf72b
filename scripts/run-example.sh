#!/usr/bin/env bash
# The main job, in two parts:
# 1. build a small MLP with the C++ builder, show it with `rlx inspect`, run it with `rlx run`;
# 2. a real model end to end: a small CNN trained by PyTorch on sklearn's
#    handwritten digits, exported with rlx_torch, verified against PyTorch and
#    run by rlx on the held-out digits (accuracy, agreement, latency ratio).
set -euo pipefail
build=${1:-build}
threads=${RLX_THREADS:-$(nproc)}
out=out/mlp
mkdir -p "$out"
"$build/examples/make_mlp" "$out"
echo
echo "== rlx inspect $out"
"$build/rlx" inspect "$out"
echo
echo "== rlx run $out --inputs $out/inputs.safetensors --out $out/outputs.safetensors --bench 50"
"$build/rlx" run "$out" --inputs "$out/inputs.safetensors" --out "$out/outputs.safetensors" --bench 50

# Part 2: sklearn digits. Debian's python3 sees python3-torch/sklearn even when
# another python3 comes first on PATH. PASSIVE keeps torch's idle OpenMP
# workers from spinning against rlx's threads.
py=/usr/bin/python3
export OMP_WAIT_POLICY=PASSIVE
d=out/digits
mkdir -p "$d"
echo
echo "== digits: train a small CNN with PyTorch on sklearn's handwritten digits, export with rlx_torch"
PYTHONPATH=python "$py" examples/digits/digits.py train "$d" --threads "$threads"
echo
echo "== rlx verify $d/model (held-out batch vs PyTorch eager)"
"$build/rlx" verify "$d/model" --threads "$threads"
echo
echo "== rlx run $d/model --inputs $d/heldout.safetensors --bench 50 --threads $threads"
log=$("$build/rlx" run "$d/model" --inputs "$d/heldout.safetensors" --out "$d/rlx_out.safetensors" \
  --bench 50 --threads "$threads")
echo "$log"
rlx_ms=$(echo "$log" | sed -n 's/.*median \([0-9.]*\) ms.*/\1/p')
echo
echo "== digits results"
PYTHONPATH=python "$py" examples/digits/digits.py report "$d" "$d/rlx_out.safetensors" "$rlx_ms"
