// Lowerings for resize and the ggml-quantized ops (dequant_matmul, dequant_embedding).
//
// resize (static NCHW):
//   nearest / nearest_exact: two gathers (H, then W) with constant source indices computed
//     exactly as the CPU kernel (src/backends/cpu/resample.cc, PyTorch's float arithmetic), so
//     every output/input ratio is exact.
//   bilinear, align_corners=1: resize_bilinear STRICT_ALIGN_CORNERS (src = dst*(in-1)/(out-1));
//     an output extent of 1 samples (in-1)/2 there but 0 in PyTorch, so it is refused.
//   bilinear, align_corners=0: resize_bilinear UNALIGN_CORNERS (half-pixel centers, src clamped
//     at 0: PyTorch's map with scale in/out); with explicit `scales` PyTorch uses 1/scale, which
//     upsample_bilinear (align_corners=false) implements.
//   bicubic and antialias have no MIL op and are refused (documented gap).
// grid_sample (static shapes), composed: coordinates unnormalized as F.grid_sample, border
//   padding clips them; each tap's flat index y*W + x is gathered (gather_along_axis over the
//   [N, C, H*W] view) and weighted, with out-of-range taps masked to 0 (zeros padding). bilinear
//   takes 4 taps, nearest one (round half to even, like the CPU kernel). bicubic and reflection
//   padding are refused.
// dequant_*: the u8 weight must be a bound param; it is dequantized at export (quant::dequantize)
//   into an fp32/fp16 const and the op becomes linear (+bias) or gather.
#include <cmath>

#include "lower.h"
#include "rlx/error.h"
#include "rlx/quant.h"

namespace rlx::coreml {
namespace {

Val gather_const(Lowering& L, const Val& x, const std::vector<int64_t>& idx, int64_t axis,
                 const Type& t, const std::string& h) {
  std::vector<std::pair<std::string, Arg>> in{{"x", x},
                                              {"indices", L.b.ints(idx, h + "_idx")},
                                              {"axis", L.b.int_scalar(axis, h + "_axis")}};
  if (L.opset() >= 6) in.push_back({"batch_dims", L.b.int_scalar(0, h + "_bd")});
  if (L.opset() >= 7) in.push_back({"validate_indices", L.b.boolean(false, h + "_vi")});
  return L.b.op("gather", in, t, h);
}

// The CPU kernel's nearest source index (float arithmetic as PyTorch).
std::vector<int64_t> nearest_src(int64_t in, int64_t out, bool exact, double user_scale) {
  const float scale = user_scale > 0 ? float(1.0 / user_scale) : float(in) / float(out);
  std::vector<int64_t> r(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) {
    int64_t s;
    if (!exact)
      s = out == in ? o : out == 2 * in ? o >> 1 : int64_t(std::floor(float(o) * scale));
    else
      s = int64_t(std::floor(float((double(o) + 0.5) * double(scale))));
    r[size_t(o)] = std::min(s, in - 1);
  }
  return r;
}

Val lower_resize(Lowering& L, const Node& n) {
  const Val& x = L.in(n, 0);
  const std::string h = L.hint(n);
  const auto& a = n.attrs_as<ResizeAttrs>();
  const Type out = L.type_of(n);
  RLX_CHECK(x.type.rank() == 4 && x.type.dims[2] > 0 && x.type.dims[3] > 0,
            "coreml: resize needs static H and W, got ", type_str(x.type));
  const int64_t IH = x.type.dims[2], IW = x.type.dims[3], OH = out.dims[2], OW = out.dims[3];
  const std::vector<double> scales = a.scales.empty() ? std::vector<double>{0, 0} : a.scales;
  RLX_CHECK(scales.size() == 2, "coreml: resize scales must be [h, w]");
  RLX_CHECK(!a.antialias, "coreml: resize with antialias has no MIL lowering");
  switch (a.mode) {
    case ResizeMode::nearest:
    case ResizeMode::nearest_exact: {
      const bool exact = a.mode == ResizeMode::nearest_exact;
      Type mid = x.type;
      mid.dims[2] = OH;
      Val y = gather_const(L, x, nearest_src(IH, OH, exact, scales[0]), 2, mid, h + "_h");
      return gather_const(L, y, nearest_src(IW, OW, exact, scales[1]), 3, out, h);
    }
    case ResizeMode::bicubic:
      throw make_error("coreml: resize mode '", to_string(a.mode), "' has no MIL lowering");
    case ResizeMode::bilinear:
      break;
  }
  if (a.align_corners) {
    RLX_CHECK(OH > 1 && OW > 1,
              "coreml: bilinear align_corners resize to an extent of 1 differs from PyTorch");
    return L.b.op("resize_bilinear",
                  {{"x", x},
                   {"target_size_height", L.b.int_scalar(OH, h + "_oh")},
                   {"target_size_width", L.b.int_scalar(OW, h + "_ow")},
                   {"sampling_mode", L.b.string("STRICT_ALIGN_CORNERS", h + "_mode")}},
                  out, h);
  }
  if (scales[0] > 0 || scales[1] > 0) {
    RLX_CHECK(scales[0] > 0 && scales[1] > 0, "coreml: resize needs both scales or none");
    RLX_CHECK(int64_t(std::floor(double(IH) * scales[0])) == OH &&
                  int64_t(std::floor(double(IW) * scales[1])) == OW,
              "coreml: resize size is not floor(input * scales)");
    return L.b.op("upsample_bilinear",
                  {{"x", x},
                   {"scale_factor_height", L.b.scalar(scales[0], pb::FLOAT32, h + "_sh")},
                   {"scale_factor_width", L.b.scalar(scales[1], pb::FLOAT32, h + "_sw")},
                   {"align_corners", L.b.boolean(false, h + "_ac")}},
                  out, h);
  }
  return L.b.op("resize_bilinear",
                {{"x", x},
                 {"target_size_height", L.b.int_scalar(OH, h + "_oh")},
                 {"target_size_width", L.b.int_scalar(OW, h + "_ow")},
                 {"sampling_mode", L.b.string("UNALIGN_CORNERS", h + "_mode")}},
                out, h);
}

Val lower_grid_sample(Lowering& L, const Node& n) {
  const Val &x = L.in(n, 0), &grid = L.in(n, 1);
  const std::string h = L.hint(n);
  const auto& a = n.attrs_as<GridSampleAttrs>();
  const Type out = L.type_of(n);
  RLX_CHECK(x.type.is_static() && grid.type.is_static(), "coreml: grid_sample needs static shapes");
  switch (a.mode) {
    case GridSampleMode::bilinear:
    case GridSampleMode::nearest:
      break;
    case GridSampleMode::bicubic:
      throw make_error("coreml: grid_sample mode '", to_string(a.mode), "' has no MIL lowering");
  }
  switch (a.padding) {
    case GridSamplePadding::zeros:
    case GridSamplePadding::border:
      break;
    case GridSamplePadding::reflection:
      throw make_error("coreml: grid_sample padding '", to_string(a.padding),
                       "' has no MIL lowering");
  }
  const bool align = a.align_corners;
  const int64_t N = x.type.dims[0], C = x.type.dims[1], H = x.type.dims[2], W = x.type.dims[3];
  const int64_t P = grid.type.dims[1] * grid.type.dims[2];
  const pb::DataType dt = x.type.dt;
  auto k = [&](double v, const std::string& s) { return L.b.scalar(v, dt, h + s); };
  Val g = L.reshape(grid, {N, P, 2}, h + "_g");
  // One coordinate [N, 1, P] in input pixels, padded.
  auto coord = [&](int64_t which, int64_t size, const std::string& s) {
    Type ct{dt, {N, P}};
    std::vector<std::pair<std::string, Arg>> in{{"x", g},
                                                {"indices", L.b.int_scalar(which, h + s + "_i")},
                                                {"axis", L.b.int_scalar(2, h + s + "_axis")}};
    if (L.opset() >= 6) in.push_back({"batch_dims", L.b.int_scalar(0, h + s + "_bd")});
    if (L.opset() >= 7) in.push_back({"validate_indices", L.b.boolean(false, h + s + "_vi")});
    Val c = L.reshape(L.b.op("gather", in, ct, h + s + "_raw"), {N, 1, P}, h + s + "_c");
    Val p1 = L.binary("add", c, k(1, s + "_one"), h + s + "_p1");
    Val u =
        align ? L.binary("mul", p1, k(double(size - 1) / 2, s + "_half"), h + s + "_u")
              : L.binary("sub", L.binary("mul", p1, k(double(size) / 2, s + "_half"), h + s + "_m"),
                         k(0.5, s + "_05"), h + s + "_u");
    if (a.padding == GridSamplePadding::border)
      u = L.b.op("clip",
                 {{"x", u}, {"alpha", k(0, s + "_lo")}, {"beta", k(double(size - 1), s + "_hi")}},
                 u.type, h + s + "_clip");
    return u;
  };
  Val ix = coord(0, W, "_x"), iy = coord(1, H, "_y");
  Val xr = L.reshape(x, {N, C, H * W}, h + "_xr");
  int tap = 0;
  // x[n, c, yy*W + xx] * w, 0 where (yy, xx) falls outside the image.
  auto sample = [&](const Val& yy, const Val& xx, const Val* w) {
    const std::string s = h + "_tap" + std::to_string(tap++);
    auto inside = [&](const Val& v, int64_t size, const std::string& t) {
      return L.binary("logical_and", L.binary("greater", v, k(-1, t + "_m1"), s + t + "_lo"),
                      L.binary("less", v, k(double(size), t + "_n"), s + t + "_hi"), s + t);
    };
    Val ok = L.binary("logical_and", inside(yy, H, "_iny"), inside(xx, W, "_inx"), s + "_ok");
    auto clamp = [&](const Val& v, int64_t size, const std::string& t) {
      return L.b.op(
          "clip", {{"x", v}, {"alpha", k(0, t + "_lo")}, {"beta", k(double(size - 1), t + "_hi")}},
          v.type, s + t);
    };
    Val flat = L.binary("add", L.binary("mul", clamp(yy, H, "_cy"), k(double(W), "_w"), s + "_yw"),
                        clamp(xx, W, "_cx"), s + "_flat");
    Val idx = L.cast(flat, pb::INT32, s + "_idx");
    idx = L.b.op("tile", {{"x", idx}, {"reps", L.b.ints({1, C, 1}, s + "_reps")}},
                 Type{pb::INT32, {N, C, P}}, s + "_tiled");
    std::vector<std::pair<std::string, Arg>> in{
        {"x", xr}, {"indices", idx}, {"axis", L.b.int_scalar(2, s + "_axis")}};
    if (L.opset() >= 7) in.push_back({"validate_indices", L.b.boolean(false, s + "_vi")});
    Val v = L.b.op("gather_along_axis", in, Type{dt, {N, C, P}}, s + "_v");
    Val m = L.cast(ok, dt, s + "_mask");
    if (w) m = L.binary("mul", m, *w, s + "_wm");
    return L.binary("mul", v, m, s + "_out");
  };
  Val y;
  if (a.mode == GridSampleMode::nearest) {
    y = sample(L.unary("round", iy, h + "_ry"), L.unary("round", ix, h + "_rx"), nullptr);
  } else {
    Val x0 = L.unary("floor", ix, h + "_x0"), y0 = L.unary("floor", iy, h + "_y0");
    Val x1 = L.binary("add", x0, k(1, "_x1one"), h + "_x1");
    Val y1 = L.binary("add", y0, k(1, "_y1one"), h + "_y1");
    Val wx1 = L.binary("sub", ix, x0, h + "_wx1"), wy1 = L.binary("sub", iy, y0, h + "_wy1");
    Val wx0 = L.binary("sub", k(1, "_one_x"), wx1, h + "_wx0");
    Val wy0 = L.binary("sub", k(1, "_one_y"), wy1, h + "_wy0");
    Val w00 = L.binary("mul", wy0, wx0, h + "_w00"), w01 = L.binary("mul", wy0, wx1, h + "_w01");
    Val w10 = L.binary("mul", wy1, wx0, h + "_w10"), w11 = L.binary("mul", wy1, wx1, h + "_w11");
    y = L.binary("add", sample(y0, x0, &w00), sample(y0, x1, &w01), h + "_s0");
    y = L.binary("add", y, sample(y1, x0, &w10), h + "_s1");
    y = L.binary("add", y, sample(y1, x1, &w11), h + "_s2");
  }
  return L.b.op("reshape", {{"x", y}, {"shape", L.b.ints(out.dims, h + "_shape")}}, out, h);
}

// The dequantized [rows, k] table of a quantized weight input, as a const.
Val dequantized_const(Lowering& L, const Node& n, size_t input, pb::DataType dt) {
  const Node& w = L.g.node(n.inputs[input]);
  const Tensor* t = nullptr;
  if (w.op == Op::Param) {
    auto it = L.weights.find(w.name);
    RLX_CHECK(it != L.weights.end(), "coreml: no weight bound to param '", w.name, "'");
    t = &it->second;
  } else if (w.op == Op::Constant) {
    t = &w.value;
  }
  RLX_CHECK(t, "coreml: ", op_name(n.op), " needs its quantized weight as a param or constant");
  const auto& q = n.attrs_as<QuantAttrs>();
  const int64_t k = q.k;
  const quant::GgmlType type = quant::parse_type_name(q.scheme);
  const size_t rb = quant::row_size(type, k);
  const Tensor src = t->contiguous();
  RLX_CHECK(src.dtype() == DType::U8 && src.rank() == 2 && src.dim(1) == int64_t(rb),
            "coreml: ", op_name(n.op), " weight must be u8 [rows, ", rb, "], got ",
            src.shape().str());
  Tensor d(Dims{src.dim(0), k}, DType::F32);
  quant::dequantize(type, src.raw(), d.data<float>(), src.dim(0) * k);
  return L.b.constant(d, dt, L.hint(n) + "_w");
}

Val lower_dequant_matmul(Lowering& L, const Node& n) {
  const Val& x = L.in(n, 0);
  const Type out = L.type_of(n);
  Val xin = x.type.dt == out.dt ? x : L.cast(x, out.dt, L.hint(n) + "_x");
  std::vector<std::pair<std::string, Arg>> in{{"x", xin},
                                              {"weight", dequantized_const(L, n, 1, out.dt)}};
  if (n.inputs.size() > 2) {
    Val b = L.in(n, 2);
    in.push_back({"bias", b.type.dt == out.dt ? b : L.cast(b, out.dt, L.hint(n) + "_bias")});
  }
  return L.b.op("linear", in, out, L.hint(n));
}

Val lower_dequant_embedding(Lowering& L, const Node& n) {
  const Type out = L.type_of(n);
  const std::string h = L.hint(n);
  std::vector<std::pair<std::string, Arg>> in{{"x", dequantized_const(L, n, 0, out.dt)},
                                              {"indices", L.in(n, 1)},
                                              {"axis", L.b.int_scalar(0, h + "_axis")}};
  if (L.opset() >= 6) in.push_back({"batch_dims", L.b.int_scalar(0, h + "_bd")});
  if (L.opset() >= 7) in.push_back({"validate_indices", L.b.boolean(false, h + "_vi")});
  return L.b.op("gather", in, out, h);
}

}  // namespace

bool only_dequant_uses(const Graph& g, NodeId id) {
  bool any = false;
  for (const Node& m : g.nodes())
    for (size_t i = 0; i < m.inputs.size(); ++i)
      if (m.inputs[i] == id) {
        const bool ok =
            (m.op == Op::DequantMatmul && i == 1) || (m.op == Op::DequantEmbedding && i == 0);
        if (!ok) return false;
        any = true;
      }
  for (const auto& o : g.outputs())
    if (o.node == id) return false;
  return any;
}

void register_resample(LowerTable& t) {
  t.one[size_t(Op::Resize)] = lower_resize;
  t.one[size_t(Op::GridSample)] = lower_grid_sample;
  t.one[size_t(Op::DequantMatmul)] = lower_dequant_matmul;
  t.one[size_t(Op::DequantEmbedding)] = lower_dequant_embedding;
}

}  // namespace rlx::coreml
