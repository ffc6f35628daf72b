#!/usr/bin/env bash
# The main job: build a small MLP with the C++ builder, then show it with
# `rlx inspect` and run it with `rlx run`.
set -euo pipefail
build=${1:-build}
out=out/mlp
mkdir -p "$out"
"$build/examples/make_mlp" "$out"
echo
echo "== rlx inspect $out"
"$build/rlx" inspect "$out"
echo
echo "== rlx run $out --inputs $out/inputs.safetensors --out $out/outputs.safetensors --bench 50"
"$build/rlx" run "$out" --inputs "$out/inputs.safetensors" --out "$out/outputs.safetensors" --bench 50
