// Ops whose output extents the values decide: NonZero, Compress, Unique and NonMaxSuppression,
// onto rlx's nonzero / unique / non_max_suppression (the runtime binds their `count` dim once the
// node has run; with inputs known at import the importer folds them like any other node).
#include <algorithm>

#include "frontends/onnx/context.h"
#include "rlx/error.h"

namespace rlx::onnx {
namespace {

NodeId nonzero(Ctx& c, NodeId x) {
  return c.b().op(Op::NonZero, {x}, {{"count", c.b().count_symbol("nonzero")}});
}

// NonZero(X) -> [rank, count]: one row of indices per axis.
std::vector<Val> lower_nonzero(Ctx& c) {
  return {node_val(c.b().transpose(nonzero(c, c.in(0)), {1, 0}))};
}

// Compress(input, condition[, axis]): the slices (elements, without axis) where the 1-D
// condition holds; a condition shorter than the axis leaves the rest out.
std::vector<Val> lower_compress(Ctx& c) {
  NodeId x = c.in(0);
  const NodeId cond = c.cast(c.in(1), DType::Bool);
  RLX_CHECK(c.shape_of(cond).rank() == 1, "Compress: condition must be 1-D, got ",
            c.shape_of(cond).str());
  int64_t axis = 0;
  if (c.has_attr("axis"))
    axis = norm_axis(c.i("axis"), c.shape_of(x).rank(), "Compress");
  else
    x = c.b().reshape(x, {-1});
  const Dim& len = c.shape_of(cond).dims[0];
  const Dim& n = c.shape_of(x).dims[size_t(axis)];
  RLX_CHECK(!(len.is_static() && n.is_static() && len.value > n.value), "Compress: condition of ",
            len.value, " elements is longer than the axis (", n.value, ")");
  const NodeId at = c.b().reshape(nonzero(c, cond), {-1});
  return {node_val(c.b().op(Op::Gather, {x, at}, {{"axis", axis}}))};
}

// Unique(X) -> (Y, indices, inverse_indices, counts), as rlx's unique lists them.
std::vector<Val> lower_unique(Ctx& c) {
  Attrs a{{"sorted", c.i("sorted", 1) != 0}, {"count", c.b().count_symbol("unique")}};
  if (c.has_attr("axis")) a.set("axis", c.i("axis"));
  std::vector<Val> out;
  for (NodeId id : c.b().results(Op::Unique, {c.in(0)}, a)) out.push_back(node_val(id));
  return out;
}

// NonMaxSuppression(boxes, scores[, max_output_boxes_per_class[, iou_threshold[,
// score_threshold]]]): the three limits must be known at import.
std::vector<Val> lower_nms(Ctx& c) {
  Attrs a{{"center_point_box", c.i("center_point_box", 0) != 0},
          {"count", c.b().count_symbol("nms")}};
  int64_t max_per_class = 0;  // ONNX's default: select nothing
  if (c.has(2)) {
    auto m = c.scalar_int(2, "NonMaxSuppression max_output_boxes_per_class");
    RLX_CHECK(m, "NonMaxSuppression: max_output_boxes_per_class must be known at import");
    max_per_class = std::max<int64_t>(*m, 0);
  }
  a.set("max_per_class", max_per_class);
  for (auto [i, name] : {std::pair<size_t, const char*>{3, "iou_threshold"},
                         std::pair<size_t, const char*>{4, "score_threshold"}}) {
    if (!c.has(i)) continue;
    auto v = c.scalar(i);
    RLX_CHECK(v, "NonMaxSuppression: ", name, " must be known at import");
    a.set(name, *v);
  }
  return {node_val(c.b().op(Op::NonMaxSuppression, {c.in(0), c.in(1)}, a))};
}

}  // namespace

void register_data_dependent(Registry& r) {
  r.add("NonZero", lower_nonzero);
  r.add("Compress", lower_compress);
  r.add("Unique", lower_unique);
  r.add("NonMaxSuppression", lower_nms);
}

}  // namespace rlx::onnx
