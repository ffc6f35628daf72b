// Indexing: Gather (folded at import on known shape values), GatherElements,
// GatherND, ScatterElements/ScatterND, OneHot.
#include "frontends/onnx/context.h"
#include "rlx/error.h"

namespace rlx::onnx {
namespace {

std::vector<Val> lower_gather(Ctx& c) {
  const int64_t axis = c.i("axis", 0);
  auto data = c.ints(0);
  auto idx = c.ints(1);
  if (data && idx && c.val(0).id < 0 && data->dims.size() == 1 && idx->is_static()) {
    const int64_t n = int64_t(data->v.size());
    IntList r{idx->dims, data->dtype, {}};
    for (const auto& i : idx->v) {
      const int64_t k = i.value < 0 ? i.value + n : i.value;
      RLX_CHECK(k >= 0 && k < n, "Gather index ", i.value, " out of range for ", n, " elements");
      r.v.push_back(data->v[size_t(k)]);
    }
    return {int_val(r)};
  }
  return one(c.b().op(Op::Gather, {c.in(0), c.in(1)}, {{"axis", axis}}));
}

ScatterReduction reduction(Ctx& c) {
  const std::string r = c.s("reduction", "none");
  if (r == "none") return ScatterReduction::none;
  if (r == "add") return ScatterReduction::add;
  if (r == "mul") return ScatterReduction::mul;
  if (r == "max") return ScatterReduction::max;
  if (r == "min") return ScatterReduction::min;
  throw make_error("reduction '", r, "'");
}

std::vector<Val> lower_one_hot(Ctx& c) {
  auto depth = c.scalar_int(1, "OneHot depth");
  RLX_CHECK(depth, "OneHot depth must be known at import");
  const Tensor* values = c.known(2);
  RLX_CHECK(values && values->numel() == 2, "OneHot values must be a known [off, on] pair");
  const DType t = values->dtype();
  const double off = values->item_as_double(0), on = values->item_as_double(1);
  const int r = c.shape(0).rank();
  const int64_t axis = norm_axis(c.i("axis", -1), r + 1, "OneHot");
  NodeId idx = c.in(0);
  if (!is_integer(c.shape_of(idx).dtype)) idx = c.cast(idx, DType::I64);
  NodeId y =
      c.b().op(Op::OneHot, {idx}, {{"depth", *depth}, {"dtype", std::string(dtype_name(t))}});
  if (off != 0 || on != 1)
    y = c.b().add(c.b().mul(y, c.scalar_const(on - off, t)), c.scalar_const(off, t));
  if (axis != r) {
    Dims perm;
    for (int64_t k = 0; k < r; ++k) {
      if (k == axis) perm.push_back(r);
      perm.push_back(k);
    }
    if (axis == r) perm.push_back(r);
    y = c.b().transpose(y, perm);
  }
  return one(y);
}

}  // namespace

void register_indexing(Registry& r) {
  r.add("Gather", lower_gather);
  r.add("GatherElements", [](Ctx& c) {
    return one(c.b().op(Op::GatherElements, {c.in(0), c.in(1)}, {{"axis", c.i("axis", 0)}}));
  });
  r.add("GatherND", [](Ctx& c) {
    return one(c.b().op(Op::GatherND, {c.in(0), c.in(1)}, {{"batch_dims", c.i("batch_dims", 0)}}));
  });
  auto scatter_el = [](Ctx& c) {
    return one(
        c.b().op(Op::ScatterElements, {c.in(0), c.in(1), c.in(2)},
                 {{"axis", c.i("axis", 0)}, {"reduction", std::string(to_string(reduction(c)))}}));
  };
  r.add("ScatterElements", scatter_el);
  r.add("Scatter", scatter_el);  // opset 9-10 name
  r.add("ScatterND", [](Ctx& c) {
    return one(c.b().op(Op::ScatterND, {c.in(0), c.in(1), c.in(2)},
                        {{"reduction", std::string(to_string(reduction(c)))}}));
  });
  r.add("OneHot", lower_one_hot);
}

}  // namespace rlx::onnx
