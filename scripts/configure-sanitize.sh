#!/usr/bin/env bash
# Configures the sanitized tree that `make test-asan` and `make fuzz` share:
# clang, ASan + UBSan, libFuzzer coverage on every layer, -O1 with line tables
# (fast to build, readable traces). Clang because GCC 12 takes ~1.6x as long
# to compile sanitized code, and libFuzzer needs clang anyway.
#   scripts/configure-sanitize.sh BUILD [CMAKE ARGS...]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="$1"
shift
CXX_SAN="${CXX_SAN:-$(command -v clang++-14 || command -v clang++ || true)}"
[ -n "$CXX_SAN" ] || { echo "clang++ not found (scripts/install-deps.sh installs it)" >&2; exit 1; }
exec cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=None "-DCMAKE_CXX_FLAGS=-O1 -g1" \
  -DCMAKE_CXX_COMPILER="$CXX_SAN" -DRLX_SANITIZE=ON -DRLX_FUZZ=ON "$@"
