// BatchNorm's training form, as torch._decomp spells it (rlx_torch's
// train=True export), into one batch_norm_train node:
//   m = reduce_mean(x, A, keep)   d = x - m   s = reduce_sum(d * d, A, keep)
//   v = s / n   xhat = d * rsqrt(v + eps)
// with A every axis but 1 and n the count over A. The node's outputs replace
// m, v and xhat, or xhat * gamma + beta when that (per channel) is xhat's one
// use, the affine then the node's too; any other sum of d * d over A (the unbiased running
// variance's numerator) becomes v * n. Run before autodiff (the Trainer,
// rlx grad and the training step graph do) the backward is one
// batch_norm_train_grad instead of a dozen broadcast ops and reductions:
// on the digits CNN, 1.2 of a 3.8 ms step; taking the affine too saved the
// mul and add of each BatchNorm and, in the backward, its two reductions and
// two products (0.06 of a 1.6 ms step at 1 thread, Zen 5).
#include <algorithm>
#include <map>
#include <optional>

#include "opt/pass.h"
#include "opt/rewrite.h"

namespace rlx::opt {
namespace {

using Users = std::vector<std::vector<NodeId>>;

Users users_of(const Graph& g) {
  Users u(g.size());
  for (const Node& n : g.nodes())
    for (NodeId in : n.inputs) u[size_t(in)].push_back(n.id);
  return u;
}

// The value of a one-element constant, or nullopt.
std::optional<double> scalar_value(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  if (n.op == Op::Constant && n.value.defined() && n.value.numel() == 1)
    return n.value.item_as_double(0);
  if (n.op == Op::Full && n.shape.is_static() && n.shape.numel() == 1)
    return n.attrs_as<FullAttrs>().value;
  return std::nullopt;
}

// A reduction over every axis but 1 of its input.
bool over_batch_axes(const Graph& g, const Node& n, Op op, bool keepdims) {
  if (n.op != op) return false;
  const auto& a = n.attrs_as<ReduceAttrs>();
  const int r = g.node(n.inputs[0]).shape.rank();
  if (a.keepdims != keepdims || r < 2) return false;
  std::vector<int64_t> axes;
  for (int64_t ax : a.axes) axes.push_back(ax < 0 ? ax + r : ax);
  std::sort(axes.begin(), axes.end());
  std::vector<int64_t> want{0};
  for (int i = 2; i < r; ++i) want.push_back(i);
  return axes == want;
}

// The other input of binary node `n` when one of them is `x`, else -1.
NodeId other(const Node& n, NodeId x) {
  if (n.inputs.size() != 2) return -1;
  if (n.inputs[0] == x) return n.inputs[1];
  if (n.inputs[1] == x) return n.inputs[0];
  return -1;
}

struct BnTrainMatch {
  NodeId x, mean, var;
  double eps, count;
  std::vector<NodeId> xhat, sums;  // sums: every reduce_sum of d * d over the batch axes
  // The affine, when xhat's one use is `xhat * gamma + beta` per channel:
  // the add, and gamma's and beta's values before any reshape.
  NodeId shift = -1, gamma = -1, beta = -1;
};

// v with its reshapes peeled off.
NodeId unreshaped(const Graph& g, NodeId v) {
  while (g.node(v).op == Op::Reshape) v = g.node(v).inputs[0];
  return v;
}

// A per-channel operand of x [N, C, ...] in broadcasting: [C, 1, ...] or
// [1, C, 1, ...], of x's dtype, defined before node `before` once its
// reshapes are peeled off (the fused node takes its place there).
NodeId channel_operand(const Graph& g, NodeId p, const Shape& xs, NodeId before) {
  const Shape& ps = g.node(p).shape;
  if (ps.dtype != xs.dtype || !ps.is_static() || ps.numel() != xs.dims[1].value) return -1;
  const int lead = xs.rank() - ps.rank();  // 1 for [C, 1, ...], 0 for [1, C, ...]
  if (lead != 0 && lead != 1) return -1;
  for (int i = 0; i < ps.rank(); ++i)
    if (ps.dims[size_t(i)].value != (i + lead == 1 ? xs.dims[1].value : 1)) return -1;
  const NodeId v = unreshaped(g, p);
  return v < before ? v : -1;
}

// v's one use: the node reading it, when v is read by one node and is no output.
const Node* only_use(const Graph& g, const Users& users, NodeId v) {
  if (users[size_t(v)].size() != 1) return nullptr;
  for (const auto& o : g.outputs())
    if (o.node == v) return nullptr;
  return &g.node(users[size_t(v)][0]);
}

// Records the affine after xhat in mt when there is one to fuse.
void match_affine(const Graph& g, const Users& users, BnTrainMatch& mt) {
  if (mt.xhat.size() != 1) return;
  const Shape& xs = g.node(mt.x).shape;
  const Node* scale = only_use(g, users, mt.xhat[0]);
  if (!scale || scale->op != Op::Mul || scale->shape.dims != xs.dims) return;
  const Node& mul = *scale;
  const Node* shift = only_use(g, users, mul.id);
  if (!shift) return;
  const Node& add = *shift;
  if (add.op != Op::Add || add.shape.dims != xs.dims) return;
  const NodeId gamma = channel_operand(g, other(mul, mt.xhat[0]), xs, mt.mean);
  const NodeId beta = channel_operand(g, other(add, mul.id), xs, mt.mean);
  if (gamma < 0 || beta < 0) return;
  mt.shift = add.id;
  mt.gamma = gamma;
  mt.beta = beta;
}

// The normalization of variance v: d * rsqrt(v + eps) for a constant eps,
// every such product into mt.xhat (with mt.var and mt.eps) at the first add
// that has one. False when there is none.
bool match_normalization(const Graph& g, const Users& users, NodeId v, NodeId d, BnTrainMatch& mt) {
  for (NodeId a : users[size_t(v)]) {
    const Node& an = g.node(a);
    const NodeId e = an.op == Op::Add ? other(an, v) : -1;
    if (e < 0 || !scalar_value(g, e)) continue;
    for (NodeId r : users[size_t(a)]) {
      if (g.node(r).op != Op::Rsqrt) continue;
      for (NodeId xh : users[size_t(r)])
        if (g.node(xh).op == Op::Mul && other(g.node(xh), r) == d) mt.xhat.push_back(xh);
    }
    if (!mt.xhat.empty()) {
      mt.var = v;
      mt.eps = *scalar_value(g, e);
      return true;
    }
  }
  return false;
}

std::optional<BnTrainMatch> match_at(const Graph& g, const Users& users, const Node& m) {
  if (!over_batch_axes(g, m, Op::ReduceMean, true)) return std::nullopt;
  const NodeId x = m.inputs[0];
  const Shape& xs = g.node(x).shape;
  if (!xs.is_static() || !is_float(xs.dtype)) return std::nullopt;
  const double count = double(xs.numel() / std::max<int64_t>(1, xs.dims[1].value));
  for (NodeId d : users[size_t(m.id)]) {
    const Node& dn = g.node(d);
    if (dn.op != Op::Sub || dn.inputs[0] != x || dn.inputs[1] != m.id) continue;
    for (NodeId sq : users[size_t(d)]) {
      const Node& sqn = g.node(sq);
      if (sqn.op != Op::Mul || sqn.inputs[0] != d || sqn.inputs[1] != d) continue;
      BnTrainMatch mt{x, m.id, -1, 0, count, {}, {}};
      for (NodeId s : users[size_t(sq)]) {
        const Node& sn = g.node(s);
        if (!over_batch_axes(g, sn, Op::ReduceSum, true) &&
            !over_batch_axes(g, sn, Op::ReduceSum, false))
          continue;
        mt.sums.push_back(s);
        if (!sn.attrs_as<ReduceAttrs>().keepdims || mt.var >= 0) continue;
        for (NodeId v : users[size_t(s)]) {
          const Node& vn = g.node(v);
          if (vn.op == Op::Div && vn.inputs[0] == s && scalar_value(g, vn.inputs[1]) == count &&
              match_normalization(g, users, v, d, mt))
            break;
        }
      }
      if (mt.var >= 0 && mt.eps > 0) {
        match_affine(g, users, mt);
        return mt;
      }
    }
  }
  return std::nullopt;
}

}  // namespace

Graph fuse_batch_norm_training(const Graph& src) {
  const Graph g = eliminate_common_subexpressions(src);
  const Users users = users_of(g);
  std::map<NodeId, BnTrainMatch> at_mean;             // by the mean node, where the fused node goes
  std::map<NodeId, std::pair<NodeId, int>> replaced;  // node -> (mean node of its match, role)
  for (const Node& n : g.nodes()) {
    auto mt = match_at(g, users, n);
    if (!mt) continue;
    replaced[mt->var] = {n.id, 2};
    for (NodeId xh : mt->xhat) replaced[xh] = {n.id, 0};
    if (mt->shift >= 0) replaced[mt->shift] = {n.id, 0};  // xhat and the mul fall to DCE
    for (NodeId s : mt->sums) replaced[s] = {n.id, 3};
    at_mean.emplace(n.id, std::move(*mt));
  }
  if (at_mean.empty()) return src;  // unchanged: CSE is its own pass, which may be disabled
  Rewriter rw(g);
  Graph& out = rw.out();
  std::map<NodeId, NodeId> fused;  // mean node -> the batch_norm_train node
  for (const Node& n : g.nodes()) {
    if (auto it = at_mean.find(n.id); it != at_mean.end()) {
      const BnTrainMatch& mt = it->second;
      std::vector<NodeId> in{rw.mapped(mt.x)};
      if (mt.shift >= 0) in.insert(in.end(), {rw.mapped(mt.gamma), rw.mapped(mt.beta)});
      const NodeId bn = out.add(Op::BatchNormTrain, in, EpsAttrs{.eps = mt.eps}, {}, n.origin);
      fused[n.id] = bn;
      rw.map(n.id, out.result(bn, 1));
      continue;
    }
    auto r = replaced.find(n.id);
    if (r == replaced.end()) {
      rw.copy(n.id);
      continue;
    }
    const NodeId bn = fused.at(r->second.first);
    const int role = r->second.second;
    if (role != 3) {
      rw.map(n.id, out.result(bn, role));
      continue;
    }
    // A sum of squared deviations: var * n, in this sum's dims.
    const BnTrainMatch& mt = at_mean.at(r->second.first);
    const Shape& xs = g.node(mt.x).shape;
    const NodeId count =
        out.constant(Tensor::from_vector<double>({}, {mt.count}, DType::F64).to(xs.dtype));
    NodeId sum = out.add(Op::Mul, {out.result(bn, 2), count}, {}, {}, n.origin);
    if (out.node(sum).shape.dims != n.shape.dims)
      sum = out.add(Op::Reshape, {sum}, ReshapeAttrs{.shape = n.shape.concrete()}, {}, n.origin);
    rw.map(n.id, sum);
  }
  return eliminate_dead_code(rw.finish());
}

namespace {
class BatchNormTrainPass final : public Pass {
 public:
  std::string_view name() const override { return "bn_train"; }
  std::string_view description() const override {
    return "BatchNorm's training-form decomposition (batch mean, var, normalize, and the "
           "affine after it) -> one batch_norm_train node";
  }
  Graph run(const Graph& g, const PassContext&) const override {
    return fuse_batch_norm_training(g);
  }
};
}  // namespace

std::unique_ptr<Pass> make_batch_norm_train_pass() {
  return std::make_unique<BatchNormTrainPass>();
}

}  // namespace rlx::opt
