// Checked shape arithmetic (rlx/checked.h) and the JSON nesting limit: the
// helpers every reader and shape rule relies on.
#include <gtest/gtest.h>

#include <string>

#include "core/json_depth.h"
#include "rlx/checked.h"
#include "rlx/tensor.h"
#include "support/testing.h"

namespace rlx {
namespace {

using testing::error_of;
using testing::has;

TEST(Checked, ProductsOverflowIntoErrors) {
  EXPECT_EQ(checked_mul(int64_t(1) << 31, int64_t(1) << 31, "x"), int64_t(1) << 62);
  EXPECT_THROW(checked_mul(int64_t(1) << 32, int64_t(1) << 31, "x"), Error);
  EXPECT_THROW(checked_mul(INT64_MIN, -1, "x"), Error);
  EXPECT_THROW(checked_add(INT64_MAX, 1, "x"), Error);
  EXPECT_EQ(checked_add(INT64_MAX, -1, "x"), INT64_MAX - 1);
  EXPECT_TRUE(has(error_of([] { checked_mul(INT64_MAX, 2, "tile"); }), "tile: "));
}

TEST(Checked, DimsAreNonNegativeBoundedAndOfBoundedRank) {
  EXPECT_EQ(checked_numel({2, 3, 4}, "s"), 24);
  EXPECT_EQ(checked_numel({}, "s"), 1);
  EXPECT_EQ(checked_numel({0, int64_t(1) << 40}, "s"), 0);
  EXPECT_EQ(checked_nbytes({3, 5}, DType::F64, "s"), size_t(120));
  EXPECT_TRUE(has(error_of([] {
                    check_dims({2, -3}, "w");
                  }),
                  "w: shape [2,-3] has a negative dim"));
  // [2, 2^63 + 3] read as int64 wraps to negative; [2, 2^62 + 3] overflows.
  EXPECT_TRUE(has(error_of([] {
                    check_dims({2, (int64_t(1) << 62) + 3}, "w");
                  }),
                  "more than 2^60 elements"));
  // Zeros do not excuse the other dims: their product still bounds strides.
  EXPECT_THROW(check_dims({0, int64_t(1) << 40, int64_t(1) << 40}, "w"), Error);
  std::string msg = error_of([] { check_dims(Dims(65, 1), "w"); });
  EXPECT_TRUE(has(msg, "has rank 65 (the most rlx supports is 64)")) << msg;
  EXPECT_TRUE(has(msg, "[1,1,1,1,1,1,1,1,... (65 dims)]")) << msg;  // not all 65 listed
  EXPECT_NO_THROW(check_dims(Dims(64, 1), "w"));
  // rlx::numel itself is checked: a negative or overflowing count never
  // reaches an allocation.
  EXPECT_THROW(numel({-2, -3}), Error);
  EXPECT_THROW(numel({int64_t(1) << 32, int64_t(1) << 32}), Error);
}

TEST(Checked, TensorsOfHugeOrNegativeShapesAreErrorsBeforeAllocating) {
  EXPECT_THROW(Tensor({int64_t(1) << 40, int64_t(1) << 40}, DType::F32), Error);
  EXPECT_THROW(Tensor({2, (int64_t(1) << 62) + 3}, DType::F32), Error);
  EXPECT_THROW(Tensor::uninitialized({-1}, DType::F32), Error);
  auto buf = make_aligned_buffer(64);
  EXPECT_THROW(Tensor(buf, 0, {int64_t(1) << 61, 8}, DType::F32), Error);
  EXPECT_THROW(Tensor(buf, 65, {1}, DType::U8), Error);
  EXPECT_THROW(Tensor({6}, DType::F32).reshape({-2, -3}), Error);
}

TEST(Checked, ReshapeTargets) {
  EXPECT_EQ(resolve_reshape({-1, 3}, 6, "r"), (Dims{2, 3}));
  EXPECT_EQ(resolve_reshape({2, 0}, 0, "r"), (Dims{2, 0}));
  EXPECT_EQ(resolve_reshape({}, 1, "r"), (Dims{}));
  EXPECT_TRUE(has(error_of([] { resolve_reshape({-2, -3}, 6, "r"); }), "negative dim -2"));
  EXPECT_TRUE(has(error_of([] { resolve_reshape({-1, -1}, 6, "r"); }), "more than one -1"));
  EXPECT_TRUE(has(error_of([] {
                    resolve_reshape({2, (int64_t(1) << 62) + 3}, 6, "r");
                  }),
                  "more than 2^60 elements"));
  EXPECT_TRUE(has(error_of([] { resolve_reshape({4, 2}, 6, "r"); }), "cannot reshape 6 elements"));
  EXPECT_THROW(resolve_reshape({-1, 0}, 0, "r"), Error);  // -1 could be anything
  EXPECT_TRUE(has(error_of([] { resolve_reshape(Dims(1000000, 1), 1, "r"); }), "rank 1000000"));
}

TEST(JsonDepth, DeepNestingIsAnErrorNamingTheSource) {
  std::string deep(1000000, '[');
  std::string msg = error_of([&] { check_json_depth(deep, "m.json"); });
  EXPECT_TRUE(has(msg, "m.json: JSON nests deeper than 512 levels")) << msg;
  std::string ok = std::string(512, '[') + std::string(512, ']');
  EXPECT_NO_THROW(check_json_depth(ok, "m.json"));
  EXPECT_THROW(check_json_depth("{\"a\": " + ok + "}", "m.json"), Error);
  // Brackets in strings, escaped quotes included, do not count.
  std::string in_string = "[\"" + std::string(600, '[') + "\\\"" + std::string(600, '{') + "\"]";
  EXPECT_NO_THROW(check_json_depth(in_string, "m.json"));
  EXPECT_THROW(check_json_depth("[[[", "m.json", 2), Error);
}

}  // namespace
}  // namespace rlx
