// Ops whose output extents the values decide: nonzero, masked_select, unique and
// unique_consecutive, onto rlx's nonzero and unique (whose `count` dim the runtime binds when
// the node has run).
#include <algorithm>
#include <optional>

#include "frontends/torch/lowering.h"
#include "rlx/error.h"

namespace rlx::torch_ir {

NodeId nonzero_of(LowerCtx& c, NodeId x) {
  return c.b.op(Op::NonZero, {x}, {{"count", c.b.count_symbol("nonzero")}});
}

namespace {

// x broadcast to `d` (PyTorch's rule; static dims).
NodeId broadcast_to(LowerCtx& c, NodeId x, const Dims& d) {
  return c.dims(x) == d ? x : c.b.op(Op::Expand, {x}, {{"shape", d}});
}

Dims broadcast_dims(const Dims& a, const Dims& b) {
  Dims out(std::max(a.size(), b.size()), 1);
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t x = i < out.size() - a.size() ? 1 : a[i - (out.size() - a.size())];
    const int64_t y = i < out.size() - b.size() ? 1 : b[i - (out.size() - b.size())];
    RLX_CHECK(x == y || x == 1 || y == 1, "masked_select: shapes ", dims_str(a), " and ",
              dims_str(b), " do not broadcast");
    out[i] = x == 1 ? y : x;
  }
  return out;
}

// unique(x) onto rlx's unique: (values, inverse, counts) as PyTorch returns them; flattened, the
// inverse takes x's shape; an output not asked for (flattened only) is what PyTorch recorded.
Value unique_of(LowerCtx& c, NodeId x, std::optional<int64_t> dim, bool sorted, bool consecutive,
                bool inverse_wanted, bool counts_wanted) {
  Attrs a{{"sorted", int64_t(sorted)},
          {"consecutive", int64_t(consecutive)},
          {"count", c.b.count_symbol("unique")}};
  if (dim) a.set("axis", *dim);
  if (c.rank(x) == 0) x = c.b.reshape(x, {1});
  const std::vector<NodeId> r = c.b.results(Op::Unique, {x}, a);
  NodeId inverse = r[2];
  if (!dim) inverse = c.b.reshape(inverse, c.reshape_dims(c.tensor(0, "self")));
  // An output not asked for: what PyTorch recorded for it ([0], or [] for a scalar x's inverse).
  auto unused = [&](size_t i) {
    const auto& out = c.node.out;
    const bool recorded = out.kind == Out::Tuple && i < out.tuple.size() && out.tuple[i];
    return c.b.constant(Tensor(recorded ? out.tuple[i]->shape : Dims{0}, DType::I64));
  };
  return Value::tuple(
      {r[0], inverse_wanted ? inverse : unused(1), counts_wanted ? r[3] : unused(2)});
}

}  // namespace

void register_data_dependent(Registry& r) {
  r.add("aten.nonzero",
        [](LowerCtx& c) { return Value::tensor(nonzero_of(c, c.tensor(0, "self"))); });
  // masked_select(x, mask): x and mask broadcast, then x's elements where mask holds, in order.
  r.add("aten.masked_select", [](LowerCtx& c) {
    const NodeId x = c.tensor(0, "self"), mask = c.tensor(1, "mask");
    const Dims d = broadcast_dims(c.dims(x), c.dims(mask));
    const NodeId flat_x = c.b.reshape(broadcast_to(c, x, d), {-1});
    const NodeId flat_m = c.b.reshape(broadcast_to(c, c.cast(mask, DType::Bool), d), {-1});
    const NodeId at = c.b.reshape(nonzero_of(c, flat_m), {-1});
    return Value::tensor(c.b.op(Op::Gather, {flat_x, at}, {{"axis", int64_t(0)}}));
  });
  // _unique2(x, sorted, return_inverse, return_counts); PyTorch's unsorted order is its hash
  // set's, rlx's the order of first occurrence.
  r.add("aten._unique2", [](LowerCtx& c) {
    return unique_of(c, c.tensor(0, "self"), std::nullopt, c.flag(1, "sorted", true), false,
                     c.flag(2, "return_inverse", false), c.flag(3, "return_counts", false));
  });
  r.add("aten.unique_dim", [](LowerCtx& c) {
    return unique_of(c, c.tensor(0, "self"), c.i(1, "dim"), c.flag(2, "sorted", true), false, true,
                     true);
  });
  r.add("aten.unique_consecutive", [](LowerCtx& c) {
    std::optional<int64_t> dim;
    if (c.has(3, "dim")) dim = c.i(3, "dim");
    return unique_of(c, c.tensor(0, "self"), dim, false, true,
                     dim || c.flag(1, "return_inverse", false),
                     dim || c.flag(2, "return_counts", false));
  });
}

}  // namespace rlx::torch_ir
