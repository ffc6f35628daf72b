// Reductions, statistics, softmax family, cumsum and topk.
#include <cmath>

#include "frontends/torch/lowering.h"
#include "rlx/error.h"

namespace rlx::torch_ir {
namespace {

// The `dim` argument: an int, a list (empty = all), or None (all).
std::vector<int64_t> dims_arg(LowerCtx& c, size_t pos, const char* name) {
  const Value* v = c.arg(pos, name);
  if (!v) return {};
  return c.ints(pos, name);
}

Value reduce(LowerCtx& c, Op op, size_t dim_pos = 1, size_t keep_pos = 2) {
  NodeId x = c.tensor(0, "self");
  DType t = c.out_dtype();
  // sum/prod of integers and bools accumulate in i64 (the recorded output dtype).
  x = c.cast(x, t);
  auto axes = dims_arg(c, dim_pos, "dim");
  bool keep = c.flag(keep_pos, "keepdim", false);
  if (c.rank(x) == 0) return Value::tensor(x);
  return Value::tensor(c.b.reduce(op, x, axes, keep));
}

int64_t reduced_count(LowerCtx& c, NodeId x, const std::vector<int64_t>& axes) {
  Dims d = c.dims(x);
  if (axes.empty()) return numel(d);
  int64_t n = 1;
  for (int64_t a : axes) n *= d[size_t(normalize_axis(a, int(d.size())))];
  return n;
}

// var/std with Bessel's correction: (dim, unbiased | correction, keepdim).
NodeId variance(LowerCtx& c, NodeId x, std::vector<int64_t> axes, double correction, bool keep) {
  DType t = c.shape(x).dtype;
  NodeId mean = c.b.reduce(Op::ReduceMean, x, axes, true);
  NodeId d = c.b.sub(x, mean);
  NodeId ss = c.b.reduce(Op::ReduceSum, c.b.mul(d, d), axes, keep);
  double n = double(reduced_count(c, x, axes)) - correction;
  return c.b.div(ss, c.scalar(n, t));  // n <= 0 gives inf/nan, as in PyTorch
}

double correction_arg(LowerCtx& c) {
  // var.dim(self, dim, unbiased, keepdim) | var.correction(self, dim, *, correction, keepdim)
  if (c.node.op.find("correction") != std::string::npos) return c.f(99, "correction", 1);
  if (c.node.op == "aten.var.default" || c.node.op == "aten.std.default")
    return c.flag(1, "unbiased", true) ? 1 : 0;
  return c.flag(2, "unbiased", true) ? 1 : 0;
}

bool keep_arg(LowerCtx& c) {
  if (c.node.op.find("correction") != std::string::npos) return c.flag(99, "keepdim", false);
  return c.flag(3, "keepdim", false);
}

Value var_like(LowerCtx& c, bool sqrt, bool with_mean) {
  NodeId x = c.tensor(0, "self");
  bool all = c.node.op == "aten.var.default" || c.node.op == "aten.std.default";
  auto axes = all ? std::vector<int64_t>{} : dims_arg(c, 1, "dim");
  bool keep = keep_arg(c);
  NodeId v = variance(c, x, axes, correction_arg(c), keep);
  if (sqrt) v = c.b.unary(Op::Sqrt, v);
  if (!with_mean) return Value::tensor(v);
  Value t;
  t.kind = Value::Tuple;
  t.items = {Value::tensor(v), Value::tensor(c.b.reduce(Op::ReduceMean, x, axes, keep))};
  return t;
}

Value softmax(LowerCtx& c, Op op) {
  NodeId x = c.cast(c.tensor(0, "self"), c.out_dtype());
  return Value::tensor(c.b.op(op, {x}, {{"axis", c.i(1, "dim")}}));
}

// max.dim / min.dim -> (values, indices)
Value minmax_dim(LowerCtx& c, Op reduce_op, Op arg_op) {
  NodeId x = c.tensor(0, "self");
  int64_t dim = c.i(1, "dim");
  bool keep = c.flag(2, "keepdim", false);
  Value t;
  t.kind = Value::Tuple;
  t.items = {Value::tensor(c.b.reduce(reduce_op, x, {dim}, keep)),
             Value::tensor(c.b.op(arg_op, {x}, {{"axis", dim}, {"keepdims", int64_t(keep)}}))};
  return t;
}

Value arg(LowerCtx& c, Op op) {
  NodeId x = c.tensor(0, "self");
  bool keep = c.flag(2, "keepdim", false);
  if (!c.has(1, "dim")) {  // over the flattened tensor
    x = c.b.reshape(x, {numel(c.dims(x))});
    NodeId r = c.b.op(op, {x}, {{"axis", int64_t(0)}, {"keepdims", int64_t(0)}});
    return Value::tensor(keep ? c.reshape_to_out(r) : r);
  }
  return Value::tensor(c.b.op(op, {x}, {{"axis", c.i(1, "dim")}, {"keepdims", int64_t(keep)}}));
}

}  // namespace

// The ord-norm of x over axes (all when empty): inf / -inf as max / min of
// |x|, 0 as the count of nonzeros, 2 as sqrt(sum x^2), else (sum |x|^p)^(1/p).
NodeId vector_norm(LowerCtx& c, NodeId x, double ord, std::vector<int64_t> axes, bool keep) {
  const DType t = c.shape(x).dtype;
  if (c.rank(x) == 0) {
    x = c.b.reshape(x, {1});
    axes = {};
  }
  const NodeId a = c.b.unary(Op::Abs, x);
  if (std::isinf(ord)) return c.b.reduce(ord > 0 ? Op::ReduceMax : Op::ReduceMin, a, axes, keep);
  if (ord == 0)
    return c.b.reduce(Op::ReduceSum, c.cast(c.b.op(Op::Ne, {x, c.scalar(0, t)}), t), axes, keep);
  if (ord == 1) return c.b.reduce(Op::ReduceSum, a, axes, keep);
  if (ord == 2) return c.b.unary(Op::Sqrt, c.b.reduce(Op::ReduceSum, c.b.mul(x, x), axes, keep));
  const NodeId s = c.b.reduce(Op::ReduceSum, c.b.binary(Op::Pow, a, c.scalar(ord, t)), axes, keep);
  return c.b.binary(Op::Pow, s, c.scalar(1 / ord, t));
}

namespace {

// sort / topk of a 0-d tensor: (x, index 0).
Value itself_at_zero(LowerCtx& c, NodeId x) {
  Value t;
  t.kind = Value::Tuple;
  t.items = {Value::tensor(x), Value::tensor(c.b.full({}, 0, DType::I64))};
  return t;
}

// cov(x, *, correction, fweights, aweights): x [vars, obs] (a 1-d x is one variable; one
// variable gives a 0-d result); with w = fweights * aweights, avg = sum(x w) / sum(w) and
// cov = (x - avg) w (x - avg)^T / (sum(w) - correction * sum(w aweights) / sum(w)), the divisor
// clamped at 0 as PyTorch does.
NodeId covariance(LowerCtx& c, NodeId x0, int64_t correction, NodeId fw, NodeId aw) {
  const DType t = is_float(c.shape(x0).dtype) ? c.shape(x0).dtype : DType::F32;
  NodeId x = c.cast(x0, t);
  RLX_CHECK(c.rank(x) <= 2, c.node.op, ": expected a 1-d or 2-d input, got ", c.shape(x).str());
  if (c.rank(x) < 2) x = c.b.reshape(x, {1, -1});
  const bool single = c.dims(x)[0] == 1;  // PyTorch squeezes the [1, 1] result
  const int64_t obs = c.dims(x)[1];
  NodeId w = -1;
  if (fw >= 0) w = c.cast(fw, t);
  if (aw >= 0) w = w >= 0 ? c.b.mul(w, c.cast(aw, t)) : c.cast(aw, t);
  NodeId wsum, avg;
  if (w < 0) {
    wsum = c.scalar(double(obs), t);
    avg = c.b.reduce(Op::ReduceMean, x, {1}, true);
  } else {
    wsum = c.b.reduce(Op::ReduceSum, w, {}, false);
    avg = c.b.div(c.b.reduce(Op::ReduceSum, c.b.mul(x, w), {1}, true), wsum);
  }
  NodeId norm = wsum;
  if (correction != 0) {
    NodeId corr = c.scalar(double(correction), t);
    if (w >= 0 && aw >= 0)
      corr = c.b.mul(
          corr, c.b.div(c.b.reduce(Op::ReduceSum, c.b.mul(w, c.cast(aw, t)), {}, false), wsum));
    norm = c.b.sub(wsum, corr);
  }
  norm = c.b.binary(Op::Max, norm, c.scalar(0, t));
  const NodeId xm = c.b.sub(x, avg);
  const NodeId lhs = w >= 0 ? c.b.mul(xm, w) : xm;
  NodeId cov = c.b.div(c.b.matmul(lhs, c.b.transpose(xm, {1, 0})), norm);
  return single ? c.b.reshape(cov, {}) : cov;
}

}  // namespace

void register_reductions(Registry& r) {
  r.add("aten.cov", [](LowerCtx& c) {
    const NodeId fw = c.has(2, "fweights") ? c.tensor(2, "fweights") : -1;
    const NodeId aw = c.has(3, "aweights") ? c.tensor(3, "aweights") : -1;
    return Value::tensor(covariance(c, c.tensor(0, "self"), c.i(1, "correction", 1), fw, aw));
  });
  // corrcoef(x): cov / (stddev_i stddev_j), clamped to [-1, 1] (a 0-d cov divides by itself).
  r.add("aten.corrcoef", [](LowerCtx& c) {
    const NodeId cov = covariance(c, c.tensor(0, "self"), 1, -1, -1);
    if (c.rank(cov) == 0) return Value::tensor(c.b.div(cov, cov));
    const int64_t n = c.dims(cov)[0];
    const NodeId eye = c.b.op(Op::Eq, {c.b.reshape(c.b.arange(n), {n, 1}), c.b.arange(n)});
    const DType t = c.shape(cov).dtype;
    const NodeId diag =
        c.b.reduce(Op::ReduceSum, c.b.op(Op::Where, {eye, cov, c.scalar(0, t)}), {1});
    const NodeId sd = c.b.op(Op::Sqrt, {diag});
    NodeId y = c.b.div(c.b.div(cov, c.b.reshape(sd, {n, 1})), c.b.reshape(sd, {1, n}));
    return Value::tensor(c.b.op(Op::Clamp, {y}, {{"min", -1.0}, {"max", 1.0}}));
  });

  r.add("aten.sum", [](LowerCtx& c) { return reduce(c, Op::ReduceSum); });
  r.add("aten.mean", [](LowerCtx& c) { return reduce(c, Op::ReduceMean); });
  r.add("aten.amax", [](LowerCtx& c) { return reduce(c, Op::ReduceMax); });
  r.add("aten.linalg_vector_norm", [](LowerCtx& c) {  // (x, ord, dim, keepdim, *, dtype)
    const NodeId x = c.cast(c.tensor(0, "self"), c.out_dtype());
    return Value::tensor(c.reshape_to_out(
        vector_norm(c, x, c.f(1, "ord", 2), dims_arg(c, 2, "dim"), c.flag(3, "keepdim", false))));
  });
  // dist(a, b, p) = ||a - b||_p over every element.
  r.add("aten.dist", [](LowerCtx& c) {
    const DType t = c.out_dtype();
    const NodeId d = c.b.sub(c.cast(c.tensor(0, "self"), t), c.cast(c.tensor(1, "other"), t));
    return Value::tensor(c.reshape_to_out(vector_norm(c, d, c.f(2, "p", 2), {}, false)));
  });
  // vdot(a, b) = sum(a * b) of two vectors (real tensors: no conjugate).
  r.add("aten.vdot", [](LowerCtx& c) {
    const DType t = c.out_dtype();
    const NodeId p = c.b.mul(c.cast(c.tensor(0, "self"), t), c.cast(c.tensor(1, "other"), t));
    return Value::tensor(c.reshape_to_out(c.b.reduce(Op::ReduceSum, p, {}, false)));
  });
  // histc(x, bins, min, max): the count of elements in each of `bins` equal
  // bins over [min, max] (the last bin closed), elements outside ignored; min
  // = max takes the data's range (widened by 1 each way when that is one
  // value). Bin b holds the elements >= edge b less those >= edge b + 1, edge
  // k = min + k (max - min) / bins (PyTorch's linspace edges up to rounding,
  // which matters only for an element on an edge).
  r.add("aten.histc", [](LowerCtx& c) {
    const DType t = c.out_dtype();
    const NodeId x = c.b.reshape(c.cast(c.tensor(0, "self"), t), {-1});
    const int64_t bins = c.i(1, "bins", 100);
    RLX_CHECK(bins > 0, "histc: bins must be positive, got ", bins);
    double lo = c.f(2, "min", 0), hi = c.f(3, "max", 0);
    RLX_CHECK(lo <= hi, "histc: max must be >= min, got ", lo, " and ", hi);
    NodeId mn, mx;
    if (lo == hi && numel(c.dims(x)) > 0) {
      mn = c.b.reduce(Op::ReduceMin, x, {0}, false);
      mx = c.b.reduce(Op::ReduceMax, x, {0}, false);
      const NodeId same = c.b.op(Op::Eq, {mn, mx});
      mn = c.b.op(Op::Where, {same, c.b.sub(mn, c.scalar(1, t)), mn});
      mx = c.b.op(Op::Where, {same, c.b.add(mx, c.scalar(1, t)), mx});
    } else {
      if (lo == hi) lo -= 1, hi += 1;
      mn = c.scalar(lo, t);
      mx = c.scalar(hi, t);
    }
    if (numel(c.dims(x)) == 0) return Value::tensor(c.b.full({bins}, 0, t));
    // edge k = min + k (max - min) / bins, the last one max itself.
    const NodeId k = c.b.arange(bins + 1, 0, 1, t);
    NodeId edges = c.b.add(mn, c.b.mul(k, c.b.div(c.b.sub(mx, mn), c.scalar(double(bins), t))));
    edges = c.b.op(Op::Where, {c.b.op(Op::Eq, {k, c.scalar(double(bins), t)}), mx, edges});
    const NodeId in = c.b.op(Op::LogicalAnd, {c.b.op(Op::Ge, {x, mn}), c.b.op(Op::Le, {x, mx})});
    const int64_t n = c.dims(x)[0];
    const NodeId above =
        c.b.op(Op::LogicalAnd,
               {c.b.reshape(in, {n, 1}),
                c.b.op(Op::Ge, {c.b.reshape(x, {n, 1}), c.b.reshape(edges, {1, bins + 1})})});
    const NodeId count = c.b.reduce(Op::ReduceSum, c.cast(above, DType::I64), {0});  // [bins + 1]
    auto part = [&](int64_t a, int64_t b) {
      return c.b.op(Op::Slice, {count}, {{"axis", int64_t(0)}, {"start", a}, {"end", b}});
    };
    NodeId next = part(1, bins);
    next =
        c.b.op(Op::Pad, {next}, {{"pads", std::vector<int64_t>{0, 1}}});  // the last bin keeps max
    return Value::tensor(c.cast(c.b.sub(part(0, bins), next), t));
  });
  // all / any: no element is zero / some element is not, counted in i64 so an
  // empty reduction gives all = true and any = false.
  for (auto [name, all] : {std::pair{"aten.all", true}, std::pair{"aten.any", false}}) {
    r.add(name, [all = all, name = std::string(name)](LowerCtx& c) {
      const NodeId x = c.tensor(0, "self");
      const DType t = c.shape(x).dtype;
      const NodeId hit = c.cast(c.b.op(all ? Op::Eq : Op::Ne, {x, c.scalar(0, t)}), DType::I64);
      NodeId n = hit;
      if (c.rank(x) > 0) {
        const bool whole = c.node.op == name + ".default";
        n = c.b.reduce(Op::ReduceSum, hit, whole ? std::vector<int64_t>{} : dims_arg(c, 1, "dim"),
                       whole ? false : c.flag(2, "keepdim", false));
      }
      const NodeId y = c.b.op(all ? Op::Eq : Op::Gt, {n, c.scalar(0, DType::I64)});
      return Value::tensor(c.reshape_to_out(c.cast(y, c.out_dtype())));
    });
  }
  r.add("aten.count_nonzero", [](LowerCtx& c) {  // (x, dim: int | int[] | None)
    const NodeId x = c.tensor(0, "self");
    const NodeId hit = c.cast(c.b.op(Op::Ne, {x, c.scalar(0, c.shape(x).dtype)}), DType::I64);
    if (c.rank(x) == 0) return Value::tensor(hit);
    return Value::tensor(c.reshape_to_out(c.b.reduce(Op::ReduceSum, hit, dims_arg(c, 1, "dim"))));
  });
  // aminmax(x, *, dim=None, keepdim=False) -> (min, max), each in the shape
  // PyTorch recorded (a 0-d x with keepdim gives [1]).
  r.add("aten.aminmax", [](LowerCtx& c) {
    const NodeId x = c.tensor(0, "self");
    const bool keep = c.flag(2, "keepdim", false);
    std::vector<int64_t> axes;
    if (c.has(1, "dim") && c.rank(x) > 0) axes = {c.i(1, "dim")};
    RLX_CHECK(c.node.out.kind == Out::Tuple && c.node.out.tuple.size() == 2, c.node.op,
              ": expected a recorded (min, max) pair of outputs");
    std::vector<NodeId> out;
    for (Op op : {Op::ReduceMin, Op::ReduceMax}) {
      NodeId y = c.rank(x) == 0 ? x : c.b.reduce(op, x, axes, keep);
      const auto& meta = c.node.out.tuple.at(out.size());
      if (meta && c.shape(y).is_static() && c.dims(y) != meta->shape)
        y = c.b.reshape(y, meta->shape);
      out.push_back(y);
    }
    return Value::tuple(out);
  });
  r.add("aten.nansum", [](LowerCtx& c) {  // (x, dim, keepdim, *, dtype)
    const DType t = c.out_dtype();
    const NodeId x = c.cast(c.tensor(0, "self"), t);
    const NodeId kept = c.b.op(Op::Where, {c.b.op(Op::Ne, {x, x}), c.scalar(0, t), x});
    return Value::tensor(c.reshape_to_out(
        c.b.reduce(Op::ReduceSum, kept, dims_arg(c, 1, "dim"), c.flag(2, "keepdim", false))));
  });
  r.add("aten.amin", [](LowerCtx& c) { return reduce(c, Op::ReduceMin); });
  r.add("aten.prod", [](LowerCtx& c) { return reduce(c, Op::ReduceProd); });
  r.add("aten.max.default", [](LowerCtx& c) { return reduce(c, Op::ReduceMax, 99, 99); });
  r.add("aten.min.default", [](LowerCtx& c) { return reduce(c, Op::ReduceMin, 99, 99); });
  r.add("aten.max.dim", [](LowerCtx& c) { return minmax_dim(c, Op::ReduceMax, Op::ArgMax); });
  r.add("aten.min.dim", [](LowerCtx& c) { return minmax_dim(c, Op::ReduceMin, Op::ArgMin); });
  r.add("aten.max.other",
        [](LowerCtx& c) { return Value::tensor(c.b.binary(Op::Max, c.tensor(0), c.tensor(1))); });
  r.add("aten.min.other",
        [](LowerCtx& c) { return Value::tensor(c.b.binary(Op::Min, c.tensor(0), c.tensor(1))); });
  r.add("aten.argmax", [](LowerCtx& c) { return arg(c, Op::ArgMax); });
  r.add("aten.argmin", [](LowerCtx& c) { return arg(c, Op::ArgMin); });
  r.add("prims.sum", [](LowerCtx& c) { return reduce(c, Op::ReduceSum, 1, 99); });
  r.add("prims.amax", [](LowerCtx& c) { return reduce(c, Op::ReduceMax, 1, 99); });
  r.add("prims.amin", [](LowerCtx& c) { return reduce(c, Op::ReduceMin, 1, 99); });
  r.add("prims.var", [](LowerCtx& c) {
    NodeId x = c.tensor(0, "inp");
    return Value::tensor(variance(c, x, dims_arg(c, 1, "dims"), c.f(2, "correction", 1), false));
  });
  r.add("aten.var", [](LowerCtx& c) { return var_like(c, false, false); });
  r.add("aten.std", [](LowerCtx& c) { return var_like(c, true, false); });
  r.add("aten.var_mean", [](LowerCtx& c) { return var_like(c, false, true); });
  r.add("aten.std_mean", [](LowerCtx& c) { return var_like(c, true, true); });
  r.add("aten._softmax", [](LowerCtx& c) { return softmax(c, Op::Softmax); });
  r.add("aten.softmax", [](LowerCtx& c) { return softmax(c, Op::Softmax); });
  r.add("aten._log_softmax", [](LowerCtx& c) { return softmax(c, Op::LogSoftmax); });
  r.add("aten.log_softmax", [](LowerCtx& c) { return softmax(c, Op::LogSoftmax); });
  r.add("aten.cumsum", [](LowerCtx& c) {
    NodeId x = c.cast(c.tensor(0, "self"), c.out_dtype());
    return Value::tensor(c.b.op(Op::CumSum, {x}, {{"axis", c.i(1, "dim")}}));
  });
  r.add("aten.cumprod", [](LowerCtx& c) {
    NodeId x = c.cast(c.tensor(0, "self"), c.out_dtype());
    return Value::tensor(c.b.op(Op::CumProd, {x}, {{"axis", c.i(1, "dim")}}));
  });
  r.add("aten.logsumexp", [](LowerCtx& c) {
    NodeId x = c.tensor(0, "self");
    auto axes = dims_arg(c, 1, "dim");
    bool keep = c.flag(2, "keepdim", false);
    // An infinite max (a row all -inf, or holding +inf) shifts by 0 instead,
    // as torch does: -inf and +inf then come out, not inf - inf = NaN.
    const DType t = c.b.graph().node(x).shape.dtype;
    NodeId m = c.b.reduce(Op::ReduceMax, x, axes, true);
    const NodeId inf = c.b.op(Op::Eq, {c.b.unary(Op::Abs, m), c.b.scalar(INFINITY, t)});
    m = c.b.op(Op::Where, {inf, c.b.scalar(0, t), m});
    NodeId s = c.b.reduce(Op::ReduceSum, c.b.unary(Op::Exp, c.b.sub(x, m)), axes, true);
    NodeId y = c.b.add(c.b.unary(Op::Log, s), m);
    return Value::tensor(keep ? y : c.reshape_to_out(y));
  });
  // sort(x, dim, descending) | sort.stable(x, *, stable, dim, descending): a
  // topk of every element along dim (ties in index order, as a stable sort).
  r.add("aten.sort", [](LowerCtx& c) {
    const bool stable_overload = c.node.op == "aten.sort.stable";
    NodeId x = c.tensor(0, "self");
    const int64_t dim = c.i(stable_overload ? 2 : 1, "dim", -1);
    const bool descending = c.flag(stable_overload ? 3 : 2, "descending", false);
    if (c.rank(x) == 0) return itself_at_zero(c, x);
    const Dims d = c.dims(x);
    const int64_t n = d[size_t(normalize_axis(dim, int(d.size())))];
    return Value::tuple(c.b.results(
        Op::TopK, {x}, {{"k", n}, {"axis", dim}, {"largest", descending}, {"sorted", true}}));
  });
  r.add("aten.topk", [](LowerCtx& c) {
    NodeId x = c.tensor(0, "self");
    if (c.rank(x) == 0 && c.i(1, "k") == 1) return itself_at_zero(c, x);
    return Value::tuple(c.b.results(Op::TopK, {x},
                                    {{"k", c.i(1, "k")},
                                     {"axis", c.i(2, "dim", -1)},
                                     {"largest", c.flag(3, "largest", true)},
                                     {"sorted", c.flag(4, "sorted", true)}}));
  });
}

}  // namespace rlx::torch_ir
