// Creation and identity ops. Sizes and dtypes come from the output PyTorch
// recorded, which already resolved every default and `*_like` rule.
#include <cmath>

#include "frontends/torch/lowering.h"
#include "rlx/error.h"

namespace rlx::torch_ir {
namespace {

Value full_of(LowerCtx& c, double value) {
  const TensorMeta& o = c.out();
  return Value::tensor(c.b.full(o.shape, value, o.dtype));
}

Value identity(LowerCtx& c) { return Value::tensor(c.tensor(0, "self")); }

// _to_copy / to / convert_element_type: only the dtype matters on the CPU.
Value to_dtype(LowerCtx& c) { return Value::tensor(c.cast(c.tensor(0, "self"), c.out_dtype())); }

}  // namespace

void register_creation(Registry& r) {
  r.add("aten.full", [](LowerCtx& c) { return full_of(c, c.f(1, "fill_value")); });
  r.add("aten.full_like", [](LowerCtx& c) { return full_of(c, c.f(1, "fill_value")); });
  r.add("aten.new_full", [](LowerCtx& c) { return full_of(c, c.f(2, "fill_value")); });
  // fill(self, value) / zero(self): functionalized in-place fills.
  r.add("aten.fill", [](LowerCtx& c) {
    const Value* v = c.arg(1, "value");
    RLX_CHECK(v, "fill needs a value");
    if (v->is_number()) return full_of(c, v->number());
    const TensorMeta& o = c.out();
    return Value::tensor(c.b.op(Op::Expand, {c.cast(v->id, o.dtype)}, {{"shape", o.shape}}));
  });
  r.add("aten.zero", [](LowerCtx& c) { return full_of(c, 0); });
  r.add("aten.scalar_tensor", [](LowerCtx& c) { return full_of(c, c.f(0, "s")); });
  for (const char* op :
       {"aten.zeros", "aten.zeros_like", "aten.new_zeros", "aten.empty", "aten.empty_like",
        "aten.new_empty", "aten.empty_strided", "aten.new_empty_strided"})
    r.add(op, [](LowerCtx& c) { return full_of(c, 0); });
  for (const char* op : {"aten.ones", "aten.ones_like", "aten.new_ones"})
    r.add(op, [](LowerCtx& c) { return full_of(c, 1); });
  r.add("aten.arange", [](LowerCtx& c) {
    // arange(end) | arange.start(start, end) | arange.start_step(start, end, step)
    double start = 0, step = 1;
    if (c.node.op == "aten.arange.start" || c.node.op == "aten.arange.start_step" ||
        c.node.op == "aten.arange.start_out") {
      start = c.f(0, "start");
      step = c.f(2, "step", 1);
    }
    const TensorMeta& o = c.out();
    RLX_CHECK(o.shape.size() == 1, "arange must produce a 1-d tensor");
    return Value::tensor(c.b.arange(o.shape[0], start, step, o.dtype));
  });
  // linspace(start, end, steps) / logspace(..., base): PyTorch's CPU kernel,
  // start + i step for the first half and end - (steps - 1 - i) step for the
  // rest (exact at both ends), base to that power for logspace; a constant.
  for (const bool log : {false, true}) {
    r.add(log ? "aten.logspace" : "aten.linspace", [log](LowerCtx& c) {
      const TensorMeta& o = c.out();
      RLX_CHECK(o.shape.size() == 1, c.node.op, " must produce a 1-d tensor");
      const int64_t steps = o.shape[0];
      const double start = c.f(0, "start"), end = c.f(1, "end"), base = c.f(3, "base", 10);
      const double step = steps > 1 ? (end - start) / double(steps - 1) : 0;
      Tensor v({steps}, DType::F64);
      double* p = v.data<double>();
      for (int64_t i = 0; i < steps; ++i) {
        p[i] = i < steps / 2 ? start + step * double(i) : end - step * double(steps - 1 - i);
        if (steps == 1) p[i] = start;
        if (log) p[i] = std::pow(base, p[i]);
      }
      return Value::tensor(c.b.constant(v.to(o.dtype)));
    });
  }
  // eye(n[, m]): row index == column index, from two aranges (no n x m constant).
  r.add("aten.eye", [](LowerCtx& c) {
    const TensorMeta& o = c.out();
    RLX_CHECK(o.shape.size() == 2, "eye must produce a 2-d tensor");
    const NodeId rows = c.b.reshape(c.b.arange(o.shape[0], 0, 1, DType::I64), {o.shape[0], 1});
    const NodeId cols = c.b.reshape(c.b.arange(o.shape[1], 0, 1, DType::I64), {1, o.shape[1]});
    return Value::tensor(c.cast(c.b.op(Op::Eq, {rows, cols}), o.dtype));
  });
  for (const char* op : {"aten.clone", "aten.contiguous", "aten.detach", "aten.alias",
                         "aten.lift_fresh_copy", "aten.lift_fresh", "aten.dropout",
                         "aten.feature_dropout", "aten.alpha_dropout", "aten.positive"})
    r.add(op, identity);
  // copy(self, src): the result is src broadcast into self's shape and dtype.
  r.add("aten.copy", [](LowerCtx& c) {
    NodeId src = c.cast(c.tensor(1, "src"), c.out_dtype());
    const TensorMeta& o = c.out();
    return Value::tensor(c.dims(src) == o.shape ? src
                                                : c.b.op(Op::Expand, {src}, {{"shape", o.shape}}));
  });
  for (const char* op : {"aten._to_copy", "aten.to", "aten.type_as", "prims.convert_element_type"})
    r.add(op, to_dtype);
  // rlx_torch's training-mode dropout: rlx::dropout(x, step, p, seed), the same hash as
  // Op::Dropout.
  r.add("rlx.dropout", [](LowerCtx& c) {
    return Value::tensor(c.b.op(Op::Dropout, {c.tensor(0, "x"), c.tensor(1, "step")},
                                {{"p", c.f(2, "p")}, {"seed", c.i(3, "seed")}}));
  });
  r.add("aten.native_dropout", [](LowerCtx& c) {
    // Inference: identity, and an all-true mask.
    Value v;
    v.kind = Value::Tuple;
    NodeId x = c.tensor(0, "input");
    v.items = {Value::tensor(x), Value::tensor(c.b.full(c.dims(x), 1, DType::Bool))};
    return v;
  });
}

}  // namespace rlx::torch_ir
