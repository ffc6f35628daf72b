// nonzero, unique and non_max_suppression: the kernels against scalar references written here
// (unique against a std::map of the slices), through the runtime path that binds their count.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <optional>

#include "runtime/plan.h"
#include "support/testing.h"

namespace rlx {
namespace {

using testing::all_equal;
using testing::f32;
using testing::ints;
using testing::random_tensor;
using testing::run_op;
using testing::run_op_outputs;

// The row-major indices of x's nonzero elements, as [count, rank].
Tensor nonzero_ref(const Tensor& x) {
  std::vector<int64_t> rows;
  int64_t count = 0;
  const Dims& d = x.dims();
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (x.item_as_double(i) == 0) continue;
    int64_t rest = i;
    std::vector<int64_t> at(d.size());
    for (size_t k = d.size(); k-- > 0;) {
      at[k] = rest % d[k];
      rest /= d[k];
    }
    rows.insert(rows.end(), at.begin(), at.end());
    ++count;
  }
  return ints({count, int64_t(d.size())}, rows);
}

TEST(NonZero, MatchesReferenceOnEveryDtypeAndRank) {
  for (DType t : {DType::F32, DType::F64, DType::I32, DType::I64, DType::Bool, DType::U8,
                  DType::F16, DType::BF16})
    for (const Dims& d : {Dims{}, Dims{7}, Dims{5, 6}, Dims{3, 4, 5}, Dims{4, 0}}) {
      // About half zeros: integers in [-1, 1], floats rounded from [-1.5, 1.5].
      Tensor x = random_tensor(d, is_float(t) ? DType::F32 : t, 11 + uint64_t(d.size()), -1, 1);
      if (is_float(t)) {
        for (int64_t i = 0; i < x.numel(); ++i)
          x.data<float>()[i] = std::round(x.data<float>()[i] * 1.5f);
        x = x.to(t);
      }
      const Tensor got = run_op(Op::NonZero, {x}, {{"count", std::string("n")}});
      EXPECT_TRUE(all_equal(got, nonzero_ref(x))) << dtype_name(t) << " " << dims_str(d);
    }
}

TEST(NonZero, NegativeZeroAndNaN) {
  // -0 is zero, NaN is not (PyTorch's rule); f16's -0 is the sign bit alone.
  const Tensor x = f32({4}, {-0.0f, NAN, 0.0f, 1e-40f});
  EXPECT_TRUE(
      all_equal(run_op(Op::NonZero, {x}, {{"count", std::string("n")}}), ints({2, 1}, {1, 3})));
  EXPECT_TRUE(all_equal(run_op(Op::NonZero, {x.to(DType::F16)}, {{"count", std::string("n")}}),
                        ints({1, 1}, {1})));  // 1e-40 is 0 in f16
}

// unique by a std::map over the slices: (values, first, inverse, counts).
struct UniqueRef {
  std::vector<std::vector<double>> values;
  std::vector<int64_t> first, inverse, counts;
};
UniqueRef unique_ref(const Tensor& x, std::optional<int> axis, bool sorted, bool consecutive) {
  const Dims& d = x.dims();
  const int ax = axis ? *axis : 0;
  const int64_t n = axis ? d[size_t(ax)] : x.numel();
  int64_t outer = 1, inner = 1;
  if (axis) {
    for (int k = 0; k < ax; ++k) outer *= d[size_t(k)];
    for (size_t k = size_t(ax) + 1; k < d.size(); ++k) inner *= d[k];
  }
  std::vector<std::vector<double>> slices(static_cast<size_t>(n));
  for (int64_t s = 0; s < n; ++s)
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i)
        slices[size_t(s)].push_back(x.item_as_double((o * n + s) * inner + i));
  UniqueRef r;
  if (consecutive) {
    for (int64_t s = 0; s < n; ++s) {
      if (s == 0 || slices[size_t(s)] != slices[size_t(s - 1)]) {
        r.values.push_back(slices[size_t(s)]);
        r.first.push_back(s);
        r.counts.push_back(0);
      }
      r.inverse.push_back(int64_t(r.values.size()) - 1);
      ++r.counts.back();
    }
    return r;
  }
  std::map<std::vector<double>, int64_t> first_of;  // lexicographic: the sorted order
  for (int64_t s = n; s-- > 0;) first_of[slices[size_t(s)]] = s;
  std::vector<std::pair<int64_t, std::vector<double>>> order;  // (first, slice)
  for (const auto& [v, f] : first_of) order.push_back({f, v});
  if (!sorted) std::sort(order.begin(), order.end());
  std::map<std::vector<double>, int64_t> place;
  for (const auto& [f, v] : order) {
    place[v] = int64_t(r.values.size());
    r.values.push_back(v);
    r.first.push_back(f);
    r.counts.push_back(0);
  }
  for (int64_t s = 0; s < n; ++s) {
    r.inverse.push_back(place[slices[size_t(s)]]);
    ++r.counts[size_t(r.inverse.back())];
  }
  return r;
}

void check_unique(const Tensor& x, std::optional<int> axis, bool sorted, bool consecutive) {
  Attrs a{{"sorted", sorted}, {"consecutive", consecutive}, {"count", std::string("u")}};
  if (axis) a.set("axis", int64_t(*axis));
  const auto got = run_op_outputs(Op::Unique, {x}, a);
  const UniqueRef want = unique_ref(x, axis, sorted, consecutive);
  const std::string what = dims_str(x.dims()) + " axis " + (axis ? std::to_string(*axis) : "-") +
                           (sorted ? " sorted" : "") + (consecutive ? " consecutive" : "");
  const int64_t count = int64_t(want.values.size());
  ASSERT_EQ(got.size(), 4u);
  EXPECT_TRUE(all_equal(got[1], ints({count}, want.first))) << what;
  EXPECT_TRUE(all_equal(got[2], ints({int64_t(want.inverse.size())}, want.inverse))) << what;
  EXPECT_TRUE(all_equal(got[3], ints({count}, want.counts))) << what;
  // values: slice u of the axis is want.values[u]
  Dims vd = axis ? x.dims() : Dims{count};
  if (axis) vd[size_t(*axis)] = count;
  ASSERT_EQ(got[0].dims(), vd) << what;
  EXPECT_EQ(got[0].dtype(), x.dtype());
  int64_t outer = 1, inner = 1;
  if (axis) {
    for (int k = 0; k < *axis; ++k) outer *= vd[size_t(k)];
    for (size_t k = size_t(*axis) + 1; k < vd.size(); ++k) inner *= vd[k];
  }
  for (int64_t u = 0; u < count; ++u)
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i)
        ASSERT_EQ(got[0].item_as_double((o * count + u) * inner + i),
                  want.values[size_t(u)][size_t(o * inner + i)])
            << what << " value " << u;
}

TEST(Unique, FlattenedAndAlongAxesMatchReference) {
  // Few distinct values, so groups are large.
  for (bool consecutive : {false, true})
    for (bool sorted : {true, false}) {
      check_unique(random_tensor({40}, DType::I64, 3, 0, 4), std::nullopt, sorted, consecutive);
      check_unique(random_tensor({6, 7}, DType::I32, 4, -2, 2), std::nullopt, sorted, consecutive);
      // rows of a 2-d tensor: slices repeat because the values are 0/1
      check_unique(random_tensor({12, 3}, DType::I64, 5, 0, 1), 0, sorted, consecutive);
      check_unique(random_tensor({3, 12}, DType::I64, 6, 0, 1), 1, sorted, consecutive);
      check_unique(random_tensor({2, 9, 2}, DType::Bool, 7), 1, sorted, consecutive);
      Tensor f = random_tensor({30}, DType::I64, 8, -3, 3).to(DType::F32);
      check_unique(f, std::nullopt, sorted, consecutive);
      check_unique(f.to(DType::F16), std::nullopt, sorted, consecutive);
      check_unique(Tensor({0}, DType::F32), std::nullopt, sorted, consecutive);
    }
}

TEST(Unique, NaNsAreOneValueAfterTheNumbers) {
  const auto got =
      run_op_outputs(Op::Unique, {f32({5}, {2, NAN, 1, NAN, 2})}, {{"count", std::string("u")}});
  ASSERT_EQ(got[0].numel(), 3);
  EXPECT_EQ(got[0].item_as_double(0), 1);
  EXPECT_EQ(got[0].item_as_double(1), 2);
  EXPECT_TRUE(std::isnan(got[0].item_as_double(2)));
  EXPECT_TRUE(all_equal(got[3], ints({3}, {1, 2, 2})));
}

// ONNX's NonMaxSuppression cases, computed by hand.
Tensor nms(const Tensor& boxes, const Tensor& scores, int64_t max_per_class, double iou,
           std::optional<double> score = std::nullopt, bool center = false) {
  Attrs a{{"max_per_class", max_per_class},
          {"iou_threshold", iou},
          {"center_point_box", center},
          {"count", std::string("k")}};
  if (score) a.set("score_threshold", *score);
  return run_op(Op::NonMaxSuppression, {boxes, scores}, a);
}

TEST(NonMaxSuppression, SelectsByScoreAndSuppressesOverlaps) {
  // Boxes 0-2 overlap heavily (IoU 0.82 between neighbours), 3-5 are apart from them.
  const Tensor boxes = f32({1, 6, 4}, {0, 0,  1, 1,  0, 0.1f,  1, 1.1f,  0, -0.1f, 1, 0.9f,
                                       0, 10, 1, 11, 0, 10.1f, 1, 11.1f, 0, 100,   1, 101});
  const Tensor scores = f32({1, 1, 6}, {0.9f, 0.75f, 0.6f, 0.95f, 0.5f, 0.3f});
  EXPECT_TRUE(all_equal(nms(boxes, scores, 3, 0.5), ints({3, 3}, {0, 0, 3, 0, 0, 0, 0, 0, 5})));
  EXPECT_TRUE(all_equal(nms(boxes, scores, 2, 0.5), ints({2, 3}, {0, 0, 3, 0, 0, 0})));
  EXPECT_TRUE(
      all_equal(nms(boxes, scores, 3, 0.5, 0.4), ints({2, 3}, {0, 0, 3, 0, 0, 0})));  // not 5
  EXPECT_EQ(nms(boxes, scores, 0, 0.5).numel(), 0);
  // The same boxes as centres and sizes, corners flipped: the same selection.
  std::vector<float> centred, flipped;
  for (int i = 0; i < 6; ++i) {
    const float* b = boxes.data<float>() + 4 * i;
    centred.insert(centred.end(), {(b[1] + b[3]) / 2, (b[0] + b[2]) / 2, b[3] - b[1], b[2] - b[0]});
    flipped.insert(flipped.end(), {b[2], b[3], b[0], b[1]});
  }
  EXPECT_TRUE(all_equal(nms(f32({1, 6, 4}, centred), scores, 3, 0.5, std::nullopt, true),
                        ints({3, 3}, {0, 0, 3, 0, 0, 0, 0, 0, 5})));
  EXPECT_TRUE(all_equal(nms(f32({1, 6, 4}, flipped), scores, 3, 0.5),
                        ints({3, 3}, {0, 0, 3, 0, 0, 0, 0, 0, 5})));
}

// A graph that reads values from before and after a data-dependent node, with the runtime
// planning again once it has run.
TEST(DataDependentRuntime, NodesAfterTheCountArePlannedForIt) {
  Graph g;
  Builder b(g);
  const NodeId x = b.input("x", Shape({Dim::symbol("n")}, DType::F32));
  const NodeId y = b.relu(b.add(x, x));  // computed before, read after the count
  const NodeId mask = b.binary(Op::Gt, x, b.scalar(0));
  const NodeId at = b.reshape(b.op(Op::NonZero, {mask}, {{"count", std::string("k")}}), {-1});
  const NodeId picked = b.op(Op::Gather, {y, at}, {{"axis", int64_t(0)}});
  const NodeId sum = b.reduce(Op::ReduceSum, b.mul(picked, picked), {0});
  g.add_output("picked", picked);
  g.add_output("sum", sum);
  g.add_output("y", y);
  EXPECT_EQ(g.node(picked).shape.str(), "[k] f32");
  auto exe = Executable::compile(g, {});
  Session s(exe);
  for (uint64_t seed : {1, 2, 3, 4, 1}) {
    const Tensor xv = random_tensor({int64_t(20 + seed * 7)}, DType::F32, seed);
    const TensorMap out = s.run({{"x", xv}});
    std::vector<float> want;
    double sq = 0;
    for (float v : xv.to_f32_vector())
      if (v > 0) {
        want.push_back(2 * v);
        sq += 4.0 * v * v;
      }
    EXPECT_TRUE(all_equal(out.at("picked"), f32({int64_t(want.size())}, want)));
    EXPECT_NEAR(out.at("sum").item_as_double(0), sq, 1e-4);
  }
  // Without running, the plan cannot know the count.
  EXPECT_NE(testing::error_of([&] {
              runtime::specialize(exe->graph(), {{"x", {5}}});
            }).find("depends on the input values"),
            std::string::npos);
  std::vector<bool> pending;
  runtime::specialize(exe->graph(), {{"x", {5}}}, {}, &pending);
  EXPECT_TRUE(pending[size_t(exe->graph().outputs()[0].node)]);
  EXPECT_FALSE(pending[size_t(exe->graph().outputs()[2].node)]);
}

// Two counts in a chain: three plans per run, each stage in its own arena, and a value from the
// first stage read in the last.
TEST(DataDependentRuntime, ChainedCountsEachPlanTheRest) {
  Graph g;
  Builder b(g);
  const NodeId x = b.input("x", Shape(Dims{64}, DType::F32));
  const NodeId scaled = b.mul(x, b.scalar(3));  // read at the very end
  auto select = [&](NodeId v, NodeId from, const char* count) {
    const NodeId mask = b.binary(Op::Gt, v, b.scalar(0.25f));
    const NodeId at = b.reshape(b.op(Op::NonZero, {mask}, {{"count", std::string(count)}}), {-1});
    return b.op(Op::Gather, {from, at}, {{"axis", int64_t(0)}});
  };
  const NodeId first = select(x, x, "k1");                         // x where x > 0.25
  const NodeId second = select(b.mul(first, first), first, "k2");  // of those, where x^2 > 0.25
  const NodeId total = b.reduce(Op::ReduceSum, scaled, {0});
  g.add_output("second", b.add(second, total));
  Session s(Executable::compile(g, {}));
  for (uint64_t seed : {5, 6, 7}) {
    const Tensor xv = random_tensor({64}, DType::F32, seed);
    double sum = 0;
    for (float v : xv.to_f32_vector()) sum += 3.0 * v;
    std::vector<float> want;
    for (float v : xv.to_f32_vector())
      if (v > 0.25f && v * v > 0.25f) want.push_back(v + float(sum));
    const Tensor got = s.run({{"x", xv}}).at("second");
    ASSERT_EQ(got.dims(), (Dims{int64_t(want.size())}));
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_NEAR(got.item_as_double(int64_t(i)), want[i], 1e-4) << i;
  }
}

// Two nodes may not share a count: the second would be planned for the first one's.
TEST(DataDependentRuntime, ACountNamesOneNode) {
  Graph g;
  Builder b(g);
  const NodeId x = b.input("x", Shape(Dims{8}, DType::F32));
  const NodeId a = b.op(Op::NonZero, {x}, {{"count", std::string("k")}});
  const NodeId c = b.op(Op::NonZero, {b.mul(x, x)}, {{"count", std::string("k")}});
  g.add_output("a", a);
  g.add_output("c", c);
  EXPECT_NE(testing::error_of([&] { g.verify(); }).find("names another node's"), std::string::npos);
}

}  // namespace
}  // namespace rlx
