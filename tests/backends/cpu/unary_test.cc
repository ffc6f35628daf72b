// Unary element-wise ops: every op against a double-precision scalar
// reference and a PyTorch golden, f32 / f64 / integer / f16 / bf16 inputs,
// special values, empty and rank-0 tensors, and error paths.
#include <cmath>
#include <limits>

#include "backends/cpu/ew_ref.h"
#include "support/torch_golden.h"

namespace rlx {
namespace {
using namespace rlx::testing;

constexpr double kPi = 3.14159265358979323846;

double softplus_ref(double x, double beta, double th) {
  return x * beta > th ? x : std::log1p(std::exp(beta * x)) / beta;
}
double clampd(double x, double lo, double hi) {
  return std::isnan(x) ? x : std::min(std::max(x, lo), hi);
}

struct UnaryCase {
  std::string name;
  Op op;
  Attrs attrs;
  double lo, hi;      // input range
  std::string torch;  // expression of `a`
  std::function<double(double)> ref;
  double rtol = 2e-6;  // f32: a couple of ulp of the kernel plus the reference rounding
  double atol = 1e-7;
};

std::vector<UnaryCase> unary_cases() {
  const double s2 = std::sqrt(2.0);
  return {
      {"relu", Op::Relu, {}, -5, 5, "torch.relu(a)", [](double x) { return x < 0 ? 0 : x; }},
      // gelu: for x < 0, 1 + erf(..) cancels, so an ulp of erf (~6e-8) becomes an
      // absolute error of up to ~|x| 3e-8 in f32 (PyTorch's formula has the same).
      {"gelu",
       Op::Gelu,
       {},
       -8,
       8,
       "F.gelu(a)",
       [=](double x) { return 0.5 * x * (1 + std::erf(x / s2)); },
       2e-6,
       5e-7},
      {"gelu_tanh",
       Op::GeluTanh,
       {},
       -8,
       8,
       "F.gelu(a, approximate='tanh')",
       [](double x) {
         return 0.5 * x * (1 + std::tanh(std::sqrt(2 / kPi) * (x + 0.044715 * x * x * x)));
       },
       2e-6,
       5e-7},
      {"silu", Op::Silu, {}, -30, 30, "F.silu(a)", [](double x) { return x / (1 + std::exp(-x)); }},
      {"sigmoid",
       Op::Sigmoid,
       {},
       -30,
       30,
       "torch.sigmoid(a)",
       [](double x) { return 1 / (1 + std::exp(-x)); }},
      {"tanh", Op::Tanh, {}, -12, 12, "torch.tanh(a)", [](double x) { return std::tanh(x); }},
      {"exp", Op::Exp, {}, -80, 80, "torch.exp(a)", [](double x) { return std::exp(x); }},
      {"log", Op::Log, {}, 1e-3, 1e3, "torch.log(a)", [](double x) { return std::log(x); }},
      {"sqrt", Op::Sqrt, {}, 0, 100, "torch.sqrt(a)", [](double x) { return std::sqrt(x); }},
      {"rsqrt",
       Op::Rsqrt,
       {},
       1e-2,
       100,
       "torch.rsqrt(a)",
       [](double x) { return 1 / std::sqrt(x); }},
      {"neg", Op::Neg, {}, -5, 5, "torch.neg(a)", [](double x) { return -x; }},
      {"abs", Op::Abs, {}, -5, 5, "torch.abs(a)", [](double x) { return std::abs(x); }},
      {"sin", Op::Sin, {}, -10, 10, "torch.sin(a)", [](double x) { return std::sin(x); }},
      {"cos", Op::Cos, {}, -10, 10, "torch.cos(a)", [](double x) { return std::cos(x); }},
      {"tan", Op::Tan, {}, -1.4, 1.4, "torch.tan(a)", [](double x) { return std::tan(x); }},
      {"atan", Op::Atan, {}, -20, 20, "torch.atan(a)", [](double x) { return std::atan(x); }},
      {"erf", Op::Erf, {}, -4, 4, "torch.erf(a)", [](double x) { return std::erf(x); }},
      {"reciprocal",
       Op::Reciprocal,
       {},
       0.1,
       10,
       "torch.reciprocal(a)",
       [](double x) { return 1 / x; }},
      // Scaled so that many inputs are exact halves: checks half-to-even.
      {"round", Op::Round, {}, -6, 6, "torch.round(a)", [](double x) { return std::nearbyint(x); }},
      {"floor", Op::Floor, {}, -6, 6, "torch.floor(a)", [](double x) { return std::floor(x); }},
      {"ceil", Op::Ceil, {}, -6, 6, "torch.ceil(a)", [](double x) { return std::ceil(x); }},
      {"sign",
       Op::Sign,
       {},
       -2,
       2,
       "torch.sign(a)",
       [](double x) { return double((x > 0) - (x < 0)); }},
      {"softplus",
       Op::Softplus,
       {},
       -30,
       30,
       "F.softplus(a)",
       [](double x) { return softplus_ref(x, 1, 20); }},
      {"softplus_b2_t5",
       Op::Softplus,
       {{"beta", 2.0}, {"threshold", 5.0}},
       -5,
       5,
       "F.softplus(a, beta=2, threshold=5)",
       [](double x) { return softplus_ref(x, 2, 5); }},
      {"elu", Op::Elu, {}, -5, 5, "F.elu(a)", [](double x) { return x > 0 ? x : std::expm1(x); }},
      {"elu_a07",
       Op::Elu,
       {{"alpha", 0.7}},
       -5,
       5,
       "F.elu(a, alpha=0.7)",
       [](double x) { return x > 0 ? x : 0.7 * std::expm1(x); }},
      {"leaky_relu",
       Op::LeakyRelu,
       {},
       -5,
       5,
       "F.leaky_relu(a)",
       [](double x) { return x > 0 ? x : 0.01 * x; }},
      {"leaky_relu_neg",
       Op::LeakyRelu,
       {{"slope", -1.5}},
       -5,
       5,
       "F.leaky_relu(a, negative_slope=-1.5)",
       [](double x) { return x > 0 ? x : -1.5 * x; }},
      {"hard_sigmoid",
       Op::HardSigmoid,
       {},
       -5,
       5,
       "F.hardsigmoid(a)",
       [](double x) { return clampd(x / 6 + 0.5, 0, 1); }},
      {"hard_sigmoid_ab",
       Op::HardSigmoid,
       {{"alpha", 0.2}, {"beta", 0.4}},
       -5,
       5,
       "torch.clamp(0.2 * a + 0.4, 0, 1)",
       [](double x) { return clampd(0.2 * x + 0.4, 0, 1); }},
      {"hard_swish",
       Op::HardSwish,
       {},
       -5,
       5,
       "F.hardswish(a)",
       [](double x) { return x * clampd(x + 3, 0, 6) / 6; }},
      {"mish",
       Op::Mish,
       {},
       -20,
       20,
       "F.mish(a)",
       [](double x) { return x * std::tanh(std::log1p(std::exp(x))); }},
      {"clamp",
       Op::Clamp,
       {{"min", -0.5}, {"max", 0.3}},
       -2,
       2,
       "torch.clamp(a, -0.5, 0.3)",
       [](double x) { return clampd(x, -0.5, 0.3); }},
      {"clamp_min",
       Op::Clamp,
       {{"min", -0.25}},
       -2,
       2,
       "torch.clamp(a, min=-0.25)",
       [](double x) { return clampd(x, -0.25, kInf); }},
  };
}

// Inputs: random in [lo, hi], rounded to quarters for the rounding ops.
Tensor input_for(const UnaryCase& c, const Dims& d, DType t, uint64_t seed) {
  Tensor x = random_tensor(d, DType::F64, seed, c.lo, c.hi);
  if (c.op == Op::Round || c.op == Op::Floor || c.op == Op::Ceil || c.op == Op::Sign)
    for (int64_t i = 0; i < x.numel(); ++i)
      x.data<double>()[i] = std::round(x.data<double>()[i] * 4) / 4;
  return x.to(t);
}

// Odd sizes exercise the vector tails; 9001 elements spans several threads'
// chunks for the expensive ops.
const std::vector<Dims> kUnaryShapes = {{3, 37}, {9001}, {}, {0, 3}, {1, 1, 5}};

class UnaryOps : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::vector<GoldenCase> g;
    for (const UnaryCase& c : unary_cases()) {
      TensorMap in{{"a", input_for(c, {4, 33}, DType::F32, 7)}};
      g.push_back({c.name, "a = x['a']\ny = " + c.torch, in});
      TensorMap in64{{"a", input_for(c, {4, 33}, DType::F64, 8)}};
      g.push_back({c.name + "_f64", "a = x['a']\ny = " + c.torch, in64});
    }
    // Integer inputs of the ops that keep integer dtypes in PyTorch.
    for (DType t : {DType::I32, DType::I64, DType::I8}) {
      TensorMap in{{"a", random_tensor({50}, t, 3, -100, 100)}};
      std::string dn(dtype_name(t));
      g.push_back({"int_" + dn,
                   "a = x['a']\ny = (-a, torch.abs(a), torch.sign(a), torch.relu(a), "
                   "torch.clamp(a, -7, 20))",
                   in});
    }
    goldens_ = new std::map<std::string, std::vector<Tensor>>(torch_goldens(g));
  }
  static std::map<std::string, std::vector<Tensor>>* goldens_;
};
std::map<std::string, std::vector<Tensor>>* UnaryOps::goldens_ = nullptr;

TEST_F(UnaryOps, F32MatchesScalarReferenceOnAllShapes) {
  for (const UnaryCase& c : unary_cases())
    for (const Dims& d : kUnaryShapes) {
      Tensor x = input_for(c, d, DType::F32, 11);
      Tensor y = run_op(c.op, {x}, c.attrs);
      EXPECT_EQ(y.dtype(), DType::F32);
      Tensor want = ref_map({x}, DType::F32, [&](auto& v) { return c.ref(v[0]); });
      EXPECT_TRUE(all_close(y, want, c.atol, c.rtol)) << c.name << " " << dims_str(d);
    }
}

TEST_F(UnaryOps, F64MatchesScalarReference) {
  for (const UnaryCase& c : unary_cases()) {
    Tensor x = input_for(c, {5, 41}, DType::F64, 12);
    Tensor y = run_op(c.op, {x}, c.attrs);
    EXPECT_EQ(y.dtype(), DType::F64);
    Tensor want = ref_map({x}, DType::F64, [&](auto& v) { return c.ref(v[0]); });
    EXPECT_TRUE(all_close(y, want, 1e-13, 1e-12)) << c.name;
  }
}

TEST_F(UnaryOps, MatchTorchGoldens) {
  for (const UnaryCase& c : unary_cases()) {
    Tensor x = input_for(c, {4, 33}, DType::F32, 7);
    EXPECT_TRUE(all_close(run_op(c.op, {x}, c.attrs), goldens_->at(c.name)[0], c.atol, c.rtol))
        << c.name;
    Tensor x64 = input_for(c, {4, 33}, DType::F64, 8);
    EXPECT_TRUE(
        all_close(run_op(c.op, {x64}, c.attrs), goldens_->at(c.name + "_f64")[0], 1e-13, 1e-12))
        << c.name << " f64";
  }
}

TEST_F(UnaryOps, IntegerOpsMatchTorch) {
  for (DType t : {DType::I32, DType::I64, DType::I8}) {
    Tensor a = random_tensor({50}, t, 3, -100, 100);
    const auto& want = goldens_->at("int_" + std::string(dtype_name(t)));
    EXPECT_TRUE(all_equal(run_op(Op::Neg, {a}), want[0]));
    EXPECT_TRUE(all_equal(run_op(Op::Abs, {a}), want[1]));
    EXPECT_TRUE(all_equal(run_op(Op::Sign, {a}), want[2]));
    EXPECT_TRUE(all_equal(run_op(Op::Relu, {a}), want[3]));
    EXPECT_TRUE(all_equal(run_op(Op::Clamp, {a}, {{"min", -7.0}, {"max", 20.0}}), want[4]));
    for (Op op : {Op::Round, Op::Floor, Op::Ceil}) EXPECT_TRUE(all_equal(run_op(op, {a}), a));
  }
}

TEST_F(UnaryOps, IntegerEdgeCasesWrapAndClampBoundsRound) {
  Tensor a = tensor_of({4}, {-128, -3, 0, 127}, DType::I8);
  EXPECT_TRUE(all_equal(run_op(Op::Neg, {a}), tensor_of({4}, {-128, 3, 0, -127}, DType::I8)));
  EXPECT_TRUE(all_equal(run_op(Op::Abs, {a}), tensor_of({4}, {-128, 3, 0, 127}, DType::I8)));
  // Float bounds on integers: min rounds up, max rounds down, huge bounds saturate.
  EXPECT_TRUE(all_equal(run_op(Op::Clamp, {a}, {{"min", -2.5}, {"max", 100.5}}),
                        tensor_of({4}, {-2, -2, 0, 100}, DType::I8)));
  EXPECT_TRUE(all_equal(run_op(Op::Clamp, {a}, {{"min", -1e30}, {"max", 1e30}}), a));
  Tensor u = tensor_of({3}, {0, 1, 255}, DType::U8);
  EXPECT_TRUE(all_equal(run_op(Op::Neg, {u}), tensor_of({3}, {0, 255, 1}, DType::U8)));
  EXPECT_TRUE(all_equal(run_op(Op::Sign, {u}), tensor_of({3}, {0, 1, 1}, DType::U8)));
  Tensor big = tensor_of({2}, {-9e18, 9e18}, DType::I64);
  EXPECT_TRUE(all_equal(run_op(Op::Clamp, {big}, {{"min", -kInf}, {"max", kInf}}), big));
}

TEST_F(UnaryOps, SpecialValuesFollowTheMath) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> v = {nan,  kInf,  -kInf, 0.0,   -0.0, 1e-30, -1e-30, 100,       -100,
                           1e30, -1e30, 88.5,  -88.5, 89.5, -104,  0.625,  -0.921875, 9.5};
  Tensor x = tensor_of({int64_t(v.size())}, v, DType::F32);
  const double s2 = std::sqrt(2.0);
  struct S {
    Op op;
    std::function<double(double)> f;
  };
  std::vector<S> ops = {
      {Op::Relu, [](double a) { return std::isnan(a) ? a
                                       : a < 0       ? 0
                                                     : a; }},
      {Op::Exp, [](double a) { return std::exp(a); }},
      {Op::Tanh, [](double a) { return std::tanh(a); }},
      {Op::Erf, [](double a) { return std::erf(a); }},
      {Op::Sigmoid, [](double a) { return 1 / (1 + std::exp(-a)); }},
      // x * sigmoid(x): -inf * 0 is NaN, like PyTorch.
      {Op::Silu, [](double a) { return a * (1 / (1 + std::exp(-a))); }},
      {Op::Gelu, [=](double a) { return 0.5 * a * (1 + std::erf(a / s2)); }},
      {Op::Sign, [](double a) { return double((a > 0) - (a < 0)); }},
      {Op::Clamp, [](double a) { return clampd(a, -1, 1); }},
  };
  for (const S& s : ops) {
    Attrs at = s.op == Op::Clamp ? Attrs{{"min", -1.0}, {"max", 1.0}} : Attrs{};
    Tensor want = ref_map({x}, DType::F32, [&](auto& a) { return s.f(float(a[0])); });
    EXPECT_TRUE(all_close(run_op(s.op, {x}, at), want, 1e-37, 2e-6)) << op_name(s.op);
  }
}

TEST_F(UnaryOps, HalfInputsUseTheF32PathAndRoundOnce) {
  for (DType t : {DType::F16, DType::BF16})
    for (Op op : {Op::Gelu, Op::Silu, Op::Exp, Op::Tanh, Op::Relu, Op::Abs}) {
      Tensor x = random_tensor({3, 17}, t, 5, -3, 3);
      Tensor y = run_op(op, {x});
      EXPECT_EQ(y.dtype(), t);
      // Reference: the same op in f32 (already checked above) rounded to t.
      Tensor want = run_op(op, {x.to(DType::F32)}).to(t);
      EXPECT_TRUE(all_equal(y, want)) << op_name(op) << " " << dtype_name(t);
      // And against the math, within one ulp of the narrow type.
      double tol = t == DType::F16 ? 1e-3 : 8e-3;
      UnaryCase c;
      for (const UnaryCase& k : unary_cases())
        if (k.op == op) c = k;
      Tensor math = ref_map({x}, DType::F64, [&](auto& a) { return c.ref(a[0]); });
      EXPECT_TRUE(all_close(y, math, 1e-3, tol)) << op_name(op) << " " << dtype_name(t);
    }
}

TEST_F(UnaryOps, RejectsUnsupportedDtypes) {
  Tensor i = random_tensor({4}, DType::I32, 1, -3, 3);
  for (Op op : {Op::Exp, Op::Gelu, Op::Sqrt, Op::Sigmoid, Op::LeakyRelu, Op::Softplus})
    EXPECT_THROW(run_op(op, {i}), Error) << op_name(op);
  Tensor b = random_tensor({4}, DType::Bool, 1);
  EXPECT_THROW(run_op(Op::Relu, {b}), Error);
  EXPECT_THROW(run_op(Op::Neg, {b}), Error);
  Tensor f = random_tensor({4}, DType::F32, 1);
  EXPECT_THROW(run_op(Op::Softplus, {f}, {{"beta", 0.0}}), Error);
  EXPECT_THROW(run_op(Op::Clamp, {i}, {{"min", std::nan("")}}), Error);
}

// Under CpuOptions::ggml_numerics GELU-tanh rounds as ggml's CPU backend does
// (its input to f16, an f16 table of results), as the separate op and as a
// matmul's fused activation; by default both keep the f32 formula.
TEST(GgmlNumerics, GeluTanhGoesThroughAnF16Table) {
  auto ggml = [](float x) -> double {
    if (x <= -10.0f) return 0;
    if (x >= 10.0f) return x;
    const float v = f16_to_f32(f32_to_f16(x));
    return f16_to_f32(
        f32_to_f16(0.5f * v * (1.0f + std::tanh(0.7978845608f * v * (1.0f + 0.044715f * v * v)))));
  };
  const Tensor x = random_tensor({3, 16}, DType::F32, 7, -4, 4),
               w = random_tensor({16, 40}, DType::F32, 8, -1, 1);
  Graph g;
  NodeId xi = g.input("x", x.shape()), wi = g.input("w", w.shape());
  g.add_output("act", g.add(Op::GeluTanh, {xi}));
  g.add_output("mm", g.add(Op::MatMul, {xi, wi}, Attrs{{"activation", std::string("gelu_tanh")}}));
  g.add_output("pre", g.add(Op::MatMul, {xi, wi}));
  auto run = [&](bool numerics) {
    CompileOptions o;
    o.backend = make_cpu_backend({.ggml_numerics = numerics});
    Session s(Executable::compile(g, {}, o));
    return s.run({{"x", x}, {"w", w}});
  };
  for (bool numerics : {false, true}) {
    SCOPED_TRACE(numerics ? "ggml numerics" : "default");
    auto out = run(numerics);
    const Tensor& pre = out.at("pre");
    double off_table = 0;
    for (auto [in, y] : {std::pair{&x, &out.at("act")}, {&pre, &out.at("mm")}})
      for (int64_t i = 0; i < in->numel(); ++i) {
        const float v = in->data<float>()[i], got = y->data<float>()[i];
        if (numerics)
          EXPECT_EQ(got, float(ggml(v))) << v;
        else
          EXPECT_NEAR(got, 0.5 * v * (1 + std::tanh(0.7978845608 * (v + 0.044715 * v * v * v))),
                      1e-5 + 2e-6 * std::abs(v));
        off_table = std::max(off_table, std::abs(got - ggml(v)));
      }
    if (!numerics) {
      EXPECT_GT(off_table, 1e-4);  // the table's rounding is visible
    }
  }
}

}  // namespace
}  // namespace rlx
