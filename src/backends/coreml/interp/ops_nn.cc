// matmul, linear, conv (any spatial rank, im2col), pools, layer_norm and
// scaled_dot_product_attention. Dot products accumulate in double so the
// reference is at least as accurate as the backends it checks.
#include <algorithm>
#include <cmath>

#include "value.h"

namespace rlx::coreml::interp {
namespace {

void need_float(const OpCtx& c, const Value& v, const char* what) {
  if (!v.is_float()) c.fail(what, " must be float, got ", v.str());
}

// out[M,N] = a[M,K] * b[K,N] (+=), all row-major; a/b given with element strides.
void gemm(int64_t M, int64_t N, int64_t K, const float* a, int64_t sam, int64_t sak, const float* b,
          int64_t sbk, int64_t sbn, float* out) {
  std::vector<double> row(static_cast<size_t>(N));
  for (int64_t m = 0; m < M; ++m) {
    std::fill(row.begin(), row.end(), 0.0);
    for (int64_t k = 0; k < K; ++k) {
      const double av = a[m * sam + k * sak];
      if (av == 0.0) continue;
      const float* bk = b + k * sbk;
      for (int64_t n = 0; n < N; ++n) row[size_t(n)] += av * double(bk[n * sbn]);
    }
    for (int64_t n = 0; n < N; ++n) out[m * N + n] = float(row[size_t(n)]);
  }
}

Value matmul(const OpCtx& c) {
  Value x = c.x("x"), y = c.x("y");
  need_float(c, x, "x");
  need_float(c, y, "y");
  const bool tx = c.b("transpose_x", false), ty = c.b("transpose_y", false);
  const bool x1 = x.rank() == 1, y1 = y.rank() == 1;
  if (x.rank() == 0 || y.rank() == 0) c.fail("matmul of a scalar");
  if (x1) x.dims.insert(x.dims.begin(), 1);  // [K] -> [1,K], transpose ignored
  if (y1) y.dims.push_back(1);               // [K] -> [K,1]
  const int rx = x.rank(), ry = y.rank();
  const int64_t M = x.dims[size_t(rx - (tx && !x1 ? 1 : 2))],
                K = x.dims[size_t(rx - (tx && !x1 ? 2 : 1))];
  const int64_t K2 = y.dims[size_t(ry - (ty && !y1 ? 1 : 2))],
                N = y.dims[size_t(ry - (ty && !y1 ? 2 : 1))];
  if (K != K2) c.fail("inner dims differ: ", c.x("x").str(), " x ", c.x("y").str());
  std::vector<int64_t> bx(x.dims.begin(), x.dims.end() - 2), by(y.dims.begin(), y.dims.end() - 2);
  auto batch = broadcast_dims(c, bx, by);
  auto ox = broadcast_offsets(bx, batch), oy = broadcast_offsets(by, batch);
  std::vector<int64_t> dims = batch;
  dims.push_back(M);
  dims.push_back(N);
  Value r = Value::floats(dims, x.dt);
  const int64_t xm = M * K, ym = K * N;
  for (size_t bi = 0; bi < ox.size(); ++bi) {
    const float* a = x.f.data() + ox[bi] * xm;
    const float* b = y.f.data() + oy[bi] * ym;
    gemm(M, N, K, a, tx && !x1 ? 1 : K, tx && !x1 ? M : 1, b, ty && !y1 ? 1 : N, ty && !y1 ? K : 1,
         r.f.data() + int64_t(bi) * M * N);
  }
  if (x1) r.dims.erase(r.dims.end() - 2);
  if (y1) r.dims.pop_back();
  return r;
}

Value linear(const OpCtx& c) {
  const Value &x = c.x("x"), &w = c.x("weight");
  need_float(c, x, "x");
  if (w.rank() != 2 || x.rank() < 1 || x.dims.back() != w.dims[1])
    c.fail("x ", x.str(), " and weight ", w.str(), " do not fit");
  const Value* bias = c.opt("bias");
  const int64_t D = w.dims[0], K = w.dims[1], M = K ? x.numel() / K : 0;
  std::vector<int64_t> dims = x.dims;
  dims.back() = D;
  Value r = Value::floats(dims, x.dt);
  gemm(M, D, K, x.f.data(), K, 1, w.f.data(), 1, K, r.f.data());
  if (bias) {
    if (bias->numel() != D) c.fail("bias ", bias->str(), " for ", D, " outputs");
    for (int64_t m = 0; m < M; ++m)
      for (int64_t d = 0; d < D; ++d) r.f[size_t(m * D + d)] += bias->f[size_t(d)];
  }
  return r;
}

// Resolved padding for conv/pool windows along each spatial dim.
struct Window {
  std::vector<int64_t> in, k, stride, dil, pb, pe, out;
};

Window window(const OpCtx& c, const std::vector<int64_t>& in, const std::vector<int64_t>& k,
              bool ceil_mode = false) {
  const size_t sp = in.size();
  Window w{in,
           k,
           c.ints("strides", std::vector<int64_t>(sp, 1)),
           c.ints("dilations", std::vector<int64_t>(sp, 1)),
           {},
           {},
           {}};
  if (w.stride.size() != sp || w.dil.size() != sp || k.size() != sp)
    c.fail("strides/dilations/kernel need ", sp, " entries");
  const std::string pt = c.s("pad_type", "valid");
  std::vector<int64_t> pad = c.ints("pad", std::vector<int64_t>(2 * sp, 0));
  for (size_t d = 0; d < sp; ++d) {
    if (w.stride[d] <= 0 || w.dil[d] <= 0 || k[d] <= 0) c.fail("bad stride/dilation/kernel");
    const int64_t ek = (k[d] - 1) * w.dil[d] + 1;
    int64_t b = 0, e = 0;
    if (pt == "custom") {
      if (pad.size() != 2 * sp) c.fail("pad needs ", 2 * sp, " entries, got ", pad.size());
      b = pad[2 * d], e = pad[2 * d + 1];
    } else if (pt == "same" || pt == "same_lower") {
      const int64_t o = (in[d] + w.stride[d] - 1) / w.stride[d];
      const int64_t total = std::max<int64_t>((o - 1) * w.stride[d] + ek - in[d], 0);
      b = pt == "same" ? total / 2 : total - total / 2;
      e = total - b;
    } else if (pt != "valid") {
      c.fail("unknown pad_type '", pt, "'");
    }
    if (b < 0 || e < 0) c.fail("negative padding");
    w.pb.push_back(b);
    w.pe.push_back(e);
    const int64_t span = in[d] + b + e - ek;
    if (span < 0) c.fail("window ", ek, " larger than padded input ", in[d] + b + e);
    int64_t o = (ceil_mode ? (span + w.stride[d] - 1) / w.stride[d] : span / w.stride[d]) + 1;
    // As in PyTorch, a last window that starts inside the end padding is dropped.
    if (ceil_mode && (o - 1) * w.stride[d] >= in[d] + b) --o;
    w.out.push_back(o);
  }
  return w;
}

Value conv(const OpCtx& c) {
  const Value &x = c.x("x"), &wt = c.x("weight");
  need_float(c, x, "x");
  need_float(c, wt, "weight");
  if (x.rank() < 3 || wt.rank() != x.rank())
    c.fail("x ", x.str(), " and weight ", wt.str(), " do not fit");
  const int64_t groups = c.i("groups", 1), N = x.dims[0], Cin = x.dims[1], Cout = wt.dims[0];
  if (groups <= 0 || Cin % groups || Cout % groups || wt.dims[1] != Cin / groups)
    c.fail("x ", x.str(), ", weight ", wt.str(), " and groups ", groups, " do not fit");
  const std::vector<int64_t> in(x.dims.begin() + 2, x.dims.end()),
      k(wt.dims.begin() + 2, wt.dims.end());
  Window w = window(c, in, k);
  const size_t sp = in.size();
  int64_t P = 1, KP = 1, IP = 1;
  for (size_t d = 0; d < sp; ++d) P *= w.out[d], KP *= k[d], IP *= in[d];
  // For every (kernel position, output position): input spatial offset or -1.
  std::vector<int64_t> src(static_cast<size_t>(KP * P));
  auto ist = strides_of(in), kst = strides_of(k), ost = strides_of(w.out);
  for (int64_t kp = 0; kp < KP; ++kp)
    for (int64_t p = 0; p < P; ++p) {
      int64_t off = 0;
      for (size_t d = 0; d < sp && off >= 0; ++d) {
        const int64_t kd = (kp / kst[d]) % k[d], od = (p / ost[d]) % w.out[d];
        const int64_t i = od * w.stride[d] - w.pb[d] + kd * w.dil[d];
        off = (i < 0 || i >= in[d]) ? -1 : off + i * ist[d];
      }
      src[size_t(kp * P + p)] = off;
    }
  std::vector<int64_t> dims{N, Cout};
  dims.insert(dims.end(), w.out.begin(), w.out.end());
  Value r = Value::floats(dims, x.dt);
  const Value* bias = c.opt("bias");
  if (bias && bias->numel() != Cout) c.fail("bias ", bias->str(), " for ", Cout, " channels");
  const int64_t cg = Cin / groups, og = Cout / groups, R = cg * KP;
  std::vector<float> col(static_cast<size_t>(R * P));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < groups; ++g) {
      for (int64_t ci = 0; ci < cg; ++ci) {
        const float* xc = x.f.data() + (n * Cin + g * cg + ci) * IP;
        for (int64_t kp = 0; kp < KP; ++kp)
          for (int64_t p = 0; p < P; ++p) {
            const int64_t s = src[size_t(kp * P + p)];
            col[size_t((ci * KP + kp) * P + p)] = s < 0 ? 0.0f : xc[s];
          }
      }
      float* out = r.f.data() + (n * Cout + g * og) * P;
      gemm(og, P, R, wt.f.data() + g * og * R, R, 1, col.data(), P, 1, out);
      if (bias)
        for (int64_t o = 0; o < og; ++o)
          for (int64_t p = 0; p < P; ++p) out[o * P + p] += bias->fget(g * og + o);
    }
  return r;
}

Value pool(const OpCtx& c, bool is_max) {
  const Value& x = c.x("x");
  need_float(c, x, "x");
  if (x.rank() < 3) c.fail("x must be [N, C, spatial...], got ", x.str());
  const std::vector<int64_t> in(x.dims.begin() + 2, x.dims.end());
  Window w = window(c, in, c.ints("kernel_sizes"), c.b("ceil_mode", false));
  const bool excl = c.b("exclude_padding_from_average", false);
  const size_t sp = in.size();
  int64_t P = 1, KP = 1, IP = 1;
  for (size_t d = 0; d < sp; ++d) P *= w.out[d], KP *= w.k[d], IP *= in[d];
  auto ist = strides_of(in), kst = strides_of(w.k), ost = strides_of(w.out);
  std::vector<int64_t> dims{x.dims[0], x.dims[1]};
  dims.insert(dims.end(), w.out.begin(), w.out.end());
  Value r = Value::floats(dims, x.dt);
  const int64_t planes = x.dims[0] * x.dims[1];
  for (int64_t p = 0; p < P; ++p) {
    // Valid input offsets of this window, and the divisor for average pooling.
    std::vector<int64_t> offs;
    int64_t inside_padded = 0;
    for (int64_t kp = 0; kp < KP; ++kp) {
      int64_t off = 0;
      bool in_padded = true;
      for (size_t d = 0; d < sp; ++d) {
        const int64_t i = (p / ost[d]) % w.out[d] * w.stride[d] - w.pb[d] + (kp / kst[d]) % w.k[d];
        in_padded &= i < in[d] + w.pe[d];
        if (off >= 0) off = (i < 0 || i >= in[d]) ? -1 : off + i * ist[d];
      }
      inside_padded += in_padded;
      if (off >= 0) offs.push_back(off);
    }
    const double div = double(excl ? int64_t(offs.size()) : inside_padded);
    for (int64_t pl = 0; pl < planes; ++pl) {
      const float* xp = x.f.data() + pl * IP;
      double acc = is_max ? -INFINITY : 0.0;
      for (int64_t o : offs) acc = is_max ? std::max(acc, double(xp[o])) : acc + xp[o];
      r.f[size_t(pl * P + p)] = float(is_max ? acc : (div > 0 ? acc / div : 0.0));
    }
  }
  return r;
}

Value layer_norm(const OpCtx& c) {
  const Value& x = c.x("x");
  need_float(c, x, "x");
  std::vector<int64_t> axes;
  if (c.has("axes"))
    for (int64_t a : c.ints("axes")) axes.push_back(norm_axis(a, x.rank(), "axis"));
  else
    for (int k = 0; k < x.rank(); ++k) axes.push_back(k);
  std::sort(axes.begin(), axes.end());
  std::vector<bool> red(size_t(x.rank()), false);
  std::vector<int64_t> gdims;
  for (int64_t a : axes) red[size_t(a)] = true, gdims.push_back(x.dims[size_t(a)]);
  const Value *gamma = c.opt("gamma"), *beta = c.opt("beta");
  int64_t gn = 1;
  for (int64_t d : gdims) gn *= d;
  if ((gamma && gamma->numel() != gn) || (beta && beta->numel() != gn))
    c.fail("gamma/beta must have the normalized shape (", gn, " elements)");
  const float eps = c.f("epsilon", 1e-5f);
  // slot (kept dims) and position within the normalized dims, per element.
  auto xs = strides_of(x.dims);
  std::vector<int64_t> kept, gst = strides_of(gdims);
  for (int k = 0; k < x.rank(); ++k) kept.push_back(red[size_t(k)] ? 1 : x.dims[size_t(k)]);
  auto kst = strides_of(kept);
  int64_t nslots = 1;
  for (int64_t d : kept) nslots *= d;
  const int64_t n = x.numel();
  std::vector<int64_t> slot(static_cast<size_t>(n)), gpos(static_cast<size_t>(n));
  for (int64_t e = 0; e < n; ++e) {
    int64_t s = 0, g = 0, j = 0;
    for (int k = 0; k < x.rank(); ++k) {
      const int64_t i = (e / xs[size_t(k)]) % x.dims[size_t(k)];
      if (red[size_t(k)])
        g += i * gst[size_t(j++)];
      else
        s += i * kst[size_t(k)];
    }
    slot[size_t(e)] = s, gpos[size_t(e)] = g;
  }
  std::vector<double> mean(size_t(nslots), 0.0), var(size_t(nslots), 0.0);
  for (int64_t e = 0; e < n; ++e) mean[size_t(slot[size_t(e)])] += x.f[size_t(e)];
  for (auto& m : mean) m /= double(gn);
  for (int64_t e = 0; e < n; ++e) {
    const double d = x.f[size_t(e)] - mean[size_t(slot[size_t(e)])];
    var[size_t(slot[size_t(e)])] += d * d;
  }
  for (auto& v : var) v /= double(gn);
  Value r = Value::floats(x.dims, x.dt);
  for (int64_t e = 0; e < n; ++e) {
    const size_t s = size_t(slot[size_t(e)]), g = size_t(gpos[size_t(e)]);
    double y = (x.f[size_t(e)] - mean[s]) / std::sqrt(var[s] + double(eps));
    if (gamma) y *= gamma->f[g];
    if (beta) y += beta->f[g];
    r.f[size_t(e)] = float(y);
  }
  return r;
}

Value sdpa(const OpCtx& c) {
  const Value &q = c.x("query"), &k = c.x("key"), &v = c.x("value");
  need_float(c, q, "query");
  if (q.rank() < 2 || k.rank() != q.rank() || v.rank() != q.rank()) c.fail("ranks differ");
  const int r = q.rank();
  const int64_t L = q.dims[size_t(r - 2)], E = q.dims[size_t(r - 1)], S = k.dims[size_t(r - 2)],
                Ev = v.dims[size_t(r - 1)];
  if (k.dims[size_t(r - 1)] != E || v.dims[size_t(r - 2)] != S) c.fail("q/k/v dims do not fit");
  std::vector<int64_t> batch(q.dims.begin(), q.dims.end() - 2);
  for (int d = 0; d < r - 2; ++d)
    if (k.dims[size_t(d)] != batch[size_t(d)] || v.dims[size_t(d)] != batch[size_t(d)])
      c.fail("batch dims of q/k/v differ");
  int64_t B = 1;
  for (int64_t d : batch) B *= d;
  std::vector<int64_t> sdims = batch;
  sdims.push_back(L);
  sdims.push_back(S);
  const Value* mask = c.opt("attn_mask");
  std::vector<int64_t> mo;
  if (mask) {
    broadcast_dims(c, mask->dims, sdims);
    mo = broadcast_offsets(mask->dims, sdims);
  }
  std::vector<int64_t> dims = batch;
  dims.push_back(L);
  dims.push_back(Ev);
  Value out = Value::floats(dims, q.dt);
  const double scale = 1.0 / std::sqrt(double(E));
  std::vector<double> s(static_cast<size_t>(S));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < L; ++i) {
      double mx = -INFINITY;
      for (int64_t j = 0; j < S; ++j) {
        double acc = 0;
        for (int64_t e = 0; e < E; ++e)
          acc += double(q.f[size_t((b * L + i) * E + e)]) * k.f[size_t((b * S + j) * E + e)];
        acc *= scale;
        if (mask) {
          const int64_t m = mo[size_t((b * L + i) * S + j)];
          if (mask->dt == pb::BOOL)
            acc = mask->i[size_t(m)] ? acc : -INFINITY;
          else
            acc += mask->fget(m);
        }
        s[size_t(j)] = acc;
        mx = std::max(mx, acc);
      }
      double sum = 0;
      for (auto& e : s) sum += (e = std::isinf(mx) ? 0.0 : std::exp(e - mx));
      for (int64_t e = 0; e < Ev; ++e) {
        double acc = 0;
        for (int64_t j = 0; j < S; ++j) acc += s[size_t(j)] * v.f[size_t((b * S + j) * Ev + e)];
        out.f[size_t((b * L + i) * Ev + e)] = float(sum > 0 ? acc / sum : 0.0);
      }
    }
  return out;
}

}  // namespace

void register_nn(OpTable& t) {
  t["matmul"] = matmul;
  t["linear"] = linear;
  t["conv"] = conv;
  t["max_pool"] = [](const OpCtx& c) { return pool(c, true); };
  t["avg_pool"] = [](const OpCtx& c) { return pool(c, false); };
  t["layer_norm"] = layer_norm;
  t["scaled_dot_product_attention"] = sdpa;
}

}  // namespace rlx::coreml::interp
