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
  const std::string h = L.hint(n), mode = n.attrs.s("mode", "nearest");
  const Type out = L.type_of(n);
  RLX_CHECK(x.type.rank() == 4 && x.type.dims[2] > 0 && x.type.dims[3] > 0,
            "coreml: resize needs static H and W, got ", type_str(x.type));
  const int64_t IH = x.type.dims[2], IW = x.type.dims[3], OH = out.dims[2], OW = out.dims[3];
  std::vector<double> scales{0, 0};
  for (const auto& [k, v] : n.attrs.items())
    if (k == "scales") scales = n.attrs.floats("scales");
  RLX_CHECK(scales.size() == 2, "coreml: resize scales must be [h, w]");
  RLX_CHECK(n.attrs.i("antialias", 0) == 0, "coreml: resize with antialias has no MIL lowering");
  if (mode == "nearest" || mode == "nearest_exact") {
    const bool exact = mode == "nearest_exact";
    Type mid = x.type;
    mid.dims[2] = OH;
    Val y = gather_const(L, x, nearest_src(IH, OH, exact, scales[0]), 2, mid, h + "_h");
    return gather_const(L, y, nearest_src(IW, OW, exact, scales[1]), 3, out, h);
  }
  RLX_CHECK(mode == "bilinear", "coreml: resize mode '", mode, "' has no MIL lowering");
  if (n.attrs.i("align_corners", 0) != 0) {
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
  const std::string scheme = n.attrs.s("scheme");
  const int64_t k = n.attrs.i("k");
  const quant::GgmlType type = quant::parse_type_name(scheme);
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
  t[size_t(Op::Resize)] = lower_resize;
  t[size_t(Op::DequantMatmul)] = lower_dequant_matmul;
  t[size_t(Op::DequantEmbedding)] = lower_dequant_embedding;
}

}  // namespace rlx::coreml
