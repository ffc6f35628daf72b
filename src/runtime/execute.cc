#include "runtime/execute.h"

#include <map>
#include <vector>

#include "backends/cpu/kernel.h"
#include "rlx/error.h"

namespace rlx::runtime {
namespace {
bool is_low_precision(DType t) { return t == DType::F16 || t == DType::BF16; }
}  // namespace

void execute_node(const Node& n, std::span<const Tensor> in, Tensor& out) {
  cpu::KernelEntry k = cpu::kernel_for(n.op);
  RLX_CHECK(k.fn, n.label(), ": the CPU backend has no kernel for '", op_name(n.op), "'");
  bool upcast = !k.all_dtypes && is_low_precision(out.dtype());
  for (const Tensor& t : in) upcast = upcast || (!k.all_dtypes && is_low_precision(t.dtype()));
  if (!upcast) {
    cpu::KernelCall call{n, in, out};
    k.fn(call);
    return;
  }
  std::vector<Tensor> wide;
  for (const Tensor& t : in) wide.push_back(is_low_precision(t.dtype()) ? t.to(DType::F32) : t);
  Tensor wide_out(out.dims(), is_low_precision(out.dtype()) ? DType::F32 : out.dtype());
  cpu::KernelCall call{n, wide, wide_out};
  k.fn(call);
  cast_elements(wide_out.raw(), wide_out.dtype(), out.raw(), out.dtype(), out.numel());
}

Tensor evaluate_node(const Node& n, std::span<const Tensor> in, const Dims& out_dims) {
  Tensor out(out_dims, n.shape.dtype);
  execute_node(n, in, out);
  return out;
}

std::string unsupported_ops(const Graph& g) {
  std::map<std::string, int> missing;
  for (const Node& n : g.nodes())
    if (!is_leaf(n.op) && !cpu::kernel_for(n.op).fn) ++missing[op_name(n.op)];
  if (missing.empty()) return {};
  std::string s = "the CPU backend cannot run " + std::to_string(missing.size()) + " op kind(s): ";
  bool first = true;
  for (const auto& [name, count] : missing) {
    s += (first ? "" : ", ") + name + " (x" + std::to_string(count) + ")";
    first = false;
  }
  return s;
}

}  // namespace rlx::runtime
