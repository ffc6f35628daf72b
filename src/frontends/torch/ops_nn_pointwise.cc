// Element-wise neural-network functions without an rlx op of their own: glu,
// the shrinkage and threshold activations, and the element-wise regression
// losses (huber, smooth L1) with their reductions.
#include "frontends/torch/lowering.h"
#include "rlx/error.h"

namespace rlx::torch_ir {
namespace {

// |self - target| and the pair's dtype.
NodeId abs_diff(LowerCtx& c) {
  const DType t = c.out_dtype();
  return c.b.unary(Op::Abs,
                   c.b.sub(c.cast(c.tensor(0, "self"), t), c.cast(c.tensor(1, "target"), t)));
}

}  // namespace

NodeId reduce_loss(LowerCtx& c, NodeId loss, size_t pos, NodeId mean_by) {
  const int64_t how = c.i(pos, "reduction", 1);
  if (how == 0) return loss;
  RLX_CHECK(how == 1 || how == 2, c.node.op, ": unknown reduction ", how);
  if (how == 2 || mean_by < 0)
    return c.b.reduce(how == 1 ? Op::ReduceMean : Op::ReduceSum, loss, {}, false);
  return c.b.div(c.b.reduce(Op::ReduceSum, loss, {}, false), mean_by);
}

void register_nn_pointwise(Registry& r) {
  // glu(x, dim) = a * sigmoid(b), a and b the two halves of x along dim.
  r.add("aten.glu", [](LowerCtx& c) {
    const NodeId x = c.tensor(0, "self");
    const int64_t dim = normalize_axis(c.i(1, "dim", -1), c.rank(x));
    const int64_t h = c.dims(x)[size_t(dim)] / 2;
    auto half = [&](int64_t start) {
      return c.b.op(Op::Slice, {x}, {{"axis", dim}, {"start", start}, {"end", start + h}});
    };
    return Value::tensor(c.b.mul(half(0), c.b.unary(Op::Sigmoid, half(h))));
  });
  // hardshrink(x, l): 0 on [-l, l], x elsewhere (NaN stays).
  r.add("aten.hardshrink", [](LowerCtx& c) {
    const NodeId x = c.tensor(0, "self");
    const DType t = c.shape(x).dtype;
    const NodeId in = c.b.op(Op::Le, {c.b.unary(Op::Abs, x), c.scalar(c.f(1, "lambd", 0.5), t)});
    return Value::tensor(c.b.op(Op::Where, {in, c.scalar(0, t), x}));
  });
  // softshrink(x, l): x - l above l, x + l below -l, else 0 (x * 0: NaN stays).
  r.add("aten.softshrink", [](LowerCtx& c) {
    const NodeId x = c.tensor(0, "self");
    const DType t = c.shape(x).dtype;
    const double l = c.f(1, "lambd", 0.5);
    const NodeId lo = c.b.op(Op::Where, {c.b.op(Op::Lt, {x, c.scalar(-l, t)}),
                                         c.b.add(x, c.scalar(l, t)), c.b.mul(x, c.scalar(0, t))});
    return Value::tensor(
        c.b.op(Op::Where, {c.b.op(Op::Gt, {x, c.scalar(l, t)}), c.b.sub(x, c.scalar(l, t)), lo}));
  });
  // threshold(x, th, v): v where x <= th, else x.
  r.add("aten.threshold", [](LowerCtx& c) {
    const NodeId x = c.tensor(0, "self");
    const DType t = c.shape(x).dtype;
    const NodeId below = c.b.op(Op::Le, {x, c.scalar(c.f(1, "threshold"), t)});
    return Value::tensor(c.b.op(Op::Where, {below, c.scalar(c.f(2, "value"), t), x}));
  });
  // huber_loss(x, y, reduction, delta): z^2 / 2 for z = |x - y| < delta, else
  // delta (z - delta / 2).
  r.add("aten.huber_loss", [](LowerCtx& c) {
    const DType t = c.out_dtype();
    const NodeId z = abs_diff(c);
    const double delta = c.f(3, "delta", 1);
    const NodeId quad = c.b.mul(c.scalar(0.5, t), c.b.mul(z, z));
    const NodeId lin = c.b.mul(c.scalar(delta, t), c.b.sub(z, c.scalar(delta / 2, t)));
    const NodeId loss = c.b.op(Op::Where, {c.b.op(Op::Lt, {z, c.scalar(delta, t)}), quad, lin});
    return Value::tensor(reduce_loss(c, loss, 2));
  });
  // smooth_l1_loss(x, y, reduction, beta): z^2 / (2 beta) for z < beta, else
  // z - beta / 2; beta = 0 is the L1 loss.
  r.add("aten.smooth_l1_loss", [](LowerCtx& c) {
    const DType t = c.out_dtype();
    const NodeId z = abs_diff(c);
    const double beta = c.f(3, "beta", 1);
    if (beta == 0) return Value::tensor(reduce_loss(c, z, 2));
    const NodeId quad = c.b.div(c.b.mul(c.scalar(0.5, t), c.b.mul(z, z)), c.scalar(beta, t));
    const NodeId lin = c.b.sub(z, c.scalar(beta / 2, t));
    const NodeId loss = c.b.op(Op::Where, {c.b.op(Op::Lt, {z, c.scalar(beta, t)}), quad, lin});
    return Value::tensor(reduce_loss(c, loss, 2));
  });
}

}  // namespace rlx::torch_ir
