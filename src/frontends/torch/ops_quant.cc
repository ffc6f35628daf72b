// PyTorch's fake quantization onto fake_quantize (quantization-aware training graphs):
// fake_quantize_per_tensor_affine / per_channel_affine, the *_cachemask forms make_fx records
// (output, mask) and the learnable (LSQ) forms. PyTorch's affine grid [quant_min, quant_max] with
// a zero point maps onto fake_quantize's quant_min/quant_max attributes and zero_point input;
// bits is the smallest of 2, 4, 8 that holds the range.
#include "frontends/torch/lowering.h"
#include "rlx/error.h"

namespace rlx::torch_ir {
namespace {

int64_t bits_for(int64_t qmin, int64_t qmax) {
  RLX_CHECK(qmin < qmax, "fake quantize: quant_min (", qmin, ") must be below quant_max (", qmax,
            ")");
  const int64_t n = qmax - qmin + 1;
  for (int64_t b : {2, 4, 8})
    if (n <= (int64_t(1) << b)) return b;
  throw make_error("fake quantize: [", qmin, ", ", qmax, "] has ", n,
                   " values; rlx's fake_quantize holds at most 256 (8 bits)");
}

// A tensor-or-number qparam as a [1] (per tensor) or [C] tensor of dtype t.
NodeId qparam(LowerCtx& c, size_t pos, const char* name, DType t) {
  const Value* v = c.arg(pos, name);
  RLX_CHECK(v, c.node.op, ": missing ", name);
  if (v->kind == Value::Tensor) return v->id;
  return c.b.full({1}, v->number(), t);
}

struct Spec {
  size_t scale_pos, zero_pos, qmin_pos, qmax_pos;
  std::optional<size_t> axis_pos, grad_factor_pos;
  bool learnable = false;
};

NodeId fake_quantize(LowerCtx& c, const Spec& s, NodeId* scale_out, NodeId* zero_out) {
  const NodeId x = c.tensor(0, "self");
  const DType xt = c.shape(x).dtype;
  const int64_t qmin = c.i(s.qmin_pos, "quant_min"), qmax = c.i(s.qmax_pos, "quant_max");
  NodeId scale = qparam(c, s.scale_pos, "scale", xt);
  if (c.shape(scale).dtype != xt) scale = c.cast(scale, xt);
  NodeId zero = qparam(c, s.zero_pos, "zero_point", DType::I64);
  if (s.learnable) {
    // PyTorch rounds a learnable (float) zero point and clamps it into the grid first.
    zero = c.cast(zero, xt);
    zero = c.b.op(Op::Clamp, {c.b.op(Op::Round, {zero})},
                  {{"min", double(qmin)}, {"max", double(qmax)}});
  }
  Attrs a{{"bits", bits_for(qmin, qmax)},
          {"scale", std::string("input")},
          {"ste", std::string(s.learnable ? "lsq" : "clipped")},
          {"quant_min", qmin},
          {"quant_max", qmax}};
  if (s.axis_pos) a.set("axis", c.i(*s.axis_pos, "axis"));
  if (s.grad_factor_pos) a.set("grad_factor", c.f(*s.grad_factor_pos, "grad_factor", 1.0));
  if (scale_out) *scale_out = scale;
  if (zero_out) *zero_out = zero;
  return c.b.op(Op::FakeQuantize, {x, scale, zero}, a);
}

// The *_cachemask forms' mask: quant_min <= round(x * (1/scale)) + zero_point <= quant_max,
// what their backward keeps (with the scale and zero point broadcast along `axis`).
NodeId cache_mask(LowerCtx& c, NodeId x, NodeId scale, NodeId zero, std::optional<int64_t> axis,
                  int64_t qmin, int64_t qmax) {
  const DType xt = c.shape(x).dtype;
  const int r = c.rank(x);
  auto bcast = [&](NodeId v) {
    if (!axis || c.shape(v).rank() == 0) return v;
    std::vector<int64_t> d(size_t(r), 1);
    d[size_t(normalize_axis(*axis, r))] = -1;
    return c.b.reshape(v, d);
  };
  NodeId q = c.b.op(Op::Round, {c.b.op(Op::Mul, {x, bcast(c.b.op(Op::Reciprocal, {scale}))})});
  q = c.b.op(Op::Add, {q, bcast(c.cast(zero, xt))});
  return c.b.op(Op::LogicalAnd, {c.b.op(Op::Ge, {q, c.scalar(double(qmin), xt)}),
                                 c.b.op(Op::Le, {q, c.scalar(double(qmax), xt)})});
}

// _fake_quantize_per_tensor_affine_cachemask_tensor_qparams takes a fake_quant_enabled tensor;
// only the constant 1 (what torch.fake_quantize_per_tensor_affine passes) is supported.
void check_enabled(LowerCtx& c, size_t pos) {
  const NodeId e = c.tensor(pos, "fake_quant_enabled");
  const rlx::Node& n = c.b.graph().node(e);
  RLX_CHECK(n.op == Op::Full && n.attrs_as<FullAttrs>().value == 1, c.node.op,
            ": fake_quant_enabled must be the constant 1 (a model switching fake quantization "
            "at run time is not supported)");
}

Value with_mask(LowerCtx& c, const Spec& s) {
  NodeId scale = -1, zero = -1;
  const NodeId y = fake_quantize(c, s, &scale, &zero);
  std::optional<int64_t> axis;
  if (s.axis_pos) axis = c.i(*s.axis_pos, "axis");
  const NodeId mask = cache_mask(c, c.tensor(0, "self"), scale, zero, axis,
                                 c.i(s.qmin_pos, "quant_min"), c.i(s.qmax_pos, "quant_max"));
  return Value::tuple({y, mask});
}

}  // namespace

void register_quant(Registry& r) {
  // (self, scale, zero_point, quant_min, quant_max): .default with numbers, .tensor_qparams
  // with tensors
  const Spec per_tensor{1, 2, 3, 4, {}, {}, false};
  const Spec per_channel{1, 2, 4, 5, 3, {}, false};
  r.add("aten.fake_quantize_per_tensor_affine",
        [=](LowerCtx& c) { return Value::tensor(fake_quantize(c, per_tensor, nullptr, nullptr)); });
  r.add("aten.fake_quantize_per_tensor_affine_cachemask",
        [=](LowerCtx& c) { return with_mask(c, per_tensor); });
  r.add("aten._fake_quantize_per_tensor_affine_cachemask_tensor_qparams", [](LowerCtx& c) {
    check_enabled(c, 3);
    return with_mask(c, Spec{1, 2, 4, 5, {}, {}, false});
  });
  // (self, scale, zero_point, axis, quant_min, quant_max)
  r.add("aten.fake_quantize_per_channel_affine", [=](LowerCtx& c) {
    return Value::tensor(fake_quantize(c, per_channel, nullptr, nullptr));
  });
  r.add("aten.fake_quantize_per_channel_affine_cachemask",
        [=](LowerCtx& c) { return with_mask(c, per_channel); });
  // LSQ: (self, scale, zero_point, [axis,] quant_min, quant_max, grad_factor=1)
  r.add("aten._fake_quantize_learnable_per_tensor_affine", [](LowerCtx& c) {
    return Value::tensor(fake_quantize(c, Spec{1, 2, 3, 4, {}, 5, true}, nullptr, nullptr));
  });
  r.add("aten._fake_quantize_learnable_per_channel_affine", [](LowerCtx& c) {
    return Value::tensor(fake_quantize(c, Spec{1, 2, 4, 5, 3, 6, true}, nullptr, nullptr));
  });
}

}  // namespace rlx::torch_ir
