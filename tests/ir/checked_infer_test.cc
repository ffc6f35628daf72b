// Shape inference on hostile attributes: every rule's arithmetic is checked,
// so a lying shape, repeat, pad or window is an rlx::Error naming the node,
// never a wrapped-around size; graph JSON nested too deep is refused.
#include <gtest/gtest.h>

#include <string>

#include "support/testing.h"

namespace rlx {
namespace {

using testing::error_of;
using testing::has;

// The error of adding one `op` node over an input of shape `in`.
std::string add_error(Op op, const Dims& in, const Attrs& a) {
  return error_of([&] {
    Graph g;
    NodeId x = g.input("x", Shape(in, DType::F32));
    g.add(op, {x}, a);
  });
}

TEST(CheckedInfer, ReshapeTargetsAreValidated) {
  using V = std::vector<int64_t>;
  std::string msg = add_error(Op::Reshape, {2, 3}, {{"shape", V{-2, -3}}});
  EXPECT_TRUE(has(msg, "negative dim -2")) << msg;
  EXPECT_TRUE(has(msg, "node %1 (reshape)")) << msg;
  // 2 * (2^63 - 3) wraps to 6 in 64-bit arithmetic: must not pass as 6 elements.
  msg = add_error(Op::Reshape, {2, 3}, {{"shape", V{2, INT64_MAX - 2}}});
  EXPECT_TRUE(has(msg, "more than 2^60 elements")) << msg;
  msg = add_error(Op::Reshape, {1}, {{"shape", V(100000, 1)}});
  EXPECT_TRUE(has(msg, "rank 100000")) << msg;
  msg = add_error(Op::Reshape, {2, 3}, {{"shape", V{-1, -1}}});
  EXPECT_TRUE(has(msg, "more than one -1")) << msg;
  EXPECT_TRUE(add_error(Op::Reshape, {2, 3}, {{"shape", V{-1, 2}}}).empty());
}

TEST(CheckedInfer, ResultShapesAreBounded) {
  using V = std::vector<int64_t>;
  // tile: 2^40 * 2^40 overflows int64 before any other check could see it.
  std::string msg = add_error(Op::Tile, {int64_t(1) << 40}, {{"repeats", V{int64_t(1) << 40}}});
  EXPECT_TRUE(has(msg, "tile")) << msg;
  EXPECT_TRUE(has(msg, "overflows")) << msg;
  msg = add_error(Op::Pad, {4}, {{"pads", V{INT64_MAX, 1}}});
  EXPECT_TRUE(has(msg, "overflows")) << msg;
  msg = add_error(Op::Expand, {1, 1}, {{"shape", V{-5, 1}}});
  EXPECT_TRUE(has(msg, "negative dim")) << msg;
  msg = error_of([] {
    Graph g;
    g.add(Op::Full, {}, {{"shape", V{int64_t(1) << 31, int64_t(1) << 31}}, {"value", 0.0}});
  });
  EXPECT_TRUE(has(msg, "full: shape [2147483648,2147483648] has more than 2^60 elements")) << msg;
}

TEST(CheckedInfer, WindowArithmeticDoesNotOverflow) {
  Graph g;
  NodeId x = g.input("x", Shape(Dims{1, 1, 8, 8}, DType::F32));
  NodeId w = g.input("w", Shape(Dims{1, 1, 3, 3}, DType::F32));
  using V = std::vector<int64_t>;
  std::string msg = error_of([&] { g.add(Op::Conv, {x, w}, {{"dilation", V{INT64_MAX / 2, 1}}}); });
  EXPECT_TRUE(has(msg, "node %2 (conv)")) << msg;
  msg = error_of([&] { g.add(Op::Conv, {x, w}, {{"pads", V{INT64_MAX, 0, INT64_MAX, 0}}}); });
  EXPECT_TRUE(has(msg, "too large")) << msg;
}

TEST(CheckedInfer, GatherFromAScalarIsAnError) {
  Graph g;
  NodeId x = g.input("x", Shape(Dims{}, DType::F32));
  NodeId i = g.input("i", Shape(Dims{}, DType::I64));
  std::string msg = error_of([&] { g.add(Op::Gather, {x, i}, {{"axis", int64_t(0)}}); });
  EXPECT_TRUE(has(msg, "gather: data must have rank >= 1")) << msg;
  EXPECT_FALSE(has(msg, "vector::")) << msg;
}

TEST(CheckedInfer, GraphJsonLimits) {
  // 10^6 nested arrays in an attribute: refused before parsing.
  std::string deep = R"({"format":"rlx-graph","version":2,"nodes":[{"op":"input","name":"x",
    "shape":[2],"dtype":"f32","attrs":{"a":)" +
                     std::string(1000000, '[') + std::string(1000000, ']') + "}}],\"outputs\":[]}";
  std::string msg = error_of([&] { from_json(deep, "model.rlx.json"); });
  EXPECT_TRUE(has(msg, "model.rlx.json: JSON nests deeper than 512 levels")) << msg;
  // An input of rank 65 fails the verifier.
  std::string dims = "[1";
  for (int k = 1; k < 65; ++k) dims += ",1";
  msg = error_of([&] {
    from_json(R"({"format":"rlx-graph","version":2,"nodes":[{"op":"input","name":"x","shape":)" +
                  dims + R"(],"dtype":"f32"}],"outputs":[]})",
              "model.rlx.json");
  });
  EXPECT_TRUE(has(msg, "rank 65")) << msg;
}

}  // namespace
}  // namespace rlx
