// The backend interface: what the runtime compiles a graph for. A backend says
// which nodes it takes (and why not), prepares a graph once (the per-node
// kernel table) and runs its nodes. The runtime only ever sees this interface;
// backends are handed to it through CompileOptions::backend or the default
// the umbrella library (`rlx`) wires in (the CPU backend).
#pragma once
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "rlx/graph.h"

namespace rlx {

// The answer to "can this backend take this node?": yes, or why not.
struct Support {
  bool ok = true;
  std::string reason;  // empty when ok
  static Support yes() { return {}; }
  static Support no(std::string why) { return {false, std::move(why)}; }
  explicit operator bool() const { return ok; }
};

// A graph prepared for one backend: the work done once per node at compile
// time (kernel lookup), so runs only call.
class CompiledGraph {
 public:
  virtual ~CompiledGraph() = default;
  // Runs `n`, a node of the graph this was compiled from (never an input,
  // param, constant or result: the runtime binds those).
  // `in` are its inputs, contiguous; `out` has one tensor per output (a
  // multi-output node's in result order), preallocated with the planned dims
  // and dtype.
  virtual void run(const Node& n, std::span<const Tensor> in, std::span<Tensor> out) const = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // Whether this backend can take `n`; leaves (input, param, constant) are
  // always taken.
  virtual Support supports(const Node& n) const = 0;
  // Prepares every node of `g` (every node must be supported). Backends that
  // only export (CoreML) throw rlx::Error saying so.
  virtual std::unique_ptr<CompiledGraph> compile(const Graph& g) const = 0;
  // Runs one node outside a compiled graph (constant folding).
  virtual void run_node(const Node& n, std::span<const Tensor> in, std::span<Tensor> out) const = 0;
};

// Runs one node on `backend` into fresh tensors of the shapes it has on these
// inputs (a data-dependent node's shrunk to the count it finds).
std::vector<Tensor> evaluate(const Backend& backend, const Node& n, std::span<const Tensor> in);

// One node `backend` cannot take and why.
struct Unsupported {
  NodeId node;
  std::string op;
  std::string reason;
};
std::vector<Unsupported> unsupported_nodes(const Backend& backend, const Graph& g);
// Every node `backend` cannot take, grouped by op kind with counts and
// reasons, in one message; empty when all are supported.
std::string unsupported_report(const Backend& backend, const Graph& g);
// Throws rlx::Error carrying unsupported_report when it is not empty.
void check_supported(const Backend& backend, const Graph& g);

// The backend Executable::compile uses when CompileOptions::backend is null.
// The `rlx` library wires the CPU backend (default CpuOptions) as the
// default; set_default_backend replaces it for the whole process (the CLI does
// so once, with options from its environment).
std::shared_ptr<const Backend> default_backend();
void set_default_backend(std::shared_ptr<const Backend> backend);
using BackendFactory = std::shared_ptr<const Backend> (*)();
// Used by the wiring in the `rlx` library: the default is made on first use.
void set_default_backend_factory(BackendFactory factory);

// ---- Backends the `rlx` library provides.

// How matmuls and GEMM convs with a constant f32 weight may round their
// operands, as PyTorch's torch.set_float32_matmul_precision: f32 ("highest")
// keeps them; bf16 ("medium") rounds activations and weights to bf16 and sums
// in f32, on CPUs with AVX-512 BF16 (1.75-2x the f32 kernel's speed there;
// elsewhere such products stay f32). Weights are packed in bf16 once. Winograd
// F(4x4,3x3) convs, whose transforms amplify bf16's rounding, stay f32.
enum class MatmulPrecision { f32, bf16 };
const char* matmul_precision_name(MatmulPrecision p);
// "f32" or "bf16"; throws rlx::Error naming both otherwise.
MatmulPrecision parse_matmul_precision(const std::string& name);

struct CpuOptions {
  // Budget of the dequantized-weight cache (quant types without a direct
  // integer kernel are dequantized once to f32 and reused); 0 disables it.
  // The CLI reads RLX_DEQUANT_CACHE_BYTES into this.
  size_t dequant_cache_bytes = size_t(512) << 20;
  // Round as ggml's CPU backend does, so logits can be compared with
  // llama.cpp rounding for rounding (CLI: RLX_GGML_NUMERICS=1): activations
  // quantized at every batch size, and GELU-tanh through ggml's f16 table.
  bool ggml_numerics = false;
  // Regroup q4_0 / q8_0 / q4_K / q5_K / q6_K weights 16 rows at a time on
  // their first decode step, for the decode GEMV, and copy f32 / f16 / bf16
  // weights of 4 MiB or more into huge pages on first use (a second copy of
  // those weights; CLI: RLX_REGROUP_WEIGHTS=0 turns both off and reads the
  // weights where the file is mapped).
  bool regroup_weights = true;
  // CLI: --matmul-precision on `rlx run`, RLX_MATMUL_PRECISION elsewhere.
  MatmulPrecision matmul_precision = MatmulPrecision::f32;
};
// Each CPU backend owns its caches: two backends never share a budget.
std::shared_ptr<const Backend> make_cpu_backend(const CpuOptions& options = {});
// The CoreML exporter's view as a backend: supports() answers which nodes
// lower to MIL; compile/run throw (it exports, it does not run).
std::shared_ptr<const Backend> make_coreml_backend();
// "cpu" or "coreml"; throws rlx::Error listing backend_names() otherwise.
std::shared_ptr<const Backend> make_backend(const std::string& name);
std::vector<std::string> backend_names();

}  // namespace rlx
