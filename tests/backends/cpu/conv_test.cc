// Conv / ConvTranspose (1-d to 3-d) against direct scalar references and
// PyTorch goldens (F.conv*d, F.conv_transpose*d; asymmetric pads via F.pad or
// by cropping a transposed conv's full output).
#include <gtest/gtest.h>

#include <functional>
#include <optional>

#include "rlx/thread_pool.h"
#include "support/testing.h"
#include "support/torch_golden.h"

namespace rlx {
namespace {

using testing::all_close;
using testing::random_tensor;
using testing::run_op;

struct ConvCase {
  std::string name;
  Dims x, w;  // conv: w [O, C/g, k...]; transpose: w [C, O/g, k...]
  std::vector<int64_t> stride, pads, dil, opad;
  int64_t groups = 1;
  bool bias = true;
  DType dt = DType::F32;
};

int sp_of(const ConvCase& c) { return int(c.x.size()) - 2; }
int64_t at(const std::vector<int64_t>& v, size_t i, int64_t def) { return v.empty() ? def : v[i]; }

Attrs conv_attrs(const ConvCase& c, bool transpose) {
  Attrs a;
  if (!c.stride.empty()) a.set("stride", c.stride);
  if (!c.pads.empty()) a.set("pads", c.pads);
  if (!c.dil.empty()) a.set("dilation", c.dil);
  if (transpose && !c.opad.empty()) a.set("output_padding", c.opad);
  a.set("groups", c.groups);
  return a;
}

// Walks every multi-index of `dims` (row-major), calling f(index, flat).
void for_each_index(const Dims& dims, const std::function<void(const Dims&, int64_t)>& f) {
  const int64_t n = numel(dims);
  Dims idx(dims.size(), 0);
  for (int64_t flat = 0; flat < n; ++flat) {
    f(idx, flat);
    for (size_t i = dims.size(); i-- > 0;) {
      if (++idx[i] < dims[i]) break;
      idx[i] = 0;
    }
  }
}

int64_t flat_of(const Dims& dims, const Dims& idx) {
  int64_t f = 0;
  for (size_t i = 0; i < dims.size(); ++i) f = f * dims[i] + idx[i];
  return f;
}

// Direct convolution: every output element gathers its window, in double.
Tensor ref_conv(const ConvCase& c, const Tensor& x, const Tensor& w, const Tensor* b) {
  const int sp = sp_of(c);
  const int64_t N = c.x[0], C = c.x[1], O = c.w[0], g = c.groups, Cg = C / g, Og = O / g;
  Dims od{N, O};
  for (int i = 0; i < sp; ++i) {
    const size_t u = size_t(i);
    int64_t eff = at(c.dil, u, 1) * (c.w[2 + u] - 1) + 1;
    od.push_back((c.x[2 + u] + at(c.pads, u, 0) + at(c.pads, u + size_t(sp), 0) - eff) /
                     at(c.stride, u, 1) +
                 1);
  }
  Tensor out(od, DType::F64);
  Dims kdims(c.w.begin() + 2, c.w.end());
  for_each_index(od, [&](const Dims& o, int64_t flat) {
    const int64_t n = o[0], oc = o[1], grp = oc / Og;
    double s = b ? b->item_as_double(oc) : 0.0;
    for (int64_t ci = 0; ci < Cg; ++ci)
      for_each_index(kdims, [&](const Dims& k, int64_t) {
        Dims xi{n, grp * Cg + ci}, wi{oc, ci};
        for (int i = 0; i < sp; ++i) {
          const size_t u = size_t(i);
          int64_t p = o[2 + u] * at(c.stride, u, 1) - at(c.pads, u, 0) + k[u] * at(c.dil, u, 1);
          if (p < 0 || p >= c.x[2 + u]) return;
          xi.push_back(p);
          wi.push_back(k[u]);
        }
        s += x.item_as_double(flat_of(c.x, xi)) * w.item_as_double(flat_of(c.w, wi));
      });
    out.data<double>()[flat] = s;
  });
  return out.to(x.dtype());
}

// Transposed convolution: every input element scatters into the output.
Tensor ref_conv_transpose(const ConvCase& c, const Tensor& x, const Tensor& w, const Tensor* b) {
  const int sp = sp_of(c);
  const int64_t N = c.x[0], C = c.x[1], g = c.groups, Cg = C / g, Og = c.w[1], O = Og * g;
  Dims od{N, O};
  for (int i = 0; i < sp; ++i) {
    const size_t u = size_t(i);
    od.push_back((c.x[2 + u] - 1) * at(c.stride, u, 1) - at(c.pads, u, 0) -
                 at(c.pads, u + size_t(sp), 0) + at(c.dil, u, 1) * (c.w[2 + u] - 1) +
                 at(c.opad, u, 0) + 1);
  }
  Tensor out(od, DType::F64);
  double* y = out.data<double>();
  for_each_index(od,
                 [&](const Dims& o, int64_t flat) { y[flat] = b ? b->item_as_double(o[1]) : 0; });
  Dims kdims(c.w.begin() + 2, c.w.end());
  for_each_index(c.x, [&](const Dims& xi, int64_t xflat) {
    const int64_t ci = xi[1], grp = ci / Cg;
    for (int64_t oj = 0; oj < Og; ++oj)
      for_each_index(kdims, [&](const Dims& k, int64_t) {
        Dims oi{xi[0], grp * Og + oj}, wi{ci, oj};
        for (int i = 0; i < sp; ++i) {
          const size_t u = size_t(i);
          int64_t p = xi[2 + u] * at(c.stride, u, 1) - at(c.pads, u, 0) + k[u] * at(c.dil, u, 1);
          if (p < 0 || p >= od[2 + u]) return;
          oi.push_back(p);
          wi.push_back(k[u]);
        }
        y[flat_of(od, oi)] += x.item_as_double(xflat) * w.item_as_double(flat_of(c.w, wi));
      });
  });
  return out.to(x.dtype());
}

struct Inputs {
  Tensor x, w;
  std::optional<Tensor> b;
  std::vector<Tensor> list() const {
    std::vector<Tensor> v{x, w};
    if (b) v.push_back(*b);
    return v;
  }
};

Inputs make_inputs(const ConvCase& c, bool transpose, uint64_t seed) {
  Inputs in{random_tensor(c.x, c.dt, seed), random_tensor(c.w, c.dt, seed + 1), std::nullopt};
  const int64_t O = transpose ? c.w[1] * c.groups : c.w[0];
  if (c.bias) in.b = random_tensor({O}, c.dt, seed + 2);
  return in;
}

std::vector<ConvCase> conv_cases() {
  std::vector<ConvCase> v;
  // 2-d grid over stride, pads (symmetric and asymmetric), dilation, groups, bias.
  const std::vector<std::vector<int64_t>> pad_set{{0, 0, 0, 0}, {1, 1, 1, 1}, {1, 0, 2, 1}};
  for (int64_t s : {1, 2})
    for (size_t pi = 0; pi < pad_set.size(); ++pi)
      for (int64_t d : {1, 2})
        for (int64_t g : {1, 2, 4}) {  // 4 == C == O: depthwise
          ConvCase c;
          c.name = "c2d_s" + std::to_string(s) + "_p" + std::to_string(pi) + "_d" +
                   std::to_string(d) + "_g" + std::to_string(g);
          c.x = {2, 4, 9, 11};
          c.w = {4, 4 / g, 3, 2};
          c.stride = {s, s};
          c.pads = pad_set[pi];
          c.dil = {d, d};
          c.groups = g;
          c.bias = (s + d + g) % 2 == 0;
          v.push_back(c);
        }
  v.push_back({"pointwise", {2, 6, 5, 7}, {8, 6, 1, 1}, {}, {}, {}, {}, 1, true});
  v.push_back({"pointwise_groups", {1, 6, 4, 4}, {9, 2, 1, 1}, {}, {}, {}, {}, 3, false});
  v.push_back({"pointwise_stride2", {1, 3, 7, 7}, {5, 3, 1, 1}, {2, 2}, {}, {}, {}, 1, true});
  v.push_back(
      {"depthwise_wide_row", {1, 3, 6, 37}, {3, 1, 3, 3}, {}, {1, 1, 1, 1}, {}, {}, 3, true});
  v.push_back({"depthwise_stride_asym",
               {2, 3, 8, 21},
               {3, 1, 3, 5},
               {2, 3},
               {0, 2, 1, 1},
               {1, 2},
               {},
               3,
               true});
  v.push_back({"depthwise_mult2", {1, 3, 6, 6}, {6, 1, 3, 3}, {}, {1, 1, 1, 1}, {}, {}, 3, true});
  // Wide rows: the register-accumulating rows (AVX2) with scalar edges, stride 1 and 2.
  v.push_back(
      {"depthwise_s2_wide", {1, 3, 9, 45}, {3, 1, 3, 3}, {2, 2}, {1, 1, 1, 1}, {}, {}, 3, true});
  v.push_back({"depthwise_s2_k5_even",
               {2, 2, 7, 40},
               {2, 1, 5, 5},
               {2, 2},
               {2, 2, 2, 2},
               {},
               {},
               2,
               false});
  v.push_back(
      {"depthwise_s1_k5_asym", {1, 2, 6, 33}, {2, 1, 5, 5}, {}, {2, 0, 2, 4}, {}, {}, 2, true});
  // Rows of 32 + 16 + a partial 8 outputs, and a kernel size without its own unrolled rows.
  v.push_back(
      {"depthwise_s1_k7_wide", {1, 2, 9, 61}, {2, 1, 7, 7}, {}, {3, 3, 3, 3}, {}, {}, 2, true});
  v.push_back({"depthwise_s2_k3_wide",
               {1, 2, 5, 121},
               {2, 1, 3, 3},
               {2, 2},
               {1, 1, 1, 1},
               {},
               {},
               2,
               true});
  // The AVX-512 stride-1 planes: rows of 1-2 vectors with padded edges (k3 and
  // k5), 150 columns (64 + 64 + a 22-column rest) and 112 (64 + 3 vectors).
  v.push_back(
      {"depthwise_flat_blocks", {1, 2, 20, 20}, {2, 1, 3, 3}, {}, {1, 1, 1, 1}, {}, {}, 2, true});
  v.push_back({"depthwise_flat_blocks_k5",
               {1, 2, 21, 21},
               {2, 1, 5, 5},
               {},
               {2, 2, 2, 2},
               {},
               {},
               2,
               false});
  v.push_back(
      {"depthwise_row_150", {1, 2, 3, 150}, {2, 1, 3, 3}, {}, {1, 1, 1, 1}, {}, {}, 2, true});
  v.push_back(
      {"depthwise_row_112", {1, 2, 4, 112}, {2, 1, 3, 3}, {}, {1, 1, 1, 1}, {}, {}, 2, true});
  // The AVX-512 stride-2 rows (even lanes of two loads) on mobilenet's maps, odd
  // and even inputs, no padding, k5; and the flat form of small stride-1 maps
  // (7x7, 6x9 with k5, one-sided pads: a plane's vectors across rows, taps masked per lane).
  // The AVX-512 stride-2 3x3 rows (three taps from one 48-column read): 112 columns (4 vectors,
  // 2 rows a block, 9 rows so the last block overlaps), and no left padding with an odd width.
  v.push_back(
      {"depthwise_s2_k3_112", {1, 2, 9, 112}, {2, 1, 3, 3}, {2, 2}, {1, 1, 1, 1}, {}, {}, 2, true});
  v.push_back({"depthwise_s2_k3_no_left_pad",
               {1, 2, 7, 57},
               {2, 1, 3, 3},
               {2, 2},
               {0, 0, 1, 1},
               {},
               {},
               2,
               false});
  // Fewer output rows (5) than an AVX-512 row block holds (8): blocks of 4, the last overlapping.
  v.push_back(
      {"depthwise_s1_k3_5_rows", {1, 2, 7, 9}, {2, 1, 3, 3}, {}, {0, 0, 0, 0}, {}, {}, 2, true});
  v.push_back({"depthwise_s2_14_to_7",
               {1, 3, 14, 14},
               {3, 1, 3, 3},
               {2, 2},
               {1, 1, 1, 1},
               {},
               {},
               3,
               true});
  v.push_back({"depthwise_s2_16_to_8",
               {1, 2, 16, 16},
               {2, 1, 3, 3},
               {2, 2},
               {1, 1, 1, 1},
               {},
               {},
               2,
               true});
  v.push_back(
      {"depthwise_s2_few_rows", {1, 2, 5, 9}, {2, 1, 3, 3}, {2, 2}, {1, 1, 1, 1}, {}, {}, 2, true});
  v.push_back(
      {"depthwise_s1_few_rows", {1, 2, 3, 21}, {2, 1, 3, 3}, {}, {1, 1, 1, 1}, {}, {}, 2, false});
  v.push_back({"depthwise_s2_odd_112",
               {1, 2, 5, 113},
               {2, 1, 3, 3},
               {2, 2},
               {1, 1, 1, 1},
               {},
               {},
               2,
               true});
  v.push_back({"depthwise_s2_unpadded", {1, 2, 9, 40}, {2, 1, 3, 3}, {2, 2}, {}, {}, {}, 2, false});
  v.push_back({"depthwise_s2_k5_asym",
               {1, 2, 11, 35},
               {2, 1, 5, 5},
               {2, 2},
               {2, 1, 1, 2},
               {},
               {},
               2,
               true});
  v.push_back(
      {"depthwise_flat_7x7", {2, 3, 7, 7}, {3, 1, 3, 3}, {}, {1, 1, 1, 1}, {}, {}, 3, true});
  v.push_back(
      {"depthwise_flat_k5", {1, 2, 6, 9}, {2, 1, 5, 5}, {}, {2, 2, 2, 2}, {}, {}, 2, false});
  v.push_back(
      {"depthwise_flat_one_sided", {1, 2, 7, 7}, {2, 1, 3, 3}, {}, {0, 0, 2, 2}, {}, {}, 2, true});
  v.push_back(
      {"depthwise_flat_k3x5", {1, 2, 6, 5}, {2, 1, 3, 5}, {}, {1, 2, 1, 2}, {}, {}, 2, true});
  v.push_back(
      {"rect_stride", {1, 3, 10, 8}, {5, 3, 2, 4}, {3, 1}, {0, 1, 2, 0}, {1, 2}, {}, 1, true});
  v.push_back({"big_tiles", {1, 8, 40, 45}, {16, 8, 3, 3}, {}, {1, 1, 1, 1}, {}, {}, 1, true});
  v.push_back({"c1d", {2, 4, 17}, {6, 2, 3}, {2}, {1, 2}, {2}, {}, 2, true});
  v.push_back({"c1d_depthwise", {2, 4, 30}, {4, 1, 5}, {1}, {2, 2}, {1}, {}, 4, true});
  v.push_back({"c1d_pointwise", {3, 5, 10}, {4, 5, 1}, {}, {}, {}, {}, 1, false});
  v.push_back({"c3d",
               {1, 4, 5, 6, 7},
               {6, 2, 3, 2, 3},
               {1, 2, 1},
               {1, 0, 1, 1, 1, 0},
               {1, 1, 2},
               {},
               2,
               true});
  v.push_back(
      {"c3d_depthwise", {1, 2, 4, 5, 6}, {2, 1, 2, 2, 2}, {}, {1, 1, 1, 0, 0, 0}, {}, {}, 2, true});
  v.push_back({"unit_spatial", {2, 3, 1, 1}, {4, 3, 1, 1}, {}, {}, {}, {}, 1, true});
  // Small output maps at batch > 1: images folded into one GEMM (conv_small_maps).
  v.push_back({"small_maps_batch", {6, 4, 5, 5}, {6, 2, 3, 3}, {}, {1, 1, 1, 1}, {}, {}, 2, true});
  v.push_back({"large_kernel_small_out", {8, 3, 9, 9}, {4, 3, 7, 7}, {}, {}, {}, {}, 1, true});
  // A kernel wider than the output: the transposed im2col (im2row), with
  // left padding, and with dilation (its per-element path).
  v.push_back(
      {"wide_kernel_padded", {1, 2, 6, 6}, {3, 2, 5, 5}, {}, {1, 2, 1, 0}, {}, {}, 1, true});
  v.push_back(
      {"wide_kernel_dilated", {2, 2, 9, 9}, {3, 2, 5, 5}, {}, {1, 1, 1, 1}, {2, 2}, {}, 1, false});
  // Whole small stride-1 maps through a zero-padded plane (im2col / im2row):
  // asymmetric pads, a kernel wider than the output (a weight gradient's),
  // rows longer than one vector.
  v.push_back({"s1_small_asym", {3, 4, 6, 5}, {5, 4, 3, 3}, {}, {2, 0, 1, 2}, {}, {}, 1, true});
  v.push_back(
      {"s1_kernel_wider_than_out", {2, 3, 8, 8}, {4, 3, 8, 8}, {}, {1, 1, 1, 1}, {}, {}, 1, false});
  v.push_back({"s1_long_rows", {2, 2, 4, 21}, {3, 2, 3, 3}, {}, {1, 1, 1, 1}, {}, {}, 1, true});
  v.push_back(
      {"f64", {2, 4, 7, 6}, {6, 2, 3, 3}, {2, 1}, {1, 1, 0, 1}, {1, 2}, {}, 2, true, DType::F64});
  v.push_back(
      {"f64_depthwise", {1, 3, 7, 9}, {3, 1, 3, 3}, {}, {1, 1, 1, 1}, {}, {}, 3, true, DType::F64});
  return v;
}

std::vector<ConvCase> transpose_cases() {
  std::vector<ConvCase> v;
  for (int64_t s : {1, 2, 3})
    for (int64_t d : {1, 2})
      for (int64_t g : {1, 2}) {
        ConvCase c;
        c.name = "t2d_s" + std::to_string(s) + "_d" + std::to_string(d) + "_g" + std::to_string(g);
        c.x = {2, 4, 5, 6};
        c.w = {4, 3, 3, 2};
        c.stride = {s, s};
        c.pads = {1, 0, 1, 0};
        c.dil = {d, d};
        c.opad = {s - 1, std::max(s, d) - 1};
        c.groups = g;
        c.bias = (s + g) % 2 == 0;
        v.push_back(c);
      }
  v.push_back({"t2d_asym", {1, 3, 4, 5}, {3, 2, 3, 3}, {2, 2}, {2, 0, 1, 2}, {}, {1, 0}, 1, true});
  v.push_back({"t2d_pointwise", {2, 5, 4, 6}, {5, 3, 1, 1}, {}, {}, {}, {}, 1, true});
  // Stride 1 through the zero-padded plane (col2im): asymmetric pads, a
  // kernel wider than the input, rows longer than one vector.
  v.push_back({"t2d_s1_asym", {2, 3, 5, 4}, {3, 2, 3, 3}, {}, {2, 0, 1, 2}, {}, {}, 1, true});
  v.push_back(
      {"t2d_s1_wide_kernel", {3, 2, 3, 3}, {2, 2, 5, 4}, {}, {0, 1, 1, 0}, {}, {}, 1, false});
  v.push_back({"t2d_s1_long_rows", {2, 2, 3, 19}, {2, 3, 3, 3}, {}, {1, 1, 1, 1}, {}, {}, 1, true});
  v.push_back({"t2d_big", {1, 16, 20, 20}, {16, 8, 4, 4}, {2, 2}, {1, 1, 1, 1}, {}, {}, 1, true});
  v.push_back(
      {"t2d_kernel_lt_stride", {1, 2, 3, 3}, {2, 2, 2, 2}, {3, 3}, {}, {}, {2, 1}, 1, false});
  v.push_back({"t1d", {2, 4, 7}, {4, 3, 4}, {2}, {1, 2}, {}, {1}, 2, true});
  v.push_back({"t1d_dil", {1, 2, 6}, {2, 5, 3}, {1}, {0, 0}, {3}, {2}, 1, true});
  v.push_back({"t3d",
               {1, 2, 3, 4, 3},
               {2, 3, 2, 3, 2},
               {2, 1, 2},
               {0, 1, 0, 1, 0, 1},
               {},
               {1, 0, 0},
               1,
               true});
  v.push_back({"t2d_f64",
               {1, 4, 5, 5},
               {4, 2, 3, 3},
               {2, 2},
               {1, 1, 1, 1},
               {},
               {1, 1},
               2,
               true,
               DType::F64});
  return v;
}

// f32 sums of <= 8 * 16 * 3 * 3 products of values in [-1, 1] (plus bias):
// rounding error ~ sqrt(n) * 6e-8, worst n * 6e-8 ~ 7e-6; 2e-5 keeps that
// margin while a wrong tap (error O(0.1)) still fails.
double atol_for(DType dt) { return dt == DType::F64 ? 1e-12 : 2e-5; }

TEST(Conv, MatchesScalarReference) {
  uint64_t seed = 1;
  for (const ConvCase& c : conv_cases()) {
    Inputs in = make_inputs(c, false, seed += 3);
    Tensor got = run_op(Op::Conv, in.list(), conv_attrs(c, false));
    Tensor want = ref_conv(c, in.x, in.w, in.b ? &*in.b : nullptr);
    EXPECT_TRUE(all_close(got, want, atol_for(c.dt), 1e-5)) << c.name;
  }
}

// A fused relu / relu6 (the AVX-512 depthwise kernels clamp in their stores:
// rows, stride 2, paired rows, the flat form) against the reference clamped;
// inputs scaled so that both of relu6's bounds are hit.
TEST(Conv, FusedActivationMatchesReference) {
  const std::vector<std::string> names{"depthwise_row_112", "depthwise_s2_odd_112",
                                       "depthwise_s2_14_to_7", "depthwise_flat_7x7",
                                       "c2d_s1_p1_d1_g1"};
  uint64_t seed = 7;
  for (const ConvCase& c : conv_cases()) {
    if (std::find(names.begin(), names.end(), c.name) == names.end()) continue;
    for (const char* act : {"relu", "relu6"}) {
      Inputs in = make_inputs(c, false, seed += 3);
      float* x = in.x.data<float>();
      for (int64_t i = 0; i < in.x.numel(); ++i) x[i] *= 8.f;
      Attrs a = conv_attrs(c, false);
      a.set("activation", std::string(act));
      Tensor got = run_op(Op::Conv, in.list(), a);
      Tensor want = ref_conv(c, in.x, in.w, in.b ? &*in.b : nullptr);
      float* w = want.data<float>();
      bool hit_top = false;
      for (int64_t i = 0; i < want.numel(); ++i) {
        w[i] = std::max(w[i], 0.f);
        if (std::string(act) == "relu6") {
          hit_top |= w[i] > 6.f;
          w[i] = std::min(w[i], 6.f);
        }
      }
      if (std::string(act) == "relu6") {
        EXPECT_TRUE(hit_top) << c.name;
      }
      EXPECT_TRUE(all_close(got, want, 1e-4, 1e-5)) << c.name << " " << act;
    }
  }
}

TEST(ConvTranspose, MatchesScalarReference) {
  uint64_t seed = 1000;
  for (const ConvCase& c : transpose_cases()) {
    Inputs in = make_inputs(c, true, seed += 3);
    Tensor got = run_op(Op::ConvTranspose, in.list(), conv_attrs(c, true));
    Tensor want = ref_conv_transpose(c, in.x, in.w, in.b ? &*in.b : nullptr);
    EXPECT_TRUE(all_close(got, want, atol_for(c.dt), 1e-5)) << c.name;
  }
}

std::string list(const std::vector<int64_t>& v, size_t from, size_t n, int64_t def) {
  std::string s = "(";
  for (size_t i = 0; i < n; ++i) s += std::to_string(v.empty() ? def : v[from + i]) + ",";
  return s + ")";
}

// Torch code for a case. Asymmetric conv pads: F.pad (last dim first) then an
// unpadded conv; transposed conv pads: crop the unpadded result.
std::string torch_code(const ConvCase& c, bool transpose) {
  const size_t sp = size_t(sp_of(c));
  const std::string fn =
      std::string(transpose ? "F.conv_transpose" : "F.conv") + std::to_string(sp) + "d";
  const std::string b = c.bias ? "x['b']" : "None";
  const std::string s = list(c.stride, 0, sp, 1), d = list(c.dil, 0, sp, 1);
  const std::string g = std::to_string(c.groups);
  if (!transpose) {
    std::string pad = "(";
    for (size_t i = sp; i-- > 0;)
      pad += std::to_string(at(c.pads, i, 0)) + "," + std::to_string(at(c.pads, i + sp, 0)) + ",";
    pad += ")";
    return "y = " + fn + "(F.pad(x['x'], " + pad + "), x['w'], " + b + ", " + s + ", 0, " + d +
           ", " + g + ")";
  }
  std::string code = "z = " + fn + "(x['x'], x['w'], " + b + ", " + s + ", 0, " +
                     list(c.opad, 0, sp, 0) + ", " + g + ", " + d + ")\ny = z[:, :";
  for (size_t i = 0; i < sp; ++i)
    code += ", " + std::to_string(at(c.pads, i, 0)) + ":z.shape[" + std::to_string(2 + i) + "]-" +
            std::to_string(at(c.pads, i + sp, 0));
  return code + "]";
}

TEST(Conv, MatchesTorch) {
  std::vector<testing::GoldenCase> gc;
  std::vector<std::pair<bool, Inputs>> ins;
  std::vector<ConvCase> all;
  uint64_t seed = 5000;
  for (bool transpose : {false, true})
    for (const ConvCase& c : transpose ? transpose_cases() : conv_cases()) {
      Inputs in = make_inputs(c, transpose, seed += 3);
      TensorMap m{{"x", in.x}, {"w", in.w}};
      if (in.b) m["b"] = *in.b;
      gc.push_back({c.name, torch_code(c, transpose), m});
      ins.emplace_back(transpose, in);
      all.push_back(c);
    }
  auto gold = testing::torch_goldens(gc);
  for (size_t i = 0; i < gc.size(); ++i) {
    const auto& [transpose, in] = ins[i];
    Tensor got =
        run_op(transpose ? Op::ConvTranspose : Op::Conv, in.list(), conv_attrs(all[i], transpose));
    EXPECT_TRUE(all_close(got, gold.at(gc[i].name)[0], atol_for(all[i].dt), 1e-5)) << gc[i].name;
  }
}

TEST(Conv, SameResultForAnyThreadCount) {
  // Few tasks (N = 1, one tile) and many tasks, conv and transposed conv, so
  // both the split-GEMM and the task-parallel paths run.
  ConvCase a{"one_image", {1, 8, 12, 12}, {16, 8, 3, 3}, {}, {1, 1, 1, 1}, {}, {}, 1, true};
  ConvCase b{"batch", {6, 4, 20, 20}, {8, 2, 3, 3}, {2, 2}, {1, 1, 1, 1}, {}, {}, 2, true};
  ConvCase t{"transpose", {1, 8, 10, 10}, {8, 8, 3, 3}, {2, 2}, {1, 1, 1, 1}, {}, {1, 1}, 1, true};
  ConvCase p{"pointwise", {1, 64, 16, 16}, {64, 64, 1, 1}, {}, {}, {}, {}, 1, true};
  for (int threads : {1, 3, 8}) {
    set_num_threads(threads);
    for (const ConvCase& c : {a, b, p}) {
      Inputs in = make_inputs(c, false, 77);
      EXPECT_TRUE(all_close(run_op(Op::Conv, in.list(), conv_attrs(c, false)),
                            ref_conv(c, in.x, in.w, &*in.b), 2e-5, 1e-5))
          << c.name << " threads=" << threads;
    }
    Inputs in = make_inputs(t, true, 78);
    EXPECT_TRUE(all_close(run_op(Op::ConvTranspose, in.list(), conv_attrs(t, true)),
                          ref_conv_transpose(t, in.x, in.w, &*in.b), 2e-5, 1e-5))
        << "transpose threads=" << threads;
  }
  set_num_threads(0);
}

TEST(Conv, HalfPrecisionRunsThroughF32) {
  // Upcast by the runtime; tolerance at f16's 2^-11 relative rounding of
  // outputs up to ~|18| (18 taps of |x w| <= 1).
  ConvCase c{"f16", {1, 2, 6, 6}, {4, 2, 3, 3}, {2, 1}, {1, 1, 1, 1}, {}, {}, 1, true, DType::F16};
  Inputs in = make_inputs(c, false, 91);
  Tensor got = run_op(Op::Conv, in.list(), conv_attrs(c, false));
  EXPECT_EQ(got.dtype(), DType::F16);
  Tensor b64 = in.b->to(DType::F64);
  EXPECT_TRUE(
      all_close(got, ref_conv(c, in.x.to(DType::F64), in.w.to(DType::F64), &b64), 1e-2, 1e-3));
}

TEST(Conv, EmptyBatchAndEmptyChannels) {
  Tensor x = random_tensor({0, 3, 5, 5}, DType::F32, 1),
         w = random_tensor({4, 3, 3, 3}, DType::F32, 2);
  EXPECT_EQ(run_op(Op::Conv, {x, w}).dims(), (Dims{0, 4, 3, 3}));
  Tensor wt = random_tensor({3, 2, 3, 3}, DType::F32, 3);
  EXPECT_EQ(run_op(Op::ConvTranspose, {x, wt}).dims(), (Dims{0, 2, 7, 7}));
  // Zero input channels: the output is just the bias.
  Tensor b = Tensor::from_vector<float>({2}, {1.5f, -2.f}, DType::F32);
  Tensor y =
      run_op(Op::Conv, {Tensor({1, 0, 4, 4}, DType::F32), Tensor({2, 0, 3, 3}, DType::F32), b});
  ASSERT_EQ(y.dims(), (Dims{1, 2, 2, 2}));
  for (int i = 0; i < 8; ++i) EXPECT_EQ(y.item_as_double(i), i < 4 ? 1.5 : -2.0);
}

TEST(Conv, RejectsBadInputs) {
  auto f = [](Dims d) { return random_tensor(d, DType::F32, 3); };
  // Channel mismatch: x has 3 channels, w expects 4 (and 2 * 2 with groups=2).
  EXPECT_THROW(run_op(Op::Conv, {f({1, 3, 5, 5}), f({2, 4, 3, 3})}), Error);
  EXPECT_THROW(run_op(Op::Conv, {f({1, 3, 5, 5}), f({2, 2, 3, 3})}, {{"groups", int64_t(2)}}),
               Error);
  EXPECT_THROW(run_op(Op::Conv, {f({1, 4, 5, 5}), f({3, 2, 3, 3})}, {{"groups", int64_t(2)}}),
               Error);
  EXPECT_THROW(run_op(Op::Conv, {f({1, 4, 5, 5}), f({4, 4, 3, 3})}, {{"groups", int64_t(0)}}),
               Error);
  EXPECT_THROW(run_op(Op::Conv, {f({1, 3, 5, 5}), f({2, 3, 3, 3}), f({3})}), Error);  // bias size
  EXPECT_THROW(run_op(Op::Conv, {f({1, 3, 2, 2}), f({2, 3, 3, 3})}), Error);  // kernel > input
  EXPECT_THROW(run_op(Op::Conv, {f({1, 3, 5, 5}), f({2, 3, 3})}), Error);     // rank
  EXPECT_THROW(run_op(Op::Conv, {f({1, 3, 5, 5}), f({2, 3, 3, 3})},
                      {{"stride", std::vector<int64_t>{0, 1}}}),
               Error);
  EXPECT_THROW(
      run_op(Op::Conv, {f({1, 3, 5, 5}), f({2, 3, 3, 3})}, {{"pads", std::vector<int64_t>{1, 1}}}),
      Error);
  EXPECT_THROW(run_op(Op::Conv, {f({1, 3, 5, 5}), f({2, 3, 3, 3})},
                      {{"pads", std::vector<int64_t>{-1, 0, 0, 0}}}),
               Error);
  EXPECT_THROW(run_op(Op::Conv, {f({1, 3, 5, 5}), f({2, 3, 3, 3})},
                      {{"dilation", std::vector<int64_t>{0, 1}}}),
               Error);
  // Transposed: channel mismatch, output_padding >= stride and dilation, bias size.
  EXPECT_THROW(run_op(Op::ConvTranspose, {f({1, 3, 5, 5}), f({4, 2, 3, 3})}), Error);
  EXPECT_THROW(run_op(Op::ConvTranspose, {f({1, 3, 5, 5}), f({3, 2, 3, 3})},
                      {{"output_padding", std::vector<int64_t>{1, 0}}}),
               Error);
  EXPECT_THROW(run_op(Op::ConvTranspose, {f({1, 4, 5, 5}), f({4, 2, 3, 3}), f({2})},
                      {{"groups", int64_t(2)}}),
               Error);
  EXPECT_THROW(
      run_op(Op::Conv, {Tensor({1, 2, 3, 3}, DType::I32), Tensor({1, 2, 1, 1}, DType::I32)}),
      Error);
}

}  // namespace
}  // namespace rlx
