// Shared test helpers: random tensors, running one op or a whole graph, and
// closeness checks with readable failure messages.
#pragma once
#include <gtest/gtest.h>

#include <filesystem>
#include <limits>
#include <memory>
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
// An f32 tensor's values rounded to bf16 (nearest even), still f32: the
// operands a MatmulPrecision::bf16 product sees.
Tensor bf16_rounded(const Tensor& t);

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

// Shorthands for building graphs and tensors.
// A shape, f32 unless given; dims may be symbols (sym("batch")).
inline Shape S(std::vector<Dim> d, DType t = DType::F32) { return Shape(std::move(d), t); }
inline Dim sym(const char* name) { return Dim::symbol(name); }
// f32 / int tensors from their elements, and an i64 scalar.
Tensor f32(const Dims& dims, std::vector<float> v);
Tensor ints(const Dims& dims, std::vector<int64_t> v, DType t = DType::I64);
Tensor i64(int64_t v);
// n samples of N(0, scale^2), from std::mt19937(seed).
std::vector<float> randn(size_t n, uint32_t seed, float scale = 1);

// A tensor's elements as floats, in row-major order.
std::vector<float> values(const Tensor& t);
// sum_i a[i] * b[i] in double.
double dot(const Tensor& a, const Tensor& b);
// Row-major flat index <-> coordinates in dims d.
Dims unravel(int64_t flat, const Dims& d);
int64_t ravel(const Dims& coords, const Dims& d);

// Nodes of `op` in g.
int count_op(const Graph& g, Op op);
// Compiles at opt_level 0: every node as built, and no constant folding (which
// would run kernels).
std::shared_ptr<Executable> compile0(const Graph& g, const TensorMap& weights = {});

inline const double kNaN = std::numeric_limits<double>::quiet_NaN();
inline const double kInf = std::numeric_limits<double>::infinity();
// Every dtype rlx has.
inline const std::vector<DType> kAllDTypes = {DType::F32, DType::F16, DType::BF16, DType::F64,
                                              DType::I8,  DType::I16, DType::I32,  DType::I64,
                                              DType::U8,  DType::Bool};
// Where fuzz loops add the elements they read, so the reads are not optimized away.
inline volatile double g_sink = 0;

// `part` occurs in `s`.
inline bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}
// A whole file's bytes ("" when it cannot be read); writes `bytes` to a file.
std::string slurp(const std::filesystem::path& p);
void spit(const std::filesystem::path& p, const std::string& bytes);

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
