// Pooling and resampling without an rlx kernel of their own: 3-d max and average pooling as two
// 2-d pools (D separable from H x W); adaptive max pooling (1-3 d), 3-d adaptive-average
// pooling, max_pool3d's indices and avg_pool3d with divisor_override composed window by window
// (a slice, a reduction, and for max pooling the argmax mapped to PyTorch's flat index through a
// constant table); 3-d nearest and trilinear upsampling as two 2-d resizes.
#include <algorithm>
#include <cmath>

#include "frontends/pool3d.h"
#include "frontends/torch/lowering.h"
#include "rlx/error.h"

namespace rlx::torch_ir {
namespace {

// The composition costs a few nodes per output cell; past this many cells a
// model is better served by a real kernel than by a graph this large.
constexpr int64_t kMaxCells = 4096;

// One output cell's window along one spatial dim: positions start, start +
// step, ... < end, inside the input; `full` is the window's size counting
// padding (average pooling's count_include_pad divisor).
struct Span {
  int64_t start, end, step, full;
};

int64_t span_len(const Span& s) {
  return s.end <= s.start ? 0 : (s.end - s.start + s.step - 1) / s.step;
}

enum class Reduce { Max, Mean, AvgPool };

// Pools the last spans.size() dims of x over every combination of per-dim
// windows (row-major), into [lead..., O...]. Max gives (values, indices);
// Mean averages the window; AvgPool divides the window sum by `divisor` (or
// the windows' full / in-input size when divisor is 0).
std::pair<NodeId, NodeId> pool_windows(LowerCtx& c, NodeId x,
                                       const std::vector<std::vector<Span>>& spans, Reduce how,
                                       bool include_pad = true, int64_t divisor = 0) {
  const Dims d = c.dims(x);
  const size_t S = spans.size(), lead = d.size() - S;
  const DType t = c.shape(x).dtype;
  Dims lead_dims(d.begin(), d.begin() + int64_t(lead)), out = lead_dims;
  int64_t cells = 1;
  for (const auto& s : spans) {
    out.push_back(int64_t(s.size()));
    cells *= int64_t(s.size());
  }
  RLX_CHECK(cells <= kMaxCells, c.node.op, ": ", cells, " output cells per plane is more than the ",
            kMaxCells, " this composition allows");
  if (numel(out) == 0) return {c.b.full(out, 0, t), c.b.full(out, 0, DType::I64)};
  Dims col = lead_dims;
  col.push_back(1);
  Dims flat = lead_dims;
  flat.push_back(-1);
  std::vector<NodeId> vals, idxs;
  std::vector<size_t> at(S, 0);
  for (int64_t cell = 0; cell < cells; ++cell) {
    NodeId w = x;
    int64_t count = 1, full = 1;
    for (size_t k = 0; k < S; ++k) {
      const Span& s = spans[k][at[k]];
      count *= span_len(s);
      full *= s.full;
      if (s.start != 0 || s.end != d[lead + k] || s.step != 1)
        w = c.b.op(
            Op::Slice, {w},
            {{"axis", int64_t(lead + k)}, {"start", s.start}, {"end", s.end}, {"step", s.step}});
    }
    NodeId v;
    if (count == 0) {  // a window wholly in the padding: 0, as PyTorch's average gives
      v = c.b.full(col, 0, t);
    } else {
      w = c.b.reshape(w, flat);
      const int ax = int(lead);
      if (how == Reduce::Max) {
        v = c.b.reduce(Op::ReduceMax, w, {ax}, true);
        // The window's positions as flat indices into the input plane.
        Tensor table({count}, DType::I64);
        int64_t* p = table.data<int64_t>();
        std::vector<int64_t> pos(S, 0);
        for (int64_t e = 0; e < count; ++e) {
          int64_t f = 0;
          for (size_t k = 0; k < S; ++k) {
            const Span& s = spans[k][at[k]];
            f = f * d[lead + k] + s.start + pos[k] * s.step;
          }
          p[e] = f;
          for (size_t k = S; k-- > 0;) {
            if (++pos[k] < span_len(spans[k][at[k]])) break;
            pos[k] = 0;
          }
        }
        const NodeId arg =
            c.b.op(Op::ArgMax, {w}, {{"axis", int64_t(ax)}, {"keepdims", int64_t(1)}});
        idxs.push_back(c.b.op(Op::Gather, {c.b.constant(table), c.b.reshape(arg, {-1})},
                              {{"axis", int64_t(0)}}));
        idxs.back() = c.b.reshape(idxs.back(), col);
      } else {
        v = c.b.reduce(Op::ReduceSum, w, {ax}, true);
        const int64_t div = how == Reduce::Mean ? count
                            : divisor != 0      ? divisor
                            : include_pad       ? full
                                                : count;
        v = c.b.div(v, c.scalar(double(div), t));
      }
    }
    vals.push_back(v);
    for (size_t k = S; k-- > 0;) {
      if (++at[k] < spans[k].size()) break;
      at[k] = 0;
    }
  }
  const int64_t last = int64_t(lead);
  NodeId y = c.b.reshape(vals.size() == 1 ? vals[0] : c.b.concat(vals, last), out);
  NodeId i = -1;
  if (!idxs.empty()) i = c.b.reshape(idxs.size() == 1 ? idxs[0] : c.b.concat(idxs, last), out);
  return {y, i};
}

// Adaptive windows: [floor(o D / O), ceil((o + 1) D / O)).
std::vector<Span> adaptive_spans(int64_t in, int64_t out) {
  std::vector<Span> s;
  for (int64_t o = 0; o < out; ++o) {
    const int64_t a = (o * in) / out, b = ((o + 1) * in + out - 1) / out;
    s.push_back({a, b, 1, b - a});
  }
  return s;
}

// Pooling windows of kernel k, stride st, padding p, dilation dl for `out`
// outputs (the count PyTorch recorded, ceil_mode included), clipped to the input.
std::vector<Span> kernel_spans(int64_t in, int64_t out, int64_t k, int64_t st, int64_t p,
                               int64_t dl) {
  std::vector<Span> s;
  for (int64_t o = 0; o < out; ++o) {
    int64_t start = o * st - p;
    const int64_t full = std::min(start + (k - 1) * dl + 1, in + p) - start;  // PyTorch's pool_size
    int64_t end = std::min(start + (k - 1) * dl + 1, in);
    while (start < 0) start += dl;
    s.push_back({start, std::max(end, start), dl, full});
  }
  return s;
}

std::vector<int64_t> triple(LowerCtx& c, size_t pos, const char* name, std::vector<int64_t> def,
                            int64_t least) {
  std::vector<int64_t> v = c.ints(pos, name, def);
  if (v.empty()) v = def;
  if (v.size() == 1) v.assign(3, v[0]);
  RLX_CHECK(v.size() == 3, c.node.op, ": ", name, " needs 1 or 3 entries, got ", v.size());
  for (int64_t e : v) RLX_CHECK(e >= least, c.node.op, ": ", name, " entries must be >= ", least);
  return v;
}

// Checks that x has at least S dims and the recorded output o the same rank,
// with at most kMaxCells cells over its last S dims (so the spans stay small);
// returns the number of leading dims.
// The number of leading (not pooled) dims; `capped`: the window-by-window composition must fit
// kMaxCells output cells per plane.
size_t pooled_lead(LowerCtx& c, const Dims& d, const Dims& o, size_t S, bool capped = true) {
  RLX_CHECK(d.size() >= S && o.size() == d.size(), c.node.op, ": expected ", S,
            " pooled dims and an output of the input's rank, got ", dims_str(d), " -> ",
            dims_str(o));
  int64_t cells = 1;
  for (size_t k = d.size() - S; k < d.size(); ++k) {
    RLX_CHECK(o[k] >= 0 && (!capped || o[k] <= kMaxCells), c.node.op, ": output dims ", dims_str(o),
              " out of range");
    cells *= std::min<int64_t>(o[k], kMaxCells + 1);
  }
  RLX_CHECK(!capped || cells <= kMaxCells, c.node.op, ": ", cells,
            " output cells per plane is more than the ", kMaxCells, " this composition allows");
  return d.size() - S;
}

bool fits_cells(const Dims& o, size_t lead) {
  int64_t cells = 1;
  for (size_t k = lead; k < o.size(); ++k) cells *= std::min<int64_t>(o[k], kMaxCells + 1);
  return cells <= kMaxCells;
}

// A 3-d max or average pool of x [lead..., D, H, W] as two of rlx's 2-d pools
// (frontends/pool3d.h); PyTorch's pads are the same at both ends.
NodeId separable_pool3d(LowerCtx& c, NodeId x, bool max, const std::vector<int64_t>& k,
                        const std::vector<int64_t>& st, const std::vector<int64_t>& p,
                        const std::vector<int64_t>& dl, bool ceil, bool include_pad) {
  auto pool = [&](NodeId v, const Dims& kernel, const Dims& stride, const Dims& dil,
                  const Dims& pads) {
    Attrs a{{"kernel", kernel}, {"stride", stride}, {"pads", pads}, {"ceil_mode", ceil}};
    if (max) {
      a.set("dilation", dil);
      return c.b.op(Op::MaxPool2d, {v}, a);
    }
    a.set("count_include_pad", include_pad);
    return c.b.op(Op::AvgPool2d, {v}, a);
  };
  return frontends::pool3d_by_2d(c.b, x, c.dims(x), k, st, dl, {p[0], p[1], p[2], p[0], p[1], p[2]},
                                 pool);
}

// The output dims PyTorch recorded for element `k` of a tuple result (or the
// single result).
Dims recorded(LowerCtx& c, size_t k = 0) {
  if (c.node.out.kind == Out::Tuple) {
    const auto& m = c.node.out.tuple.at(k);
    RLX_CHECK(m, c.node.op, ": no recorded shape for output ", k);
    return m->shape;
  }
  return c.out().shape;
}

Value adaptive_max(LowerCtx& c) {
  const NodeId x = c.tensor(0, "self");
  const std::vector<int64_t> size = c.ints(1, "output_size");
  const Dims d = c.dims(x), o = recorded(c);
  const size_t S = size.size(), lead = pooled_lead(c, d, o, S);
  std::vector<std::vector<Span>> spans;
  for (size_t k = 0; k < S; ++k) spans.push_back(adaptive_spans(d[lead + k], o[lead + k]));
  auto [y, i] = pool_windows(c, x, spans, Reduce::Max);
  return Value::tuple({y, i});
}

// upsample_nearest3d / upsample_trilinear3d: H x W resized as a 2-d image of
// N x (C D) planes, then D (with H' W' as an untouched second dim).
Value upsample3d(LowerCtx& c, const std::string& mode, bool has_align) {
  const NodeId x = c.tensor(0, "input");
  const Dims d = c.dims(x), o = c.out().shape;
  RLX_CHECK(d.size() == 5 && o.size() == 5, c.node.op, ": expected NCDHW, got ", dims_str(d));
  const bool align = has_align && c.flag(2, "align_corners", false);
  std::vector<double> scales;
  const size_t pos = has_align ? 3 : 2;
  if (const Value* v = c.arg(pos, "scale_factors"); v && v->kind == Value::List)
    for (const Value& e : v->items) scales.push_back(e.number());
  else if (c.has(pos, "scales_d") || c.has(pos + 1, "scales_h") || c.has(pos + 2, "scales_w"))
    scales = {c.f(pos, "scales_d", 0), c.f(pos + 1, "scales_h", 0), c.f(pos + 2, "scales_w", 0)};
  auto resize = [&](NodeId v, int64_t h, int64_t w, std::vector<double> sc) {
    Attrs a{{"size", std::vector<int64_t>{h, w}},
            {"mode", mode},
            {"align_corners", int64_t(align)},
            {"antialias", int64_t(0)}};
    if (!scales.empty()) a.set("scales", sc);
    return c.b.op(Op::Resize, {v}, a);
  };
  NodeId y = c.b.reshape(x, {d[0], d[1] * d[2], d[3], d[4]});
  y = resize(y, o[3], o[4],
             scales.empty() ? std::vector<double>{} : std::vector<double>{scales[1], scales[2]});
  y = c.b.reshape(y, {d[0], d[1], d[2], o[3] * o[4]});
  // The second dim keeps its size: scale 1 maps every position onto itself.
  y = resize(y, o[2], o[3] * o[4],
             scales.empty() ? std::vector<double>{} : std::vector<double>{scales[0], 1.0});
  return Value::tensor(c.b.reshape(y, o));
}

}  // namespace

void register_pool(Registry& r) {
  r.add("aten.adaptive_max_pool2d", adaptive_max);
  r.add("aten.adaptive_max_pool3d", adaptive_max);
  r.add("aten._adaptive_avg_pool3d", [](LowerCtx& c) {
    const NodeId x = c.tensor(0, "self");
    const Dims d = c.dims(x), o = c.out().shape;
    const size_t lead = pooled_lead(c, d, o, 3);
    std::vector<std::vector<Span>> spans;
    for (size_t k = 0; k < 3; ++k) spans.push_back(adaptive_spans(d[lead + k], o[lead + k]));
    return Value::tensor(pool_windows(c, x, spans, Reduce::Mean).first);
  });
  // max_pool3d_with_indices(x, kernel, stride, padding, dilation, ceil_mode): the values by
  // separable 2-d pools; the indices window by window, up to kMaxCells cells per plane (past
  // that they are not computed, which an import that reads them reports).
  r.add("aten.max_pool3d_with_indices", [](LowerCtx& c) {
    const NodeId x = c.tensor(0, "self");
    const auto k = triple(c, 1, "kernel_size", {}, 1), st = triple(c, 2, "stride", k, 1),
               p = triple(c, 3, "padding", {0, 0, 0}, 0),
               dl = triple(c, 4, "dilation", {1, 1, 1}, 1);
    const Dims d = c.dims(x), o = recorded(c);
    const size_t lead = pooled_lead(c, d, o, 3, false);
    const NodeId y =
        separable_pool3d(c, x, true, k, st, p, dl, c.flag(5, "ceil_mode", false), true);
    if (!fits_cells(o, lead)) return Value::tuple({y, -1});
    std::vector<std::vector<Span>> spans;
    for (size_t j = 0; j < 3; ++j)
      spans.push_back(kernel_spans(d[lead + j], o[lead + j], k[j], st[j], p[j], dl[j]));
    return Value::tuple({y, pool_windows(c, x, spans, Reduce::Max).second});
  });
  // avg_pool3d(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override).
  r.add("aten.avg_pool3d", [](LowerCtx& c) {
    const NodeId x = c.tensor(0, "self");
    const auto k = triple(c, 1, "kernel_size", {}, 1), st = triple(c, 2, "stride", k, 1),
               p = triple(c, 3, "padding", {0, 0, 0}, 0);
    const bool include_pad = c.flag(5, "count_include_pad", true);
    const int64_t divisor = c.i(6, "divisor_override", 0);  // 0: none
    const Dims d = c.dims(x), o = c.out().shape;
    if (divisor == 0) {
      pooled_lead(c, d, o, 3, false);
      return Value::tensor(separable_pool3d(c, x, false, k, st, p, {1, 1, 1},
                                            c.flag(4, "ceil_mode", false), include_pad));
    }
    // divisor_override (any nonzero divisor, negative too, as PyTorch allows): window by window.
    const size_t lead = pooled_lead(c, d, o, 3);
    std::vector<std::vector<Span>> spans;
    for (size_t j = 0; j < 3; ++j)
      spans.push_back(kernel_spans(d[lead + j], o[lead + j], k[j], st[j], p[j], 1));
    return Value::tensor(pool_windows(c, x, spans, Reduce::AvgPool, include_pad, divisor).first);
  });
  r.add("aten.upsample_nearest3d", [](LowerCtx& c) { return upsample3d(c, "nearest", false); });
  r.add("aten.upsample_trilinear3d", [](LowerCtx& c) { return upsample3d(c, "bilinear", true); });
}

}  // namespace rlx::torch_ir
