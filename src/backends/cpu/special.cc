// special_unary and special_binary: the scalar functions of special_math.h per
// element, in double (f16/bf16 arrive widened to f32), binary with NumPy
// broadcasting. Each element costs tens to hundreds of flops, so the grain is
// the heavy one.
#include <cmath>

#include "backends/cpu/ew_util.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/special_math.h"

namespace rlx::cpu {

namespace {

template <typename T>
void special_typed(const KernelCall& c) {
  T* o = c.out.data<T>();
  if (c.node.op == Op::SpecialUnary) {
    const SpecialFn fn = c.node.attrs_as<SpecialUnaryAttrs>().fn;
    const T* x = c.in[0].data<T>();
    parallel_for(c.out.numel(), kGrainHeavy / 16, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) o[i] = T(special_unary_value(fn, double(x[i])));
    });
    return;
  }
  const SpecialFn2 fn = c.node.attrs_as<SpecialBinaryAttrs>().fn;
  const Broadcast<2> bc(c.out.dims(), {&c.in[0].dims(), &c.in[1].dims()}, c.node);
  const T* a = c.in[0].data<T>();
  const T* b = c.in[1].data<T>();
  const int64_t sa = bc.inner_stride(0), sb = bc.inner_stride(1);
  if (fn == SpecialFn2::nextafter) {  // in T itself: a double's neighbour rounds back to a
    bc.parallel_runs(kGrainCheap, [&](const std::array<int64_t, 2>& off, int64_t pos, int64_t len) {
      for (int64_t j = 0; j < len; ++j)
        o[pos + j] = std::nextafter(a[off[0] + j * sa], b[off[1] + j * sb]);
    });
    return;
  }
  bc.parallel_runs(
      kGrainHeavy / 16, [&](const std::array<int64_t, 2>& off, int64_t pos, int64_t len) {
        for (int64_t j = 0; j < len; ++j)
          o[pos + j] =
              T(special_binary_value(fn, double(a[off[0] + j * sa]), double(b[off[1] + j * sb])));
      });
}

}  // namespace

void special(const KernelCall& c) {
  const DType t = c.in[0].dtype();
  for (const Tensor& in : c.in)
    RLX_CHECK(in.dtype() == DType::F32 || in.dtype() == DType::F64, c.node.label(),
              ": special functions take float inputs, got ", in.shape().str());
  if (c.out.numel() == 0) return;
  if (t == DType::F64)
    special_typed<double>(c);
  else
    special_typed<float>(c);
}

}  // namespace rlx::cpu
