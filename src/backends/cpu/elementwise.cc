// Dtype-agnostic element-wise kernels: logical ops, where and cast. These
// take every dtype directly (f16/bf16 included), so they work on raw bits.
// Unary math lives in unary.cc, arithmetic and comparisons in binary.cc.
#include <cstring>
#include <vector>

#include "backends/cpu/ew_util.h"
#include "backends/cpu/half_rows.h"
#include "backends/cpu/kernels.h"

namespace rlx::cpu {
namespace {

// Truthiness of element i ("!= 0"; NaN is true, -0.0 is false), 0 or 1.
std::vector<uint8_t> truth_values(const Tensor& t) {
  std::vector<uint8_t> out(size_t(t.numel()));
  const int64_t n = t.numel();
  auto fill = [&]<typename S>(auto pred) {
    const S* p = static_cast<const S*>(t.raw());
    parallel_for(n, kGrainCheap, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) out[size_t(i)] = pred(p[i]);
    });
  };
  auto nz = [](auto v) -> uint8_t { return v != 0; };
  switch (t.dtype()) {
    case DType::F16:
    case DType::BF16:  // any bit but the sign set: non-zero (NaN included)
      fill.operator()<uint16_t>([](uint16_t v) -> uint8_t { return (v & 0x7fff) != 0; });
      break;
    case DType::F32:
      fill.operator()<float>(nz);
      break;
    case DType::F64:
      fill.operator()<double>(nz);
      break;
    case DType::I8:
      fill.operator()<int8_t>(nz);
      break;
    case DType::I16:
      fill.operator()<int16_t>(nz);
      break;
    case DType::I32:
      fill.operator()<int32_t>(nz);
      break;
    case DType::I64:
      fill.operator()<int64_t>(nz);
      break;
    case DType::U8:
    case DType::Bool:
      fill.operator()<uint8_t>(nz);
      break;
  }
  return out;
}

template <typename T, typename F>
void map_same(const Tensor& in, Tensor& out, F f) {
  const T* x = static_cast<const T*>(in.raw());
  T* y = static_cast<T*>(out.raw());
  parallel_for(out.numel(), kGrainCheap, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = f(x[i]);
  });
}

void bitwise_not(const KernelCall& c) {
  const Tensor& x = c.in[0];
  auto inv = [](auto v) { return decltype(v)(~v); };
  switch (x.dtype()) {
    case DType::Bool:
      return map_same<uint8_t>(x, c.out, [](uint8_t v) { return uint8_t(!v); });
    case DType::I8:
      return map_same<int8_t>(x, c.out, inv);
    case DType::I16:
      return map_same<int16_t>(x, c.out, inv);
    case DType::I32:
      return map_same<int32_t>(x, c.out, inv);
    case DType::I64:
      return map_same<int64_t>(x, c.out, inv);
    case DType::U8:
      return map_same<uint8_t>(x, c.out, inv);
    default:
      break;
  }
  throw make_error(c.node.label(), ": bitwise_not needs an integer or bool input, got ",
                   dtype_name(x.dtype()));
}

// Copies elements of `bytes` size by their bit pattern, so where() serves
// every dtype with four instantiations.
template <typename U>
void where_bits(const KernelCall& c, const Broadcast<3>& bc) {
  const auto* cond = static_cast<const uint8_t*>(c.in[0].raw());
  const U* a = static_cast<const U*>(c.in[1].raw());
  const U* b = static_cast<const U*>(c.in[2].raw());
  U* o = static_cast<U*>(c.out.raw());
  const int64_t sc = bc.inner_stride(0), sa = bc.inner_stride(1), sb = bc.inner_stride(2);
  bc.parallel_runs(kGrainCheap, [&](const std::array<int64_t, 3>& off, int64_t pos, int64_t len) {
    const uint8_t* pc = cond + off[0];
    const U* pa = a + off[1];
    const U* pb = b + off[2];
    U* po = o + pos;
    if (sc && sa && sb) {
      for (int64_t i = 0; i < len; ++i) po[i] = pc[i] ? pa[i] : pb[i];
    } else {
      for (int64_t i = 0; i < len; ++i) po[i] = pc[i * sc] ? pa[i * sa] : pb[i * sb];
    }
  });
}

bool* bool_out(const KernelCall& c) {
  RLX_CHECK(c.out.dtype() == DType::Bool, c.node.label(), ": output must be bool");
  return c.out.data<bool>();
}

void logical_not(const KernelCall& c) {
  bool* o = bool_out(c);
  std::vector<uint8_t> x = truth_values(c.in[0]);
  parallel_for(c.out.numel(), kGrainCheap, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) o[i] = !x[size_t(i)];
  });
}

void logical_and_or(const KernelCall& c, bool is_and) {
  bool* o = bool_out(c);
  const std::vector<uint8_t> a = truth_values(c.in[0]), b = truth_values(c.in[1]);
  const Broadcast<2> bc(c.out.dims(), {&c.in[0].dims(), &c.in[1].dims()}, c.node);
  const int64_t sa = bc.inner_stride(0), sb = bc.inner_stride(1);
  bc.parallel_runs(kGrainCheap, [&](const std::array<int64_t, 2>& off, int64_t pos, int64_t len) {
    const uint8_t* pa = a.data() + off[0];
    const uint8_t* pb = b.data() + off[1];
    if (is_and) {
      for (int64_t i = 0; i < len; ++i) o[pos + i] = pa[i * sa] & pb[i * sb];
    } else {
      for (int64_t i = 0; i < len; ++i) o[pos + i] = pa[i * sa] | pb[i * sb];
    }
  });
}

}  // namespace

void logical(const KernelCall& c) {
  switch (family_op<LogicalOp>(c.node.op)) {
    case LogicalOp::LogicalNot:
      return logical_not(c);
    case LogicalOp::BitwiseNot:
      return bitwise_not(c);
    case LogicalOp::LogicalAnd:
      return logical_and_or(c, true);
    case LogicalOp::LogicalOr:
      return logical_and_or(c, false);
  }
}

void where(const KernelCall& c) {
  const Node& n = c.node;
  RLX_CHECK(c.in[0].dtype() == DType::Bool, n.label(), ": condition must be bool, got ",
            dtype_name(c.in[0].dtype()));
  RLX_CHECK(c.in[1].dtype() == c.in[2].dtype() && c.out.dtype() == c.in[1].dtype(), n.label(),
            ": value dtypes differ: ", c.in[1].shape().str(), " vs ", c.in[2].shape().str());
  const Broadcast<3> bc(c.out.dims(), {&c.in[0].dims(), &c.in[1].dims(), &c.in[2].dims()}, n);
  switch (dtype_size(c.out.dtype())) {
    case 1:
      return where_bits<uint8_t>(c, bc);
    case 2:
      return where_bits<uint16_t>(c, bc);
    case 4:
      return where_bits<uint32_t>(c, bc);
    case 8:
      return where_bits<uint64_t>(c, bc);
  }
  throw make_error(n.label(), ": unsupported element size");
}

void cast(const KernelCall& c) {
  const Tensor& x = c.in[0];
  RLX_CHECK(x.numel() == c.out.numel(), c.node.label(), ": ", x.shape().str(), " cast to ",
            c.out.shape().str());
  const size_t si = dtype_size(x.dtype()), so = dtype_size(c.out.dtype());
  const auto* src = static_cast<const std::byte*>(x.raw());
  auto* dst = static_cast<std::byte*>(c.out.raw());
  parallel_for(x.numel(), kGrainCheap, [&](int64_t b, int64_t e) {
    if (x.dtype() == c.out.dtype())
      std::memcpy(dst + size_t(b) * so, src + size_t(b) * si, size_t(e - b) * si);
    else if (x.dtype() == DType::F32 && c.out.dtype() == DType::F16)  // an f16 KV cache's writes
      f32_to_f16_run(x.data<float>() + b, c.out.data<uint16_t>() + b, e - b);
    else if (x.dtype() == DType::F16 && c.out.dtype() == DType::F32)
      f16_to_f32_run(x.data<uint16_t>() + b, c.out.data<float>() + b, e - b);
    else
      cast_elements(src + size_t(b) * si, x.dtype(), dst + size_t(b) * so, c.out.dtype(), e - b);
  });
}

}  // namespace rlx::cpu
