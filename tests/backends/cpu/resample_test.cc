// resize and grid_sample: scalar references written here for the simple modes, PyTorch goldens
// (F.interpolate over every mode x align_corners x antialias, up and down, odd ratios; and
// F.grid_sample over all 3 modes x 3 paddings x align_corners), size-1 dims, empty tensors, errors.
//
// Tolerance: both sides compute in float32 with the same index arithmetic; outputs are short
// weighted sums of values in [-1, 1], so atol = 1e-5 (a wrong index moves an output by ~1e-1).
#include <gtest/gtest.h>

#include <array>
#include <cmath>

#include "support/testing.h"
#include "support/torch_golden.h"

namespace rlx {
namespace {

using testing::all_close;
using testing::random_tensor;
using testing::run_op;

constexpr double kResampleTol = 1e-5;

Tensor resize(const Tensor& x, int64_t h, int64_t w, const std::string& mode, bool align = false,
              bool aa = false) {
  return run_op(Op::Resize, {x},
                {{"size", std::vector<int64_t>{h, w}},
                 {"mode", mode},
                 {"align_corners", int64_t(align)},
                 {"antialias", int64_t(aa)}});
}

// Independent references: nearest picks floor(dst * in / out); bilinear with align_corners maps
// dst to src = dst * (in - 1) / (out - 1) and blends the two neighbours on each axis.
Tensor ref_nearest(const Tensor& x, int64_t OH, int64_t OW, bool exact) {
  const int64_t P = x.dim(0) * x.dim(1), H = x.dim(2), W = x.dim(3);
  Tensor y({x.dim(0), x.dim(1), OH, OW}, DType::F64);
  auto src = [exact](int64_t o, int64_t in, int64_t out) {
    double s = exact ? (o + 0.5) * double(in) / double(out) : double(o) * double(in) / double(out);
    return std::min<int64_t>(int64_t(std::floor(s)), in - 1);
  };
  for (int64_t p = 0; p < P; ++p)
    for (int64_t i = 0; i < OH; ++i)
      for (int64_t j = 0; j < OW; ++j)
        y.data<double>()[(p * OH + i) * OW + j] =
            x.item_as_double((p * H + src(i, H, OH)) * W + src(j, W, OW));
  return y;
}

Tensor ref_bilinear_align(const Tensor& x, int64_t OH, int64_t OW) {
  const int64_t P = x.dim(0) * x.dim(1), H = x.dim(2), W = x.dim(3);
  Tensor y({x.dim(0), x.dim(1), OH, OW}, DType::F64);
  auto at = [&](int64_t p, int64_t i, int64_t j) { return x.item_as_double((p * H + i) * W + j); };
  for (int64_t p = 0; p < P; ++p)
    for (int64_t i = 0; i < OH; ++i)
      for (int64_t j = 0; j < OW; ++j) {
        double sy = OH > 1 ? double(i) * double(H - 1) / double(OH - 1) : 0;
        double sx = OW > 1 ? double(j) * double(W - 1) / double(OW - 1) : 0;
        int64_t y0 = int64_t(sy), x0 = int64_t(sx);
        int64_t y1 = std::min(y0 + 1, H - 1), x1 = std::min(x0 + 1, W - 1);
        double ly = sy - double(y0), lx = sx - double(x0);
        y.data<double>()[(p * OH + i) * OW + j] =
            (1 - ly) * ((1 - lx) * at(p, y0, x0) + lx * at(p, y0, x1)) +
            ly * ((1 - lx) * at(p, y1, x0) + lx * at(p, y1, x1));
      }
  return y;
}

TEST(Resize, NearestAndBilinearMatchScalarReference) {
  // Ratios that are exact in binary, so the float index arithmetic cannot round differently.
  for (auto [h, w, oh, ow] : std::vector<std::array<int64_t, 4>>{
           {4, 8, 8, 16}, {8, 8, 4, 2}, {4, 4, 4, 4}, {2, 4, 8, 2}, {1, 1, 3, 5}, {4, 2, 1, 1}}) {
    SCOPED_TRACE(std::to_string(h) + "x" + std::to_string(w) + " -> " + std::to_string(oh) + "x" +
                 std::to_string(ow));
    Tensor x = random_tensor({2, 3, h, w}, DType::F32, 1, -1, 1);
    EXPECT_TRUE(
        testing::all_close(resize(x, oh, ow, "nearest"), ref_nearest(x, oh, ow, false), 0, 0));
    EXPECT_TRUE(
        testing::all_close(resize(x, oh, ow, "nearest_exact"), ref_nearest(x, oh, ow, true), 0, 0));
  }
  for (auto [h, w, oh, ow] : std::vector<std::array<int64_t, 4>>{
           {4, 6, 7, 11}, {9, 5, 3, 2}, {3, 3, 1, 1}, {1, 4, 5, 4}, {16, 16, 33, 33}}) {
    Tensor x = random_tensor({1, 2, h, w}, DType::F32, 2, -1, 1);
    EXPECT_TRUE(
        all_close(resize(x, oh, ow, "bilinear", true), ref_bilinear_align(x, oh, ow), 1e-6, 1e-6));
  }
}

TEST(Resize, IdentitySizeCopiesAndConstantsStayConstant) {
  Tensor x = random_tensor({2, 2, 5, 7}, DType::F32, 3, -1, 1);
  for (const char* m : {"nearest", "nearest_exact", "bilinear", "bicubic"})
    EXPECT_TRUE(all_close(resize(x, 5, 7, m), x, 1e-6, 0)) << m;
  EXPECT_TRUE(all_close(resize(x, 5, 7, "bilinear", false, true), x, 1e-6, 0));
  // Interpolation weights sum to 1: a constant image stays constant in every mode.
  Tensor c({1, 1, 6, 9}, DType::F32);
  for (int64_t i = 0; i < c.numel(); ++i) c.data<float>()[i] = 0.75f;
  for (bool aa : {false, true})
    for (bool align : {false, true})
      for (const char* m : {"bilinear", "bicubic"}) {
        Tensor y = resize(c, 4, 17, m, align, aa);
        for (int64_t i = 0; i < y.numel(); ++i) ASSERT_NEAR(y.item_as_double(i), 0.75, 1e-6) << m;
      }
}

TEST(Resize, EmptyF64AndF16) {
  EXPECT_EQ(resize(random_tensor({0, 3, 4, 4}, DType::F32, 1), 2, 2, "bilinear").dims(),
            (Dims{0, 3, 2, 2}));
  EXPECT_EQ(resize(random_tensor({1, 0, 4, 4}, DType::F32, 1), 8, 8, "bicubic").numel(), 0);
  Tensor x = random_tensor({1, 2, 4, 8}, DType::F64, 4, -1, 1);
  Tensor y = resize(x, 8, 16, "nearest");
  EXPECT_EQ(y.dtype(), DType::F64);
  EXPECT_TRUE(all_close(y, ref_nearest(x, 8, 16, false), 0, 0));
  Tensor xh = x.to(DType::F16);
  EXPECT_TRUE(
      all_close(resize(xh, 7, 3, "bilinear", true), ref_bilinear_align(xh, 7, 3), 2e-3, 2e-3));
}

// ---------------------------------------------------------------- grid_sample reference

// Bilinear, zeros padding: unnormalize, blend the four neighbours, out-of-range pixels are 0.
Tensor ref_grid_bilinear_zeros(const Tensor& x, const Tensor& grid, bool align) {
  const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3);
  const int64_t OH = grid.dim(1), OW = grid.dim(2);
  Tensor y({N, C, OH, OW}, DType::F64);
  auto un = [align](double g, int64_t size) {
    return align ? (g + 1) / 2 * double(size - 1) : ((g + 1) * double(size) - 1) / 2;
  };
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < OH * OW; ++i) {
      double gx = un(grid.item_as_double((n * OH * OW + i) * 2), W);
      double gy = un(grid.item_as_double((n * OH * OW + i) * 2 + 1), H);
      int64_t x0 = int64_t(std::floor(gx)), y0 = int64_t(std::floor(gy));
      for (int64_t c = 0; c < C; ++c) {
        double v = 0;
        for (int dy = 0; dy < 2; ++dy)
          for (int dx = 0; dx < 2; ++dx) {
            int64_t xi = x0 + dx, yi = y0 + dy;
            if (xi < 0 || xi >= W || yi < 0 || yi >= H) continue;
            double wgt = (dx ? gx - double(x0) : 1 - (gx - double(x0))) *
                         (dy ? gy - double(y0) : 1 - (gy - double(y0)));
            v += wgt * x.item_as_double(((n * C + c) * H + yi) * W + xi);
          }
        y.data<double>()[(n * C + c) * OH * OW + i] = v;
      }
    }
  return y;
}

Tensor grid_sample(const Tensor& x, const Tensor& g, const std::string& mode,
                   const std::string& pad, bool align) {
  return run_op(Op::GridSample, {x, g},
                {{"mode", mode}, {"padding", pad}, {"align_corners", int64_t(align)}});
}

TEST(GridSample, BilinearZerosMatchesScalarReference) {
  Tensor x = random_tensor({2, 3, 5, 7}, DType::F32, 5, -1, 1);
  Tensor g = random_tensor({2, 4, 6, 2}, DType::F32, 6, -1.3, 1.3);
  for (bool align : {false, true})
    EXPECT_TRUE(all_close(grid_sample(x, g, "bilinear", "zeros", align),
                          ref_grid_bilinear_zeros(x, g, align), 1e-6, 1e-6));
  // Far outside (and huge) coordinates read nothing under zeros padding; border clamps them.
  Tensor far =
      Tensor::from_vector<float>({1, 1, 3, 2}, {5, 5, -1e30f, 0, 1e30f, 1e30f}, DType::F32);
  Tensor x1 = random_tensor({1, 2, 3, 3}, DType::F32, 7, -1, 1);
  for (const char* m : {"bilinear", "nearest", "bicubic"}) {
    Tensor y = grid_sample(x1, far, m, "zeros", false);
    for (int64_t i = 0; i < y.numel(); ++i) EXPECT_EQ(y.item_as_double(i), 0.0) << m;
  }
  Tensor yb = grid_sample(x1, far, "nearest", "border", true);  // (5,5) -> corner (2,2)
  EXPECT_EQ(yb.item_as_double(0), x1.item_as_double(8));
}

TEST(GridSample, EmptyAndSizeOne) {
  Tensor x = random_tensor({2, 3, 4, 4}, DType::F32, 8, -1, 1);
  EXPECT_EQ(
      grid_sample(x, random_tensor({2, 0, 5, 2}, DType::F32, 1), "bilinear", "zeros", false).dims(),
      (Dims{2, 3, 0, 5}));
  // A 1x1 input under border padding is that pixel everywhere.
  Tensor one = random_tensor({1, 1, 1, 1}, DType::F32, 9, -1, 1);
  Tensor g = random_tensor({1, 2, 2, 2}, DType::F32, 10, -2, 2);
  for (const char* m : {"bilinear", "nearest", "bicubic"})
    for (bool align : {false, true}) {
      Tensor y = grid_sample(one, g, m, "border", align);
      for (int64_t i = 0; i < 4; ++i) EXPECT_NEAR(y.item_as_double(i), one.item_as_double(0), 1e-6);
    }
}

// ---------------------------------------------------------------- PyTorch goldens

struct ResizeCase {
  std::string name, mode;
  bool align, aa;
  Dims x;
  int64_t oh, ow;
};

std::vector<ResizeCase> resize_cases() {
  std::vector<ResizeCase> v;
  const std::vector<std::array<int64_t, 4>> sizes = {{7, 9, 3, 4}, {5, 6, 12, 17}, {16, 15, 5, 7},
                                                     {4, 4, 1, 1}, {1, 1, 3, 2},   {6, 10, 6, 23}};
  int k = 0;
  for (auto [h, w, oh, ow] : sizes) {
    for (const char* m : {"nearest", "nearest_exact"})
      v.push_back({"r" + std::to_string(k++), m, false, false, {2, 3, h, w}, oh, ow});
    for (const char* m : {"bilinear", "bicubic"})
      for (bool align : {false, true})
        for (bool aa : {false, true})
          v.push_back({"r" + std::to_string(k++), m, align, aa, {2, 3, h, w}, oh, ow});
  }
  return v;
}

Tensor resize_input(const ResizeCase& c) {
  return random_tensor(c.x, DType::F32, 100 + std::hash<std::string>()(c.name) % 1000, -1, 1);
}

struct GridCase {
  std::string name, mode, pad;
  bool align;
};

std::vector<GridCase> grid_cases() {
  std::vector<GridCase> v;
  for (const char* m : {"bilinear", "nearest", "bicubic"})
    for (const char* p : {"zeros", "border", "reflection"})
      for (bool a : {false, true})
        v.push_back({std::string("g_") + m + "_" + p + (a ? "_ac" : ""), m, p, a});
  return v;
}

const Tensor& grid_x() {
  static const Tensor t = random_tensor({2, 3, 5, 6}, DType::F32, 200, -1, 1);
  return t;
}
const Tensor& grid_g() {
  // Beyond [-1, 1] so every padding mode matters; reflection folds more than once at +-2.5.
  static const Tensor t = random_tensor({2, 7, 8, 2}, DType::F32, 201, -2.5, 2.5);
  return t;
}

const std::map<std::string, std::vector<Tensor>>& resample_goldens() {
  static const auto g = [] {
    std::vector<testing::GoldenCase> cases;
    for (const ResizeCase& c : resize_cases()) {
      std::string code = "y = F.interpolate(x['x'], size=(" + std::to_string(c.oh) + ", " +
                         std::to_string(c.ow) + "), mode='" +
                         (c.mode == "nearest_exact" ? "nearest-exact" : c.mode) + "'";
      if (c.mode == "bilinear" || c.mode == "bicubic")
        code += std::string(", align_corners=") + (c.align ? "True" : "False") +
                ", antialias=" + (c.aa ? "True" : "False");
      cases.push_back({c.name, code + ")", {{"x", resize_input(c)}}});
    }
    for (const GridCase& c : grid_cases())
      cases.push_back({c.name,
                       "y = F.grid_sample(x['x'], x['g'], mode='" + c.mode + "', padding_mode='" +
                           c.pad + "', align_corners=" + (c.align ? "True" : "False") + ")",
                       {{"x", grid_x()}, {"g", grid_g()}}});
    return testing::torch_goldens(cases);
  }();
  return g;
}

TEST(ResizeTorch, MatchesInterpolateForEveryMode) {
  const auto& g = resample_goldens();
  for (const ResizeCase& c : resize_cases()) {
    SCOPED_TRACE(c.name + " " + dims_str(c.x) + " -> " + std::to_string(c.oh) + "x" +
                 std::to_string(c.ow) + " " + c.mode + (c.align ? " align" : "") +
                 (c.aa ? " aa" : ""));
    EXPECT_TRUE(all_close(resize(resize_input(c), c.oh, c.ow, c.mode, c.align, c.aa),
                          g.at(c.name)[0], kResampleTol, kResampleTol));
  }
}

TEST(GridSampleTorch, MatchesGridSampleForEveryCombination) {
  const auto& g = resample_goldens();
  for (const GridCase& c : grid_cases()) {
    SCOPED_TRACE(c.name);
    EXPECT_TRUE(all_close(grid_sample(grid_x(), grid_g(), c.mode, c.pad, c.align), g.at(c.name)[0],
                          kResampleTol, kResampleTol));
  }
}

// ---------------------------------------------------------------- errors

TEST(ResampleErrors, BadAttrsAndShapesThrow) {
  Tensor x = random_tensor({1, 2, 4, 4}, DType::F32, 1);
  EXPECT_THROW(resize(x, 2, 2, "area"), Error);
  EXPECT_THROW(resize(x, 2, 2, "nearest", true), Error);  // align_corners needs interpolation
  EXPECT_THROW(resize(x, 2, 2, "nearest_exact", false, true), Error);  // so does antialias
  EXPECT_THROW(resize(x, 0, 2, "bilinear"), Error);
  EXPECT_THROW(run_op(Op::Resize, {x}, {{"size", std::vector<int64_t>{2}}}), Error);
  EXPECT_THROW(resize(random_tensor({2, 4, 4}, DType::F32, 1), 2, 2, "bilinear"), Error);
  EXPECT_THROW(resize(random_tensor({1, 1, 0, 4}, DType::F32, 1), 2, 2, "bilinear"), Error);
  Tensor g = random_tensor({1, 3, 3, 2}, DType::F32, 2);
  EXPECT_THROW(grid_sample(x, g, "area", "zeros", false), Error);
  EXPECT_THROW(grid_sample(x, g, "bilinear", "wrap", false), Error);
  EXPECT_THROW(
      grid_sample(x, random_tensor({1, 3, 3, 3}, DType::F32, 2), "bilinear", "zeros", false),
      Error);
  EXPECT_THROW(
      grid_sample(x, random_tensor({2, 3, 3, 2}, DType::F32, 2), "bilinear", "zeros", false),
      Error);  // batch mismatch
  EXPECT_THROW(grid_sample(x, g.to(DType::F64), "bilinear", "zeros", false), Error);
  EXPECT_THROW(
      grid_sample(random_tensor({1, 1, 0, 3}, DType::F32, 1), g, "bilinear", "zeros", false),
      Error);
}

TEST(ResampleShapeInference, ValidatesWhenAdded) {
  Graph g;
  NodeId x = g.input("x", Shape({Dim(1), Dim(3), Dim::symbol("h"), Dim::symbol("w")}, DType::F32));
  NodeId grid = g.input("grid", Shape({Dim(1), Dim(5), Dim(6), Dim(2)}, DType::F32));
  Attrs ok{{"size", std::vector<int64_t>{4, 5}},
           {"mode", std::string("bicubic")},
           {"align_corners", int64_t(1)},
           {"antialias", int64_t(1)}};
  EXPECT_EQ(g.node(g.add(Op::Resize, {x}, ok)).shape.dims[3], Dim(5));
  EXPECT_THROW(g.add(Op::Resize, {x},
                     {{"size", std::vector<int64_t>{4, 5}},
                      {"mode", std::string("nearest")},
                      {"antialias", int64_t(1)}}),
               Error);
  EXPECT_NO_THROW(g.add(Op::GridSample, {x, grid}, {{"padding", std::string("reflection")}}));
  EXPECT_THROW(g.add(Op::GridSample, {x, grid}, {{"padding", std::string("circular")}}), Error);
  EXPECT_THROW(g.add(Op::GridSample, {x, grid}, {{"mode", std::string("area")}}), Error);
}

}  // namespace
}  // namespace rlx
