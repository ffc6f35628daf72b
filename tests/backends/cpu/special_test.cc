// special_unary and special_binary: every function against SciPy (unary, in
// double: independent of both our kernels and PyTorch's Cephes code) and
// PyTorch's float64 results (binary, with broadcasting), over ranges that
// cross each regime switch of the kernels (series / asymptotic / quadrature),
// in f64 and f32, plus PyTorch's edge values (poles, infinities, NaN, n < 0).
#include <cmath>
#include <limits>

#include "backends/cpu/ew_ref.h"
#include "support/torch_golden.h"

namespace rlx {
namespace {
using namespace rlx::testing;

struct UnaryFn {
  std::string fn;      // special_unary's fn
  double lo, hi;       // input range
  std::string scipy;   // expression of the numpy array `a`
  double rtol = 1e-9;  // against the double reference (f64 input)
};

std::vector<UnaryFn> unary_fns() {
  return {
      {"lgamma", -10, 30, "S.gammaln(a)"},
      {"digamma", -10, 30, "S.psi(a)"},
      {"erfinv", -1, 1, "S.erfinv(a)"},
      {"i0", -30, 30, "S.i0(a)"},
      {"i0e", -40, 40, "S.i0e(a)"},
      {"i1", -30, 30, "S.i1(a)"},
      {"i1e", -40, 40, "S.i1e(a)"},
      {"ndtri", 0, 1, "S.ndtri(a)"},
      {"log_ndtr", -40, 10, "S.log_ndtr(a)"},
      {"erfcx", -20, 40, "S.erfcx(a)"},
      // Bessel J/Y: series below 12, Hankel above; near the zeros only absolute error matters
      {"bessel_j0", -40, 40, "S.j0(a)"},
      {"bessel_j1", -40, 40, "S.j1(a)"},
      {"bessel_y0", 0, 40, "S.y0(a)"},
      {"bessel_y1", 0, 40, "S.y1(a)"},
      {"modified_bessel_k0", 0, 40, "S.k0(a)"},
      {"modified_bessel_k1", 0, 40, "S.k1(a)"},
      {"scaled_modified_bessel_k0", 0, 40, "S.k0e(a)"},
      {"scaled_modified_bessel_k1", 0, 40, "S.k1e(a)"},
      {"spherical_bessel_j0", -30, 30, "S.spherical_jn(0, a)"},
      // the Maclaurin series loses ~1e-7 relative where Ai is small (x near 6)
      {"airy_ai", -15, 12, "S.airy(a)[0]", 1e-6},
  };
}

struct BinaryFn {
  std::string fn;
  double alo, ahi, blo, bhi;
  bool b_integral;     // b (the degree) rounded to integers
  std::string torch;   // expression of tensors `a`, `b`
  double rtol = 1e-9;  // against PyTorch's float64
};

std::vector<BinaryFn> binary_fns() {
  return {
      {"zeta", 1.5, 12, 0.2, 10, false, "torch.special.zeta(a, b)"},
      // the prefactor x^a e^-x / Gamma(a) costs ~a ulp for large a
      {"igamma", 0.1, 30, 0, 40, false, "torch.igamma(a, b)", 1e-8},
      {"igammac", 0.1, 30, 0, 40, false, "torch.igammac(a, b)", 1e-8},
      {"chebyshev_t", -1.5, 1.5, -2, 14, true, "torch.special.chebyshev_polynomial_t(a, b)"},
      {"chebyshev_u", -1.5, 1.5, -2, 14, true, "torch.special.chebyshev_polynomial_u(a, b)"},
      {"chebyshev_v", -1.5, 1.5, -2, 14, true, "torch.special.chebyshev_polynomial_v(a, b)"},
      {"chebyshev_w", -1.5, 1.5, -2, 14, true, "torch.special.chebyshev_polynomial_w(a, b)"},
      {"shifted_chebyshev_t", -0.5, 1.5, -2, 14, true,
       "torch.special.shifted_chebyshev_polynomial_t(a, b)"},
      {"shifted_chebyshev_u", -0.5, 1.5, -2, 14, true,
       "torch.special.shifted_chebyshev_polynomial_u(a, b)"},
      {"shifted_chebyshev_v", -0.5, 1.5, -2, 14, true,
       "torch.special.shifted_chebyshev_polynomial_v(a, b)"},
      {"shifted_chebyshev_w", -0.5, 1.5, -2, 14, true,
       "torch.special.shifted_chebyshev_polynomial_w(a, b)"},
      {"hermite_h", -3, 3, -2, 14, true, "torch.special.hermite_polynomial_h(a, b)"},
      {"hermite_he", -3, 3, -2, 14, true, "torch.special.hermite_polynomial_he(a, b)"},
      {"laguerre_l", -3, 6, -2, 14, true, "torch.special.laguerre_polynomial_l(a, b)"},
      {"legendre_p", -1.5, 1.5, -2, 14, true, "torch.special.legendre_polynomial_p(a, b)"},
  };
}

Attrs fn_attr(const std::string& fn) { return {{"fn", fn}}; }

Tensor unary_input(const UnaryFn& f) {
  Tensor x = random_tensor({7, 61}, DType::F64, 5, f.lo, f.hi);
  // the regime switches and a few exact points
  const double pts[] = {0.5, 1, 2, 6, 12, 20, -8, -12, -20, 0.25, 1e-6, 25};
  for (size_t i = 0; i < std::size(pts); ++i)
    if (pts[i] > f.lo && pts[i] < f.hi) x.data<double>()[i] = pts[i];
  return x;
}

// [4, 1] x [1, 9]: broadcasting, polynomial degrees as integers.
std::pair<Tensor, Tensor> binary_inputs(const BinaryFn& f) {
  Tensor a = random_tensor({6, 1}, DType::F64, 9, f.alo, f.ahi);
  Tensor b = random_tensor({1, 13}, DType::F64, 10, f.blo, f.bhi);
  if (f.b_integral) {
    for (int64_t i = 0; i < b.numel(); ++i) b.data<double>()[i] = std::round(b.data<double>()[i]);
    a.data<double>()[0] = 1;  // PyTorch's special cases at the ends of the interval
    a.data<double>()[1] = f.alo < -0.9 ? -1 : 0;
  }
  return {a, b};
}

class SpecialOps : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::vector<GoldenCase> g;
    for (const UnaryFn& f : unary_fns())
      g.push_back(
          {f.fn,
           "import scipy.special as S\na = x['a'].numpy()\ny = torch.from_numpy(" + f.scipy + ")",
           {{"a", unary_input(f)}}});
    for (const BinaryFn& f : binary_fns()) {
      auto [a, b] = binary_inputs(f);
      g.push_back({f.fn, "a = x['a']\nb = x['b']\ny = " + f.torch, {{"a", a}, {"b", b}}});
    }
    Tensor px = random_tensor({40}, DType::F64, 3, -6, 12);
    for (int n = 0; n <= 4; ++n)
      g.push_back({"polygamma" + std::to_string(n),
                   "y = torch.polygamma(" + std::to_string(n) + ", x['a'])",
                   {{"a", px}}});
    // PyTorch's edge values, float64
    const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
    Tensor e = tensor_of({9}, {inf, -inf, nan, 0, -1, -2.5, 1, -1e-300, 1e-300}, DType::F64);
    g.push_back({"edges",
                 "a = x['a']\nS = torch.special\ny = (torch.lgamma(a), torch.digamma(a), "
                 "torch.i0(a), S.i1e(a), S.bessel_j0(a), S.bessel_y1(a), "
                 "S.modified_bessel_k0(a), S.scaled_modified_bessel_k1(a), S.airy_ai(a), "
                 "S.erfcx(a), S.log_ndtr(a), S.ndtri(a), torch.erfinv(a))",
                 {{"a", e}}});
    goldens_ = new std::map<std::string, std::vector<Tensor>>(torch_goldens(g));
  }
  static std::map<std::string, std::vector<Tensor>>* goldens_;
};
std::map<std::string, std::vector<Tensor>>* SpecialOps::goldens_ = nullptr;

TEST_F(SpecialOps, UnaryMatchesSciPyInF64AndF32) {
  for (const UnaryFn& f : unary_fns()) {
    Tensor x = unary_input(f);
    const Tensor& want = goldens_->at(f.fn)[0];
    Tensor y = run_op(Op::SpecialUnary, {x}, fn_attr(f.fn));
    EXPECT_EQ(y.dtype(), DType::F64);
    EXPECT_TRUE(all_close(y, want, 1e-11, f.rtol)) << f.fn;
    // f32: the double result, rounded once
    Tensor x32 = x.to(DType::F32);
    Tensor y32 = run_op(Op::SpecialUnary, {x32}, fn_attr(f.fn));
    EXPECT_EQ(y32.dtype(), DType::F32);
    Tensor want32 = run_op(Op::SpecialUnary, {x32.to(DType::F64)}, fn_attr(f.fn)).to(DType::F32);
    EXPECT_TRUE(all_close(y32, want32, 0, 0)) << f.fn << " f32";
  }
}

TEST_F(SpecialOps, BinaryMatchesTorchWithBroadcasting) {
  for (const BinaryFn& f : binary_fns()) {
    auto [a, b] = binary_inputs(f);
    Tensor y = run_op(Op::SpecialBinary, {a, b}, fn_attr(f.fn));
    EXPECT_EQ(y.dims(), (Dims{6, 13})) << f.fn;
    EXPECT_TRUE(all_close(y, goldens_->at(f.fn)[0], 1e-11, f.rtol)) << f.fn;
    Tensor y32 = run_op(Op::SpecialBinary, {a.to(DType::F32), b.to(DType::F32)}, fn_attr(f.fn));
    EXPECT_TRUE(all_close(y32, goldens_->at(f.fn)[0].to(DType::F32), 1e-6, 1e-5)) << f.fn;
  }
}

TEST_F(SpecialOps, PolygammaOfEachOrderMatchesTorch) {
  Tensor px = random_tensor({40}, DType::F64, 3, -6, 12);
  for (int n = 0; n <= 4; ++n) {
    Tensor order = tensor_of({}, {double(n)}, DType::F64);
    Tensor y = run_op(Op::SpecialBinary, {order, px}, fn_attr("polygamma"));
    EXPECT_TRUE(all_close(y, goldens_->at("polygamma" + std::to_string(n))[0], 1e-9, 1e-9))
        << "n = " << n;
  }
}

TEST_F(SpecialOps, EdgeValuesFollowTorch) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  Tensor e = tensor_of({9}, {inf, -inf, nan, 0, -1, -2.5, 1, -1e-300, 1e-300}, DType::F64);
  const char* fns[] = {"lgamma",
                       "digamma",
                       "i0",
                       "i1e",
                       "bessel_j0",
                       "bessel_y1",
                       "modified_bessel_k0",
                       "scaled_modified_bessel_k1",
                       "airy_ai",
                       "erfcx",
                       "log_ndtr",
                       "ndtri",
                       "erfinv"};
  const auto& want = goldens_->at("edges");
  // the non-finite results must agree exactly; the finite ones to PyTorch's float64 accuracy
  // (its Cephes-style airy_ai is ~3e-7 off at -2.5, where ours agrees with SciPy to 1e-12)
  for (size_t i = 0; i < std::size(fns); ++i)
    EXPECT_TRUE(all_close(run_op(Op::SpecialUnary, {e}, fn_attr(fns[i])), want[i], 1e-6, 1e-9))
        << fns[i];
}

TEST(SpecialOpsErrors, IntegerInputsAndUnknownFunctionsAreRefused) {
  Tensor i = tensor_of({3}, {1, 2, 3}, DType::I64);
  EXPECT_NE(error_of([&] { run_op(Op::SpecialUnary, {i}, fn_attr("lgamma")); }).find("float"),
            std::string::npos);
  Tensor x = tensor_of({3}, {1, 2, 3}, DType::F32);
  EXPECT_NE(error_of([&] { run_op(Op::SpecialUnary, {x}, fn_attr("gamma")); }), "");
  EXPECT_NE(error_of([&] {
              run_op(Op::SpecialBinary, {x, x.to(DType::F64)}, fn_attr("zeta"));
            }),
            "");
}

}  // namespace
}  // namespace rlx
