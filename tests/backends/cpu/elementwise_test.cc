// Logical ops, where, cast, full and arange: every dtype (these kernels see
// f16/bf16 directly), broadcasting corners, PyTorch goldens, error paths.
#include <cmath>

#include "backends/cpu/ew_ref.h"
#include "rlx/builder.h"
#include "support/torch_golden.h"

namespace rlx {
namespace {
using namespace rlx::testing;

// Values with zeros, negative zero and NaN (for floats) to probe truthiness.
Tensor truthy_input(const Dims& d, DType t, uint64_t seed) {
  Tensor x = random_tensor(d, DType::I32, seed, -1, 1).to(DType::F64);
  if (is_float(t) && x.numel() > 2) {
    x.data<double>()[0] = kNaN;
    x.data<double>()[1] = -0.0;
  }
  return x.to(t);
}

class ElementwiseMisc : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::vector<GoldenCase> g;
    for (DType t : {DType::F32, DType::I64, DType::Bool, DType::F16, DType::BF16}) {
      std::string n(dtype_name(t));
      g.push_back({"logic_" + n,
                   "a, b = x['a'], x['b']\ny = (torch.logical_and(a, b), torch.logical_or(a, b), "
                   "torch.logical_not(a))",
                   {{"a", truthy_input({3, 1}, t, 1)}, {"b", truthy_input({1, 4}, t, 2)}}});
      g.push_back({"where_" + n,
                   "y = torch.where(x['c'], x['a'], x['b'])",
                   {{"c", random_tensor({3, 1, 1}, DType::Bool, 3)},
                    {"a", random_tensor({1, 4}, t, 4, -5, 5)},
                    {"b", random_tensor({}, t, 5, -5, 5)}}});
    }
    for (DType t : {DType::I8, DType::I32, DType::U8, DType::Bool})
      g.push_back({"bnot_" + std::string(dtype_name(t)),
                   "y = torch.bitwise_not(x['a'])",
                   {{"a", random_tensor({20}, t, 6, t == DType::U8 ? 0 : -100, 100)}}});
    for (DType s : kAllDTypes)
      for (DType d : kAllDTypes)
        g.push_back({cast_key(s, d),
                     "y = x['a'].to(torch." + torch_name(d) + ")",
                     {{"a", cast_input(s, d)}}});
    g.push_back({"arange",
                 "y = (torch.arange(1, 3.5, 0.5), torch.arange(10, -3, -2), "
                 "torch.full((2, 3), 2.5))",
                 {}});
    goldens_ = new std::map<std::string, std::vector<Tensor>>(torch_goldens(g));
  }
  static std::string cast_key(DType s, DType d) {
    return "cast_" + std::string(dtype_name(s)) + "_" + std::string(dtype_name(d));
  }
  static std::string torch_name(DType t) {
    switch (t) {
      case DType::F32:
        return "float32";
      case DType::F16:
        return "float16";
      case DType::BF16:
        return "bfloat16";
      case DType::F64:
        return "float64";
      case DType::I8:
        return "int8";
      case DType::I16:
        return "int16";
      case DType::I32:
        return "int32";
      case DType::I64:
        return "int64";
      case DType::U8:
        return "uint8";
      case DType::Bool:
        return "bool";
    }
    return "";
  }
  // Values every destination represents without overflow (casts of
  // out-of-range floats to integers are undefined in PyTorch), with
  // fractions of both signs to check truncation toward zero.
  static Tensor cast_input(DType s, DType d) {
    std::vector<double> v = {0, 1, 2.75, 100, 126.5, 3, 0, 64.25, 7};
    if (s != DType::U8 && s != DType::Bool) v.insert(v.end(), {-1.5, -0.0, -0.75});
    if (s != DType::U8 && s != DType::Bool && d != DType::U8) v.insert(v.end(), {-100, -7.25});
    if (s == DType::Bool) v = {0, 1, 1, 0};
    return tensor_of({int64_t(v.size())}, v, s);
  }
  static std::map<std::string, std::vector<Tensor>>* goldens_;
};
std::map<std::string, std::vector<Tensor>>* ElementwiseMisc::goldens_ = nullptr;

TEST_F(ElementwiseMisc, LogicalOpsOnEveryDtypeWithBroadcasting) {
  const std::vector<std::pair<Dims, Dims>> shapes = {
      {{3, 1}, {1, 4}}, {{}, {2, 3}}, {{0, 3}, {3}}, {{5, 6}, {5, 6}}, {{200, 300}, {300}}};
  for (DType t : kAllDTypes)
    for (const auto& [da, db] : shapes) {
      Tensor a = truthy_input(da, t, 1), b = truthy_input(db, DType::F32, 2);  // mixed dtypes
      auto truth = [](double v) { return std::isnan(v) || v != 0; };
      Tensor want_and =
          ref_map({a, b}, DType::Bool, [&](auto& v) { return double(truth(v[0]) && truth(v[1])); });
      Tensor want_or =
          ref_map({a, b}, DType::Bool, [&](auto& v) { return double(truth(v[0]) || truth(v[1])); });
      Tensor want_not = ref_map({a}, DType::Bool, [&](auto& v) { return double(!truth(v[0])); });
      EXPECT_TRUE(all_equal(run_op(Op::LogicalAnd, {a, b}), want_and)) << dtype_name(t);
      EXPECT_TRUE(all_equal(run_op(Op::LogicalOr, {a, b}), want_or)) << dtype_name(t);
      EXPECT_TRUE(all_equal(run_op(Op::LogicalNot, {a}), want_not)) << dtype_name(t);
    }
  for (DType t : {DType::F32, DType::I64, DType::Bool, DType::F16, DType::BF16}) {
    Tensor a = truthy_input({3, 1}, t, 1), b = truthy_input({1, 4}, t, 2);
    const auto& want = goldens_->at("logic_" + std::string(dtype_name(t)));
    EXPECT_TRUE(all_equal(run_op(Op::LogicalAnd, {a, b}), want[0]));
    EXPECT_TRUE(all_equal(run_op(Op::LogicalOr, {a, b}), want[1]));
    EXPECT_TRUE(all_equal(run_op(Op::LogicalNot, {a}), want[2]));
  }
}

TEST_F(ElementwiseMisc, BitwiseNot) {
  for (DType t : {DType::I8, DType::I32, DType::U8, DType::Bool}) {
    Tensor a = random_tensor({20}, t, 6, t == DType::U8 ? 0 : -100, 100);
    Tensor y = run_op(Op::BitwiseNot, {a});
    EXPECT_TRUE(all_equal(y, goldens_->at("bnot_" + std::string(dtype_name(t)))[0]));
  }
  Tensor i = tensor_of({3}, {0, -1, 5}, DType::I64);
  EXPECT_TRUE(all_equal(run_op(Op::BitwiseNot, {i}), tensor_of({3}, {-1, 0, -6}, DType::I64)));
  for (DType t : {DType::F32, DType::F16, DType::F64})
    EXPECT_THROW(run_op(Op::BitwiseNot, {random_tensor({3}, t, 1)}), Error);
}

TEST_F(ElementwiseMisc, WhereAnyDtypeThreeWayBroadcast) {
  struct S {
    Dims c, a, b;
  };
  const std::vector<S> shapes = {{{3, 1, 1}, {1, 4}, {}},
                                 {{}, {2, 3}, {2, 3}},
                                 {{0, 1}, {1, 5}, {5}},
                                 {{4, 5}, {4, 5}, {4, 5}},
                                 {{1, 300}, {200, 1}, {300}}};
  for (DType t : kAllDTypes)
    for (const S& s : shapes) {
      Tensor c = random_tensor(s.c, DType::Bool, 3), a = random_tensor(s.a, t, 4, -5, 5),
             b = random_tensor(s.b, t, 5, -5, 5);
      Tensor y = run_op(Op::Where, {c, a, b});
      EXPECT_EQ(y.dtype(), t);
      Tensor want = ref_map({c, a, b}, t, [](auto& v) { return v[0] != 0 ? v[1] : v[2]; });
      EXPECT_TRUE(all_equal(y, want)) << dtype_name(t) << " " << dims_str(s.c);
    }
  for (DType t : {DType::F32, DType::I64, DType::Bool, DType::F16, DType::BF16}) {
    Tensor c = random_tensor({3, 1, 1}, DType::Bool, 3), a = random_tensor({1, 4}, t, 4, -5, 5),
           b = random_tensor({}, t, 5, -5, 5);
    EXPECT_TRUE(all_equal(run_op(Op::Where, {c, a, b}),
                          goldens_->at("where_" + std::string(dtype_name(t)))[0]));
  }
  Tensor f = random_tensor({3}, DType::F32, 1);
  EXPECT_THROW(run_op(Op::Where, {f, f, f}), Error);  // condition must be bool
  Tensor c = random_tensor({3}, DType::Bool, 1);
  EXPECT_THROW(run_op(Op::Where, {c, f, f.to(DType::I32)}), Error);
  EXPECT_THROW(run_op(Op::Where, {c, f, random_tensor({4}, DType::F32, 1)}), Error);
}

TEST_F(ElementwiseMisc, CastBetweenAllDtypesMatchesTorch) {
  for (DType s : kAllDTypes)
    for (DType d : kAllDTypes) {
      Tensor x = cast_input(s, d);
      Tensor y = run_op(Op::Cast, {x}, {{"dtype", std::string(dtype_name(d))}});
      EXPECT_EQ(y.dtype(), d);
      EXPECT_TRUE(all_equal(y, goldens_->at(cast_key(s, d))[0]))
          << dtype_name(s) << " -> " << dtype_name(d);
    }
}

TEST_F(ElementwiseMisc, CastLargeTensorsAcrossThreads) {
  Tensor x = random_tensor({3, 70001}, DType::F32, 9, -300, 300);
  for (DType d : {DType::F16, DType::BF16, DType::I32, DType::F64, DType::F32, DType::Bool}) {
    Tensor y = run_op(Op::Cast, {x}, {{"dtype", std::string(dtype_name(d))}});
    Tensor want =
        ref_map({x}, d, [&](auto& v) { return d == DType::I32 ? std::trunc(v[0]) : v[0]; });
    EXPECT_TRUE(all_equal(y, want)) << dtype_name(d);
  }
  Tensor e = random_tensor({0, 4}, DType::F32, 1);
  EXPECT_EQ(run_op(Op::Cast, {e}, {{"dtype", std::string("i8")}}).dims(), (Dims{0, 4}));
  EXPECT_THROW(run_op(Op::Cast, {x}, {{"dtype", std::string("q4")}}), Error);
}

Tensor run_leaf(const std::function<NodeId(Builder&)>& make) {
  Graph g;
  Builder b(g);
  g.add_output("y", make(b));
  return run_graph(g, {}, {}, 0).at("y");
}

TEST_F(ElementwiseMisc, FullEveryDtype) {
  for (DType t : kAllDTypes) {
    Tensor y = run_leaf([&](Builder& b) { return b.full({2, 3}, -2.5, t); });
    // -2.5 converted like Tensor::to: integers truncate, u8 wraps, bool is true.
    Tensor want = tensor_of({2, 3}, std::vector<double>(6, -2.5), DType::F64).to(t);
    EXPECT_TRUE(all_equal(y, want)) << dtype_name(t);
  }
  EXPECT_TRUE(all_equal(run_leaf([](Builder& b) {
                          return b.full({2, 3}, 2.5);
                        }),
                        goldens_->at("arange")[2]));
  EXPECT_EQ(run_leaf([](Builder& b) { return b.full({0, 7}, 1.0); }).numel(), 0);
  Tensor big = run_leaf([](Builder& b) { return b.full({100003}, 7.0, DType::I16); });
  for (int64_t i = 0; i < big.numel(); ++i) ASSERT_EQ(big.data<int16_t>()[i], 7);
  Tensor s = run_leaf([](Builder& b) { return b.full({}, 3.0, DType::F64); });
  EXPECT_EQ(s.dims(), Dims{});
  EXPECT_EQ(s.data<double>()[0], 3.0);
}

TEST_F(ElementwiseMisc, ArangeComputesStartPlusIStep) {
  const auto& g = goldens_->at("arange");
  EXPECT_TRUE(
      all_equal(run_leaf([](Builder& b) { return b.arange(5, 1, 0.5, DType::F32); }), g[0]));
  EXPECT_TRUE(all_equal(run_leaf([](Builder& b) { return b.arange(7, 10, -2); }), g[1]));
  // Float values truncate toward zero in integer dtypes: -1.5 + 0.5 i.
  EXPECT_TRUE(all_equal(run_leaf([](Builder& b) { return b.arange(6, -1.5, 0.5, DType::I32); }),
                        tensor_of({6}, {-1, -1, 0, 0, 0, 1}, DType::I32)));
  EXPECT_EQ(run_leaf([](Builder& b) { return b.arange(0); }).numel(), 0);
  // A long f32 range equals start + i*step rounded once (no accumulated drift).
  Tensor y = run_leaf([](Builder& b) { return b.arange(200001, -3, 0.1, DType::F32); });
  for (int64_t i = 0; i < y.numel(); ++i)
    ASSERT_EQ(y.data<float>()[i], float(-3.0 + double(i) * 0.1)) << i;
  for (DType t : {DType::F16, DType::BF16, DType::U8, DType::F64}) {
    Tensor a = run_leaf([&](Builder& b) { return b.arange(9, 2, 3, t); });
    EXPECT_TRUE(all_equal(a, tensor_of({9}, {2, 5, 8, 11, 14, 17, 20, 23, 26}, t)))
        << dtype_name(t);
  }
  Graph bad;
  EXPECT_THROW(Builder(bad).arange(-1), Error);
}

}  // namespace
}  // namespace rlx
