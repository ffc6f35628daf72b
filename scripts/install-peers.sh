#!/usr/bin/env bash
# Installs the reference peers used by parity tests (idempotent):
#   node-llama-cpp 3.21.1, whose prebuilt libggml-base.so is ggml's own quant code,
#   and a checkout of the llama.cpp source it bundles ($dir/llama.cpp: tokenizer
#   vocab fixtures under models/, llama.h for the llama.cpp peer harness),
#   and onnxruntime-node 1.30.0 (CPU ONNX Runtime for bench/race.py; its library is
#   node_modules/onnxruntime-node/bin/napi-v6/linux/x64/libonnxruntime.so.1).
# Directory: $RLX_PEERS_DIR, default $HOME/.cache/rlx-peers. Prints the path of
# libggml-base.so on its last line. Needs npm (installed from Debian if absent).
set -euo pipefail
dir="${RLX_PEERS_DIR:-$HOME/.cache/rlx-peers}"
lib="$dir/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-base.so"
if [ ! -f "$lib" ]; then
  if ! command -v npm >/dev/null; then
    sudo_cmd=()
    [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
    export DEBIAN_FRONTEND=noninteractive
    "${sudo_cmd[@]}" apt-get update -qq
    "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends npm
  fi
  mkdir -p "$dir"
  echo "install-peers: npm install node-llama-cpp@3.21.1 into $dir (~730 MB)" >&2
  (cd "$dir" && npm install -E node-llama-cpp@3.21.1 --ignore-scripts --no-audit --no-fund >&2)
fi
test -f "$lib"
src="$dir/llama.cpp"
if [ ! -f "$src/include/llama.h" ]; then
  rm -rf "$src"
  git clone -q "$dir/node_modules/node-llama-cpp/llama/gitRelease.bundle" "$src" 2>/dev/null
fi
test -f "$src/models/ggml-vocab-llama-spm.gguf"
ort="$dir/node_modules/onnxruntime-node"
if ! grep -q '"version": "1.30.0"' "$ort/package.json" 2>/dev/null ||
   [ ! -f "$ort/bin/napi-v6/linux/x64/libonnxruntime.so.1" ]; then
  echo "install-peers: npm install onnxruntime-node@1.30.0 into $dir" >&2
  # Without ONNXRUNTIME_NODE_INSTALL=skip its postinstall downloads GPU parts and fails;
  # the CPU library ships in the package itself.
  (cd "$dir" && ONNXRUNTIME_NODE_INSTALL=skip npm install -E onnxruntime-node@1.30.0 \
     --no-audit --no-fund >&2)
fi
test -f "$ort/bin/napi-v6/linux/x64/libonnxruntime.so.1"
test -f "$lib"
echo "$lib"
