#include "ir/shape_infer_data_dependent.h"

#include <algorithm>

#include "rlx/checked.h"
#include "rlx/error.h"
#include "rlx/op_attrs.h"

namespace rlx {
namespace {

Dim count_dim(const Node& n) {
  const std::string& name = data_dependent_dim(n);
  RLX_CHECK(!name.empty() && name != "?", op_name(n.op),
            ": `count` must name the data-dependent dim (a symbol such as \"nonzero_1\")");
  return Dim::symbol(name);
}

// The element count of s, or the anonymous symbol when a dim is symbolic.
Dim numel_dim(const Shape& s, const char* op) {
  int64_t n = 1;
  for (const Dim& d : s.dims) {
    if (!d.is_static()) return Dim::symbol("?");
    n = checked_mul(n, d.value, op);
  }
  return Dim(n);
}

}  // namespace

bool has_data_dependent_dims(Op op) {
  return op_info(op).family == OpFamily::DataDependent || is_control(op);
}

bool is_control(Op op) { return op_info(op).family == OpFamily::Control; }

const std::string& data_dependent_dim(const Node& n) {
  switch (n.op) {
    case Op::NonZero:
      return n.attrs_as<NonZeroAttrs>().count;
    case Op::Unique:
      return n.attrs_as<UniqueAttrs>().count;
    case Op::NonMaxSuppression:
      return n.attrs_as<NmsAttrs>().count;
    case Op::If:
      return n.attrs_as<IfAttrs>().count;
    case Op::Loop:
      return n.attrs_as<LoopAttrs>().count;
    default:
      throw make_error(n.label(), ": ", op_name(n.op), " has no data-dependent dim");
  }
}

// The axis of the first output that holds the count.
int count_axis(const Node& n, int rank) {
  if (n.op != Op::Unique) return 0;
  const auto& axis = n.attrs_as<UniqueAttrs>().axis;
  return axis ? normalize_axis(*axis, rank) : 0;
}

std::vector<Shape> shapes_for_run(const Node& n, std::span<const Tensor> in) {
  std::vector<Shape> shapes;
  std::vector<const Shape*> ptrs;
  int64_t bound = 0;
  for (const Tensor& t : in) {
    shapes.push_back(t.shape());
    bound = std::max(bound, t.numel());
  }
  for (const Shape& s : shapes) ptrs.push_back(&s);
  std::vector<Shape> out = infer_shapes(n, ptrs);
  if (!has_data_dependent_dims(n.op)) return out;
  const std::string& name = data_dependent_dim(n);
  for (Shape& s : out)
    for (Dim& d : s.dims)
      if (!d.is_static() && d.sym == name) d = Dim(bound);
  return out;
}

int64_t data_dependent_count(const Node& n, const Shape& first_output) {
  return first_output.dims.at(size_t(count_axis(n, first_output.rank()))).value;
}

Shape infer_nonzero(const Node& n, const std::vector<const Shape*>& in) {
  return Shape({count_dim(n), Dim(in[0]->rank())}, DType::I64);
}

std::vector<Shape> infer_unique(const Node& n, const std::vector<const Shape*>& in) {
  const Shape& x = *in[0];
  const auto& a = n.attrs_as<UniqueAttrs>();
  const Dim count = count_dim(n);
  Shape values(std::vector<Dim>{count}, x.dtype);
  Dim slices = numel_dim(x, "unique");
  if (a.axis) {
    RLX_CHECK(x.rank() >= 1, "unique: axis ", *a.axis, " of a scalar ", x.str());
    const int ax = normalize_axis(*a.axis, x.rank());
    values = x;
    values.dims[size_t(ax)] = count;
    slices = x.dims[size_t(ax)];
  }
  const Shape per_value(std::vector<Dim>{count}, DType::I64);
  return {values, per_value, Shape(std::vector<Dim>{slices}, DType::I64), per_value};
}

Shape infer_nms(const Node& n, const std::vector<const Shape*>& in) {
  const Shape &boxes = *in[0], &scores = *in[1];
  const auto& a = n.attrs_as<NmsAttrs>();
  RLX_CHECK(boxes.rank() == 3 && boxes.dims[2] == Dim(4), "non_max_suppression: boxes must be ",
            "[batch, boxes, 4], got ", boxes.str());
  RLX_CHECK(scores.rank() == 3, "non_max_suppression: scores must be [batch, classes, boxes], got ",
            scores.str());
  for (int i : {0, 2}) {
    const Dim &b = boxes.dims[size_t(i ? 1 : 0)], &s = scores.dims[size_t(i)];
    RLX_CHECK(!(b.is_static() && s.is_static() && b.value != s.value),
              "non_max_suppression: ", "scores ", scores.str(), " do not match boxes ",
              boxes.str());
  }
  RLX_CHECK(is_float(boxes.dtype) && scores.dtype == boxes.dtype, "non_max_suppression: boxes ",
            boxes.str(), " and scores ", scores.str(), " must be floats of one dtype");
  RLX_CHECK(a.max_per_class >= 0, "non_max_suppression: max_per_class must be >= 0, got ",
            a.max_per_class);
  return Shape({count_dim(n), Dim(3)}, DType::I64);
}

}  // namespace rlx
