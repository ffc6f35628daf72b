#!/usr/bin/env bash
# The main job, in two parts:
# 1. build a small MLP with the C++ builder, show it with `rlx inspect`, run it with `rlx run`;
# 2. training in rlx: a small CNN for sklearn's handwritten digits, defined in
#    PyTorch and exported with rlx_torch (train=True), trained by `rlx train`,
#    then run by rlx on the held-out digits (accuracy, agreement with PyTorch
#    running the same weights, latency ratio) and exported to CoreML.
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
rm -rf "$d"
mkdir -p "$d"
echo
echo "== digits: export the untrained CNN from PyTorch (train=True: loss output, BatchNorm in training form)"
PYTHONPATH=python "$py" examples/digits/digits.py prepare "$d"
echo
echo "== rlx train $d/train_model --optimizer adam --lr 3e-3 --epochs 8 --batch 64"
"$build/rlx" train "$d/train_model" --data "$d/train.safetensors" --eval "$d/eval.safetensors" \
  --optimizer adam --lr 3e-3 --epochs 8 --batch 64 --seed 0 --threads "$threads" --out "$d/trained"
echo "loss and accuracy curves: $d/trained/curves.svg"
echo
echo "== the inference graph with the trained weights; PyTorch runs the same weights"
PYTHONPATH=python "$py" examples/digits/digits.py assemble "$d" "$d/trained" --threads "$threads"
echo
echo "== rlx run $d/trained_model --inputs $d/heldout.safetensors --bench 50 --threads $threads"
log=$("$build/rlx" run "$d/trained_model" --inputs "$d/heldout.safetensors" \
  --out "$d/rlx_out.safetensors" --bench 50 --threads "$threads")
echo "$log"
rlx_ms=$(echo "$log" | sed -n 's/.*median \([0-9.]*\) ms.*/\1/p')
echo
echo "== CoreML: rlx compile --target coreml, rlx coreml-check, rlx coreml-run"
"$build/rlx" compile "$d/trained_model" --target coreml -o "$d/digits.mlpackage"
"$build/rlx" coreml-check "$d/digits.mlpackage"
"$build/rlx" coreml-run "$d/digits.mlpackage" --inputs "$d/heldout.safetensors" \
  --out "$d/coreml_out.safetensors" > /dev/null
echo
echo "== digits results"
PYTHONPATH=python "$py" examples/digits/digits.py report "$d" "$d/rlx_out.safetensors" "$rlx_ms" \
  "$d/coreml_out.safetensors"
