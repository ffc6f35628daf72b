// Resize (opset 10-19) and Upsample (7-9). The combinations PyTorch exports
// (nearest/asymmetric/floor, linear and cubic with half_pixel, align_corners)
// lower to rlx's resize op. Every other ONNX coordinate mode, nearest mode,
// cubic coefficient, exclude_outside and tf_crop_and_resize is computed at
// import as per-axis index maps (nearest: a Gather per axis) or
// interpolation matrices (linear, cubic: Y = A_h X A_w^T as two matmuls),
// following the ONNX specification's formulas, so no variant is refused.
#include <cmath>

#include "frontends/onnx/context.h"
#include "rlx/checked.h"
#include "rlx/error.h"

namespace rlx::onnx {
namespace {

struct Params {
  std::string mode, ctm, nearest_mode;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation = 0;
  std::vector<double> scales;  // per axis, as given or out/in
  bool scales_given = false;
  Dims in, out;
  std::vector<double> roi;  // tf_crop_and_resize: [starts..., ends...]
};

// ONNX's original coordinate of output index x on one axis.
double original(const Params& p, size_t axis, int64_t x) {
  const double scale = p.scales[axis];
  const double in = double(p.in[axis]), out = double(p.out[axis]);
  const double xr = double(x);
  const std::string& m = p.ctm;
  if (m == "half_pixel") return (xr + 0.5) / scale - 0.5;
  if (m == "pytorch_half_pixel") return out > 1 ? (xr + 0.5) / scale - 0.5 : 0;
  if (m == "align_corners") {
    // The resized length is in * scale when scales are given (unrounded), as the spec's reference.
    const double len = p.scales_given ? in * scale : out;
    return len == 1 ? 0 : xr * (in - 1) / (len - 1);
  }
  if (m == "asymmetric") return xr / scale;
  if (m == "tf_half_pixel_for_nn") return (xr + 0.5) / scale;
  if (m == "tf_crop_and_resize") {
    const size_t r = p.in.size();
    const double start = p.roi[axis], end = p.roi[axis + r];
    return out > 1 ? start * (in - 1) + xr * (end - start) * (in - 1) / (out - 1)
                   : 0.5 * (start + end) * (in - 1);
  }
  throw make_error("Resize coordinate_transformation_mode '", m, "'");
}

int64_t nearest_index(const Params& p, double v) {
  const std::string& m = p.nearest_mode;
  double r;
  if (m == "floor")
    r = std::floor(v);
  else if (m == "ceil")
    r = std::ceil(v);
  else if (m == "round_prefer_ceil")
    r = std::floor(v + 0.5);
  else if (m == "round_prefer_floor")
    r = std::ceil(v - 0.5);
  else
    throw make_error("Resize nearest_mode '", m, "'");
  return int64_t(r);
}

bool outside(const Params& p, size_t axis, double v) {
  return p.ctm == "tf_crop_and_resize" && (v < 0 || v > double(p.in[axis] - 1));
}

// Interpolation weights [out, in] for one axis (linear or cubic), and which
// output rows fall outside the crop (tf_crop_and_resize).
std::vector<double> weights(const Params& p, size_t axis, std::vector<bool>& out_of_range) {
  const int64_t in = p.in[axis], out = p.out[axis];
  std::vector<double> w(size_t(out * in), 0.0);
  out_of_range.assign(size_t(out), false);
  auto clampi = [&](int64_t i) { return std::max<int64_t>(0, std::min(in - 1, i)); };
  for (int64_t x = 0; x < out; ++x) {
    double v = original(p, axis, x);
    if (outside(p, axis, v)) {
      out_of_range[size_t(x)] = true;
      continue;
    }
    // A hostile roi or scale must not reach the integer casts below.
    RLX_CHECK(std::abs(v) < 0x1p52, "Resize: source coordinate ", v, " of output ", x,
              " is out of range");
    double* row = &w[size_t(x * in)];
    if (p.mode == "linear") {
      v = std::max(0.0, std::min(double(in - 1), v));
      const int64_t i0 = int64_t(std::floor(v));
      const double f = v - double(i0);
      row[clampi(i0)] += 1 - f;
      row[clampi(i0 + 1)] += f;
    } else {  // cubic: 4 taps around floor(v), edge-clamped or excluded
      const double a = p.cubic_a;
      const int64_t i0 = int64_t(std::floor(v));
      const double s = v - double(i0);
      const double t[4] = {s + 1, s, 1 - s, 2 - s};
      double c[4], sum = 0;
      for (int k = 0; k < 4; ++k) {
        const double d = t[k];
        c[k] = d <= 1 ? ((a + 2) * d - (a + 3)) * d * d + 1
                      : ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
        const int64_t idx = i0 - 1 + k;
        if (p.exclude_outside && (idx < 0 || idx >= in)) c[k] = 0;
        sum += c[k];
      }
      for (int k = 0; k < 4; ++k) row[clampi(i0 - 1 + k)] += p.exclude_outside ? c[k] / sum : c[k];
    }
  }
  return w;
}

// The general path over the resized axes.
NodeId resize_general(Ctx& c, const Params& p, NodeId x, DType t) {
  const size_t r = p.in.size();
  std::vector<std::vector<bool>> oor(r);
  for (size_t axis = 0; axis < r; ++axis) {
    if (p.in[axis] == p.out[axis] && p.scales[axis] == 1 && p.ctm != "tf_crop_and_resize") continue;
    if (p.mode == "nearest") {
      std::vector<int64_t> idx;
      oor[axis].assign(size_t(p.out[axis]), false);
      for (int64_t o = 0; o < p.out[axis]; ++o) {
        const double v = original(p, axis, o);
        oor[axis][size_t(o)] = outside(p, axis, v);
        idx.push_back(std::max<int64_t>(0, std::min(p.in[axis] - 1, nearest_index(p, v))));
      }
      NodeId ids = c.constant(Tensor::from_vector<int64_t>({p.out[axis]}, idx, DType::I64));
      x = c.b().op(Op::Gather, {x, ids}, {{"axis", int64_t(axis)}});
      continue;
    }
    // Y = A X along this axis: move it last, multiply by A^T, move it back.
    const std::vector<double> w = weights(p, axis, oor[axis]);
    NodeId a = c.constant(Tensor::from_vector<double>({p.out[axis], p.in[axis]}, w, t));
    Dims perm;
    for (size_t k = 0; k < r; ++k) perm.push_back(int64_t(k));
    std::swap(perm[axis], perm[r - 1]);
    const bool last = axis == r - 1;
    NodeId xt = last ? x : c.b().transpose(x, perm);
    NodeId y = c.b().op(Op::MatMul, {xt, a}, {{"transpose_b", true}});
    x = last ? y : c.b().transpose(y, perm);
  }
  // tf_crop_and_resize: points outside the crop take extrapolation_value.
  bool any = false;
  for (const auto& v : oor)
    for (bool b : v) any = any || b;
  if (any) {
    const int64_t n = checked_numel(p.out, "Resize");
    Tensor mask(p.out, DType::Bool);
    auto* m = mask.data<bool>();
    for (int64_t i = 0; i < n; ++i) {
      int64_t rem = i;
      bool o = false;
      for (size_t axis = r; axis-- > 0;) {
        const int64_t k = rem % p.out[axis];
        rem /= p.out[axis];
        o = o || (!oor[axis].empty() && oor[axis][size_t(k)]);
      }
      m[i] = o;
    }
    x = c.b().op(Op::Where, {c.constant(mask), c.scalar_const(p.extrapolation, t), x});
  }
  return x;
}

std::vector<Val> lower_resize(Ctx& c) {
  const Shape xs = c.shape(0);
  RLX_CHECK(xs.rank() >= 1, "Resize of a scalar");
  const bool upsample = c.node.op_type == "Upsample";
  // Dims unknown at import (0 here) resize by their scale at run time: rlx's resize op only.
  const bool known = xs.is_static();
  Params p;
  for (const Dim& d : xs.dims) p.in.push_back(d.is_static() ? d.value : 0);
  const size_t r = p.in.size();
  p.mode = c.s("mode", "nearest");
  if (p.mode == "bilinear") p.mode = "linear";  // Upsample-7 spelling
  RLX_CHECK(p.mode == "nearest" || p.mode == "linear" || p.mode == "cubic", "Resize mode '", p.mode,
            "'");
  const bool v11 = !upsample && c.opset >= 11;
  p.ctm = v11 ? c.s("coordinate_transformation_mode", "half_pixel") : "asymmetric";
  p.nearest_mode = v11 ? c.s("nearest_mode", "round_prefer_floor") : "floor";
  p.cubic_a = c.f("cubic_coeff_a", -0.75);
  p.exclude_outside = c.i("exclude_outside", 0) != 0;
  p.extrapolation = c.f("extrapolation_value", 0.0);
  RLX_CHECK(!c.has_attr("axes"), "Resize axes is not supported");
  RLX_CHECK(c.i("antialias", 0) == 0, "Resize antialias is not supported");
  RLX_CHECK(c.s("keep_aspect_ratio_policy", "stretch") == "stretch",
            "Resize keep_aspect_ratio_policy is not supported");
  const size_t scales_at = v11 ? 2 : 1;
  if (v11 && c.has(3) && !known) {
    // Sizes of a symbolic input (exporters write Concat(Shape(x)[:2], [h, w])): each entry is
    // the input's own dim, kept, or a static size.
    const auto sizes = c.ints(3);
    RLX_CHECK(sizes && sizes->v.size() == r, "Resize sizes must be ", r,
              " values known at import for ", xs.str());
    for (size_t k = 0; k < r; ++k) {
      const Dim& want = sizes->v[k];
      const bool kept = want == xs.dims[k];
      RLX_CHECK(kept || want.is_static(), "Resize of ", xs.str(), " to sizes ",
                Shape(sizes->v, xs.dtype).str(), ": entry ", k, " is unknown at import");
      RLX_CHECK(kept || k >= 2 || xs.dims[k].is_static(), "Resize of ", xs.str(), " to sizes ",
                Shape(sizes->v, xs.dtype).str(), ": dim ", k, " may change (rlx resizes H and W)");
      RLX_CHECK(k < 2 || !kept || xs.dims[k].is_static(), "Resize of ", xs.str(), " to sizes ",
                Shape(sizes->v, xs.dtype).str(), ": keeps dim ", k, ", unknown at import");
      p.out.push_back(kept ? p.in[k] : want.value);
      p.scales.push_back(kept                     ? 1.0
                         : xs.dims[k].is_static() ? double(want.value) / double(p.in[k])
                                                  : 0.0);  // 0: unknown until run time
    }
  } else if (v11 && c.has(3)) {
    p.out = c.static_ints(3, "sizes");
    RLX_CHECK(p.out.size() == r, "Resize sizes has ", p.out.size(), " values for rank ", r);
    for (size_t k = 0; k < r; ++k) p.scales.push_back(double(p.out[k]) / double(p.in[k]));
  } else {
    if (upsample && c.opset < 9) {
      p.scales = c.floats_attr("scales");
    } else {
      const Tensor* s = c.known(scales_at);
      RLX_CHECK(s, "Resize scales must be known at import");
      for (int64_t k = 0; k < s->numel(); ++k) p.scales.push_back(s->item_as_double(k));
    }
    RLX_CHECK(p.scales.size() == r, "Resize scales has ", p.scales.size(), " values for rank ", r);
    p.scales_given = true;
    for (size_t k = 0; k < r; ++k) {
      RLX_CHECK(p.scales[k] > 0 && double(p.in[k]) * p.scales[k] < 0x1p62, "Resize scale ",
                p.scales[k], " for a dim of ", p.in[k]);
      RLX_CHECK(xs.dims[k].is_static() || k >= 2 || p.scales[k] == 1, "Resize of ", xs.str(),
                " by ", p.scales[k], " on dim ", k,
                ", unknown at import (rlx resizes H and W only)");
      p.out.push_back(xs.dims[k].is_static() ? int64_t(std::floor(double(p.in[k]) * p.scales[k]))
                                             : 0);  // floor(dim * scale) at run time
    }
  }
  check_dims(p.out, "Resize output");
  if (p.ctm == "tf_crop_and_resize") {
    const Tensor* roi = c.known(1);
    RLX_CHECK(roi && roi->numel() == int64_t(2 * r), "Resize tf_crop_and_resize needs a known roi");
    for (int64_t k = 0; k < roi->numel(); ++k) p.roi.push_back(roi->item_as_double(k));
  }
  NodeId x = c.in(0);
  const DType t = xs.dtype;

  // The fast path: rlx's resize op, where its PyTorch semantics are ONNX's.
  bool nc_kept = r == 4 && p.out[0] == p.in[0] && p.out[1] == p.in[1] && p.scales[0] == 1 &&
                 p.scales[1] == 1 && is_float(t);
  bool big = (p.out[2] > 1 || p.out[2] == 0) && (p.out[3] > 1 || p.out[3] == 0);
  std::string rmode;
  bool align = false;
  if (nc_kept && p.mode == "nearest" && p.ctm == "asymmetric" && p.nearest_mode == "floor") {
    rmode = "nearest";
  } else if (nc_kept && p.mode != "nearest" && p.cubic_a == -0.75 && !p.exclude_outside && big) {
    if (p.ctm == "half_pixel" || p.ctm == "pytorch_half_pixel")
      rmode = p.mode == "linear" ? "bilinear" : "bicubic";
    // align_corners with scales uses the unrounded length: only exact when it is whole.
    if (p.ctm == "align_corners" && known &&
        (!p.scales_given || (double(p.out[2]) == double(p.in[2]) * p.scales[2] &&
                             double(p.out[3]) == double(p.in[3]) * p.scales[3]))) {
      rmode = p.mode == "linear" ? "bilinear" : "bicubic";
      align = true;
    }
  }
  if (!rmode.empty()) {
    Attrs a{{"size", Dims{p.out[2], p.out[3]}}, {"mode", rmode}, {"align_corners", align}};
    if (p.scales_given && !align) a.set("scales", std::vector<double>{p.scales[2], p.scales[3]});
    return one(c.b().op(Op::Resize, {x}, a));
  }
  RLX_CHECK(known, "Resize of ", xs.str(), " (mode ", p.mode, ", ", p.ctm, "): with dims unknown ",
            "at import, only the forms rlx's resize op takes (nearest asymmetric floor, linear "
            "or cubic half_pixel) run; give the input static dims");
  RLX_CHECK(p.mode == "nearest" || is_float(t), "Resize ", p.mode, " of ", xs.str());
  return one(resize_general(c, p, x, t));
}

}  // namespace

void register_resize(Registry& r) {
  r.add("Resize", lower_resize);
  r.add("Upsample", lower_resize);
}

}  // namespace rlx::onnx
