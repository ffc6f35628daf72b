// Binary arithmetic and comparisons: every op and dtype over broadcasting
// corners, against a double scalar reference and PyTorch goldens.
#include <cmath>
#include <limits>

#include "backends/cpu/ew_ref.h"
#include "support/torch_golden.h"

namespace rlx {
namespace {
using namespace rlx::testing;

struct Pair {
  Dims a, b;
};
// Same shape, outer broadcast, scalars either side, empty, row broadcast,
// rank mismatch, size-1 dims, and large ones that span several threads.
const std::vector<Pair> kPairs = {
    {{4, 5}, {4, 5}}, {{3, 1}, {1, 4}},    {{}, {2, 3}},        {{2, 3}, {}},
    {{0, 3}, {3}},    {{0, 3}, {1, 3}},    {{2, 3, 4}, {3, 1}}, {{5, 1, 3}, {4, 1}},
    {{1}, {1, 1, 7}}, {{300, 257}, {257}}, {{70001}, {70001}},  {{257}, {300, 1}},
};

struct BinCase {
  std::string name;
  Op op;
  Attrs attrs;
  std::string torch;  // expression of a, b
  std::function<double(double, double)> ref;
  bool float_only = false;
};

double py_mod(double a, double b) {
  double m = std::fmod(a, b);
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}
double nan_max(double a, double b) {
  return std::isnan(a) || std::isnan(b) ? kNaN : std::max(a, b);
}
double nan_min(double a, double b) {
  return std::isnan(a) || std::isnan(b) ? kNaN : std::min(a, b);
}

std::vector<BinCase> bin_cases() {
  return {
      {"add", Op::Add, {}, "a + b", [](double a, double b) { return a + b; }},
      {"sub", Op::Sub, {}, "a - b", [](double a, double b) { return a - b; }},
      {"mul", Op::Mul, {}, "a * b", [](double a, double b) { return a * b; }},
      {"div", Op::Div, {}, "a / b", [](double a, double b) { return a / b; }, true},
      {"div_trunc",
       Op::Div,
       {{"rounding", std::string("trunc")}},
       "torch.div(a, b, rounding_mode='trunc')",
       [](double a, double b) { return std::trunc(a / b); }},
      {"div_floor",
       Op::Div,
       {{"rounding", std::string("floor")}},
       "torch.div(a, b, rounding_mode='floor')",
       [](double a, double b) { return std::floor(a / b); }},
      {"max", Op::Max, {}, "torch.maximum(a, b)", nan_max},
      {"min", Op::Min, {}, "torch.minimum(a, b)", nan_min},
      {"pow", Op::Pow, {}, "torch.pow(a, b)", [](double a, double b) { return std::pow(a, b); }},
      {"mod", Op::Mod, {}, "torch.remainder(a, b)", py_mod},
      {"fmod",
       Op::Fmod,
       {},
       "torch.fmod(a, b)",
       [](double a, double b) { return std::fmod(a, b); }},
  };
}

// Operands: floats in [-4, 4] with b kept away from 0 for the dividing ops
// and a positive for pow; integers small enough not to overflow, with b != 0.
std::pair<Tensor, Tensor> operands(const BinCase& c, const Pair& p, DType t, uint64_t seed) {
  const bool is_int = is_integer(t);
  const bool u8 = t == DType::U8;
  Tensor a = random_tensor(p.a, DType::F64, seed, is_int ? (u8 ? 0 : -20) : -4, is_int ? 20 : 4);
  Tensor b = random_tensor(p.b, DType::F64, seed + 1, is_int ? (u8 ? 1 : -9) : -4, is_int ? 9 : 4);
  for (int64_t i = 0; i < b.numel(); ++i) {
    double& v = b.data<double>()[i];
    if (is_int) {
      v = std::round(v);
      if (v == 0) v = 3;
      if (c.op == Op::Pow) v = std::abs(v) > 4 ? 2 : std::abs(v);  // no overflow
    } else if (std::abs(v) < 0.25) {
      v = 0.5;
    }
  }
  for (int64_t i = 0; i < a.numel(); ++i) {
    double& v = a.data<double>()[i];
    if (is_int) v = std::round(v);
    if (c.op == Op::Pow) v = is_int ? std::fmod(v, 5.0) : std::abs(v) + 0.1;
    if (t == DType::I8 && c.op == Op::Mul) v = std::fmod(v, 10.0);
  }
  return {a.to(t), b.to(t)};
}

double tol_for(const BinCase& c, DType t) {
  if (is_integer(t)) return 0;
  if (t == DType::F64) return 1e-14;
  // f32: one rounding of the op (pow: ~1 ulp of powf).
  return c.op == Op::Pow ? 2e-6 : 1e-6;
}

const std::vector<DType> kDtypes = {DType::F32, DType::F64, DType::I32, DType::I64,
                                    DType::I8,  DType::I16, DType::U8};

class BinaryOps : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::vector<GoldenCase> g;
    for (const BinCase& c : bin_cases())
      for (DType t : {DType::F32, DType::I64, DType::I32})
        for (size_t p = 0; p < 3; ++p) {  // a few broadcasting shapes are enough for torch
          if (c.float_only && t != DType::F32) continue;
          auto [a, b] = operands(c, kPairs[p], t, 40 + p);
          std::string expr = c.torch;
          g.push_back({key(c, t, p), "a, b = x['a'], x['b']\ny = " + expr, {{"a", a}, {"b", b}}});
        }
    const char* cmp[] = {"eq", "ne", "lt", "le", "gt", "ge"};
    for (DType t : {DType::F32, DType::I32, DType::U8, DType::Bool}) {
      auto [a, b] = cmp_operands(t);
      std::string code = "a, b = x['a'], x['b']\ny = (";
      for (const char* op : cmp) code += std::string("torch.") + op + "(a, b), ";
      g.push_back({"cmp_" + std::string(dtype_name(t)), code + ")", {{"a", a}, {"b", b}}});
    }
    goldens_ = new std::map<std::string, std::vector<Tensor>>(torch_goldens(g));
  }
  static std::string key(const BinCase& c, DType t, size_t p) {
    return c.name + "_" + std::string(dtype_name(t)) + "_" + std::to_string(p);
  }
  // Comparison operands with many ties (small integer values) and NaNs.
  static std::pair<Tensor, Tensor> cmp_operands(DType t) {
    Tensor a = random_tensor({3, 1}, t, 1, 0, 3), b = random_tensor({1, 4}, t, 2, 0, 3);
    if (is_float(t)) {
      a = random_tensor({3, 1}, DType::I32, 1, 0, 3).to(DType::F64);
      b = random_tensor({1, 4}, DType::I32, 2, 0, 3).to(DType::F64);
      a.data<double>()[1] = kNaN;
      b.data<double>()[2] = kNaN;
      a = a.to(t);
      b = b.to(t);
    }
    return {a, b};
  }
  static std::map<std::string, std::vector<Tensor>>* goldens_;
};
std::map<std::string, std::vector<Tensor>>* BinaryOps::goldens_ = nullptr;

TEST_F(BinaryOps, AllDtypesAndShapesMatchScalarReference) {
  for (const BinCase& c : bin_cases())
    for (DType t : kDtypes) {
      if (c.float_only && !is_float(t)) continue;
      for (size_t p = 0; p < kPairs.size(); ++p) {
        auto [a, b] = operands(c, kPairs[p], t, 40 + p);
        Tensor y = run_op(c.op, {a, b}, c.attrs);
        EXPECT_EQ(y.dtype(), t);
        Tensor want = ref_map({a, b}, t, [&](auto& v) { return c.ref(v[0], v[1]); });
        double tol = tol_for(c, t);
        EXPECT_TRUE(all_close(y, want, tol, tol))
            << c.name << " " << dtype_name(t) << " " << dims_str(kPairs[p].a) << " x "
            << dims_str(kPairs[p].b);
      }
    }
}

TEST_F(BinaryOps, MatchTorchGoldens) {
  for (const BinCase& c : bin_cases())
    for (DType t : {DType::F32, DType::I64, DType::I32})
      for (size_t p = 0; p < 3; ++p) {
        if (c.float_only && t != DType::F32) continue;
        auto [a, b] = operands(c, kPairs[p], t, 40 + p);
        double tol = tol_for(c, t);
        EXPECT_TRUE(
            all_close(run_op(c.op, {a, b}, c.attrs), goldens_->at(key(c, t, p))[0], tol, tol))
            << key(c, t, p);
      }
}

TEST_F(BinaryOps, IntegerDivisionWithoutRoundingTruncates) {
  Tensor a = tensor_of({4}, {7, -7, 7, -7}, DType::I32),
         b = tensor_of({4}, {2, 2, -2, -2}, DType::I32);
  EXPECT_TRUE(all_equal(run_op(Op::Div, {a, b}), tensor_of({4}, {3, -3, -3, 3}, DType::I32)));
  EXPECT_TRUE(all_equal(run_op(Op::Div, {a, b}, {{"rounding", std::string("floor")}}),
                        tensor_of({4}, {3, -4, -4, 3}, DType::I32)));
  EXPECT_TRUE(all_equal(run_op(Op::Mod, {a, b}), tensor_of({4}, {1, 1, -1, -1}, DType::I32)));
  EXPECT_TRUE(all_equal(run_op(Op::Fmod, {a, b}), tensor_of({4}, {1, -1, 1, -1}, DType::I32)));
}

TEST_F(BinaryOps, IntegerOverflowWrapsAndNegativePowers) {
  const double mn = double(std::numeric_limits<int32_t>::min());
  Tensor a = tensor_of({3}, {mn, 2147483647, mn}, DType::I32),
         m1 = tensor_of({3}, {-1, 1, -1}, DType::I32);
  EXPECT_TRUE(
      all_equal(run_op(Op::Div, {a, m1}), tensor_of({3}, {mn, 2147483647, mn}, DType::I32)));
  EXPECT_TRUE(all_equal(run_op(Op::Mod, {a, m1}), tensor_of({3}, {0, 0, 0}, DType::I32)));
  EXPECT_TRUE(all_equal(run_op(Op::Add, {a, m1}),
                        tensor_of({3}, {2147483647, mn, 2147483647}, DType::I32)));
  Tensor u = tensor_of({2}, {200, 255}, DType::U8);
  EXPECT_TRUE(all_equal(run_op(Op::Mul, {u, u}), tensor_of({2}, {64, 1}, DType::U8)));
  // Negative integer exponents: 1 / base truncated (PyTorch gives the same).
  Tensor base = tensor_of({5}, {2, 1, -1, -1, 0}, DType::I64);
  Tensor ex = tensor_of({5}, {-1, -3, -3, -2, 2}, DType::I64);
  EXPECT_TRUE(all_equal(run_op(Op::Pow, {base, ex}), tensor_of({5}, {0, 1, -1, 1, 0}, DType::I64)));
}

TEST_F(BinaryOps, FloatSpecialValues) {
  std::vector<double> av = {kNaN, 1, kNaN, 5, -5, 5, -5, 0, kInf, -0.0};
  std::vector<double> bv = {1, kNaN, kNaN, 0, 0, -3, 3, 0, 2, 1};
  Tensor a = tensor_of({10}, av, DType::F32), b = tensor_of({10}, bv, DType::F32);
  for (const BinCase& c : bin_cases()) {
    // Floor division of +-inf is NaN, as in PyTorch (its result goes through fmod).
    Tensor want = ref_map({a, b}, DType::F32, [&](auto& v) {
      return c.name == "div_floor" && std::isinf(v[0]) ? kNaN : c.ref(v[0], v[1]);
    });
    EXPECT_TRUE(all_close(run_op(c.op, {a, b}, c.attrs), want, 0, 1e-6)) << c.name;
  }
  // Max/min propagate NaN in the vector path too (8+ elements, NaN in either lane).
  Tensor x = random_tensor({37}, DType::F32, 3), z = random_tensor({37}, DType::F32, 4);
  x.data<float>()[5] = NAN;
  z.data<float>()[20] = NAN;
  for (Op op : {Op::Max, Op::Min}) {
    Tensor y = run_op(op, {x, z});
    EXPECT_TRUE(std::isnan(y.data<float>()[5]) && std::isnan(y.data<float>()[20]));
    EXPECT_FALSE(std::isnan(y.data<float>()[6]));
  }
}

TEST_F(BinaryOps, BoolAndHalfInputs) {
  Tensor p = tensor_of({4}, {0, 1, 0, 1}, DType::Bool),
         q = tensor_of({4}, {0, 0, 1, 1}, DType::Bool);
  EXPECT_TRUE(all_equal(run_op(Op::Add, {p, q}), tensor_of({4}, {0, 1, 1, 1}, DType::Bool)));
  EXPECT_TRUE(all_equal(run_op(Op::Mul, {p, q}), tensor_of({4}, {0, 0, 0, 1}, DType::Bool)));
  EXPECT_THROW(run_op(Op::Sub, {p, q}), Error);
  for (DType t : {DType::F16, DType::BF16})
    for (Op op : {Op::Add, Op::Mul, Op::Div, Op::Max}) {
      Tensor a = random_tensor({3, 1}, t, 8, 0.5, 2), b = random_tensor({1, 5}, t, 9, 0.5, 2);
      Tensor y = run_op(op, {a, b});
      EXPECT_EQ(y.dtype(), t);
      // Computed in f32 and rounded once to t.
      Tensor want = run_op(op, {a.to(DType::F32), b.to(DType::F32)}).to(t);
      EXPECT_TRUE(all_equal(y, want)) << op_name(op) << " " << dtype_name(t);
    }
}

TEST_F(BinaryOps, ErrorsAreReportedNotCrashes) {
  for (DType t : {DType::I32, DType::I64, DType::U8, DType::I8}) {
    Tensor a = tensor_of({3}, {1, 2, 3}, t), z = tensor_of({3}, {1, 0, 1}, t);
    for (Op op : {Op::Div, Op::Mod, Op::Fmod}) EXPECT_THROW(run_op(op, {a, z}), Error);
    EXPECT_THROW(run_op(Op::Div, {a, z}, {{"rounding", std::string("floor")}}), Error);
  }
  Tensor f = random_tensor({2, 3}, DType::F32, 1), g = random_tensor({4}, DType::F32, 1);
  EXPECT_THROW(run_op(Op::Add, {f, g}), Error);                 // shapes do not broadcast
  EXPECT_THROW(run_op(Op::Add, {f, f.to(DType::F64)}), Error);  // dtype mismatch
  EXPECT_THROW(run_op(Op::Div, {f, f}, {{"rounding", std::string("ceil")}}), Error);
  Tensor i = tensor_of({3}, {1, 2, 3}, DType::I32);
  EXPECT_THROW(run_op(Op::Div, {i, i}, {{"rounding", std::string("x")}}), Error);
}

TEST_F(BinaryOps, ComparisonsAllDtypesWithBroadcasting) {
  const Op ops[] = {Op::Eq, Op::Ne, Op::Lt, Op::Le, Op::Gt, Op::Ge};
  const std::function<bool(double, double)> ref[] = {
      [](double a, double b) { return a == b; }, [](double a, double b) { return a != b; },
      [](double a, double b) { return a < b; },  [](double a, double b) { return a <= b; },
      [](double a, double b) { return a > b; },  [](double a, double b) { return a >= b; }};
  for (DType t : {DType::F32, DType::I32, DType::U8, DType::Bool, DType::F64, DType::I64, DType::I8,
                  DType::I16, DType::F16, DType::BF16})
    for (const Pair& p : kPairs)
      for (int k = 0; k < 6; ++k) {
        if (numel(p.a) > 1000 || numel(p.b) > 1000) continue;  // big shapes: covered above
        Tensor a = random_tensor(p.a, t, 5, 0, 3), b = random_tensor(p.b, t, 6, 0, 3);
        if (is_float(t)) {  // ties need equal values: round to integers
          a = a.to(DType::I32).to(t);
          b = b.to(DType::I32).to(t);
        }
        Tensor y = run_op(ops[k], {a, b});
        Tensor want =
            ref_map({a, b}, DType::Bool, [&](auto& v) { return double(ref[k](v[0], v[1])); });
        EXPECT_TRUE(all_equal(y, want)) << op_name(ops[k]) << " " << dtype_name(t) << " "
                                        << dims_str(p.a) << " x " << dims_str(p.b);
      }
  for (DType t : {DType::F32, DType::I32, DType::U8, DType::Bool}) {
    auto [a, b] = cmp_operands(t);
    const auto& want = goldens_->at("cmp_" + std::string(dtype_name(t)));
    for (int k = 0; k < 6; ++k) EXPECT_TRUE(all_equal(run_op(ops[k], {a, b}), want[size_t(k)]));
  }
}

}  // namespace
}  // namespace rlx
