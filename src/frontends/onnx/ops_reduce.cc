// Reductions (axes as attribute before opset 13 for ReduceSum and before 18
// for the others, as an input since), the composite ReduceL1/L2/LogSum/
// LogSumExp/SumSquare, ArgMax/ArgMin, CumSum and TopK.
#include "frontends/onnx/context.h"
#include "rlx/error.h"

namespace rlx::onnx {
namespace {

enum class Post { None, Abs, Square, Log, LogSumExp, Sqrt };

void reduce(Registry& r, const char* name, Op op, int64_t axes_input_from, Post post) {
  r.add(name, [=](Ctx& c) -> std::vector<Val> {
    Dims axes;
    if (c.opset < axes_input_from)
      axes = c.ints_attr("axes");
    else if (c.has(1))
      axes = c.static_ints(1, "axes");
    const bool keep = c.i("keepdims", 1) != 0;
    if (axes.empty() && c.i("noop_with_empty_axes", 0) != 0) return {c.val(0)};
    NodeId x = c.in(0);
    const DType t = c.shape_of(x).dtype;
    switch (post) {
      case Post::Abs:
        x = c.b().unary(Op::Abs, x);
        break;
      case Post::Square:
      case Post::Sqrt:
        x = c.b().mul(x, x);
        break;
      case Post::LogSumExp: {
        // log(sum(exp(x - m))) + m with m = max(x), so large inputs do not overflow.
        NodeId m = c.b().reduce(Op::ReduceMax, x, axes, true);
        NodeId s = c.b().reduce(Op::ReduceSum, c.b().unary(Op::Exp, c.b().sub(x, m)), axes, keep);
        NodeId mk = keep ? m : c.b().reduce(Op::ReduceMax, x, axes, false);
        return one(c.b().add(c.b().unary(Op::Log, s), mk));
      }
      default:
        break;
    }
    (void)t;
    NodeId y = c.b().reduce(op, x, axes, keep);
    if (post == Post::Log) y = c.b().unary(Op::Log, y);
    if (post == Post::Sqrt) y = c.b().unary(Op::Sqrt, y);
    return one(y);
  });
}

void arg(Registry& r, const char* name, Op op) {
  r.add(name, [op](Ctx& c) {
    const int64_t axis = c.i("axis", 0);
    const bool keep = c.i("keepdims", 1) != 0;
    if (c.i("select_last_index", 0) == 0)
      return one(c.b().op(op, {c.in(0)}, {{"axis", axis}, {"keepdims", keep}}));
    // The last extreme: the first one of the flipped axis, mapped back (len - 1 - i).
    const Shape s = c.shape(0);
    const int64_t ax = norm_axis(axis, s.rank(), "ArgMax/ArgMin");
    const Dim len = s.dims[size_t(ax)];
    RLX_CHECK(len.is_static(), "select_last_index over symbolic dim ", len.str());
    NodeId f = c.b().op(Op::Flip, {c.in(0)}, {{"axes", Dims{ax}}});
    NodeId i = c.b().op(op, {f}, {{"axis", ax}, {"keepdims", keep}});
    return one(c.b().sub(c.scalar_const(double(len.value - 1), DType::I64), i));
  });
}

std::vector<Val> lower_cumsum(Ctx& c) {
  auto axis = c.scalar_int(1, "CumSum axis");
  RLX_CHECK(axis, "CumSum axis must be known at import");
  return one(c.b().op(Op::CumSum, {c.in(0)},
                      {{"axis", *axis},
                       {"exclusive", c.i("exclusive", 0) != 0},
                       {"reverse", c.i("reverse", 0) != 0}}));
}

std::vector<Val> lower_topk(Ctx& c) {
  int64_t k;
  if (c.opset < 10) {
    k = c.i("k");
  } else {
    auto v = c.scalar_int(1, "TopK k");
    RLX_CHECK(v, "TopK k must be known at import");
    k = *v;
  }
  auto ids = c.b().results(Op::TopK, {c.in(0)},
                           {{"k", k},
                            {"axis", c.i("axis", -1)},
                            {"largest", c.i("largest", 1) != 0},
                            {"sorted", c.i("sorted", 1) != 0}});
  return {node_val(ids[0]), node_val(ids[1])};
}

}  // namespace

void register_reduce(Registry& r) {
  reduce(r, "ReduceSum", Op::ReduceSum, 13, Post::None);
  reduce(r, "ReduceMean", Op::ReduceMean, 18, Post::None);
  reduce(r, "ReduceMax", Op::ReduceMax, 18, Post::None);
  reduce(r, "ReduceMin", Op::ReduceMin, 18, Post::None);
  reduce(r, "ReduceProd", Op::ReduceProd, 18, Post::None);
  reduce(r, "ReduceL1", Op::ReduceSum, 18, Post::Abs);
  reduce(r, "ReduceL2", Op::ReduceSum, 18, Post::Sqrt);
  reduce(r, "ReduceSumSquare", Op::ReduceSum, 18, Post::Square);
  reduce(r, "ReduceLogSum", Op::ReduceSum, 18, Post::Log);
  reduce(r, "ReduceLogSumExp", Op::ReduceSum, 18, Post::LogSumExp);
  arg(r, "ArgMax", Op::ArgMax);
  arg(r, "ArgMin", Op::ArgMin);
  r.add("CumSum", lower_cumsum);
  r.add("TopK", lower_topk);
}

}  // namespace rlx::onnx
