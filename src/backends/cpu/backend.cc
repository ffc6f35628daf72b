// The CPU backend: supports() asks the dispatch table, compile() looks every
// node's kernel up once, and runs call them, computing f16/bf16 in f32 for
// kernels that only compute in f32.
#include <memory>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/gemm.h"
#include "backends/cpu/kernel.h"
#include "backends/cpu/weight_pack.h"
#include "quant/dequant_cache.h"
#include "rlx/backend.h"
#include "rlx/cpu_isa.h"
#include "rlx/error.h"

namespace rlx::cpu {
namespace {

bool is_low_precision(DType t) { return t == DType::F16 || t == DType::BF16; }

void call_kernel(const KernelEntry& k, const Context& ctx, const Node& n,
                 std::span<const Tensor> in, std::span<Tensor> out, WeightPack* pack = nullptr) {
  RLX_CHECK(!out.empty(), n.label(), ": no output buffers");
  auto widen = [&](size_t i) {
    return is_low_precision(in[i].dtype()) &&
           !(in[i].dtype() == DType::F16 && (k.f16_inputs >> i & 1u));
  };
  bool upcast = false;
  for (size_t i = 0; i < in.size(); ++i) upcast = upcast || widen(i);
  for (const Tensor& t : out) upcast = upcast || is_low_precision(t.dtype());
  if (k.all_dtypes || !upcast) {
    k.fn(KernelCall{n, in, out[0], ctx, out, pack});
    return;
  }
  std::vector<Tensor> wide, wide_out;
  wide.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) wide.push_back(widen(i) ? in[i].to(DType::F32) : in[i]);
  for (const Tensor& t : out)
    wide_out.emplace_back(t.dims(), is_low_precision(t.dtype()) ? DType::F32 : t.dtype());
  k.fn(KernelCall{n, wide, wide_out[0], ctx, wide_out});
  for (size_t i = 0; i < out.size(); ++i)
    cast_elements(wide_out[i].raw(), wide_out[i].dtype(), out[i].raw(), out[i].dtype(),
                  out[i].numel());
}

KernelEntry checked_kernel(const Node& n) {
  KernelEntry k = kernel_for(n.op);
  RLX_CHECK(k.fn, n.label(), ": the CPU backend has no kernel for '", op_name(n.op), "'");
  return k;
}

// A weight that is a param or constant (bound once, never changes between
// runs): a matmul's B or a conv's weight in f32, packed once for rlx's sgemm;
// a dequant_matmul's rows (a moe_ffn's three expert weights), regrouped once
// for the decode GEMV (the types of quant/row_groups.h) or, float rows,
// copied into huge pages, unless CpuOptions::regroup_weights is off.
bool has_packable_weight(const Graph& g, const Node& n, const Context& ctx) {
  auto constant = [&](size_t i) {
    const Op op = g.node(n.inputs[i]).op;
    return op == Op::Param || op == Op::Constant;
  };
  // moe_ffn: gate, up and down, each in its own slot.
  if (n.op == Op::MoeFfn) return ctx.regroup_weights && constant(3) && constant(4) && constant(5);
  if (n.inputs.size() < 2 || !constant(1)) return false;
  if (n.op == Op::MatMul || n.op == Op::Conv) return g.node(n.inputs[1]).shape.dtype == DType::F32;
  return n.op == Op::DequantMatmul && ctx.regroup_weights;
}

class CpuGraph final : public CompiledGraph {
 public:
  CpuGraph(const Graph& g, const Context& ctx) : ctx_(ctx), table_(g.size()), packs_(g.size()) {
    // Input/param/constant are bound by the runtime; other leaves (full,
    // arange) have kernels like any op.
    const bool packing = detected_isa() >= Isa::avx2;  // a CPU with one of rlx's own sgemm kernels
    for (const Node& n : g.nodes()) {
      if (n.op != Op::Input && n.op != Op::Param && n.op != Op::Constant && n.op != Op::Result &&
          !is_control(n.op))
        table_[size_t(n.id)] = checked_kernel(n);
      if (packing && has_packable_weight(g, n, ctx))
        packs_[size_t(n.id)] = std::make_unique<WeightPack>();
    }
  }
  void run(const Node& n, std::span<const Tensor> in, std::span<Tensor> out) const override {
    const KernelEntry& k = table_[size_t(n.id)];
    RLX_CHECK(k.fn, n.label(), ": not a node of the compiled graph");
    call_kernel(k, ctx_, n, in, out, packs_[size_t(n.id)].get());
  }

 private:
  const Context& ctx_;
  std::vector<KernelEntry> table_;                  // per node id; empty for leaves
  std::vector<std::unique_ptr<WeightPack>> packs_;  // per node id; see has_packable_weight
};

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const CpuOptions& o)
      : cache_(o.dequant_cache_bytes),
        ctx_{&cache_, o.ggml_numerics, o.regroup_weights,
             o.matmul_precision == MatmulPrecision::bf16} {}
  std::string name() const override { return "cpu"; }
  Support supports(const Node& n) const override {
    if (is_leaf(n.op) || n.op == Op::Result || is_control(n.op) || kernel_for(n.op).fn)
      return Support::yes();
    return Support::no("no CPU kernel");
  }
  std::unique_ptr<CompiledGraph> compile(const Graph& g) const override {
    return std::make_unique<CpuGraph>(g, ctx_);
  }
  void run_node(const Node& n, std::span<const Tensor> in, std::span<Tensor> out) const override {
    call_kernel(checked_kernel(n), ctx_, n, in, out);
  }
  const quant::DequantCache& cache() const { return cache_; }

 private:
  mutable quant::DequantCache cache_;  // synchronized internally
  Context ctx_;
};

}  // namespace

const quant::DequantCache* dequant_cache_of(const Backend& b) {
  auto* cpu = dynamic_cast<const CpuBackend*>(&b);
  return cpu ? &cpu->cache() : nullptr;
}

}  // namespace rlx::cpu

namespace rlx {
std::shared_ptr<const Backend> make_cpu_backend(const CpuOptions& options) {
  return std::make_shared<cpu::CpuBackend>(options);
}

const char* matmul_precision_name(MatmulPrecision p) {
  return p == MatmulPrecision::bf16 ? "bf16" : "f32";
}

MatmulPrecision parse_matmul_precision(const std::string& name) {
  for (MatmulPrecision p : {MatmulPrecision::f32, MatmulPrecision::bf16})
    if (name == matmul_precision_name(p)) return p;
  throw make_error("matmul precision '", name, "' is not one of f32, bf16");
}
}  // namespace rlx
