// fake_quantize and fake_quantize_grad composed from primitive MIL ops, with the arithmetic of
// the CPU kernels (src/backends/cpu/fake_quantize.cc): the scale (max|x| / quant_max over the
// non-channel axes, or the scale input) floored at 1e-12 and broadcast along the channel axis,
// v = x * (1/s), q = round(v) + z (MIL round, half to even), clip to [quant_min, quant_max],
// y = (q - z) * s. The backward masks dy where q left the grid and (lsq) reduces the scale
// gradient over the non-channel axes.
#include <algorithm>
#include <cmath>

#include "lower.h"
#include "rlx/error.h"
#include "rlx/fake_quant.h"

namespace rlx::coreml {
namespace {

struct Grid {
  Val s, inv, z;  // broadcastable to x; z absent (empty name) without a zero point
  std::vector<int64_t> other_axes;  // every axis but the channel axis
  int64_t channel_axis = -1;        // -1 per tensor
  FakeQuantRange r;
};

bool has(const Val& v) { return !v.name.empty(); }

// The scale, its inverse and the zero point of node n as values broadcast against x.
// `first_param`: index of the scale input (1 forward, 2 backward).
Grid grid_of(Lowering& L, const Node& n, const Val& x, size_t first_param) {
  const auto& a = n.attrs_as<FakeQuantAttrs>();
  const std::string h = L.hint(n);
  Grid g;
  g.r = fake_quant_range(a);
  const int rank = x.type.rank();
  if (a.axis) g.channel_axis = normalize_axis(*a.axis, rank);
  for (int i = 0; i < rank; ++i)
    if (i != g.channel_axis) g.other_axes.push_back(i);
  // [1, .., C, .., 1] (or all ones per tensor): the shape a per-channel value broadcasts as
  std::vector<int64_t> bshape(size_t(rank), 1);
  if (g.channel_axis >= 0) bshape[size_t(g.channel_axis)] = -1;
  auto broadcastable = [&](const Val& v, const std::string& name) {
    if (rank == 0) return L.reshape(v, {}, name);
    if (v.type.rank() == 1 && v.type.dims[0] == 1)
      return L.reshape(v, std::vector<int64_t>(size_t(rank), 1), name);
    return L.reshape(v, bshape, name);
  };
  Val s;
  if (a.scale == FakeQuantScale::batch) {
    Val ax = L.unary("abs", x, h + "_abs");
    Val m = g.other_axes.empty() ? ax : L.reduce("reduce_max", ax, g.other_axes, true, h + "_amax");
    s = L.binary("real_div", m, L.scalar_like(double(g.r.qmax), x, h + "_qmax"), h + "_s0");
  } else {
    s = broadcastable(L.in(n, first_param), h + "_sb");
  }
  // 1e-12 is 0 in fp16, where 1/s must also stay finite: an fp16 program floors at 1/65504.
  const double floor_s = x.type.dt == pb::FLOAT16 ? 1.0 / 65504 : kFakeQuantMinScale;
  g.s = L.binary("maximum", s, L.scalar_like(floor_s, x, h + "_smin"), h + "_s");
  g.inv = L.binary("real_div", L.scalar_like(1, x, h + "_one"), g.s, h + "_inv");
  if (n.inputs.size() > first_param + 1) {
    Val z = L.in(n, first_param + 1);
    if (z.type.dt != x.type.dt) z = L.cast(z, x.type.dt, h + "_zc");
    g.z = broadcastable(z, h + "_zb");
  }
  return g;
}

// q = round(x * inv) + z, before clipping.
Val unclipped(Lowering& L, const Grid& g, const Val& x, const std::string& h) {
  Val q = L.unary("round", L.binary("mul", x, g.inv, h + "_v"), h + "_r");
  return has(g.z) ? L.binary("add", q, g.z, h + "_rz") : q;
}

// The weight fake_quantize reads, when the package stores it as real int8: a bound f32 param of
// static rank >= 1, the batch scale (so the integers follow from the weight alone), a grid inside
// int8, and CoreML6+ (constexpr_affine_dequantize). What the qat pass inserts, after training.
const Tensor* int8_weight(const Graph& g, const TensorMap& weights, const Node& n, int opset) {
  if (n.op != Op::FakeQuantize || opset < 6) return nullptr;
  const auto& a = n.attrs_as<FakeQuantAttrs>();
  const Node& w = g.node(n.inputs[0]);
  if (w.op != Op::Param || a.scale != FakeQuantScale::batch) return nullptr;
  const FakeQuantRange r = fake_quant_range(a);
  if (r.qmin < -128 || r.qmax > 127) return nullptr;
  auto it = weights.find(w.name);
  if (it == weights.end() || it->second.dtype() != DType::F32 || it->second.rank() == 0)
    return nullptr;
  return &it->second;
}

// fake_quantize(param) as int8 data and per-channel scales, with the CPU kernel's arithmetic
// (max|w| / qmax in f32, floored at 1e-12, q = clamp(round(w * (1/s)))), so q * s is the value
// the CPU computes, bit for bit in an fp32 program.
Val lower_int8_weight(Lowering& L, const Node& n, const Tensor& wt) {
  const auto& a = n.attrs_as<FakeQuantAttrs>();
  const FakeQuantRange r = fake_quant_range(a);
  const Tensor w = wt.contiguous();
  const float* x = w.data<float>();
  const int rank = w.rank();
  const int axis = a.axis ? normalize_axis(*a.axis, rank) : 0;
  int64_t inner = 1;
  const int64_t c = w.dim(axis);
  for (int i = axis + 1; i < rank; ++i) inner *= w.dim(i);
  std::vector<float> s(size_t(a.axis ? c : 1), 0.0f);
  auto channel = [&](int64_t i) { return a.axis ? size_t((i / inner) % c) : size_t(0); };
  for (int64_t i = 0; i < w.numel(); ++i)
    if (std::fabs(x[i]) > s[channel(i)]) s[channel(i)] = std::fabs(x[i]);
  for (float& v : s) v = std::max(v / float(r.qmax), float(kFakeQuantMinScale));
  std::vector<int8_t> q(size_t(w.numel()));
  for (int64_t i = 0; i < w.numel(); ++i) {
    const float v = std::nearbyint(x[i] * (1.0f / s[channel(i)]));
    q[size_t(i)] = int8_t(std::min(std::max(v, float(r.qmin)), float(r.qmax)));
  }
  if (!a.axis) s.assign(size_t(c), s[0]);  // per tensor: the one scale along axis 0
  return L.b.affine_dequantize(q, w.dims(), s, axis, L.type_of(n).dt, L.hint(n));
}

Val lower_fake_quantize(Lowering& L, const Node& n) {
  if (const Tensor* w = int8_weight(L.g, L.weights, n, L.opset()))
    return lower_int8_weight(L, n, *w);
  const Val& x = L.in(n, 0);
  const std::string h = L.hint(n);
  const Grid g = grid_of(L, n, x, 1);
  Val q = L.b.op("clip",
                 {{"x", unclipped(L, g, x, h)},
                  {"alpha", L.scalar_like(double(g.r.qmin), x, h + "_lo")},
                  {"beta", L.scalar_like(double(g.r.qmax), x, h + "_hi")}},
                 x.type, h + "_q");
  if (has(g.z)) q = L.binary("sub", q, g.z, h + "_qz");
  return L.b.op("mul", {{"x", q}, {"y", g.s}}, L.type_of(n), h);
}

std::vector<Val> lower_fake_quantize_grad(Lowering& L, const Node& n) {
  const auto& a = n.attrs_as<FakeQuantAttrs>();
  const Val &x = L.in(n, 0), &dy = L.in(n, 1);
  const std::string h = L.hint(n);
  const Grid g = grid_of(L, n, x, 2);
  const Val q = unclipped(L, g, x, h);
  const Val lo = L.scalar_like(double(g.r.qmin), x, h + "_lo");
  const Val hi = L.scalar_like(double(g.r.qmax), x, h + "_hi");
  const Type bt{pb::BOOL, x.type.dims};
  const Val below = L.b.op("less", {{"x", q}, {"y", lo}}, bt, h + "_below");
  const Val above = L.b.op("greater", {{"x", q}, {"y", hi}}, bt, h + "_above");
  const Val zero = L.scalar_like(0, x, h + "_zero");
  Val dx = dy;
  if (a.ste != FakeQuantSte::identity) {
    const Val out = L.b.op("logical_or", {{"x", below}, {"y", above}}, bt, h + "_out");
    dx = L.b.op("select", {{"cond", out}, {"a", zero}, {"b", dy}}, x.type, h + "_dxm");
  }
  dx = L.b.op("identity", {{"x", dx}}, L.type_of(n.results[0]), h + "_0");
  const Type st = L.type_of(n.results[1]);
  Val ds;
  if (a.ste == FakeQuantSte::lsq) {
    // (q - z) - v inside the grid, quant_min - z below it, quant_max - z above it
    Val inside = L.binary("sub", q, L.binary("mul", x, g.inv, h + "_v2"), h + "_in");
    Val lo_z = lo, hi_z = hi;
    if (has(g.z)) {
      inside = L.binary("sub", inside, g.z, h + "_inz");
      lo_z = L.binary("sub", lo, g.z, h + "_loz");
      hi_z = L.binary("sub", hi, g.z, h + "_hiz");
    }
    Val t = L.b.op("select", {{"cond", above}, {"a", hi_z}, {"b", inside}}, x.type, h + "_ta");
    t = L.b.op("select", {{"cond", below}, {"a", lo_z}, {"b", t}}, x.type, h + "_tb");
    Val p = L.binary("mul", dy, t, h + "_p");
    // reduce to the channel axis (or everything), then to scale's own shape
    std::vector<int64_t> axes = g.other_axes;
    if (st.numel() == 1 && g.channel_axis >= 0) axes.push_back(g.channel_axis);
    Val r = axes.empty() ? p : L.reduce("reduce_sum", p, axes, false, h + "_sum");
    r = L.reshape(r, st.dims, h + "_shp");
    ds = L.binary("mul", r, L.scalar_like(a.grad_factor, x, h + "_gf"), h + "_dsf");
  } else {
    Tensor zeros(Dims(st.dims.begin(), st.dims.end()), DType::F32);
    ds = L.b.constant(zeros, st.dt, h + "_dsz");
  }
  ds = L.b.op("identity", {{"x", ds}}, st, h + "_1");
  return {dx, ds};
}

}  // namespace

bool only_int8_weight_uses(const Graph& g, const TensorMap& weights, NodeId id, int opset) {
  bool any = false;
  for (const Node& n : g.nodes())
    for (NodeId in : n.inputs)
      if (in == id) {
        if (!int8_weight(g, weights, n, opset)) return false;
        any = true;
      }
  for (const auto& o : g.outputs())
    if (o.node == id) return false;
  return any;
}

void register_quant(LowerTable& t) {
  t.one[size_t(Op::FakeQuantize)] = lower_fake_quantize;
  t.many[size_t(Op::FakeQuantizeGrad)] = lower_fake_quantize_grad;
}

}  // namespace rlx::coreml
