// Shared test helpers: random tensors, running one op or a whole graph, and
// closeness checks with readable failure messages.
#pragma once
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "rlx/cpu_isa.h"
#include "rlx/quant.h"
#include "rlx/rlx.h"

namespace rlx::testing {

// Caps cpu_isa() for the scope (tests force each kernel path on any machine).
struct IsaLimit {
  explicit IsaLimit(Isa isa) : saved(isa_limit()) { set_isa_limit(isa); }
  ~IsaLimit() { set_isa_limit(saved); }
  IsaLimit(const IsaLimit&) = delete;
  IsaLimit& operator=(const IsaLimit&) = delete;
  Isa saved;
};

// N rows of K random values quantized to ggml type t by rlx's quantizer: rows
// of different magnitudes, an outlier in some, and for q8_0 some -128s (which
// files may hold and the quantizer never writes).
std::vector<uint8_t> random_quant_rows(quant::GgmlType t, int64_t N, int64_t K, uint32_t seed);

// Uniform in [lo, hi) for floats; integers in [lo, hi] for integer dtypes; bool 50/50.
Tensor random_tensor(const Dims& dims, DType t, uint64_t seed, double lo = -1, double hi = 1);

// Builds a graph with one Input per tensor ("x0", "x1", ...), one `op` node
// and one output, compiles it without optimizations and runs it.
Tensor run_op(Op op, const std::vector<Tensor>& inputs, const Attrs& attrs = {});
// Every output of the op: one, or a multi-output op's (topk, split, norm grads) in
// result order. run_op throws for multi-output ops.
std::vector<Tensor> run_op_outputs(Op op, const std::vector<Tensor>& inputs,
                                   const Attrs& attrs = {});

// Compiles (with the given opt level) and runs a whole graph.
TensorMap run_graph(const Graph& g, const TensorMap& inputs, const TensorMap& weights = {},
                    int opt_level = 1);

// |got - want| <= atol + rtol * |want| element-wise, same dims; NaNs must
// match NaNs. Compares as double, so it works for every dtype.
::testing::AssertionResult all_close(const Tensor& got, const Tensor& want, double atol = 1e-5,
                                     double rtol = 1e-5);
// How closely `got` follows a reference: max |got - want|, max |want| and the
// cosine of the two as vectors (1 for two zero tensors; NaN counts as an
// infinite error). For whole-model parity tables.
struct Parity {
  double max_abs = 0, max_ref = 0, cosine = 1;
};
Parity parity(const Tensor& got, const Tensor& want);
// Exact equality of dims, dtype and every element.
::testing::AssertionResult all_equal(const Tensor& got, const Tensor& want);

// Runs the rlx command line with `args` (shell words); stdout and stderr
// together, and the exit status.
struct CliResult {
  int status = -1;
  std::string output;
};
CliResult run_cli(const std::string& args);
// Any shell command line, its stderr folded into the output.
CliResult run_command(const std::string& command);

// An empty directory `name.<pid>` under the system temp dir. ctest runs each
// test in its own process, in parallel: a fixed path would let one process
// rewrite a file another one has mapped.
std::filesystem::path process_temp_dir(const std::string& name);

// While alive, no file this process writes may grow past `bytes`: writes
// beyond fail with EFBIG (SIGXFSZ is ignored), as when a disk fills up
// midway through an output.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(uint64_t bytes);
  ~FileSizeLimit();
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  uint64_t old_cur_ = 0;
  void (*old_handler_)(int) = nullptr;
};

// The entries of `dir` by file name (not recursive), sorted.
std::vector<std::string> list_dir(const std::filesystem::path& dir);

// The message of the rlx::Error `f` throws; empty when it throws nothing.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace rlx::testing
