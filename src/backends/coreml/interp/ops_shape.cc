// Reductions, softmax, cumsum and data movement: reshape, transpose,
// slice_by_index, concat, tile, reverse, pad, gather, gather_along_axis.
#include <algorithm>
#include <cmath>
#include <limits>

#include "value.h"

namespace rlx::coreml::interp {
namespace {

// Calls fn(idx) for every multi-index of `dims` in row-major order.
template <typename F>
void for_each_index(const std::vector<int64_t>& dims, F&& fn) {
  const int64_t total = checked_numel(dims);
  std::vector<int64_t> idx(dims.size(), 0);
  for (int64_t e = 0; e < total; ++e) {
    fn(idx);
    for (int k = int(dims.size()) - 1; k >= 0; --k) {
      if (++idx[size_t(k)] < dims[size_t(k)]) break;
      idx[size_t(k)] = 0;
    }
  }
}

// A value of x's dtype class with dims `dims`, element k copied from x[src[k]].
Value gather_elems(const Value& x, std::vector<int64_t> dims, const std::vector<int64_t>& src) {
  Value r;
  r.dt = x.dt;
  r.dims = std::move(dims);
  if (x.is_float()) {
    r.f.resize(src.size());
    for (size_t k = 0; k < src.size(); ++k) r.f[k] = x.f[size_t(src[k])];
  } else if (x.is_string()) {
    r.s.resize(src.size());
    for (size_t k = 0; k < src.size(); ++k) r.s[k] = x.s[size_t(src[k])];
  } else {
    r.i.resize(src.size());
    for (size_t k = 0; k < src.size(); ++k) r.i[k] = x.i[size_t(src[k])];
  }
  return r;
}

std::vector<bool> axis_set(const OpCtx& c, const Value& x, const std::vector<int64_t>& axes) {
  std::vector<bool> red(size_t(x.rank()), false);
  for (int64_t a : axes) {
    if (a < -x.rank() || a >= x.rank()) c.fail("axis ", a, " out of range for ", x.str());
    red[size_t(a < 0 ? a + x.rank() : a)] = true;
  }
  return red;
}

// Groups: for every element of x, the offset of its reduced slot in the kept-dims shape.
struct Groups {
  std::vector<int64_t> kept;  // reduced dims set to 1
  std::vector<int64_t> out;   // dims of the result (keep_dims or not)
  std::vector<int64_t> slot;  // per element of x
  int64_t nslots = 1, count = 1;
};

Groups groups(const OpCtx& c, const Value& x, const std::vector<int64_t>& axes, bool keep) {
  Groups g;
  auto red = axis_set(c, x, axes);
  for (int k = 0; k < x.rank(); ++k) {
    const int64_t d = x.dims[size_t(k)];
    g.kept.push_back(red[size_t(k)] ? 1 : d);
    if (red[size_t(k)]) g.count *= d;
    if (!red[size_t(k)] || keep) g.out.push_back(red[size_t(k)] ? 1 : d);
  }
  for (int64_t d : g.kept) g.nslots *= d;
  auto ks = strides_of(g.kept);
  g.slot.assign(size_t(x.numel()), 0);
  int64_t e = 0;
  for_each_index(x.dims, [&](const std::vector<int64_t>& idx) {
    int64_t o = 0;
    for (size_t k = 0; k < idx.size(); ++k) o += red[k] ? 0 : idx[k] * ks[k];
    g.slot[size_t(e++)] = o;
  });
  return g;
}

Value finish(const Value& x, const Groups& g, const std::vector<double>& acc) {
  if (x.is_float()) {
    Value r = Value::floats(g.out, x.dt);
    for (size_t k = 0; k < acc.size(); ++k) r.f[k] = float(acc[k]);
    return r;
  }
  Value r = Value::ints(g.out, x.dt == pb::BOOL ? pb::INT32 : x.dt);
  for (size_t k = 0; k < acc.size(); ++k) r.i[k] = saturate_int32(acc[k]);
  return r;
}

enum class Red { Sum, Mean, Prod, Max, Min, LogSumExp, SumSquare, L1, L2 };

Value reduce(const OpCtx& c, Red kind) {
  const Value& x = c.x("x");
  std::vector<int64_t> axes;
  if (c.has("axes"))
    axes = c.ints("axes");
  else
    for (int k = 0; k < x.rank(); ++k) axes.push_back(k);
  Groups g = groups(c, x, axes, c.b("keep_dims", false));
  const double init = kind == Red::Prod                            ? 1.0
                      : kind == Red::Max || kind == Red::LogSumExp ? -INFINITY
                      : kind == Red::Min                           ? INFINITY
                                                                   : 0.0;
  std::vector<double> acc(size_t(g.nslots), init);
  const int64_t n = x.numel();
  for (int64_t e = 0; e < n; ++e) {
    double v = x.fget(e);
    double& a = acc[size_t(g.slot[size_t(e)])];
    switch (kind) {
      case Red::Sum:
      case Red::Mean:
        a += v;
        break;
      case Red::Prod:
        a *= v;
        break;
      case Red::Max:
      case Red::LogSumExp:
        a = std::isnan(v) || v > a ? v : a;
        break;
      case Red::Min:
        a = std::isnan(v) || v < a ? v : a;
        break;
      case Red::SumSquare:
      case Red::L2:
        a += v * v;
        break;
      case Red::L1:
        a += std::abs(v);
        break;
    }
  }
  if (kind == Red::LogSumExp) {
    std::vector<double> s(acc.size(), 0.0);
    for (int64_t e = 0; e < n; ++e) {
      const size_t sl = size_t(g.slot[size_t(e)]);
      s[sl] += std::exp(double(x.fget(e)) - acc[sl]);
    }
    for (size_t k = 0; k < acc.size(); ++k)
      acc[k] = std::isinf(acc[k]) ? acc[k] : acc[k] + std::log(s[k]);
  }
  if (kind == Red::Mean)
    for (auto& a : acc) a = g.count ? a / double(g.count) : NAN;
  if (kind == Red::L2)
    for (auto& a : acc) a = std::sqrt(a);
  return finish(x, g, acc);
}

Value arg_reduce(const OpCtx& c, bool is_max) {
  const Value& x = c.x("x");
  const int64_t ax = norm_axis(c.i("axis", -1), x.rank(), "axis");
  Groups g = groups(c, x, {ax}, c.b("keep_dims", false));
  const int64_t st = strides_of(x.dims)[size_t(ax)], d = x.dims[size_t(ax)];
  std::vector<double> best(size_t(g.nslots), is_max ? -INFINITY : INFINITY);
  std::vector<int64_t> at(size_t(g.nslots), -1);
  for (int64_t e = 0; e < x.numel(); ++e) {
    const size_t sl = size_t(g.slot[size_t(e)]);
    const double v = x.fget(e);
    // First occurrence wins on ties; NaN counts as the extreme.
    if (at[sl] < 0 ||
        (!std::isnan(best[sl]) && (std::isnan(v) || (is_max ? v > best[sl] : v < best[sl])))) {
      best[sl] = v;
      at[sl] = (e / st) % d;
    }
  }
  Value r = Value::ints(g.out, pb::INT32);
  for (size_t k = 0; k < at.size(); ++k) r.i[k] = int32_t(std::max<int64_t>(at[k], 0));
  return r;
}

Value softmax(const OpCtx& c) {
  const Value& x = c.x("x");
  if (!x.is_float()) c.fail("x must be float, got ", x.str());
  Groups g = groups(c, x, {c.i("axis", -1)}, true);
  std::vector<double> mx(size_t(g.nslots), -INFINITY), sum(size_t(g.nslots), 0.0);
  for (int64_t e = 0; e < x.numel(); ++e) {
    double& m = mx[size_t(g.slot[size_t(e)])];
    m = std::max(m, double(x.f[size_t(e)]));
  }
  std::vector<double> ex(size_t(x.numel()));
  for (int64_t e = 0; e < x.numel(); ++e) {
    const size_t sl = size_t(g.slot[size_t(e)]);
    ex[size_t(e)] = std::exp(double(x.f[size_t(e)]) - mx[sl]);
    sum[sl] += ex[size_t(e)];
  }
  Value r = Value::floats(x.dims, x.dt);
  for (int64_t e = 0; e < x.numel(); ++e)
    r.f[size_t(e)] = float(ex[size_t(e)] / sum[size_t(g.slot[size_t(e)])]);
  return r;
}

Value cumsum(const OpCtx& c) {
  const Value& x = c.x("x");
  const int64_t ax = norm_axis(c.i("axis", 0), x.rank(), "axis");
  const bool excl = c.b("exclusive", false), rev = c.b("reverse", false);
  const int64_t d = x.dims[size_t(ax)], st = strides_of(x.dims)[size_t(ax)];
  const int64_t outer = d ? x.numel() / (d * st) : 0;
  Value r = x.is_float() ? Value::floats(x.dims, x.dt) : Value::ints(x.dims, x.dt);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < st; ++in) {
      double acc = 0;
      for (int64_t j = 0; j < d; ++j) {
        const int64_t jj = rev ? d - 1 - j : j, e = (o * d + jj) * st + in;
        const double v = x.fget(e);
        if (!excl) acc += v;
        if (x.is_float())
          r.f[size_t(e)] = float(acc);
        else
          r.i[size_t(e)] = saturate_int32(acc);
        if (excl) acc += v;
      }
    }
  return r;
}

Value reshape(const OpCtx& c) {
  const Value& x = c.x("x");
  auto shape = c.ints("shape");
  int64_t known = 1, unknown = -1;
  for (size_t k = 0; k < shape.size(); ++k) {
    if (shape[k] == -1) {
      if (unknown >= 0) c.fail("more than one -1 in shape");
      unknown = int64_t(k);
    } else if (shape[k] < 0) {
      c.fail("bad target dim ", shape[k]);
    } else {
      known *= shape[k];
    }
  }
  if (unknown >= 0) {
    if (known == 0 || x.numel() % known) c.fail("cannot infer -1 reshaping ", x.str());
    shape[size_t(unknown)] = x.numel() / known;
    known *= shape[size_t(unknown)];
  }
  if (known != x.numel())
    c.fail("cannot reshape ", x.str(), " to ", shape.size(), "-d target of ", known, " elements");
  Value r = x;
  r.dims = shape;
  return r;
}

Value transpose(const OpCtx& c) {
  const Value& x = c.x("x");
  auto perm = c.ints("perm");
  if (int(perm.size()) != x.rank()) c.fail("perm has ", perm.size(), " entries for ", x.str());
  std::vector<bool> seen(perm.size(), false);
  std::vector<int64_t> dims, st = strides_of(x.dims), pst;
  for (auto& p : perm) {
    p = norm_axis(p, x.rank(), "perm entry");
    if (seen[size_t(p)]) c.fail("perm repeats axis ", p);
    seen[size_t(p)] = true;
    dims.push_back(x.dims[size_t(p)]);
    pst.push_back(st[size_t(p)]);
  }
  std::vector<int64_t> src;
  src.reserve(size_t(x.numel()));
  for_each_index(dims, [&](const std::vector<int64_t>& idx) {
    int64_t o = 0;
    for (size_t k = 0; k < idx.size(); ++k) o += idx[k] * pst[k];
    src.push_back(o);
  });
  return gather_elems(x, dims, src);
}

Value slice_by_index(const OpCtx& c) {
  const Value& x = c.x("x");
  const size_t r = size_t(x.rank());
  auto begin = c.ints("begin"), end = c.ints("end");
  auto stride = c.ints("stride", std::vector<int64_t>(r, 1));
  auto bmask = c.ints("begin_mask", std::vector<int64_t>(r, 0));
  auto emask = c.ints("end_mask", std::vector<int64_t>(r, 0));
  auto smask = c.ints("squeeze_mask", std::vector<int64_t>(r, 0));
  for (auto* v : {&begin, &end, &stride, &bmask, &emask, &smask})
    if (v->size() != r) c.fail("begin/end/stride/masks must have ", r, " entries");
  std::vector<int64_t> b(r), len(r), full, st = strides_of(x.dims), out;
  for (size_t k = 0; k < r; ++k) {
    const int64_t d = x.dims[k], s = stride[k];
    if (s == 0) c.fail("stride 0 on axis ", k);
    auto norm = [&](int64_t v) {
      if (v < 0) v += d;
      return s > 0 ? std::clamp<int64_t>(v, 0, d) : std::clamp<int64_t>(v, -1, d - 1);
    };
    int64_t lo = bmask[k] ? (s > 0 ? 0 : d - 1) : norm(begin[k]);
    int64_t hi = emask[k] ? (s > 0 ? d : -1) : norm(end[k]);
    int64_t n = s > 0 ? (hi - lo + s - 1) / s : (lo - hi + (-s) - 1) / (-s);
    n = std::max<int64_t>(n, 0);
    if (smask[k]) {
      int64_t i = begin[k] < 0 ? begin[k] + d : begin[k];
      if (i < 0 || i >= d) c.fail("squeezed index ", begin[k], " out of range on axis ", k);
      lo = i, n = 1;
    }
    b[k] = lo, len[k] = n;
    full.push_back(n);
    if (!smask[k]) out.push_back(n);
  }
  std::vector<int64_t> src;
  for_each_index(full, [&](const std::vector<int64_t>& idx) {
    int64_t o = 0;
    for (size_t k = 0; k < r; ++k) o += (b[k] + idx[k] * (smask[k] ? 1 : stride[k])) * st[k];
    src.push_back(o);
  });
  return gather_elems(x, out, src);
}

Value concat(const OpCtx& c) {
  const auto& vs = c.list("values");
  if (vs.empty()) c.fail("no values");
  const Value& first = *vs[0];
  const int64_t ax = norm_axis(c.i("axis"), first.rank(), "axis");
  const bool inter = c.b("interleave", false);
  std::vector<int64_t> dims = first.dims;
  dims[size_t(ax)] = 0;
  for (const Value* v : vs) {
    if (v->rank() != first.rank() || v->is_float() != first.is_float())
      c.fail("values ", first.str(), " and ", v->str(), " cannot be concatenated");
    for (int k = 0; k < first.rank(); ++k)
      if (k != ax && v->dims[size_t(k)] != first.dims[size_t(k)])
        c.fail("values ", first.str(), " and ", v->str(), " differ off the axis");
    if (inter && v->dims[size_t(ax)] != first.dims[size_t(ax)])
      c.fail("interleave needs equal sizes along the axis");
    dims[size_t(ax)] += v->dims[size_t(ax)];
  }
  int64_t outer = 1, inner = 1;
  for (int k = 0; k < ax; ++k) outer *= dims[size_t(k)];
  for (int k = int(ax) + 1; k < first.rank(); ++k) inner *= dims[size_t(k)];
  Value r = first.is_float() ? Value::floats(dims, first.dt) : Value::ints(dims, first.dt);
  int64_t e = 0;
  auto put = [&](const Value& v, int64_t o, int64_t j) {
    for (int64_t i = 0; i < inner; ++i, ++e) {
      const size_t s = size_t((o * v.dims[size_t(ax)] + j) * inner + i);
      if (v.is_float())
        r.f[size_t(e)] = v.f[s];
      else
        r.i[size_t(e)] = v.i[s];
    }
  };
  for (int64_t o = 0; o < outer; ++o) {
    if (inter) {
      for (int64_t j = 0; j < first.dims[size_t(ax)]; ++j)
        for (const Value* v : vs) put(*v, o, j);
    } else {
      for (const Value* v : vs)
        for (int64_t j = 0; j < v->dims[size_t(ax)]; ++j) put(*v, o, j);
    }
  }
  return r;
}

Value tile(const OpCtx& c) {
  const Value& x = c.x("x");
  auto reps = c.ints("reps");
  if (int(reps.size()) != x.rank()) c.fail("reps has ", reps.size(), " entries for ", x.str());
  std::vector<int64_t> dims, st = strides_of(x.dims), src;
  for (size_t k = 0; k < reps.size(); ++k) {
    if (reps[k] < 0) c.fail("negative rep");
    dims.push_back(x.dims[k] * reps[k]);
  }
  for_each_index(dims, [&](const std::vector<int64_t>& idx) {
    int64_t o = 0;
    for (size_t k = 0; k < idx.size(); ++k) o += (idx[k] % x.dims[k]) * st[k];
    src.push_back(o);
  });
  return gather_elems(x, dims, src);
}

Value reverse(const OpCtx& c) {
  const Value& x = c.x("x");
  std::vector<int64_t> all;
  for (int k = 0; k < x.rank(); ++k) all.push_back(k);
  auto flip = axis_set(c, x, c.ints("axes", all));
  std::vector<int64_t> st = strides_of(x.dims), src;
  for_each_index(x.dims, [&](const std::vector<int64_t>& idx) {
    int64_t o = 0;
    for (size_t k = 0; k < idx.size(); ++k)
      o += (flip[k] ? x.dims[k] - 1 - idx[k] : idx[k]) * st[k];
    src.push_back(o);
  });
  return gather_elems(x, x.dims, src);
}

Value pad(const OpCtx& c) {
  const Value& x = c.x("x");
  auto p = c.ints("pad");
  const std::string mode = c.s("mode", "constant");
  const float cval = c.f("constant_val", 0.0f);
  if (p.size() % 2 || int(p.size() / 2) > x.rank())
    c.fail("pad has ", p.size(), " entries for ", x.str());
  const size_t r = size_t(x.rank()), lead = r - p.size() / 2;
  std::vector<int64_t> lo(r, 0), dims = x.dims;
  for (size_t k = lead; k < r; ++k) {
    const int64_t b = p[2 * (k - lead)], e = p[2 * (k - lead) + 1];
    if (b < 0 || e < 0) c.fail("negative padding");
    if (mode == "reflect" && (b >= x.dims[k] || e >= x.dims[k]))
      c.fail("reflect padding ", b, "/", e, " needs a dim larger than it, got ", x.dims[k]);
    if (mode == "replicate" && x.dims[k] == 0 && b + e > 0)
      c.fail("replicate padding of an empty dim");
    lo[k] = b;
    dims[k] += b + e;
  }
  if (mode != "constant" && mode != "reflect" && mode != "replicate")
    c.fail("unknown pad mode '", mode, "'");
  std::vector<int64_t> st = strides_of(x.dims), src;
  for_each_index(dims, [&](const std::vector<int64_t>& idx) {
    int64_t o = 0;
    for (size_t k = 0; k < r && o >= 0; ++k) {
      int64_t i = idx[k] - lo[k], d = x.dims[k];
      if (i < 0 || i >= d) {
        if (mode == "constant")
          o = -1;
        else if (mode == "reflect")
          i = i < 0 ? -i : 2 * (d - 1) - i;
        else
          i = std::clamp<int64_t>(i, 0, d - 1);
      }
      if (o >= 0) o += i * st[k];
    }
    src.push_back(o);
  });
  Value r2 = x.is_float() ? Value::floats(dims, x.dt) : Value::ints(dims, x.dt);
  for (size_t k = 0; k < src.size(); ++k) {
    if (x.is_float())
      r2.f[k] = src[k] < 0 ? cval : x.f[size_t(src[k])];
    else
      r2.i[k] = src[k] < 0 ? saturate_int32(cval) : x.i[size_t(src[k])];
  }
  return r2;
}

int64_t check_index(const OpCtx& c, int64_t i, int64_t d) {
  if (i < -d || i >= d) c.fail("index ", i, " out of range for a dim of ", d);
  return i < 0 ? i + d : i;
}

Value gather(const OpCtx& c) {
  const Value &x = c.x("x"), &ind = c.x("indices");
  if (ind.is_float()) c.fail("indices must be integers, got ", ind.str());
  const int64_t ax = norm_axis(c.i("axis", 0), x.rank(), "axis");
  const int64_t bd = c.i("batch_dims", 0);
  if (bd < 0 || bd > ax || bd > ind.rank()) c.fail("bad batch_dims ", bd);
  for (int64_t k = 0; k < bd; ++k)
    if (x.dims[size_t(k)] != ind.dims[size_t(k)]) c.fail("batch dims of x and indices differ");
  std::vector<int64_t> dims(x.dims.begin(), x.dims.begin() + ax);
  dims.insert(dims.end(), ind.dims.begin() + bd, ind.dims.end());
  dims.insert(dims.end(), x.dims.begin() + ax + 1, x.dims.end());
  const int64_t ni = ind.rank() - bd;
  auto xs = strides_of(x.dims), is = strides_of(ind.dims);
  std::vector<int64_t> src;
  for_each_index(dims, [&](const std::vector<int64_t>& idx) {
    int64_t io = 0;
    for (int64_t k = 0; k < bd; ++k) io += idx[size_t(k)] * is[size_t(k)];
    for (int64_t k = 0; k < ni; ++k) io += idx[size_t(ax + k)] * is[size_t(bd + k)];
    const int64_t j = check_index(c, ind.i[size_t(io)], x.dims[size_t(ax)]);
    int64_t o = j * xs[size_t(ax)];
    for (int64_t k = 0; k < ax; ++k) o += idx[size_t(k)] * xs[size_t(k)];
    for (int64_t k = ax + 1; k < x.rank(); ++k) o += idx[size_t(k - 1 + ni)] * xs[size_t(k)];
    src.push_back(o);
  });
  return gather_elems(x, dims, src);
}

Value gather_along_axis(const OpCtx& c) {
  const Value &x = c.x("x"), &ind = c.x("indices");
  if (ind.is_float()) c.fail("indices must be integers, got ", ind.str());
  if (ind.rank() != x.rank()) c.fail("indices ", ind.str(), " and x ", x.str(), " differ in rank");
  const int64_t ax = norm_axis(c.i("axis", 0), x.rank(), "axis");
  for (int k = 0; k < x.rank(); ++k)
    if (k != ax && ind.dims[size_t(k)] > x.dims[size_t(k)])
      c.fail("indices ", ind.str(), " exceed x ", x.str());
  auto xs = strides_of(x.dims);
  std::vector<int64_t> src;
  int64_t e = 0;
  for_each_index(ind.dims, [&](const std::vector<int64_t>& idx) {
    int64_t o = 0;
    for (int k = 0; k < x.rank(); ++k)
      o += (k == ax ? check_index(c, ind.i[size_t(e)], x.dims[size_t(k)]) : idx[size_t(k)]) *
           xs[size_t(k)];
    ++e;
    src.push_back(o);
  });
  return gather_elems(x, ind.dims, src);
}

Value expand_dims(const OpCtx& c) {
  const Value& x = c.x("x");
  auto axes = c.ints("axes");
  const int r = x.rank() + int(axes.size());
  std::vector<bool> ins(size_t(r), false);
  for (int64_t a : axes) ins[size_t(norm_axis(a, r, "axis"))] = true;
  Value v = x;
  v.dims.clear();
  for (int k = 0, j = 0; k < r; ++k) v.dims.push_back(ins[size_t(k)] ? 1 : x.dims[size_t(j++)]);
  return v;
}

Value squeeze(const OpCtx& c) {
  const Value& x = c.x("x");
  std::vector<bool> drop(size_t(x.rank()), false);
  if (c.has("axes"))
    drop = axis_set(c, x, c.ints("axes"));
  else
    for (int k = 0; k < x.rank(); ++k) drop[size_t(k)] = x.dims[size_t(k)] == 1;
  Value v = x;
  v.dims.clear();
  for (int k = 0; k < x.rank(); ++k) {
    if (drop[size_t(k)] && x.dims[size_t(k)] != 1)
      c.fail("cannot squeeze axis ", k, " of ", x.str());
    if (!drop[size_t(k)]) v.dims.push_back(x.dims[size_t(k)]);
  }
  return v;
}

}  // namespace

void register_shape(OpTable& t) {
  auto red = [&](const char* name, Red k) {
    t[name] = [k](const OpCtx& c) { return reduce(c, k); };
  };
  red("reduce_sum", Red::Sum);
  red("reduce_mean", Red::Mean);
  red("reduce_prod", Red::Prod);
  red("reduce_max", Red::Max);
  red("reduce_min", Red::Min);
  red("reduce_log_sum_exp", Red::LogSumExp);
  red("reduce_sum_square", Red::SumSquare);
  red("reduce_l1_norm", Red::L1);
  red("reduce_l2_norm", Red::L2);
  t["reduce_argmax"] = [](const OpCtx& c) { return arg_reduce(c, true); };
  t["reduce_argmin"] = [](const OpCtx& c) { return arg_reduce(c, false); };
  t["softmax"] = softmax;
  t["cumsum"] = cumsum;
  t["reshape"] = reshape;
  t["transpose"] = transpose;
  t["slice_by_index"] = slice_by_index;
  t["concat"] = concat;
  t["tile"] = tile;
  t["reverse"] = reverse;
  t["pad"] = pad;
  t["gather"] = gather;
  t["gather_along_axis"] = gather_along_axis;
  t["expand_dims"] = expand_dims;
  t["squeeze"] = squeeze;
}

}  // namespace rlx::coreml::interp
