// Lowerings for one_hot, gather_nd, scatter_elements, scatter_nd, topk and conv_transpose.
// rlx wraps negative indices (idx + len) and MIL's gather/scatter ops do not all promise to, so
// indices are wrapped here with select(idx < 0, idx + len, idx); that needs the indexed dims to be
// static. Out-of-range indices cannot raise at run time in MIL (the CPU kernels throw).
#include "lower.h"
#include "rlx/error.h"

namespace rlx::coreml {
namespace {

// select(idx < 0, idx + lens, idx); `lens` broadcasts against idx (a scalar or a [k] vector).
Val wrap_indices(Lowering& L, const Val& idx, const std::vector<int64_t>& lens,
                 const std::string& h) {
  for (int64_t d : lens) RLX_CHECK(d >= 0, "coreml: indexing needs static indexed dims");
  Tensor t(Dims{int64_t(lens.size())}, DType::I32);
  for (size_t i = 0; i < lens.size(); ++i) t.data<int32_t>()[i] = int32_t(lens[i]);
  Val len = lens.size() == 1 ? L.b.int_scalar(lens[0], h + "_len")
                             : L.b.constant(t, pb::INT32, h + "_lens");
  Val neg = L.binary("less", idx, L.b.int_scalar(0, h + "_zero"), h + "_neg");
  Val shifted = L.binary("add", idx, len, h + "_shifted");
  return L.b.op("select", {{"cond", neg}, {"a", shifted}, {"b", idx}}, idx.type, h + "_wrapped");
}

// equal(expand_dims(wrap(idx), -1), range(depth)), cast to the output dtype.
Val lower_one_hot(Lowering& L, const Node& n) {
  const Val& idx = L.in(n, 0);
  const std::string h = L.hint(n);
  const int64_t depth = n.attrs_as<OneHotAttrs>().depth;
  Val w = wrap_indices(L, idx, {depth}, h);
  Type et = w.type;
  et.dims.push_back(1);
  Val e = L.b.op("expand_dims", {{"x", w}, {"axes", L.b.ints({-1}, h + "_axes")}}, et, h + "_e");
  Tensor range(Dims{depth}, DType::I32);
  for (int64_t j = 0; j < depth; ++j) range.data<int32_t>()[j] = int32_t(j);
  Val hot = L.binary("equal", e, L.b.constant(range, pb::INT32, h + "_range"), h + "_hot");
  const Type out = L.type_of(n);
  if (out.dt == pb::BOOL) return L.b.op("identity", {{"x", hot}}, out, h);
  return L.b.op("cast", {{"x", hot}, {"dtype", L.b.string(mil_dtype_name(out.dt), h + "_dtype")}},
                out, h);
}

Val lower_gather_nd(Lowering& L, const Node& n) {
  const Val &x = L.in(n, 0), &idx = L.in(n, 1);
  const std::string h = L.hint(n);
  const int64_t b = n.attrs_as<GatherNDAttrs>().batch_dims;
  RLX_CHECK(b == 0 || L.opset() >= 6, "coreml: gather_nd with batch_dims needs CoreML6");
  const int64_t k = idx.type.dims.back();
  RLX_CHECK(k >= 0, "coreml: gather_nd needs a static index depth");
  std::vector<int64_t> lens(x.type.dims.begin() + b, x.type.dims.begin() + b + k);
  std::vector<std::pair<std::string, Arg>> in{{"x", x}, {"indices", wrap_indices(L, idx, lens, h)}};
  if (L.opset() >= 6) in.push_back({"batch_dims", L.b.int_scalar(b, h + "_bd")});
  if (L.opset() >= 7) in.push_back({"validate_indices", L.b.boolean(false, h + "_vi")});
  return L.b.op("gather_nd", in, L.type_of(n), h);
}

std::string scatter_mode(ScatterReduction r) {
  switch (r) {
    case ScatterReduction::none:
      return "update";
    case ScatterReduction::add:  // these share MIL's names
    case ScatterReduction::mul:
    case ScatterReduction::max:
    case ScatterReduction::min:
      return std::string(to_string(r));
  }
  throw make_error("coreml: bad scatter reduction ", int(r));
}

Val lower_scatter_elements(Lowering& L, const Node& n) {
  const Val &x = L.in(n, 0), &idx = L.in(n, 1);
  const std::string h = L.hint(n);
  const auto& a = n.attrs_as<ScatterElementsAttrs>();
  const int ax = normalize_axis(a.axis, x.type.rank());
  std::vector<std::pair<std::string, Arg>> in{
      {"data", x},
      {"indices", wrap_indices(L, idx, {x.type.dims[size_t(ax)]}, h)},
      {"updates", L.in(n, 2)},
      {"axis", L.b.int_scalar(ax, h + "_axis")},
      {"mode", L.b.string(scatter_mode(a.reduction), h + "_mode")}};
  if (L.opset() >= 7) in.push_back({"validate_indices", L.b.boolean(false, h + "_vi")});
  return L.b.op("scatter_along_axis", in, L.type_of(n), h);
}

Val lower_scatter_nd(Lowering& L, const Node& n) {
  const Val &x = L.in(n, 0), &idx = L.in(n, 1);
  const std::string h = L.hint(n);
  const int64_t k = idx.type.dims.back();
  RLX_CHECK(k >= 0, "coreml: scatter_nd needs a static index depth");
  std::vector<int64_t> lens(x.type.dims.begin(), x.type.dims.begin() + k);
  std::vector<std::pair<std::string, Arg>> in{
      {"data", x},
      {"indices", wrap_indices(L, idx, lens, h)},
      {"updates", L.in(n, 2)},
      {"mode", L.b.string(scatter_mode(n.attrs_as<ScatterNDAttrs>().reduction), h + "_mode")}};
  if (L.opset() >= 7) in.push_back({"validate_indices", L.b.boolean(false, h + "_vi")});
  return L.b.op("scatter_nd", in, L.type_of(n), h);
}

// MIL's weight layout [C_in, C_out/groups, K...] is PyTorch's, as in the IR. output_padding is
// expressed through output_shape (static output dims).
Val lower_conv_transpose(Lowering& L, const Node& n) {
  const Val& x = L.in(n, 0);
  const size_t sp = size_t(x.type.rank() - 2);
  const std::string h = L.hint(n);
  const auto& a = n.attrs_as<ConvTransposeAttrs>();
  const auto pads = list_or(a.pads, 2 * sp, 0);
  std::vector<int64_t> mil_pad;
  for (size_t i = 0; i < sp; ++i) mil_pad.insert(mil_pad.end(), {pads[i], pads[i + sp]});
  std::vector<std::pair<std::string, Arg>> in{
      {"x", x},
      {"weight", L.in(n, 1)},
      {"strides", L.b.ints(list_or(a.stride, sp, 1), h + "_strides")},
      {"pad_type", L.b.string("custom", h + "_pad_type")},
      {"pad", L.b.ints(mil_pad, h + "_pad")},
      {"dilations", L.b.ints(list_or(a.dilation, sp, 1), h + "_dil")},
      {"groups", L.b.int_scalar(a.groups, h + "_groups")}};
  if (n.inputs.size() == 3) in.push_back({"bias", L.in(n, 2)});
  const auto opad = list_or(a.output_padding, sp, 0);
  if (opad != std::vector<int64_t>(sp, 0)) {
    const Type out = L.type_of(n);
    RLX_CHECK(out.is_static(), "coreml: conv_transpose with output_padding needs static shapes");
    in.push_back({"output_shape", L.b.ints(out.dims, h + "_oshape")});
  }
  return L.b.op("conv_transpose", in, L.type_of(n), h);
}

// topk from single-output ops: argsort along the axis, the first k indices, then a gather.
// sorted=0 (index order) re-sorts the k indices. Ties follow CoreML's argsort, which does not
// promise the CPU kernel's index-ascending order.
std::vector<Val> lower_topk(Lowering& L, const Node& n) {
  const Val& x = L.in(n, 0);
  const std::string h = L.hint(n);
  const int r = x.type.rank();
  const auto& a = n.attrs_as<TopKAttrs>();
  const int ax = normalize_axis(a.axis, r);
  const int64_t k = a.k;
  auto argsort = [&](const Val& v, bool ascending, const std::string& s) {
    return L.b.op("argsort",
                  {{"x", v},
                   {"axis", L.b.int_scalar(ax, s + "_axis")},
                   {"ascending", L.b.boolean(ascending, s + "_asc")}},
                  Type{pb::INT32, v.type.dims}, s);
  };
  auto bools = [&](bool v, bool at_axis, const char* s) {
    Tensor t(Dims{r}, DType::Bool);
    for (int i = 0; i < r; ++i) t.data<bool>()[i] = i == ax ? at_axis : v;
    return L.b.constant(t, pb::BOOL, h + s);
  };
  Val order = argsort(x, !a.largest, h + "_order");
  std::vector<int64_t> begin(size_t(r), 0), end(size_t(r), 0), stride(size_t(r), 1);
  end[size_t(ax)] = k;
  Type kt{pb::INT32, x.type.dims};
  kt.dims[size_t(ax)] = k;
  Val idx = L.b.op("slice_by_index",
                   {{"x", order},
                    {"begin", L.b.ints(begin, h + "_begin")},
                    {"end", L.b.ints(end, h + "_end")},
                    {"stride", L.b.ints(stride, h + "_stride")},
                    {"begin_mask", bools(true, false, "_bmask")},
                    {"end_mask", bools(true, false, "_emask")},
                    {"squeeze_mask", bools(false, false, "_smask")}},
                   kt, h + "_topk_idx");
  auto gather = [&](const Val& v, const Val& i, const Type& t, const std::string& s) {
    std::vector<std::pair<std::string, Arg>> in{
        {"x", v}, {"indices", i}, {"axis", L.b.int_scalar(ax, s + "_axis")}};
    if (L.opset() >= 7) in.push_back({"validate_indices", L.b.boolean(false, s + "_vi")});
    return L.b.op("gather_along_axis", in, t, s);
  };
  if (!a.sorted) idx = gather(idx, argsort(idx, true, h + "_by_index"), kt, h + "_index_order");
  return {gather(x, idx, L.type_of(n.results[0]), h + "_values"),
          L.b.op("identity", {{"x", idx}}, L.type_of(n.results[1]), h + "_indices")};
}

}  // namespace

void register_indexing(LowerTable& t) {
  auto set = [&](Op op, LowerFn f) { t.one[size_t(op)] = f; };
  set(Op::OneHot, lower_one_hot);
  set(Op::GatherND, lower_gather_nd);
  set(Op::ScatterElements, lower_scatter_elements);
  set(Op::ScatterND, lower_scatter_nd);
  set(Op::ConvTranspose, lower_conv_transpose);
  t.many[size_t(Op::TopK)] = lower_topk;
}

}  // namespace rlx::coreml
