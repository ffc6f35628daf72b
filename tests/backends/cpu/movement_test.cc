// Movement ops (reshape, transpose, slice, concat, expand, pad, tile, flip):
// bit-exact against index-mapping references written here and against
// PyTorch/NumPy goldens (one batched Python call), over 1/2/4/8-byte dtypes.
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <optional>

#include "support/testing.h"
#include "support/torch_golden.h"

namespace rlx {
namespace {

using testing::all_equal;
using testing::random_tensor;
using testing::ravel;
using testing::run_op;
using testing::unravel;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

// Builds out[idx] = in[src(idx)] (src returns input multi-index, or an empty
// optional-like {-1} for `fill`), element by element through doubles.
using SrcFn = std::function<Dims(const Dims&)>;
Tensor gather_ref(const Tensor& x, const Dims& od, const SrcFn& src, double fill = 0) {
  Tensor r(od, DType::F64);
  for (int64_t i = 0; i < r.numel(); ++i) {
    Dims s = src(unravel(i, od));
    r.data<double>()[i] = !s.empty() && s[0] < 0 ? fill : x.item_as_double(ravel(s, x.dims()));
  }
  return r.to(x.dtype());
}

std::string py_list(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (int64_t a : v) s += std::to_string(a) + ",";
  return s + "]";
}

struct MovementCase {
  std::string name;
  Op op;
  Attrs attrs;
  std::vector<Tensor> in;
  std::string code;  // torch/numpy golden; inputs are x['a'], x['b'], ...
  std::function<Tensor()> ref;
};

TensorMap golden_inputs(const std::vector<Tensor>& in) {
  TensorMap m;
  for (size_t i = 0; i < in.size(); ++i) m[std::string(1, char('a' + i))] = in[i];
  return m;
}

// ------------------------------------------------------------------ cases

void add_transpose(std::vector<MovementCase>& cs) {
  struct T {
    Dims d;
    std::vector<int64_t> perm;
    DType t;
  };
  std::vector<T> ts = {
      {{37, 53}, {1, 0}, DType::F32},
      {{3, 37, 53}, {0, 2, 1}, DType::F16},
      {{2, 3, 4, 5}, {3, 1, 0, 2}, DType::F32},
      {{2, 3, 4, 5}, {0, 2, 1, 3}, DType::I64},
      {{2, 1, 4, 5}, {1, 3, 0, 2}, DType::F32},
      {{2, 3, 1, 4, 5}, {4, 2, 0, 3, 1}, DType::I64},
      {{3, 2, 4, 2, 3}, {1, 0, 3, 2, 4}, DType::U8},
      {{3, 4, 5, 6, 2}, {2, 0, 4, 1, 3}, DType::F16},
      {{4, 5, 6}, {-1, -3, 1}, DType::F32},
      {{4, 5}, {0, 1}, DType::Bool},
      {{5, 7}, {1, 0}, DType::Bool},
      {{0, 3}, {1, 0}, DType::F32},
      {{300, 517}, {1, 0}, DType::F32},
      {{1, 1, 7}, {2, 0, 1}, DType::F32},
      {{2, 33, 65}, {2, 1, 0}, DType::I32},
  };
  int n = 0;
  for (const T& t : ts) {
    Tensor x = random_tensor(t.d, t.t, uint64_t(100 + n), -100, 100);
    Dims od;
    for (int64_t p : t.perm) od.push_back(t.d[size_t(p < 0 ? p + int64_t(t.d.size()) : p)]);
    auto perm = t.perm;
    cs.push_back({"transpose_" + std::to_string(n++),
                  Op::Transpose,
                  Attrs{{"perm", t.perm}},
                  {x},
                  "y = x['a'].permute(" + py_list(t.perm) + ").contiguous()",
                  [=] {
                    return gather_ref(x, od, [&](const Dims& o) {
                      Dims s(o.size());
                      for (size_t k = 0; k < o.size(); ++k)
                        s[size_t(perm[k] < 0 ? perm[k] + int64_t(o.size()) : perm[k])] = o[k];
                      return s;
                    });
                  }});
  }
}

// Python slice indices, as CPython's PySlice_AdjustIndices computes them.
std::vector<int64_t> py_slice(int64_t len, const int64_t* start, const int64_t* stop,
                              int64_t step) {
  auto adjust = [&](const int64_t* v, bool is_start) -> int64_t {
    if (!v) return step < 0 ? (is_start ? len - 1 : -1) : (is_start ? 0 : len);
    int64_t a = *v;
    if (a < 0) {
      a += len;
      if (a < 0) a = step < 0 ? -1 : 0;
    } else if (a >= len) {
      a = step < 0 ? len - 1 : len;
    }
    return a;
  };
  int64_t s = adjust(start, true), e = adjust(stop, false);
  std::vector<int64_t> r;
  for (int64_t i = s; step > 0 ? i < e : i > e; i += step) r.push_back(i);
  return r;
}

void add_slice(std::vector<MovementCase>& cs) {
  struct S {
    Dims d;
    int64_t axis;
    std::optional<int64_t> start, end;
    int64_t step;
    DType t;
  };
  std::vector<S> ss = {
      {{10, 6}, 0, 2, 8, 1, DType::F32},       {{10, 6}, 0, -3, kMax, 1, DType::I64},
      {{10, 6}, 0, 1, 100, 3, DType::U8},      {{10, 6}, 0, -100, 5, 2, DType::F32},
      {{10, 6}, 0, 8, 2, -1, DType::F16},      {{10, 6}, 0, kMax, kMin, -1, DType::F32},
      {{10, 6}, 0, -1, -100, -3, DType::I32},  {{10, 6}, 0, 5, 5, 1, DType::F32},
      {{10, 6}, 0, 7, 2, 1, DType::F32},       {{10, 6}, 0, 0, 10, 100, DType::F32},
      {{10, 6}, 0, 9, -11, kMax, DType::F32},  {{10, 6}, 0, 9, -11, -kMax, DType::F32},
      {{3, 10, 4}, -1, 1, -1, 1, DType::F32},  {{3, 10, 4}, 1, 12, -12, -2, DType::Bool},
      {{3, 10, 4}, 1, {}, {}, -1, DType::F32}, {{3, 10, 4}, 1, {}, 4, 1, DType::F32},
      {{3, 10, 4}, 1, -2, {}, -4, DType::I64}, {{0, 5}, 1, 1, 3, 1, DType::F32},
      {{4, 0}, 1, 0, 3, 1, DType::F32},        {{300, 70}, 1, 3, 66, 2, DType::F32},
  };
  int n = 0;
  for (const S& s : ss) {
    Tensor x = random_tensor(s.d, s.t, uint64_t(200 + n), -100, 100);
    Attrs a{{"axis", s.axis}, {"step", s.step}};
    if (s.start) a.set("start", *s.start);
    if (s.end) a.set("end", *s.end);
    const int r = int(s.d.size());
    const int ax = int(s.axis < 0 ? s.axis + r : s.axis);
    auto idx =
        py_slice(s.d[size_t(ax)], s.start ? &*s.start : nullptr, s.end ? &*s.end : nullptr, s.step);
    Dims od = s.d;
    od[size_t(ax)] = int64_t(idx.size());
    auto pyv = [](const std::optional<int64_t>& v) { return v ? std::to_string(*v) : "None"; };
    std::string code =
        "a = x['a'].numpy()\ny = torch.from_numpy(np.ascontiguousarray(a[(slice(None),)*" +
        std::to_string(ax) + " + (slice(" + pyv(s.start) + ", " + pyv(s.end) + ", " +
        std::to_string(s.step) + "),)]))";
    cs.push_back({"slice_" + std::to_string(n++), Op::Slice, a, {x}, code, [=] {
                    return gather_ref(x, od, [&](const Dims& o) {
                      Dims i = o;
                      i[size_t(ax)] = idx[size_t(o[size_t(ax)])];
                      return i;
                    });
                  }});
  }
}

void add_concat(std::vector<MovementCase>& cs) {
  struct C {
    std::vector<Dims> ds;
    int64_t axis;
    DType t;
  };
  std::vector<C> ccs = {
      {{{2, 3}, {4, 3}, {1, 3}}, 0, DType::F32},
      {{{2, 3, 4}, {2, 1, 4}, {2, 0, 4}, {2, 5, 4}}, 1, DType::I64},
      {{{2, 3, 4}, {2, 3, 7}}, -1, DType::F16},
      {{{5}, {0}, {3}}, 0, DType::U8},
      {{{0, 3}, {0, 2}}, 1, DType::F32},
      {{{200, 100}, {200, 57}}, 1, DType::F32},
  };
  int n = 0;
  for (const C& c : ccs) {
    std::vector<Tensor> in;
    std::string names;
    for (size_t i = 0; i < c.ds.size(); ++i) {
      in.push_back(random_tensor(c.ds[i], c.t, uint64_t(300 + 10 * n + int(i)), -100, 100));
      names += "x['" + std::string(1, char('a' + i)) + "'],";
    }
    const int r = int(c.ds[0].size());
    const int ax = int(c.axis < 0 ? c.axis + r : c.axis);
    Dims od = c.ds[0];
    od[size_t(ax)] = 0;
    for (const Dims& d : c.ds) od[size_t(ax)] += d[size_t(ax)];
    cs.push_back({"concat_" + std::to_string(n++), Op::Concat, Attrs{{"axis", c.axis}}, in,
                  "y = torch.cat([" + names + "], " + std::to_string(c.axis) + ")", [=] {
                    Tensor r(od, DType::F64);
                    for (int64_t i = 0; i < r.numel(); ++i) {
                      Dims o = unravel(i, od);
                      size_t k = 0;
                      while (o[size_t(ax)] >= in[k].dims()[size_t(ax)])
                        o[size_t(ax)] -= in[k++].dims()[size_t(ax)];
                      r.data<double>()[i] = in[k].item_as_double(ravel(o, in[k].dims()));
                    }
                    return r.to(in[0].dtype());
                  }});
  }
}

void add_expand(std::vector<MovementCase>& cs) {
  struct E {
    Dims d;
    std::vector<int64_t> shape;
    Dims out;
    DType t;
  };
  std::vector<E> es = {
      {{3, 1}, {3, 4}, {3, 4}, DType::F32},
      {{1, 4}, {2, 3, 4}, {2, 3, 4}, DType::I64},
      {{2, 1, 3, 1}, {2, 5, 3, 4}, {2, 5, 3, 4}, DType::F16},
      {{3, 1}, {-1, 6}, {3, 6}, DType::U8},
      {{}, {2, 3}, {2, 3}, DType::F32},
      {{1}, {0}, {0}, DType::F32},
      {{2, 3}, {2, 3}, {2, 3}, DType::Bool},
      {{1, 1, 1}, {4, 1, 300}, {4, 1, 300}, DType::F32},
      {{5, 1, 7}, {2, 5, 60, 7}, {2, 5, 60, 7}, DType::F32},
  };
  int n = 0;
  for (const E& e : es) {
    Tensor x = random_tensor(e.d, e.t, uint64_t(400 + n), -100, 100);
    const size_t lead = e.out.size() - e.d.size();
    Dims od = e.out, xd = e.d;
    cs.push_back({"expand_" + std::to_string(n++),
                  Op::Expand,
                  Attrs{{"shape", e.shape}},
                  {x},
                  "y = x['a'].expand(" + py_list(e.shape) + ").contiguous()",
                  [=] {
                    return gather_ref(x, od, [&](const Dims& o) {
                      Dims i;
                      for (size_t k = lead; k < o.size(); ++k)
                        i.push_back(xd[k - lead] == 1 ? 0 : o[k]);
                      return i;
                    });
                  }});
  }
}

void add_pad(std::vector<MovementCase>& cs) {
  struct P {
    Dims d;
    std::vector<int64_t> pads;
    std::string mode;
    double value;
    DType t;
    std::string code;  // when numpy/torch cannot express the case directly
  };
  std::vector<P> ps = {
      {{3, 4}, {1, 2, 0, 3}, "constant", 1.5, DType::F32, ""},
      {{5, 6},
       {-1, 2, 0, -3},
       "constant",
       -2,
       DType::F32,
       "y = F.pad(x['a'], (2, -3, -1, 0), value=-2.0)"},
      {{2, 3, 5, 6}, {0, 0, 2, 1, 0, 0, 1, 4}, "reflect", 0, DType::F32, ""},
      {{5}, {4, 4}, "reflect", 0, DType::I64, ""},
      {{4, 3}, {3, 0, 2, 0}, "reflect", 0, DType::F16, ""},
      // Cropping 2 then reflecting about the (uncropped) last element.
      {{6},
       {-2, 3},
       "reflect",
       0,
       DType::F32,
       "y = torch.from_numpy(np.pad(x['a'].numpy()[2:], [(0, 3)], mode='reflect'))"},
      {{2, 3, 4}, {0, 1, 2, 3, 0, 1}, "replicate", 0, DType::F32, ""},
      {{3, 1}, {0, 5, 0, 2}, "replicate", 0, DType::U8, ""},
      {{2, 3}, {1, 1, 1, 1}, "constant", 7, DType::I64, ""},
      {{2, 3}, {0, 2, 1, 0}, "constant", 1, DType::Bool, ""},
      {{0, 3}, {1, 0, 0, 1}, "constant", 3, DType::F32, ""},
      {{}, {}, "constant", 3, DType::F32, "y = x['a'].clone()"},
  };
  int n = 0;
  for (const P& p : ps) {
    Tensor x = random_tensor(p.d, p.t, uint64_t(600 + n), -100, 100);
    const size_t r = p.d.size();
    Dims od = p.d;
    std::string pairs = "[";
    for (size_t k = 0; k < r; ++k) {
      od[k] += p.pads[k] + p.pads[k + r];
      pairs += "(" + std::to_string(p.pads[k]) + "," + std::to_string(p.pads[k + r]) + "),";
    }
    pairs += "]";
    std::string code = p.code;
    if (code.empty())
      code = "y = torch.from_numpy(np.pad(x['a'].numpy(), " + pairs + ", mode='" +
             (p.mode == "replicate" ? std::string("edge") : p.mode) + "'" +
             (p.mode == "constant" ? ", constant_values=" + std::to_string(p.value) : "") + "))";
    Dims xd = p.d;
    auto pads = p.pads;
    std::string mode = p.mode;
    double fill = p.value;
    cs.push_back({"pad_" + std::to_string(n++),
                  Op::Pad,
                  Attrs{{"pads", p.pads}, {"mode", p.mode}, {"value", p.value}},
                  {x},
                  code,
                  [=] {
                    return gather_ref(
                        x, od,
                        [&](const Dims& o) {
                          Dims i(o.size());
                          for (size_t k = 0; k < o.size(); ++k) {
                            int64_t L = xd[k], v = o[k] - pads[k];
                            if (v < 0 || v >= L) {
                              if (mode == "constant") return Dims{-1};
                              if (mode == "reflect") v = v < 0 ? -v : 2 * L - 2 - v;
                              if (mode == "replicate") v = v < 0 ? 0 : L - 1;
                            }
                            i[k] = v;
                          }
                          return i;
                        },
                        fill);
                  }});
  }
}

void add_tile_flip(std::vector<MovementCase>& cs) {
  struct T {
    Dims d;
    std::vector<int64_t> reps;
    DType t;
  };
  std::vector<T> ts = {{{2, 3}, {2, 3}, DType::F32},
                       {{2, 1, 3}, {1, 4, 2}, DType::I64},
                       {{2, 3}, {0, 2}, DType::F32},
                       {{3}, {1}, DType::U8},
                       {{4, 5, 3}, {2, 1, 3}, DType::F16}};
  int n = 0;
  for (const T& t : ts) {
    Tensor x = random_tensor(t.d, t.t, uint64_t(700 + n), -100, 100);
    Dims od = t.d, xd = t.d;
    for (size_t k = 0; k < od.size(); ++k) od[k] *= t.reps[k];
    cs.push_back({"tile_" + std::to_string(n++),
                  Op::Tile,
                  Attrs{{"repeats", t.reps}},
                  {x},
                  "y = x['a'].repeat(" + py_list(t.reps) + ")",
                  [=] {
                    return gather_ref(x, od, [&](const Dims& o) {
                      Dims i(o.size());
                      for (size_t k = 0; k < o.size(); ++k) i[k] = o[k] % xd[k];
                      return i;
                    });
                  }});
  }
  struct Fl {
    Dims d;
    std::vector<int64_t> axes;
    DType t;
  };
  std::vector<Fl> fs = {{{3, 4, 5}, {0, 2}, DType::F32},
                        {{3, 4, 5}, {-1}, DType::I64},
                        {{3, 4, 5}, {1}, DType::F16},
                        {{3, 4}, {}, DType::Bool},
                        {{2, 3, 2, 3, 2}, {4, 1, 0, 3}, DType::U8},
                        {{0, 3}, {0}, DType::F32}};
  n = 0;
  for (const Fl& f : fs) {
    Tensor x = random_tensor(f.d, f.t, uint64_t(800 + n), -100, 100);
    std::vector<bool> fl(f.d.size(), false);
    for (int64_t a : f.axes) fl[size_t(a < 0 ? a + int64_t(f.d.size()) : a)] = true;
    Dims xd = f.d;
    cs.push_back(
        {"flip_" + std::to_string(n++),
         Op::Flip,
         Attrs{{"axes", f.axes}},
         {x},
         f.axes.empty() ? "y = x['a'].clone()" : "y = torch.flip(x['a'], " + py_list(f.axes) + ")",
         [=] {
           return gather_ref(x, xd, [&](const Dims& o) {
             Dims i = o;
             for (size_t k = 0; k < o.size(); ++k)
               if (fl[k]) i[k] = xd[k] - 1 - o[k];
             return i;
           });
         }});
  }
}

std::vector<MovementCase> make_movement_cases() {
  std::vector<MovementCase> cs;
  add_transpose(cs);
  add_slice(cs);
  add_concat(cs);
  add_expand(cs);
  add_pad(cs);
  add_tile_flip(cs);
  // reshape: a byte copy; torch reshape of the same data.
  for (DType t : {DType::F32, DType::I64, DType::F16, DType::Bool}) {
    Tensor x = random_tensor({4, 6, 5}, t, 500, -100, 100);
    cs.push_back({std::string("reshape_") + std::string(dtype_name(t)),
                  Op::Reshape,
                  Attrs{{"shape", std::vector<int64_t>{3, -1, 2}}},
                  {x},
                  "y = x['a'].reshape(3, -1, 2).contiguous()",
                  [=] {
                    Tensor r = x.clone();
                    return r.reshape({3, 20, 2});
                  }});
  }
  return cs;
}

const std::vector<MovementCase>& movement_cases() {
  static const std::vector<MovementCase> cs = make_movement_cases();
  return cs;
}

const std::map<std::string, std::vector<Tensor>>& movement_goldens() {
  static const auto g = [] {
    std::vector<testing::GoldenCase> gc;
    for (const MovementCase& c : movement_cases())
      gc.push_back({c.name, c.code, golden_inputs(c.in)});
    return testing::torch_goldens(gc);
  }();
  return g;
}

void check_op(Op op, int expected_cases) {
  int n = 0;
  for (const MovementCase& c : movement_cases()) {
    if (c.op != op) continue;
    SCOPED_TRACE(c.name);
    ++n;
    Tensor got = run_op(c.op, c.in, c.attrs);
    EXPECT_TRUE(all_equal(got, c.ref())) << "vs scalar reference";
    EXPECT_TRUE(all_equal(got, movement_goldens().at(c.name)[0])) << "vs torch";
  }
  EXPECT_EQ(n, expected_cases);
}

TEST(CpuMovement, Reshape) { check_op(Op::Reshape, 4); }
TEST(CpuMovement, Transpose) { check_op(Op::Transpose, 15); }
TEST(CpuMovement, Slice) { check_op(Op::Slice, 20); }
TEST(CpuMovement, Concat) { check_op(Op::Concat, 6); }
TEST(CpuMovement, Expand) { check_op(Op::Expand, 9); }
TEST(CpuMovement, Pad) { check_op(Op::Pad, 12); }
TEST(CpuMovement, Tile) { check_op(Op::Tile, 5); }
TEST(CpuMovement, Flip) { check_op(Op::Flip, 6); }

}  // namespace
}  // namespace rlx
