// vjp rules of element-wise ops, reductions, softmax and cumsum. Binary ops
// sum each operand's gradient back over the axes it was broadcast along.
#include "opt/autodiff/rules.h"
#include "rlx/error.h"

namespace rlx::opt::ad {
namespace {

// Operand i of a broadcasting op gets `g` summed back to its shape.
void set_broadcast(VjpCall& c, size_t i, NodeId g) { c.dx[i] = c.e.sum_to(g, c.in_shape(i)); }

// Reduced axes of a reduction over x of rank r, normalized (empty = all).
std::vector<int64_t> reduced_axes(const std::vector<int64_t>& axes, int r) {
  std::vector<int64_t> out;
  if (r == 0) return out;
  if (axes.empty())
    for (int i = 0; i < r; ++i) out.push_back(i);
  for (int64_t a : axes) out.push_back(normalize_axis(a, r));
  return out;
}

// x's dims with the reduced axes set to 1: the keepdims shape of the result.
std::vector<Dim> kept_dims(const Shape& x, const std::vector<int64_t>& axes) {
  std::vector<Dim> d = x.dims;
  for (int64_t a : axes) d[size_t(a)] = Dim(1);
  return d;
}

}  // namespace

void vjp_unary(VjpCall& c) {
  c.dx[0] =
      c.e.op(Op::ActivationGrad, {c.in(0), c.grad()}, activation_grad_attrs(c.n.op, c.n.attrs));
}

void vjp_add(VjpCall& c) {
  for (size_t i = 0; i < 2; ++i)
    if (c.needs(i)) set_broadcast(c, i, c.grad());
}

void vjp_sub(VjpCall& c) {
  if (c.needs(0)) set_broadcast(c, 0, c.grad());
  if (c.needs(1)) set_broadcast(c, 1, c.e.neg(c.grad()));
}

void vjp_mul(VjpCall& c) {
  if (c.needs(0)) set_broadcast(c, 0, c.e.mul(c.grad(), c.in(1)));
  if (c.needs(1)) set_broadcast(c, 1, c.e.mul(c.grad(), c.in(0)));
}

void vjp_div(VjpCall& c) {
  // Rounded division is piecewise constant: no gradient (as in PyTorch).
  if (c.n.attrs_as<DivAttrs>().rounding != DivRounding::none) return;
  Emit& e = c.e;
  if (c.needs(0)) set_broadcast(c, 0, e.div(c.grad(), c.in(1)));
  // d(a/b)/db = -(a/b)/b
  if (c.needs(1)) set_broadcast(c, 1, e.neg(e.div(e.mul(c.grad(), c.n.id), c.in(1))));
}

void vjp_max_min(VjpCall& c) {
  // The larger (smaller) operand takes the gradient; ties split it evenly, as
  // PyTorch's maximum/minimum do.
  Emit& e = c.e;
  const NodeId a = c.in(0), b = c.in(1), dy = c.grad();
  const bool is_max = c.n.op == Op::Max;
  const NodeId tie = e.compare(Op::Eq, a, b);
  const NodeId half = e.mask(tie, e.mul(dy, 0.5));
  for (size_t i = 0; i < 2; ++i) {
    if (!c.needs(i)) continue;
    const NodeId wins = e.compare(is_max == (i == 0) ? Op::Gt : Op::Lt, a, b);
    set_broadcast(c, i, e.where(wins, dy, half));
  }
}

void vjp_pow(VjpCall& c) {
  // PyTorch's pow_backward: exponent 0 gives the base no gradient, and base 0
  // with exponent >= 0 gives the exponent none (log 0 would be -inf).
  Emit& e = c.e;
  const NodeId a = c.in(0), b = c.in(1), dy = c.grad();
  const DType t = e.dtype(a);
  const NodeId zero = e.scalar(0, t);
  if (c.needs(0)) {
    const NodeId d = e.mul(e.mul(dy, b), e.op(Op::Pow, {a, e.sub(b, e.scalar(1, t))}));
    set_broadcast(c, 0, e.where(e.compare(Op::Eq, b, zero), zero, d));
  }
  if (c.needs(1)) {
    const NodeId d = e.mul(e.mul(dy, c.n.id), e.op(Op::Log, {a}));
    const NodeId skip =
        e.op(Op::LogicalAnd, {e.compare(Op::Eq, a, zero), e.compare(Op::Ge, b, zero)});
    set_broadcast(c, 1, e.where(skip, zero, d));
  }
}

namespace {
// mod (floor) and fmod (trunc): a - q*b with q = a/b rounded, piecewise constant.
void vjp_remainder(VjpCall& c, DivRounding r) {
  Emit& e = c.e;
  if (c.needs(0)) set_broadcast(c, 0, c.grad());
  if (c.needs(1)) {
    const NodeId q = e.op(Op::Div, {c.in(0), c.in(1)}, DivAttrs{.rounding = r});
    set_broadcast(c, 1, e.neg(e.mul(c.grad(), q)));
  }
}
}  // namespace

void vjp_mod(VjpCall& c) { vjp_remainder(c, DivRounding::floor); }
void vjp_fmod(VjpCall& c) { vjp_remainder(c, DivRounding::trunc); }

void vjp_where(VjpCall& c) {
  Emit& e = c.e;
  const NodeId cond = c.in(0), dy = c.grad();
  const NodeId zero = e.scalar(0, e.dtype(dy));
  if (c.needs(1)) set_broadcast(c, 1, e.where(cond, dy, zero));
  if (c.needs(2)) set_broadcast(c, 2, e.where(cond, zero, dy));
}

void vjp_cast(VjpCall& c) { c.dx[0] = c.e.cast(c.grad(), c.e.dtype(c.in(0))); }

void vjp_reduce_sum(VjpCall& c) {
  const Shape x = c.in_shape(0);
  const auto axes = reduced_axes(c.n.attrs_as<ReduceAttrs>().axes, x.rank());
  c.dx[0] = c.e.broadcast_to(c.e.reshape(c.grad(), kept_dims(x, axes)), x);
}

void vjp_reduce_mean(VjpCall& c) {
  Emit& e = c.e;
  const Shape x = c.in_shape(0);
  const auto axes = reduced_axes(c.n.attrs_as<ReduceAttrs>().axes, x.rank());
  int64_t count = 1;
  for (int64_t a : axes) {
    const Dim& d = x.dims[size_t(a)];
    RLX_CHECK(d.is_static(), "reduce_mean's gradient needs the reduced dims static, x is ",
              x.str());
    count *= d.value;
  }
  const NodeId g = e.mul(e.reshape(c.grad(), kept_dims(x, axes)), count ? 1.0 / double(count) : 0);
  c.dx[0] = e.broadcast_to(g, x);
}

void vjp_reduce_max_min(VjpCall& c) {
  // Every element equal to the extremum shares its gradient evenly (PyTorch's amax/amin).
  Emit& e = c.e;
  const Shape x = c.in_shape(0);
  const auto axes = reduced_axes(c.n.attrs_as<ReduceAttrs>().axes, x.rank());
  const auto kept = kept_dims(x, axes);
  const NodeId hit = e.compare(Op::Eq, c.in(0), e.reshape(c.n.id, kept));
  const NodeId count = e.sum(e.cast(hit, x.dtype), axes, true);
  c.dx[0] = e.broadcast_to(e.mask(hit, e.div(e.reshape(c.grad(), kept), count)), x);
}

void vjp_reduce_prod(VjpCall& c) {
  // d prod / d x_i = product of the others: y / x_i where x_i != 0; at a zero,
  // the product of the nonzeros when it is the only zero, else 0. No division by zero.
  Emit& e = c.e;
  const Shape x = c.in_shape(0);
  const auto axes = reduced_axes(c.n.attrs_as<ReduceAttrs>().axes, x.rank());
  const auto kept = kept_dims(x, axes);
  const NodeId zero = e.scalar(0, x.dtype), one = e.scalar(1, x.dtype);
  const NodeId is_zero = e.compare(Op::Eq, c.in(0), zero);
  const NodeId safe = e.where(is_zero, one, c.in(0));
  const NodeId others_nz =
      e.op(Op::ReduceProd, {safe}, ReduceAttrs{.axes = axes, .keepdims = true});
  const NodeId zeros = e.sum(e.cast(is_zero, x.dtype), axes, true);
  const NodeId at_zero = e.where(e.compare(Op::Eq, zeros, one), others_nz, zero);
  const NodeId at_nonzero = e.div(e.reshape(c.n.id, kept), safe);
  const NodeId d = e.where(is_zero, at_zero, at_nonzero);
  c.dx[0] = e.mul(d, e.reshape(c.grad(), kept));
}

void vjp_softmax(VjpCall& c) {
  // dx = y * (dy - sum(dy * y))
  Emit& e = c.e;
  const int64_t axis =
      normalize_axis(c.n.attrs_as<SoftmaxAttrs>().axis, std::max(e.rank(c.n.id), 1));
  const NodeId y = c.n.id, dy = c.grad();
  const NodeId s = e.rank(y) ? e.sum(e.mul(dy, y), {axis}, true) : e.mul(dy, y);
  c.dx[0] = e.mul(y, e.sub(dy, s));
}

void vjp_log_softmax(VjpCall& c) {
  // dx = dy - softmax(x) * sum(dy), softmax = exp(y)
  Emit& e = c.e;
  const int64_t axis =
      normalize_axis(c.n.attrs_as<SoftmaxAttrs>().axis, std::max(e.rank(c.n.id), 1));
  const NodeId dy = c.grad();
  const NodeId s = e.rank(dy) ? e.sum(dy, {axis}, true) : dy;
  c.dx[0] = e.sub(dy, e.mul(e.op(Op::Exp, {c.n.id}), s));
}

// y = cumprod(x) along an axis (inclusive; reverse scans the other way). With
// z the first zero of a slice, PyTorch's cumprod_backward in scans:
//   before z: dx_i = (suffix sum of dy * y)_i / x_i (no zero at or before i),
//   at z:     dx_z = (suffix sum of dy * y')_z, y' = cumprod with x_z set to 1,
//   after z:  0 (every product holding x_i holds the zero x_z too).
void vjp_cumprod(VjpCall& c) {
  Emit& e = c.e;
  const CumSumAttrs a = c.n.attrs_as<CumSumAttrs>();
  RLX_CHECK(!a.exclusive, c.n.label(), ": the gradient of an exclusive cumprod is not provided");
  const NodeId x = c.in(0), dy = c.grad();
  const DType t = e.dtype(x);
  const CumSumAttrs suffix{.axis = a.axis, .exclusive = false, .reverse = !a.reverse};
  const NodeId zero = e.compare(Op::Eq, x, e.scalar(0, t));
  const NodeId zeros_before =
      e.op(Op::CumSum, {e.cast(zero, t)},
           CumSumAttrs{.axis = a.axis, .exclusive = true, .reverse = a.reverse});
  const NodeId none_before = e.compare(Op::Eq, zeros_before, e.scalar(0, t));
  const NodeId first_zero = e.op(Op::LogicalAnd, {zero, none_before});
  const NodeId clean = e.op(Op::LogicalAnd, {e.op(Op::LogicalNot, {zero}), none_before});
  const NodeId one = e.scalar(1, t);
  const NodeId before = e.div(e.op(Op::CumSum, {e.mul(dy, c.n.id)}, suffix), e.where(zero, one, x));
  const NodeId y1 = e.op(Op::CumProd, {e.where(first_zero, one, x)}, a);
  const NodeId at = e.op(Op::CumSum, {e.mul(dy, y1)}, suffix);
  c.dx[0] = e.where(clean, before, e.where(first_zero, at, e.scalar(0, t)));
}

void vjp_cumsum(VjpCall& c) {
  // The adjoint of a prefix sum is the suffix sum (exclusive stays exclusive).
  CumSumAttrs a = c.n.attrs_as<CumSumAttrs>();
  a.reverse = !a.reverse;
  c.dx[0] = c.e.op(Op::CumSum, {c.grad()}, a);
}

}  // namespace rlx::opt::ad
