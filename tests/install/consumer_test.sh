#!/usr/bin/env bash
# `make install` end to end (ctest install_consumer): installs the build into
# a prefix inside the build dir, checks the layout, builds examples/consumer
# against it with find_package(rlx) and a small program with pkg-config, runs
# both, and imports the installed Python packages from the prefix.
#   consumer_test.sh BUILD_DIR SOURCE_DIR PYTHON_DIR_IN_PREFIX (or "")
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
pydir=${3:-}
work=$build/install-test
prefix=$work/prefix
rm -rf "$work"
mkdir -p "$work"

step() { echo "== $*"; }

step "cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" > "$work/install.log"
for f in bin/rlx lib/librlx.so include/rlx/rlx.h include/rlx/ops.def \
         lib/cmake/rlx/rlxConfig.cmake lib/cmake/rlx/rlxConfigVersion.cmake \
         lib/cmake/rlx/rlxTargets.cmake lib/pkgconfig/rlx.pc; do
  [ -e "$prefix/$f" ] || { echo "missing from the install: $f"; exit 1; }
done
"$prefix/bin/rlx" version | head -1

step "find_package(rlx): examples/consumer"
cmake -S "$src/examples/consumer" -B "$work/consumer" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$prefix" > "$work/consumer-configure.log" \
  || { cat "$work/consumer-configure.log"; exit 1; }
cmake --build "$work/consumer" > "$work/consumer-build.log" \
  || { cat "$work/consumer-build.log"; exit 1; }
"$work/consumer/rlx_consumer"
# The installed CLI writes a model the consumer then loads by path.
"$build/examples/make_mlp" "$work/mlp" > /dev/null
"$work/consumer/rlx_consumer" "$work/mlp" | tee "$work/mlp.out"
grep -q "^logits \[8,10\] f32$" "$work/mlp.out"

step "pkg-config rlx"
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
flags=$(pkg-config --cflags --libs rlx)
echo "$flags"
cat > "$work/pc.cc" <<'CC'
#include <cstdio>
#include "rlx/dtype.h"
#include "rlx/version.h"
int main() {
  std::printf("rlx %s via pkg-config: %s\n", rlx::kVersion,
              std::string(rlx::dtype_name(rlx::parse_dtype("float32"))).c_str());
  return rlx::dtype_size(rlx::DType::BF16) == 2 ? 0 : 1;
}
CC
# shellcheck disable=SC2086
c++ "$work/pc.cc" -o "$work/pc" $flags
LD_LIBRARY_PATH=$prefix/lib "$work/pc"

if [ -n "$pydir" ]; then
  step "python3: import rlx, rlx_torch from $prefix/$pydir"
  PYTHONPATH=$prefix/$pydir /usr/bin/python3 - "$prefix" "$work/mlp" <<'PY'
import sys
import numpy as np
import rlx, rlx_torch
prefix, mlp = sys.argv[1:]
assert rlx.__file__.startswith(prefix), rlx.__file__
assert rlx_torch.__file__.startswith(prefix), rlx_torch.__file__
y = rlx.load(mlp).run({"x": np.ones((8, 64), np.float32)})["probs"]
assert y.shape == (8, 10) and abs(float(y.sum()) - 8) < 1e-4, y.sum()
print("installed rlx", rlx.__version__, "runs", mlp)
PY
fi
echo "install_consumer: ok"
