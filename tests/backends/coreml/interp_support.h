// Helpers for the MIL interpreter tests: temp packages, export + interpret,
// the CPU reference and closeness measures.
#pragma once
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <string>

#include "backends/coreml/interp/interp.h"
#include "rlx/coreml.h"
#include "rlx/rlx.h"
#include "support/testing.h"

namespace rlx::coreml_test {

namespace fs = std::filesystem;

struct TmpDir {
  fs::path p;
  explicit TmpDir(const std::string& tag) {
    static std::atomic<int> seq{0};
    p = fs::temp_directory_path() /
        ("rlx_milinterp_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(seq++));
    fs::remove_all(p);
    fs::create_directories(p);
  }
  ~TmpDir() { fs::remove_all(p); }
};

// Exports `g` to a temp package and runs it through the interpreter.
inline TensorMap export_and_interpret(const Graph& g, const TensorMap& weights,
                                      const TensorMap& inputs, const coreml::ExportOptions& o) {
  TmpDir t("pkg");
  const std::string pkg = (t.p / "m.mlpackage").string();
  coreml::export_package(g, weights, pkg, o);
  return coreml::run_package(pkg, inputs);
}

inline Tensor as_f64(const Tensor& t) { return t.to(DType::F64); }

inline double cosine(const Tensor& a, const Tensor& b) {
  double dot = 0, na = 0, nb = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    double x = a.item_as_double(i), y = b.item_as_double(i);
    dot += x * y, na += x * x, nb += y * y;
  }
  return na == 0 && nb == 0 ? 1.0 : dot / std::sqrt(na * nb);
}

inline double max_abs_diff(const Tensor& a, const Tensor& b) {
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    double d = std::abs(a.item_as_double(i) - b.item_as_double(i));
    m = std::isnan(d) ? INFINITY : std::max(m, d);
  }
  return m;
}

}  // namespace rlx::coreml_test
