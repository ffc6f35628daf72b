// ONNX ops without an rlx op of their own, composed from rlx ops: BitShift (uint8), Hardmax,
// LRN, MaxUnpool, MeanVarianceNormalization (as its ONNX function body), ReverseSequence, the
// window functions (values computed at import for the size given), the linear quantization ops
// (QuantizeLinear / DequantizeLinear / DynamicQuantizeLinear: round half to even, saturate) and
// the integer ones (MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv: the 8-bit values
// centred in f64, where their products sum exactly, then requantized).
#include <cmath>
#include <numbers>

#include "frontends/onnx/context.h"
#include "rlx/checked.h"
#include "rlx/error.h"

namespace rlx::onnx {
namespace {

// x's dim `axis` as a [1, .., n, .., 1] tensor of 0 .. n - 1 (i64).
NodeId positions(Ctx& c, int rank, int64_t axis, int64_t n) {
  Dims d(size_t(rank), 1);
  d[size_t(axis)] = n;
  return c.b().reshape(c.b().arange(n), d);
}

// Hardmax: 1 at the first maximum along axis, 0 elsewhere (opset 13; before it, the input is
// coerced to 2-d at axis, default 1, like Softmax).
std::vector<Val> lower_hardmax(Ctx& c) {
  const Shape xs = c.shape(0);
  NodeId x = c.in(0);
  int64_t axis = c.i("axis", c.opset >= 13 ? -1 : 1);
  axis = norm_axis(axis, xs.rank(), "Hardmax");
  RLX_CHECK(xs.is_static(), "Hardmax needs a static shape, got ", xs.str());
  const Dims d = xs.concrete();
  if (c.opset < 13) {
    int64_t lead = 1;
    for (int64_t k = 0; k < axis; ++k) lead *= d[size_t(k)];
    x = c.b().reshape(x, {lead, xs.numel() / std::max<int64_t>(lead, 1)});
    axis = 1;
  }
  const int rank = c.shape_of(x).rank();
  const int64_t n = c.shape_of(x).concrete()[size_t(axis)];
  const NodeId at = c.b().op(Op::ArgMax, {x}, {{"axis", axis}, {"keepdims", int64_t(1)}});
  NodeId y = c.cast(c.b().op(Op::Eq, {positions(c, rank, axis, n), at}), xs.dtype);
  if (c.opset < 13) y = c.b().reshape(y, d);
  return one(y);
}

// LRN over channels: x / (bias + alpha / size * sum of x^2 over the window)^beta, the window
// [c - floor((size - 1) / 2), c + ceil((size - 1) / 2)].
std::vector<Val> lower_lrn(Ctx& c) {
  const Shape xs = c.shape(0);
  RLX_CHECK(xs.rank() >= 3 && xs.dims[1].is_static(), "LRN needs [N, C, ...] with a static C, got ",
            xs.str());
  const int64_t size = c.i("size"), C = xs.dims[1].value;
  RLX_CHECK(size >= 1 && size <= 1024, "LRN size ", size, " out of range");
  const DType t = xs.dtype;
  auto& b = c.b();
  const NodeId x = c.in(0);
  std::vector<int64_t> pads(size_t(2 * xs.rank()), 0);
  pads[1] = (size - 1) / 2;
  pads[size_t(xs.rank()) + 1] = size / 2;
  const NodeId sq = b.op(Op::Pad, {b.mul(x, x)}, {{"pads", pads}});
  NodeId sum = -1;
  for (int64_t k = 0; k < size; ++k) {
    const NodeId part = b.op(Op::Slice, {sq}, {{"axis", int64_t(1)}, {"start", k}, {"end", k + C}});
    sum = sum < 0 ? part : b.add(sum, part);
  }
  const NodeId base = b.add(c.scalar_const(c.f("bias", 1.0), t),
                            b.mul(c.scalar_const(c.f("alpha", 1e-4) / double(size), t), sum));
  return one(b.div(x, b.binary(Op::Pow, base, c.scalar_const(c.f("beta", 0.75), t))));
}

// MeanVarianceNormalization: (x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9) over `axes`.
std::vector<Val> lower_mvn(Ctx& c) {
  const DType t = c.shape(0).dtype;
  auto& b = c.b();
  const NodeId x = c.in(0);
  const Dims axes = c.ints_attr("axes", {0, 2, 3});
  const NodeId mean = b.reduce(Op::ReduceMean, x, axes, true);
  const NodeId var = b.sub(b.reduce(Op::ReduceMean, b.mul(x, x), axes, true), b.mul(mean, mean));
  return one(b.div(b.sub(x, mean), b.add(b.unary(Op::Sqrt, var), c.scalar_const(1e-9, t))));
}

// ReverseSequence: the first sequence_lens[b] steps of batch b reversed along time_axis.
std::vector<Val> lower_reverse_sequence(Ctx& c) {
  const Shape xs = c.shape(0);
  RLX_CHECK(xs.is_static() && xs.rank() >= 2, "ReverseSequence needs a static shape, got ",
            xs.str());
  const Dims d = xs.concrete();
  const int64_t ta = norm_axis(c.i("time_axis", 0), xs.rank(), "ReverseSequence");
  const int64_t ba = norm_axis(c.i("batch_axis", 1), xs.rank(), "ReverseSequence");
  RLX_CHECK(ta != ba && ta <= 1 && ba <= 1,
            "ReverseSequence: time_axis and batch_axis must be 0 "
            "and 1 in some order");
  auto& b = c.b();
  Dims ld(d.size(), 1);
  ld[size_t(ba)] = d[size_t(ba)];
  const NodeId len = b.reshape(c.cast(c.in(1), DType::I64), ld);
  const NodeId t = positions(c, xs.rank(), ta, d[size_t(ta)]);
  const NodeId back = b.sub(b.sub(len, c.scalar_const(1, DType::I64)), t);
  NodeId idx = b.op(Op::Where, {b.op(Op::Lt, {t, len}), back, t});
  idx = b.op(Op::Expand, {idx}, {{"shape", d}});
  return one(b.op(Op::GatherElements, {c.in(0), idx}, {{"axis", ta}}));
}

// The window functions: size known at import, periodic (divide by size) or symmetric (size - 1).
std::vector<Val> lower_window(Ctx& c, const std::vector<double>& coef) {
  const auto size = c.scalar_int(0, "size");
  RLX_CHECK(size, "the window size must be known at import");
  RLX_CHECK(*size >= 0 && *size <= (int64_t(1) << 20), "window size ", *size, " out of range");
  const auto t = dtype_of(int32_t(c.i("output_datatype", 1)));
  RLX_CHECK(t && is_float(*t), "window output_datatype must be a float type");
  const double denom = double(c.i("periodic", 1) != 0 ? *size : *size - 1);
  std::vector<double> w(static_cast<size_t>(*size));
  for (int64_t n = 0; n < *size; ++n) {
    double v = 0;
    for (size_t k = 0; k < coef.size(); ++k)
      v += coef[k] * std::cos(2 * std::numbers::pi * double(k) * double(n) / denom);
    w[size_t(n)] = v;
  }
  return one(c.constant(Tensor::from_vector({*size}, w, *t)));
}

Dims column(int64_t rank, int64_t axis) {  // [1, .., -1 at axis, .., 1]
  RLX_CHECK(axis >= 0 && axis < rank, "expected an input with a dim ", axis, ", got rank ", rank);
  Dims d(size_t(rank), 1);
  d[size_t(axis)] = -1;
  return d;
}

// The quantization ops' per-axis parameter: a scalar, or a 1-d [x.shape[axis]] as
// [1, .., n, .., 1].
NodeId per_axis(Ctx& c, NodeId p, const Shape& xs) {
  const Shape ps = c.shape_of(p);
  if (ps.rank() == 0 || (ps.rank() == 1 && ps.dims[0] == Dim(1) && xs.rank() != 1)) return p;
  RLX_CHECK(ps.rank() == 1, "scale / zero point must be a scalar or 1-d, got ", ps.str());
  return c.b().reshape(
      p, column(xs.rank(), norm_axis(c.i("axis", 1), xs.rank(), "quantization axis")));
}

// saturate(round_half_even(x / scale) + zero_point) in t's range, as t.
NodeId quantize(Ctx& c, NodeId x, NodeId scale, NodeId zp, DType t) {
  RLX_CHECK(t == DType::U8 || t == DType::I8, "quantize to ", dtype_name(t),
            ": only uint8 and int8");
  const DType f = c.shape_of(x).dtype;
  auto& b = c.b();
  NodeId q = b.unary(Op::Round, b.div(x, c.cast(scale, f)));
  q = b.add(q, c.cast(zp, f));
  const double lo = t == DType::U8 ? 0 : -128, hi = t == DType::U8 ? 255 : 127;
  q = b.op(Op::Clamp, {q}, {{"min", lo}, {"max", hi}});
  return c.cast(q, t);
}

std::vector<Val> lower_quantize(Ctx& c) {
  const Shape xs = c.shape(0);
  const NodeId scale = per_axis(c, c.in(1), xs);
  const NodeId zp = c.has(2) ? per_axis(c, c.in(2), xs) : c.b().full({}, 0, DType::U8);
  return one(quantize(c, c.in(0), scale, zp, c.shape_of(zp).dtype));
}

std::vector<Val> lower_dequantize(Ctx& c) {
  const Shape xs = c.shape(0);
  const NodeId scale = per_axis(c, c.in(1), xs);
  const DType f = c.shape_of(scale).dtype;
  NodeId x = c.cast(c.in(0), f);
  if (c.has(2)) x = c.b().sub(x, c.cast(per_axis(c, c.in(2), xs), f));
  return one(c.b().mul(x, scale));
}

// DynamicQuantizeLinear: uint8 over [min(0, min x), max(0, max x)] -> (y, scale, zero_point).
std::vector<Val> lower_dynamic_quantize(Ctx& c) {
  const NodeId x = c.in(0);
  const DType f = c.shape_of(x).dtype;
  auto& b = c.b();
  const NodeId zero = c.scalar_const(0, f);
  const NodeId lo = b.binary(Op::Min, b.reduce(Op::ReduceMin, x, {}, false), zero);
  const NodeId hi = b.binary(Op::Max, b.reduce(Op::ReduceMax, x, {}, false), zero);
  const NodeId scale = b.div(b.sub(hi, lo), c.scalar_const(255, f));
  NodeId zp = b.unary(Op::Round, b.div(b.sub(zero, lo), scale));
  zp = c.cast(b.op(Op::Clamp, {zp}, {{"min", 0.0}, {"max", 255.0}}), DType::U8);
  return {node_val(quantize(c, x, scale, zp, DType::U8)), node_val(scale), node_val(zp)};
}

// x - zero_point in f64 (exact for 8-bit values and their products' sums); a 1-d zero point is
// reshaped to zp_shape (per row of MatMulInteger's A, per output channel of a conv weight).
NodeId centered(Ctx& c, NodeId x, NodeId zp, const Dims& zp_shape) {
  NodeId v = c.cast(x, DType::F64);
  if (zp < 0) return v;
  NodeId z = c.cast(zp, DType::F64);
  if (c.shape_of(z).rank() == 1 && !zp_shape.empty()) z = c.b().reshape(z, zp_shape);
  return c.b().sub(v, z);
}

NodeId opt_in(Ctx& c, size_t i) { return c.has(i) ? c.in(i) : -1; }

// MatMulInteger(A, B, a_zero_point, b_zero_point) -> i32 (A - a_zp) (B - b_zp); a_zp per row
// of A, b_zp per column of B.
std::vector<Val> lower_matmul_integer(Ctx& c) {
  const int64_t ra = c.shape(0).rank();
  const NodeId a = centered(c, c.in(0), opt_in(c, 2), ra >= 2 ? column(ra, ra - 2) : Dims{});
  const NodeId b = centered(c, c.in(1), opt_in(c, 3), {});
  return one(c.cast(c.b().matmul(a, b), DType::I32));
}

// ConvInteger(x, w, x_zero_point, w_zero_point) -> i32 conv(x - x_zp, w - w_zp); w_zp per
// output channel.
std::vector<Val> lower_conv_integer(Ctx& c) {
  const NodeId x = centered(c, c.in(0), opt_in(c, 2), {});
  const NodeId w = centered(c, c.in(1), opt_in(c, 3), column(c.shape(1).rank(), 0));
  return one(c.cast(conv_node(c, x, w, -1), DType::I32));
}

// QLinearMatMul(a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp): the integer product scaled
// by a_scale b_scale / y_scale, requantized.
std::vector<Val> lower_qlinear_matmul(Ctx& c) {
  const int64_t ra = c.shape(0).rank();
  const NodeId a = centered(c, c.in(0), c.in(2), ra >= 2 ? column(ra, ra - 2) : Dims{});
  const NodeId b = centered(c, c.in(3), c.in(5), {});
  const NodeId as = c.cast(c.in(1), DType::F64), bs = c.cast(c.in(4), DType::F64);
  const NodeId as_rows =
      c.shape_of(as).rank() == 1 && ra >= 2 ? c.b().reshape(as, column(ra, ra - 2)) : as;
  const NodeId acc = c.b().mul(c.b().mul(c.b().matmul(a, b), as_rows), bs);
  const NodeId zp = c.in(7);
  return one(quantize(c, acc, c.cast(c.in(6), DType::F64), zp, c.shape_of(zp).dtype));
}

// QLinearConv(x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, B): the integer conv plus the
// i32 bias, scaled by x_scale w_scale (w_scale per output channel) / y_scale, requantized.
std::vector<Val> lower_qlinear_conv(Ctx& c) {
  const int64_t rank = c.shape(3).rank();
  const NodeId x = centered(c, c.in(0), c.in(2), {});
  const NodeId w = centered(c, c.in(3), c.in(5), column(rank, 0));
  NodeId acc = conv_node(c, x, w, c.has(8) ? c.cast(c.in(8), DType::F64) : -1);
  NodeId ws = c.cast(c.in(4), DType::F64);
  if (c.shape_of(ws).rank() == 1) ws = c.b().reshape(ws, column(rank, 1));
  acc = c.b().mul(c.b().mul(acc, c.cast(c.in(1), DType::F64)), ws);
  const NodeId zp = c.in(7);
  return one(quantize(c, acc, c.cast(c.in(6), DType::F64), zp, c.shape_of(zp).dtype));
}

// MaxUnpool(X, I, output_shape): X's values at I's flat indices (as MaxPool's Indices give them)
// in zeros of the unpooled shape ((in - 1) stride + kernel - pads per spatial dim), then zeros
// appended to reach output_shape when it is given, as ONNX's reference does.
std::vector<Val> lower_max_unpool(Ctx& c) {
  const Shape xs = c.shape(0);
  RLX_CHECK(xs.is_static() && xs.rank() >= 3, "MaxUnpool needs a static [N, C, ...] input, got ",
            xs.str());
  const Dims d = xs.concrete();
  const size_t sp = d.size() - 2;
  const Dims kernel = c.window_attr("kernel_shape", sp, 1, 1);
  const Dims stride = c.window_attr("strides", sp, 1, 1),
             pads = c.window_attr("pads", 2 * sp, 0, 0);
  Dims out{d[0], d[1]};
  for (size_t k = 0; k < sp; ++k)
    out.push_back((d[2 + k] - 1) * stride[k] + kernel[k] - pads[k] - pads[k + sp]);
  const int64_t n = checked_numel(out, "MaxUnpool output");
  auto& b = c.b();
  const NodeId idx = b.reshape(c.cast(c.in(1), DType::I64), {-1});
  NodeId y =
      b.reshape(b.op(Op::ScatterElements, {b.full({n}, 0, xs.dtype), idx, b.reshape(c.in(0), {-1})},
                     {{"axis", int64_t(0)}}),
                out);
  if (c.has(2)) {
    const Dims want = c.static_ints(2, "output_shape");
    RLX_CHECK(want.size() == out.size() && want[0] == out[0] && want[1] == out[1],
              "MaxUnpool output_shape ", dims_str(want), " for ", xs.str());
    std::vector<int64_t> grow(2 * out.size(), 0);
    for (size_t k = 2; k < out.size(); ++k) {
      RLX_CHECK(want[k] >= out[k], "MaxUnpool output_shape ", dims_str(want), " is smaller than ",
                dims_str(out));
      grow[out.size() + k] = want[k] - out[k];
    }
    if (want != out) y = b.op(Op::Pad, {y}, {{"pads", grow}});
  }
  return one(y);
}

// BitShift of uint8 (rlx's one unsigned dtype): x * 2^y mod 256 (LEFT) or floor(x / 2^y)
// (RIGHT) in i64, with shifts past 8 bits clamped to 8 (both give 0 there).
std::vector<Val> lower_bit_shift(Ctx& c) {
  const DType t = c.shape(0).dtype;
  RLX_CHECK(t == DType::U8 && c.shape(1).dtype == DType::U8, "BitShift of ", c.shape(0).str(),
            " by ", c.shape(1).str(), ": rlx shifts uint8 only");
  const std::string dir = c.s("direction", "");
  RLX_CHECK(dir == "LEFT" || dir == "RIGHT", "BitShift direction '", dir, "'");
  auto& b = c.b();
  auto i64 = [&](double v) { return c.scalar_const(v, DType::I64); };
  const NodeId x = c.cast(c.in(0), DType::I64);
  const NodeId y = b.binary(Op::Min, c.cast(c.in(1), DType::I64), i64(8));
  const NodeId p =
      c.cast(b.binary(Op::Pow, c.scalar_const(2, DType::F64), c.cast(y, DType::F64)), DType::I64);
  const NodeId r = dir == "LEFT" ? b.binary(Op::Mod, b.mul(x, p), i64(256))
                                 : b.op(Op::Div, {x, p}, {{"rounding", std::string("floor")}});
  return one(c.cast(r, t));
}

}  // namespace

void register_composed(Registry& r) {
  r.add("BitShift", lower_bit_shift);
  r.add("MaxUnpool", lower_max_unpool);
  r.add("MatMulInteger", lower_matmul_integer);
  r.add("ConvInteger", lower_conv_integer);
  r.add("QLinearMatMul", lower_qlinear_matmul);
  r.add("QLinearConv", lower_qlinear_conv);
  r.add("Hardmax", lower_hardmax);
  r.add("LRN", lower_lrn);
  r.add("MeanVarianceNormalization", lower_mvn);
  r.add("ReverseSequence", lower_reverse_sequence);
  r.add("HannWindow", [](Ctx& c) { return lower_window(c, {0.5, -0.5}); });
  r.add("HammingWindow", [](Ctx& c) { return lower_window(c, {25.0 / 46, -21.0 / 46}); });
  r.add("BlackmanWindow", [](Ctx& c) { return lower_window(c, {0.42, -0.5, 0.08}); });
  r.add("QuantizeLinear", lower_quantize);
  r.add("DequantizeLinear", lower_dequantize);
  r.add("DynamicQuantizeLinear", lower_dynamic_quantize);
}

}  // namespace rlx::onnx
