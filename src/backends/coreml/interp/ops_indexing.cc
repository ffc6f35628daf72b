// gather_nd, scatter_along_axis, scatter_nd, argsort, conv_transpose and the bilinear resizes
// (resize_bilinear, upsample_bilinear).
// Indices must be in range (negative ones wrap, as in MIL's gather family); an
// out-of-range index throws instead of reading out of bounds.
#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

#include "value.h"

namespace rlx::coreml::interp {
namespace {

int64_t wrap_index(const OpCtx& c, int64_t i, int64_t d) {
  if (i < -d || i >= d) c.fail("index ", i, " out of range for a dim of ", d);
  return i < 0 ? i + d : i;
}

void need_int(const OpCtx& c, const Value& v, const char* what) {
  if (v.is_float() || v.is_string()) c.fail(what, " must be integers, got ", v.str());
}

int64_t prod(const std::vector<int64_t>& d, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t k = from; k < to; ++k) p *= d[k];
  return p;
}

Value gather_nd(const OpCtx& c) {
  const Value &x = c.x("x"), &ind = c.x("indices");
  need_int(c, ind, "indices");
  const int64_t bd = c.i("batch_dims", 0);
  if (ind.rank() < 1) c.fail("indices must have rank >= 1");
  const int64_t k = ind.dims.back();
  if (bd < 0 || bd >= ind.rank() || bd + k > x.rank())
    c.fail("bad batch_dims ", bd, " / depth ", k);
  for (int64_t j = 0; j < bd; ++j)
    if (x.dims[size_t(j)] != ind.dims[size_t(j)]) c.fail("batch dims of x and indices differ");
  std::vector<int64_t> dims(ind.dims.begin(), ind.dims.end() - 1);
  dims.insert(dims.end(), x.dims.begin() + bd + k, x.dims.end());
  const int64_t inner = prod(x.dims, size_t(bd + k), x.dims.size());
  const int64_t per_batch = prod(x.dims, size_t(bd), x.dims.size());
  const int64_t nb = prod(ind.dims, 0, size_t(bd));
  const int64_t nrows = nb ? prod(ind.dims, 0, ind.dims.size() - 1) / nb : 0;
  auto xs = strides_of(x.dims);
  Value r = x.is_float() ? Value::floats(dims, x.dt) : Value::ints(dims, x.dt);
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t row = 0; row < nrows; ++row) {
      const int64_t ro = (b * nrows + row);
      int64_t o = b * per_batch;
      for (int64_t j = 0; j < k; ++j)
        o += wrap_index(c, ind.i[size_t(ro * k + j)], x.dims[size_t(bd + j)]) * xs[size_t(bd + j)];
      for (int64_t e = 0; e < inner; ++e) {
        if (x.is_float())
          r.f[size_t(ro * inner + e)] = x.f[size_t(o + e)];
        else
          r.i[size_t(ro * inner + e)] = x.i[size_t(o + e)];
      }
    }
  return r;
}

// dst = combine(dst, u) for MIL's scatter modes.
void combine(const OpCtx& c, const std::string& mode, Value& r, int64_t at, const Value& u,
             int64_t from) {
  const bool flt = r.is_float();
  const double a = flt ? r.f[size_t(at)] : r.i[size_t(at)], b = u.fget(from);
  double v;
  if (mode == "update")
    v = b;
  else if (mode == "add")
    v = a + b;
  else if (mode == "sub")
    v = a - b;
  else if (mode == "mul")
    v = a * b;
  else if (mode == "div")
    v = a / b;
  else if (mode == "max")
    v = std::max(a, b);
  else if (mode == "min")
    v = std::min(a, b);
  else
    c.fail("unknown scatter mode '", mode, "'");
  if (flt)
    r.f[size_t(at)] = float(v);
  else
    r.i[size_t(at)] = saturate_int32(v);
}

Value scatter_along_axis(const OpCtx& c) {
  const Value &data = c.x("data"), &ind = c.x("indices"), &upd = c.x("updates");
  need_int(c, ind, "indices");
  if (ind.dims != upd.dims || ind.rank() != data.rank())
    c.fail("indices ", ind.str(), ", updates ", upd.str(), " and data ", data.str(), " differ");
  const int64_t ax = norm_axis(c.i("axis", 0), data.rank(), "axis");
  for (int k = 0; k < data.rank(); ++k)
    if (k != ax && ind.dims[size_t(k)] > data.dims[size_t(k)])
      c.fail("indices ", ind.str(), " exceed data ", data.str());
  const std::string mode = c.s("mode", "add");
  Value r = data;
  auto ds = strides_of(data.dims), is = strides_of(ind.dims);
  for (int64_t e = 0; e < ind.numel(); ++e) {
    int64_t o = 0;
    for (int k = 0; k < data.rank(); ++k) {
      const int64_t idx = (e / is[size_t(k)]) % ind.dims[size_t(k)];
      o += (k == ax ? wrap_index(c, ind.i[size_t(e)], data.dims[size_t(k)]) : idx) * ds[size_t(k)];
    }
    combine(c, mode, r, o, upd, e);
  }
  return r;
}

Value scatter_nd(const OpCtx& c) {
  const Value &data = c.x("data"), &ind = c.x("indices"), &upd = c.x("updates");
  need_int(c, ind, "indices");
  if (ind.rank() < 1) c.fail("indices must have rank >= 1");
  const int64_t k = ind.dims.back();
  if (k > data.rank()) c.fail("index depth ", k, " exceeds data ", data.str());
  std::vector<int64_t> want(ind.dims.begin(), ind.dims.end() - 1);
  want.insert(want.end(), data.dims.begin() + k, data.dims.end());
  if (upd.dims != want) c.fail("updates ", upd.str(), " should be ", type_str(Type{upd.dt, want}));
  const std::string mode = c.s("mode", "add");
  const int64_t inner = prod(data.dims, size_t(k), data.dims.size());
  const int64_t rows = prod(ind.dims, 0, ind.dims.size() - 1);
  auto ds = strides_of(data.dims);
  Value r = data;
  for (int64_t row = 0; row < rows; ++row) {
    int64_t o = 0;
    for (int64_t j = 0; j < k; ++j)
      o += wrap_index(c, ind.i[size_t(row * k + j)], data.dims[size_t(j)]) * ds[size_t(j)];
    for (int64_t e = 0; e < inner; ++e) combine(c, mode, r, o + e, upd, row * inner + e);
  }
  return r;
}

// Stable: equal values keep index order (ascending or descending alike).
Value argsort(const OpCtx& c) {
  const Value& x = c.x("x");
  const int64_t ax = norm_axis(c.i("axis", -1), x.rank(), "axis");
  const bool asc = c.b("ascending", false);
  const int64_t len = x.dims[size_t(ax)], inner = prod(x.dims, size_t(ax + 1), x.dims.size());
  const int64_t outer = prod(x.dims, 0, size_t(ax));
  Value r = Value::ints(x.dims, pb::INT32);
  std::vector<int64_t> order(static_cast<size_t>(len));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) {
      const int64_t base = o * len * inner + in;
      std::iota(order.begin(), order.end(), 0);
      auto at = [&](int64_t j) { return x.fget(base + j * inner); };
      std::stable_sort(order.begin(), order.end(),
                       [&](int64_t a, int64_t b) { return asc ? at(a) < at(b) : at(a) > at(b); });
      for (int64_t j = 0; j < len; ++j) r.i[size_t(base + j * inner)] = int32_t(order[size_t(j)]);
    }
  return r;
}

// Direct scatter form: x[n, ci, i] * w[ci, co_g, k] adds into y[n, co, i*s - pb + k*d].
// The output extent is (in-1)*s - pb - pe + d*(k-1) + 1, or output_shape when given (its extra
// trailing positions receive no taps from the end padding, as PyTorch's output_padding).
Value conv_transpose(const OpCtx& c) {
  const Value &x = c.x("x"), &wt = c.x("weight");
  if (!x.is_float() || !wt.is_float()) c.fail("x and weight must be float");
  if (x.rank() < 3 || wt.rank() != x.rank())
    c.fail("x ", x.str(), " and weight ", wt.str(), " do not fit");
  const size_t sp = size_t(x.rank() - 2);
  const int64_t groups = c.i("groups", 1), N = x.dims[0], Cin = x.dims[1];
  if (groups <= 0 || Cin % groups || wt.dims[0] != Cin)
    c.fail("x ", x.str(), ", weight ", wt.str(), " and groups ", groups, " do not fit");
  const int64_t cog = wt.dims[1], Cout = cog * groups, cig = Cin / groups;
  auto st = c.ints("strides", std::vector<int64_t>(sp, 1));
  auto dil = c.ints("dilations", std::vector<int64_t>(sp, 1));
  auto pad = c.ints("pad", std::vector<int64_t>(2 * sp, 0));
  const std::string pt = c.s("pad_type", "valid");
  if (pt == "valid")
    pad.assign(2 * sp, 0);
  else if (pt != "custom")
    c.fail("pad_type '", pt, "' is not supported");
  if (st.size() != sp || dil.size() != sp || pad.size() != 2 * sp) c.fail("bad strides/pad");
  std::vector<int64_t> in(x.dims.begin() + 2, x.dims.end()), k(wt.dims.begin() + 2, wt.dims.end()),
      out(sp);
  for (size_t d = 0; d < sp; ++d)
    out[d] = (in[d] - 1) * st[d] - pad[2 * d] - pad[2 * d + 1] + dil[d] * (k[d] - 1) + 1;
  if (c.has("output_shape")) {
    auto os = c.ints("output_shape");
    if (os.size() != sp + 2) c.fail("output_shape needs ", sp + 2, " entries");
    for (size_t d = 0; d < sp; ++d) out[d] = os[d + 2];
  }
  std::vector<int64_t> dims{N, Cout};
  dims.insert(dims.end(), out.begin(), out.end());
  for (int64_t d : out)
    if (d < 0) c.fail("negative output extent");
  Value r = Value::floats(dims, x.dt);
  std::vector<double> acc(r.f.size(), 0.0);
  const Value* bias = c.opt("bias");
  if (bias && bias->numel() != Cout) c.fail("bias ", bias->str(), " for ", Cout, " channels");
  const int64_t IP = prod(in, 0, sp), KP = prod(k, 0, sp), OP = prod(out, 0, sp);
  auto ist = strides_of(in), kst = strides_of(k), ost = strides_of(out);
  for (int64_t ip = 0; ip < IP; ++ip)
    for (int64_t kp = 0; kp < KP; ++kp) {
      int64_t o = 0;
      for (size_t d = 0; d < sp && o >= 0; ++d) {
        const int64_t id = (ip / ist[d]) % in[d], kd = (kp / kst[d]) % k[d];
        const int64_t od = id * st[d] - pad[2 * d] + kd * dil[d];
        o = (od < 0 || od >= out[d]) ? -1 : o + od * ost[d];
      }
      if (o < 0) continue;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t ci = 0; ci < Cin; ++ci) {
          const double xv = x.f[size_t((n * Cin + ci) * IP + ip)];
          const int64_t g = ci / cig;
          for (int64_t j = 0; j < cog; ++j)
            acc[size_t((n * Cout + g * cog + j) * OP + o)] +=
                xv * double(wt.f[size_t((ci * cog + j) * KP + kp)]);
        }
    }
  for (size_t e = 0; e < acc.size(); ++e)
    r.f[e] = float(acc[e] + (bias ? double(bias->fget(int64_t(e) / OP % Cout)) : 0.0));
  return r;
}

// Source coordinate of every output position along one axis.
using CoordFn = std::function<double(int64_t)>;

// Bilinear resampling of the last two dims: taps floor(g) and min(floor(g) + 1, in - 1), with g
// clamped to [0, in - 1].
Value bilinear(const OpCtx& c, const Value& x, int64_t OH, int64_t OW, const CoordFn& gh,
               const CoordFn& gw) {
  if (!x.is_float() || x.rank() < 2) c.fail("x must be a float tensor of rank >= 2, got ", x.str());
  if (OH <= 0 || OW <= 0) c.fail("bad output size ", OH, "x", OW);
  const int64_t IH = x.dims[size_t(x.rank() - 2)], IW = x.dims.back();
  if (IH <= 0 || IW <= 0) c.fail("empty spatial dims in ", x.str());
  struct Tap {
    int64_t i0, i1;
    double w;
  };
  auto taps = [](int64_t in, int64_t out, const CoordFn& g) {
    std::vector<Tap> t;
    for (int64_t o = 0; o < out; ++o) {
      const double v = std::clamp(g(o), 0.0, double(in - 1));
      const int64_t i0 = std::min(int64_t(std::floor(v)), in - 1);
      t.push_back({i0, std::min(i0 + 1, in - 1), v - double(i0)});
    }
    return t;
  };
  const auto th = taps(IH, OH, gh), tw = taps(IW, OW, gw);
  std::vector<int64_t> dims = x.dims;
  dims[dims.size() - 2] = OH;
  dims.back() = OW;
  Value r = Value::floats(dims, x.dt);
  const int64_t planes = x.numel() / (IH * IW);  // IH, IW > 0 checked above
  for (int64_t p = 0; p < planes; ++p) {
    const float* src = x.f.data() + p * IH * IW;
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        const Tap &a = th[size_t(oh)], &b = tw[size_t(ow)];
        auto at = [&](int64_t i, int64_t j) { return double(src[i * IW + j]); };
        const double top = at(a.i0, b.i0) * (1 - b.w) + at(a.i0, b.i1) * b.w;
        const double bot = at(a.i1, b.i0) * (1 - b.w) + at(a.i1, b.i1) * b.w;
        r.f[size_t((p * OH + oh) * OW + ow)] = float(top * (1 - a.w) + bot * a.w);
      }
  }
  return r;
}

Value resize_bilinear(const OpCtx& c) {
  const Value& x = c.x("x");
  const int64_t OH = c.i("target_size_height"), OW = c.i("target_size_width");
  const std::string mode = c.s("sampling_mode", "DEFAULT");
  if (x.rank() < 2) c.fail("x must have rank >= 2");
  const int64_t IH = x.dims[size_t(x.rank() - 2)], IW = x.dims.back();
  auto coord = [&](int64_t in, int64_t out) -> CoordFn {
    const double n = double(in), m = double(out);
    if (mode == "STRICT_ALIGN_CORNERS")
      return [=](int64_t i) { return m == 1 ? (n - 1) / 2 : double(i) * (n - 1) / (m - 1); };
    if (mode == "UNALIGN_CORNERS")
      return [=](int64_t i) { return (double(i) + 0.5) * (n / m) - 0.5; };
    if (mode == "DEFAULT") return [=](int64_t i) { return double(i) * (n / m); };
    c.fail("sampling_mode '", mode, "' is not supported");
  };
  return bilinear(c, x, OH, OW, coord(IH, OH), coord(IW, OW));
}

Value upsample_bilinear(const OpCtx& c) {
  const Value& x = c.x("x");
  const double sh = c.f("scale_factor_height", 1.0f), sw = c.f("scale_factor_width", 1.0f);
  const bool align = c.b("align_corners", true);
  if (x.rank() < 2 || sh <= 0 || sw <= 0) c.fail("bad x ", x.str(), " or scales");
  const int64_t IH = x.dims[size_t(x.rank() - 2)], IW = x.dims.back();
  const int64_t OH = int64_t(std::floor(double(IH) * sh)),
                OW = int64_t(std::floor(double(IW) * sw));
  auto coord = [&](int64_t in, int64_t out, double s) -> CoordFn {
    const double n = double(in), m = double(out);
    if (align) return [=](int64_t i) { return m > 1 ? double(i) * (n - 1) / (m - 1) : 0.0; };
    return [=](int64_t i) { return (double(i) + 0.5) / s - 0.5; };
  };
  return bilinear(c, x, OH, OW, coord(IH, OH, sh), coord(IW, OW, sw));
}

}  // namespace

void register_indexing(OpTable& t) {
  t["gather_nd"] = gather_nd;
  t["scatter_along_axis"] = scatter_along_axis;
  t["scatter_nd"] = scatter_nd;
  t["argsort"] = argsort;
  t["conv_transpose"] = conv_transpose;
  t["resize_bilinear"] = resize_bilinear;
  t["upsample_bilinear"] = upsample_bilinear;
}

}  // namespace rlx::coreml::interp
