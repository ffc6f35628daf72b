// Linear-algebra compositions: the add*-matmul family (addbmm, addmv, addr),
// cross products, pairwise distances (cdist, pdist), _trilinear (bilinear),
// diagonal embedding and scattering, block_diag and renorm. Each is a few
// plain IR ops; none needs a kernel of its own.
#include <algorithm>
#include <cmath>

#include "frontends/torch/lowering.h"
#include "rlx/error.h"

namespace rlx::torch_ir {
namespace {

NodeId scaled(LowerCtx& c, NodeId x, double s) {
  return s == 1 ? x : c.b.mul(x, c.scalar(s, c.shape(x).dtype));
}

// beta * self + alpha * prod; beta = 0 ignores self (NaN there too), as PyTorch does.
Value beta_self_plus(LowerCtx& c, NodeId prod, size_t beta_pos, size_t alpha_pos) {
  const DType t = c.out_dtype();
  prod = scaled(c, c.cast(prod, t), c.f(alpha_pos, "alpha", 1));
  const double beta = c.f(beta_pos, "beta", 1);
  if (beta == 0)
    return Value::tensor(c.dims(prod) == c.out().shape
                             ? prod
                             : c.b.op(Op::Expand, {prod}, {{"shape", c.out().shape}}));
  return Value::tensor(c.b.add(scaled(c, c.cast(c.tensor(0, "self"), t), beta), prod));
}

NodeId index_const(LowerCtx& c, const std::vector<int64_t>& v) {
  Tensor t({int64_t(v.size())}, DType::I64);
  std::copy(v.begin(), v.end(), t.data<int64_t>());
  return c.b.constant(t);
}

// x with a size-1 dim inserted at `at`.
NodeId unsqueeze(LowerCtx& c, NodeId x, int at) {
  Dims d = c.dims(x);
  d.insert(d.begin() + at, 1);
  return c.b.reshape(x, d);
}

// The inverse of a permutation.
std::vector<int64_t> inverse(const std::vector<int64_t>& p) {
  std::vector<int64_t> inv(p.size());
  for (size_t k = 0; k < p.size(); ++k) inv[size_t(p[k])] = int64_t(k);
  return inv;
}

// The permutation that moves dims d1, d2 of a rank-r tensor last (in that order).
std::vector<int64_t> two_last(int r, int d1, int d2) {
  std::vector<int64_t> p;
  for (int k = 0; k < r; ++k)
    if (k != d1 && k != d2) p.push_back(k);
  p.push_back(d1);
  p.push_back(d2);
  return p;
}

// src [..., L] placed on the diagonal `off` of [..., n1, n2] over `base`
// (0 where base < 0): element k at (k + max(0, -off), k + max(0, off)). The
// value at (i, j) is src[..., i] (off >= 0) or src[..., j] (off < 0), padded
// to the row or column count and broadcast; a where() keeps it on the diagonal.
NodeId diag_place(LowerCtx& c, NodeId src, int64_t n1, int64_t n2, int64_t off, NodeId base) {
  Dims d = c.dims(src);
  const int r = int(d.size());
  const int64_t L = d.back(), n = off >= 0 ? n1 : n2;
  RLX_CHECK(L <= n, "diagonal: ", L, " values do not fit ", n1, " x ", n2, " at offset ", off);
  if (L < n) {
    std::vector<int64_t> pads(size_t(2 * r), 0);
    pads[size_t(2 * r - 1)] = n - L;
    src = c.b.op(Op::Pad, {src}, {{"pads", pads}});
  }
  d.back() = 1;
  d.insert(d.end() - (off >= 0 ? 1 : 0), n);
  src = c.b.reshape(src, d);
  const NodeId rows = c.b.reshape(c.b.arange(n1), {n1, 1});
  const NodeId cols = c.b.reshape(c.b.arange(n2), {1, n2});
  const NodeId on = c.b.op(Op::Eq, {c.b.sub(cols, rows), c.scalar(double(off), DType::I64)});
  const DType t = c.shape(src).dtype;
  return c.b.op(Op::Where, {on, src, base >= 0 ? base : c.scalar(0, t)});
}

// diag_embed(x, offset, dim1, dim2): x's last dim on a diagonal of two new dims.
Value diag_embed(LowerCtx& c) {
  const NodeId x = c.tensor(0, "self");
  const int64_t off = c.i(1, "offset", 0);
  const int r = c.rank(x) + 1;
  const int d1 = normalize_axis(c.i(2, "dim1", -2), r), d2 = normalize_axis(c.i(3, "dim2", -1), r);
  RLX_CHECK(d1 != d2, "diag_embed: dim1 and dim2 must differ");
  const int64_t m = c.dims(x).back() + std::abs(off);
  const NodeId placed = diag_place(c, x, m, m, off, -1);
  Dims full = c.dims(x);
  full.back() = m;
  full.push_back(m);
  const NodeId y =
      c.dims(placed) == full ? placed : c.b.op(Op::Expand, {placed}, {{"shape", full}});
  return Value::tensor(c.b.transpose(y, inverse(two_last(r, d1, d2))));
}

// diagonal_scatter(self, src, offset, dim1, dim2): self with that diagonal set to src.
Value diagonal_scatter(LowerCtx& c) {
  const NodeId x = c.tensor(0, "self");
  const NodeId src = c.cast(c.tensor(1, "src"), c.shape(x).dtype);
  const int64_t off = c.i(2, "offset", 0);
  const int r = c.rank(x);
  const int d1 = normalize_axis(c.i(3, "dim1", 0), r), d2 = normalize_axis(c.i(4, "dim2", 1), r);
  RLX_CHECK(d1 != d2, "diagonal_scatter: dim1 and dim2 must differ");
  const std::vector<int64_t> p = two_last(r, d1, d2);
  const NodeId xt = c.b.transpose(x, p);
  const Dims d = c.dims(x);
  const int64_t n1 = d[size_t(d1)], n2 = d[size_t(d2)];
  const int64_t L =
      std::max<int64_t>(0, std::min(off >= 0 ? n1 : n1 + off, off >= 0 ? n2 - off : n2));
  if (L == 0) return Value::tensor(x);
  return Value::tensor(c.b.transpose(diag_place(c, src, n1, n2, off, xt), inverse(p)));
}

// linalg_cross(a, b, dim): a[i+1] b[i+2] - a[i+2] b[i+1] along dim (size 3),
// the rotations as gathers; a and b broadcast first.
Value cross(LowerCtx& c) {
  const DType t = c.out_dtype();
  const Dims& o = c.out().shape;
  auto full = [&](NodeId v) {
    v = c.cast(v, t);
    return c.dims(v) == o ? v : c.b.op(Op::Expand, {v}, {{"shape", o}});
  };
  const NodeId a = full(c.tensor(0, "self")), b = full(c.tensor(1, "other"));
  const int64_t dim = normalize_axis(c.i(2, "dim", -1), int(o.size()));
  const NodeId i1 = index_const(c, {1, 2, 0}), i2 = index_const(c, {2, 0, 1});
  auto rot = [&](NodeId v, NodeId i) { return c.b.op(Op::Gather, {v, i}, {{"axis", dim}}); };
  return Value::tensor(c.b.sub(c.b.mul(rot(a, i1), rot(b, i2)), c.b.mul(rot(a, i2), rot(b, i1))));
}

// _cdist_forward(x1 [..., P, M], x2 [..., R, M], p): ||x1_i - x2_j||_p as
// [..., P, R], from the broadcast differences (exact; PyTorch's matmul form
// for large p = 2 inputs is only an optimization).
NodeId pairwise(LowerCtx& c, NodeId x1, NodeId x2, double p) {
  const int r1 = c.rank(x1), r2 = c.rank(x2);
  const NodeId diff = c.b.sub(unsqueeze(c, x1, r1 - 1), unsqueeze(c, x2, r2 - 2));
  return vector_norm(c, diff, p, {-1}, false);
}

// _trilinear(i1, i2, i3, expand1, expand2, expand3, sumdim, unroll_dim): each
// input with size-1 dims inserted at its expand positions, multiplied, summed
// over sumdim.
Value trilinear(LowerCtx& c) {
  const DType t = c.out_dtype();
  NodeId in[3] = {c.tensor(0, "i1"), c.tensor(1, "i2"), c.tensor(2, "i3")};
  const char* names[3] = {"expand1", "expand2", "expand3"};
  const int total = c.rank(in[0]) + int(c.ints(3, names[0]).size());
  NodeId prod = -1;
  for (int k = 0; k < 3; ++k) {
    std::vector<int64_t> ex = c.ints(size_t(3 + k), names[k]);
    std::vector<bool> at(size_t(total), false);
    for (int64_t e : ex) at[size_t(normalize_axis(e, total))] = true;
    const Dims d = c.dims(in[k]);
    Dims nd;
    size_t next = 0;
    for (int j = 0; j < total; ++j) nd.push_back(at[size_t(j)] ? 1 : d[next++]);
    RLX_CHECK(next == d.size(), "_trilinear: input ", k + 1, " ", dims_str(d), " does not fit ",
              total, " dims with expand ", ex.size());
    const NodeId v = c.b.reshape(c.cast(in[k], t), nd);
    prod = prod < 0 ? v : c.b.mul(prod, v);
  }
  const std::vector<int64_t> sum = c.ints(6, "sumdim");
  if (sum.empty()) return Value::tensor(c.reshape_to_out(prod));
  return Value::tensor(c.reshape_to_out(c.b.reduce(Op::ReduceSum, prod, sum, false)));
}

}  // namespace

NodeId mT(const LowerCtx& c, NodeId x) {
  std::vector<int64_t> perm(size_t(c.rank(x)));
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = int64_t(i);
  RLX_CHECK(perm.size() >= 2, c.node.op, ": expected a matrix, got ", c.shape(x).str());
  std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
  return c.b.transpose(x, perm);
}

void register_linalg(Registry& r) {
  // addbmm(self, b1, b2, beta, alpha): the batch of products summed.
  r.add("aten.addbmm", [](LowerCtx& c) {
    const NodeId prod = c.b.reduce(Op::ReduceSum, c.b.matmul(c.tensor(1), c.tensor(2)), {0});
    return beta_self_plus(c, prod, 3, 4);
  });
  r.add("aten.addmv", [](LowerCtx& c) {  // (self, mat, vec, beta, alpha)
    const NodeId m = c.tensor(1, "mat"), v = c.tensor(2, "vec");
    const int64_t n = c.dims(m)[0], k = c.dims(v)[0];
    return beta_self_plus(c, c.b.reshape(c.b.matmul(m, c.b.reshape(v, {k, 1})), {n}), 3, 4);
  });
  r.add("aten.addr", [](LowerCtx& c) {  // (self, vec1, vec2, beta, alpha): the outer product
    const DType t = c.out_dtype();
    const NodeId a = c.cast(c.tensor(1, "vec1"), t), b = c.cast(c.tensor(2, "vec2"), t);
    const NodeId outer =
        c.b.mul(c.b.reshape(a, {c.dims(a)[0], 1}), c.b.reshape(b, {1, c.dims(b)[0]}));
    return beta_self_plus(c, outer, 3, 4);
  });
  r.add("aten.linalg_cross", cross);
  r.add("aten.cross", cross);
  r.add("aten._cdist_forward", [](LowerCtx& c) {
    const DType t = c.out_dtype();
    return Value::tensor(
        pairwise(c, c.cast(c.tensor(0, "x1"), t), c.cast(c.tensor(1, "x2"), t), c.f(2, "p", 2)));
  });
  // _pdist_forward(x [N, M], p): the distances of the pairs i < j, row by row,
  // gathered from the full N x N table.
  r.add("aten._pdist_forward", [](LowerCtx& c) {
    const DType t = c.out_dtype();
    const NodeId x = c.cast(c.tensor(0, "self"), t);
    const int64_t n = c.dims(x)[0];
    std::vector<int64_t> at;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = i + 1; j < n; ++j) at.push_back(i * n + j);
    if (at.empty()) return Value::tensor(c.b.full({0}, 0, t));
    const NodeId all = c.b.reshape(pairwise(c, x, x, c.f(1, "p", 2)), {n * n});
    return Value::tensor(c.b.op(Op::Gather, {all, index_const(c, at)}, {{"axis", int64_t(0)}}));
  });
  r.add("aten._trilinear", trilinear);
  r.add("aten.diag_embed", diag_embed);
  r.add("aten.diagonal_scatter", diagonal_scatter);
  // block_diag(tensors): each as a 2-d block (0-d: 1 x 1, 1-d: one row), padded
  // to the total width and stacked.
  r.add("aten.block_diag", [](LowerCtx& c) {
    const DType t = c.out_dtype();
    const int64_t width = c.out().shape[1];
    std::vector<NodeId> rows;
    int64_t left = 0;
    for (NodeId v : c.tensors(0, "tensors")) {
      Dims d = c.dims(v);
      if (d.size() < 2) v = c.b.reshape(v, {1, d.empty() ? 1 : d[0]});
      const int64_t w = c.dims(v)[1];
      if (w < width)
        v = c.b.op(Op::Pad, {v}, {{"pads", std::vector<int64_t>{0, left, 0, width - left - w}}});
      rows.push_back(c.cast(v, t));
      left += w;
    }
    return Value::tensor(rows.size() == 1 ? rows[0] : c.b.concat(rows, 0));
  });
  // renorm(x, p, dim, maxnorm): each slice along dim whose p-norm exceeds
  // maxnorm scaled by maxnorm / (norm + 1e-7).
  r.add("aten.renorm", [](LowerCtx& c) {
    const DType t = c.out_dtype();
    const NodeId x = c.cast(c.tensor(0, "self"), t);
    const int r = c.rank(x), dim = normalize_axis(c.i(2, "dim"), std::max(r, 1));
    std::vector<int64_t> axes;
    for (int k = 0; k < r; ++k)
      if (k != dim) axes.push_back(k);
    const double maxnorm = c.f(3, "maxnorm");
    const NodeId norm =
        axes.empty() ? c.b.unary(Op::Abs, x) : vector_norm(c, x, c.f(1, "p"), axes, true);
    const NodeId factor = c.b.div(c.scalar(maxnorm, t), c.b.add(norm, c.scalar(1e-7, t)));
    const NodeId over = c.b.op(Op::Gt, {norm, c.scalar(maxnorm, t)});
    return Value::tensor(c.b.mul(x, c.b.op(Op::Where, {over, factor, c.scalar(1, t)})));
  });
}

}  // namespace rlx::torch_ir
