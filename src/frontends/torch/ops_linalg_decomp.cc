// Factorizations, solves and the functions made of them (torch.linalg and the older aten
// spellings) onto the linalg IR op: cholesky (+ _ex, solve, inverse), lu, det, slogdet, inverse,
// solve, triangular solves, qr, geqrf, householder_product, ormqr, svd, pinv, eigh, symeig.
// Outputs PyTorch computes only for its own use (LU, pivots) are left uncomputed; outputs it
// returns empty (svd without U/V, qr's mode 'r') are made empty in the recorded shape.
#include <algorithm>

#include "frontends/torch/lowering.h"
#include "rlx/error.h"

namespace rlx::torch_ir {
namespace {

std::vector<NodeId> linalg(LowerCtx& c, const char* fn, std::vector<NodeId> in, Attrs a = {}) {
  a.set("fn", std::string(fn));
  return c.b.results(Op::Linalg, std::move(in), std::move(a));
}

// x with a trailing unit dim added (a vector right-hand side as a matrix) or removed.
NodeId with_unit_col(LowerCtx& c, NodeId x, bool add) {
  Dims d = c.dims(x);
  if (add)
    d.push_back(1);
  else
    d.pop_back();
  return c.b.reshape(x, d);
}

// a and b expanded to their common batch dims (NumPy broadcasting of all but the last
// `a_keep` / `b_keep` dims), as PyTorch's solves broadcast.
std::pair<NodeId, NodeId> broadcast_batch(LowerCtx& c, NodeId a, NodeId b, size_t a_keep,
                                          size_t b_keep) {
  const Dims da = c.dims(a), db = c.dims(b);
  RLX_CHECK(da.size() >= a_keep && db.size() >= b_keep, c.node.op, ": inputs ", dims_str(da),
            " and ", dims_str(db), " have too few dims");
  const Dims ba(da.begin(), da.end() - int64_t(a_keep)), bb(db.begin(), db.end() - int64_t(b_keep));
  Dims batch(std::max(ba.size(), bb.size()), 1);
  for (size_t i = 0; i < batch.size(); ++i) {
    const int64_t x = i < batch.size() - ba.size() ? 1 : ba[i - (batch.size() - ba.size())];
    const int64_t y = i < batch.size() - bb.size() ? 1 : bb[i - (batch.size() - bb.size())];
    RLX_CHECK(x == y || x == 1 || y == 1, c.node.op, ": batch dims of ", dims_str(da), " and ",
              dims_str(db), " do not broadcast");
    batch[i] = std::max(x, y);
  }
  auto grow = [&](NodeId v, const Dims& d, size_t keep) {
    Dims want = batch;
    want.insert(want.end(), d.end() - int64_t(keep), d.end());
    return want == d ? v : c.b.op(Op::Expand, {v}, {{"shape", want}});
  };
  return {grow(a, da, a_keep), grow(b, db, b_keep)};
}

// An empty tensor in the shape PyTorch recorded for tuple output `k`.
NodeId recorded_empty(LowerCtx& c, size_t k, DType t) {
  const auto& out = c.node.out;
  RLX_CHECK(out.kind == Out::Tuple && k < out.tuple.size() && out.tuple[k], c.node.op,
            ": no recorded shape for output ", k);
  const Dims d = out.tuple[k]->shape;
  RLX_CHECK(numel(d) == 0, c.node.op, ": output ", k, " ", dims_str(d), " was expected empty");
  return c.b.full(d, 0, t);
}

// Solves A X = B (left) or X A = B with A triangular, batches broadcast.
NodeId tri_solve(LowerCtx& c, NodeId A, NodeId B, bool upper, bool left, bool unit) {
  auto [a, b] = broadcast_batch(c, A, B, 2, 2);
  return linalg(c, "triangular_solve", {a, b},
                {{"upper", upper}, {"left", left}, {"unitriangular", unit}})[0];
}

// The identity of A's size and batch, as PyTorch's solves against it.
NodeId identity_like(LowerCtx& c, NodeId A) {
  const Dims d = c.dims(A);
  const int64_t n = d.back();
  std::vector<double> e(size_t(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i) e[size_t(i * n + i)] = 1;
  const NodeId eye = c.b.constant(Tensor::from_vector({n, n}, e, c.shape(A).dtype));
  return c.b.op(Op::Expand, {eye}, {{"shape", d}});
}

// pinv(A): V diag(1 / s) U^T over the singular values above max(atol, rtol * s_max) (hermitian:
// the eigenvalues by magnitude), PyTorch's linalg_pinv.atol_rtol_tensor.
Value pinv(LowerCtx& c) {
  const NodeId A = c.tensor(0, "self");
  const DType t = c.shape(A).dtype;
  const bool hermitian = c.flag(3, "hermitian", false);
  const Dims d = c.dims(A);
  RLX_CHECK(d.size() >= 2, c.node.op, ": expected a matrix, got ", c.shape(A).str());
  const int64_t m = d[d.size() - 2], n = d.back();
  if (m == 0 || n == 0) {  // no singular values: the [..., n, m] zeros
    Dims z = d;
    std::swap(z[z.size() - 1], z[z.size() - 2]);
    return Value::tensor(c.b.full(z, 0, t));
  }
  // rtol defaults to eps * max(m, n), or 0 when a positive atol is given instead.
  const double eps = t == DType::F64 ? 2.220446049250313e-16 : 1.1920928955078125e-07;
  const NodeId zero = c.scalar(0, t);
  NodeId atol = c.has(1, "atol") ? c.cast(c.as_tensor(*c.arg(1, "atol"), t), t) : zero;
  NodeId rtol = c.has(2, "rtol") ? c.cast(c.as_tensor(*c.arg(2, "rtol"), t), t)
                                 : c.scalar(eps * double(std::max(m, n)), t);
  if (c.has(1, "atol") && !c.has(2, "rtol"))
    rtol = c.b.op(Op::Where, {c.b.op(Op::Gt, {atol, zero}), zero, rtol});
  auto col = [&](NodeId v) {  // [batch...] tolerances against [batch..., k] values
    return c.rank(v) == 0 ? v : with_unit_col(c, v, true);
  };
  NodeId vals, left, right;  // pinv = left diag(1 / vals) right
  NodeId mag;
  if (hermitian) {
    const auto wq = linalg(c, "eigh", {A});
    vals = wq[0];
    mag = c.b.unary(Op::Abs, vals);
    left = wq[1];
    right = mT(c, wq[1]);
  } else {
    const auto usv = linalg(c, "svd", {A});
    vals = mag = usv[1];
    left = mT(c, usv[2]);
    right = mT(c, usv[0]);
  }
  const NodeId top = c.b.reduce(Op::ReduceMax, mag, {-1}, true);
  const NodeId cut = c.b.binary(Op::Max, col(atol), c.b.mul(col(rtol), top));
  const NodeId inv =
      c.b.op(Op::Where, {c.b.op(Op::Gt, {mag, cut}), c.b.op(Op::Reciprocal, {vals}), zero});
  Dims row = c.dims(inv);
  row.insert(row.end() - 1, 1);
  return Value::tensor(c.b.matmul(c.b.mul(left, c.b.reshape(inv, row)), right));
}

}  // namespace

void register_linalg_decompositions(Registry& r) {
  r.add("aten.cholesky", [](LowerCtx& c) {  // (self, upper=False)
    return Value::tensor(
        linalg(c, "cholesky", {c.tensor(0, "self")}, {{"upper", c.flag(1, "upper", false)}})[0]);
  });
  r.add("aten.linalg_cholesky_ex", [](LowerCtx& c) {  // (A, *, upper, check_errors) -> (L, info)
    return Value::tuple(
        linalg(c, "cholesky", {c.tensor(0, "self")}, {{"upper", c.flag(1, "upper", false)}}));
  });
  // cholesky_solve(B, F, upper): A X = B with A = F F^T (upper: F^T F), as two triangular solves.
  r.add("aten.cholesky_solve", [](LowerCtx& c) {
    const NodeId B = c.tensor(0, "self"), F = c.tensor(1, "input2");
    const bool upper = c.flag(2, "upper", false);
    const NodeId lower = upper ? mT(c, F) : F, upper_f = upper ? F : mT(c, F);
    const NodeId y = tri_solve(c, lower, B, false, true, false);
    return Value::tensor(tri_solve(c, upper_f, y, true, true, false));
  });
  // cholesky_inverse(F, upper): (F F^T)^-1 = F^-T F^-1 (upper: F^-1 F^-T).
  r.add("aten.cholesky_inverse", [](LowerCtx& c) {
    const NodeId F = c.tensor(0, "self");
    const bool upper = c.flag(1, "upper", false);
    const NodeId Finv = tri_solve(c, F, identity_like(c, F), upper, true, false);
    return Value::tensor(upper ? c.b.matmul(Finv, mT(c, Finv)) : c.b.matmul(mT(c, Finv), Finv));
  });
  r.add("aten.linalg_lu", [](LowerCtx& c) {  // (A, *, pivot=True) -> (P, L, U)
    RLX_CHECK(c.flag(1, "pivot", true), c.node.op, ": LU without pivoting is not supported");
    return Value::tuple(linalg(c, "lu", {c.tensor(0, "A")}));
  });
  r.add("aten._linalg_det", [](LowerCtx& c) {  // (A) -> (det, LU, pivots)
    return Value::tuple({linalg(c, "det", {c.tensor(0, "A")})[0], -1, -1});
  });
  r.add("aten._linalg_slogdet", [](LowerCtx& c) {  // (A) -> (sign, logabsdet, LU, pivots)
    const auto s = linalg(c, "slogdet", {c.tensor(0, "A")});
    return Value::tuple({s[0], s[1], -1, -1});
  });
  r.add("aten.linalg_inv_ex", [](LowerCtx& c) {  // (A, *, check_errors) -> (inverse, info)
    return Value::tuple(linalg(c, "inverse", {c.tensor(0, "A")}));
  });
  // _linalg_solve_ex(A, B, *, left, check_errors) -> (X, LU, pivots, info); B is a vector
  // (PyTorch's rule) when it is 1-d or A's batch dims plus n.
  r.add("aten._linalg_solve_ex", [](LowerCtx& c) {
    NodeId A = c.tensor(0, "A"), B = c.tensor(1, "B");
    const bool left = c.flag(2, "left", true);
    const Dims da = c.dims(A), db = c.dims(B);
    const bool vector = db.size() == 1 || (db.size() + 1 == da.size() &&
                                           std::equal(db.begin(), db.end(), da.begin()));
    if (vector) B = with_unit_col(c, B, true);
    if (vector && !left) B = mT(c, B);
    auto [a, b] = broadcast_batch(c, A, B, 2, 2);
    auto x = linalg(c, "solve", {a, b}, {{"left", left}});
    NodeId X = x[0];
    if (vector) X = with_unit_col(c, left ? X : mT(c, X), false);
    return Value::tuple({X, -1, -1, x[1]});
  });
  // triangular_solve(b, A, upper=True, transpose=False, unitriangular=False) -> (X, A's clone)
  r.add("aten.triangular_solve", [](LowerCtx& c) {
    const NodeId B = c.tensor(0, "self"), A = c.tensor(1, "A");
    const bool upper = c.flag(2, "upper", true), trans = c.flag(3, "transpose", false);
    const NodeId X = tri_solve(c, trans ? mT(c, A) : A, B, upper != trans, true,
                               c.flag(4, "unitriangular", false));
    return Value::tuple({X, A});
  });
  r.add("aten.linalg_solve_triangular", [](LowerCtx& c) {  // (A, B, *, upper, left, unitriangular)
    return Value::tensor(tri_solve(c, c.tensor(0, "self"), c.tensor(1, "B"),
                                   c.flag(2, "upper", false), c.flag(3, "left", true),
                                   c.flag(4, "unitriangular", false)));
  });
  r.add("aten.linalg_qr", [](LowerCtx& c) {  // (A, mode='reduced') -> (Q, R)
    const NodeId A = c.tensor(0, "A");
    const std::string mode = c.str(1, "mode", "reduced");
    RLX_CHECK(mode == "reduced" || mode == "complete" || mode == "r", c.node.op, ": unknown mode '",
              mode, "'");
    const auto qr = linalg(c, "qr", {A}, {{"full_matrices", mode == "complete"}});
    if (mode == "r") return Value::tuple({recorded_empty(c, 0, c.shape(A).dtype), qr[1]});
    return Value::tuple(qr);
  });
  r.add("aten.geqrf", [](LowerCtx& c) {  // (A) -> (a, tau)
    return Value::tuple(linalg(c, "geqrf", {c.tensor(0, "self")}));
  });
  r.add("aten.linalg_householder_product", [](LowerCtx& c) {  // (A, tau)
    auto [a, tau] = broadcast_batch(c, c.tensor(0, "input"), c.tensor(1, "tau"), 2, 1);
    return Value::tensor(linalg(c, "householder_product", {a, tau})[0]);
  });
  // ormqr(A, tau, C, left=True, transpose=False): Q C, C Q or with Q^T, Q [m, m] the product of
  // every reflector (the packed A padded to m columns with tau's zeros: identity reflectors).
  r.add("aten.ormqr", [](LowerCtx& c) {
    const NodeId A = c.tensor(0, "self"), tau = c.tensor(1, "input2"), C = c.tensor(2, "input3");
    const bool left = c.flag(3, "left", true), trans = c.flag(4, "transpose", false);
    const DType t = c.shape(A).dtype;
    Dims da = c.dims(A), dt = c.dims(tau);
    const int64_t m = da[da.size() - 2], k = da.back();
    RLX_CHECK(k <= m && dt.back() <= k, c.node.op, ": expected A [..., m, k] with k <= m and tau",
              " [..., t] with t <= k, got ", dims_str(da), " and ", dims_str(dt));
    NodeId full = A, taus = tau;
    if (k < m) {
      Dims pad = da;
      pad.back() = m - k;
      full = c.b.concat({A, c.b.full(pad, 0, t)}, -1);
    }
    if (dt.back() < m) {
      Dims pad = dt;
      pad.back() = m - dt.back();
      taus = c.b.concat({tau, c.b.full(pad, 0, t)}, -1);
    }
    auto [a, tt] = broadcast_batch(c, full, taus, 2, 1);
    NodeId Q = linalg(c, "householder_product", {a, tt})[0];
    if (trans) Q = mT(c, Q);
    return Value::tensor(left ? c.b.matmul(Q, C) : c.b.matmul(C, Q));
  });
  // _linalg_svd(A, full_matrices=False, compute_uv=True, *, driver) -> (U, S, Vh)
  r.add("aten._linalg_svd", [](LowerCtx& c) {
    const NodeId A = c.tensor(0, "A");
    const bool uv = c.flag(2, "compute_uv", true);
    const auto usv = linalg(c, "svd", {A}, {{"full_matrices", c.flag(1, "full_matrices", false)}});
    if (uv) return Value::tuple(usv);
    const DType t = c.shape(A).dtype;
    return Value::tuple({recorded_empty(c, 0, t), usv[1], recorded_empty(c, 2, t)});
  });
  r.add("aten.linalg_pinv.atol_rtol_tensor", pinv);
  r.add("aten.linalg_pinv.atol_rtol_float", pinv);
  // _linalg_eigh(A, UPLO='L', compute_v=True) -> (eigenvalues, eigenvectors)
  r.add("aten._linalg_eigh", [](LowerCtx& c) {
    const NodeId A = c.tensor(0, "A");
    const std::string uplo = c.str(1, "UPLO", "L");
    RLX_CHECK(uplo == "L" || uplo == "U", c.node.op, ": UPLO must be 'L' or 'U', got '", uplo, "'");
    const auto wq = linalg(c, "eigh", {A}, {{"upper", uplo == "U"}});
    if (c.flag(2, "compute_v", true)) return Value::tuple(wq);
    return Value::tuple({wq[0], recorded_empty(c, 1, c.shape(A).dtype)});
  });
  // symeig(A, eigenvectors=False, upper=True) -> (eigenvalues, eigenvectors or empty)
  r.add("aten.symeig", [](LowerCtx& c) {
    const NodeId A = c.tensor(0, "self");
    const auto wq = linalg(c, "eigh", {A}, {{"upper", c.flag(2, "upper", true)}});
    if (c.flag(1, "eigenvectors", false)) return Value::tuple(wq);
    return Value::tuple({wq[0], recorded_empty(c, 1, c.shape(A).dtype)});
  });
}

}  // namespace rlx::torch_ir
