// Movement ops: bad attributes give rlx::Error (from shape inference or the
// kernel), never a crash; plus shape-inference corner cases fixed on the way.
#include <gtest/gtest.h>

#include <limits>

#include "support/testing.h"

namespace rlx {
namespace {

using testing::all_equal;
using testing::random_tensor;
using testing::run_op;

using V = std::vector<int64_t>;

TEST(CpuMovementErrors, Transpose) {
  Tensor x = random_tensor({2, 3, 4}, DType::F32, 1);
  EXPECT_THROW(run_op(Op::Transpose, {x}, Attrs{{"perm", V{1, 0}}}), Error);        // too short
  EXPECT_THROW(run_op(Op::Transpose, {x}, Attrs{{"perm", V{0, 1, 2, 3}}}), Error);  // too long
  EXPECT_THROW(run_op(Op::Transpose, {x}, Attrs{{"perm", V{0, 1, 1}}}), Error);     // repeated
  EXPECT_THROW(run_op(Op::Transpose, {x}, Attrs{{"perm", V{0, 2, -1}}}), Error);    // -1 == 2
  EXPECT_THROW(run_op(Op::Transpose, {x}, Attrs{{"perm", V{0, 1, 3}}}), Error);     // range
  EXPECT_THROW(run_op(Op::Transpose, {x}, Attrs{}), Error);                         // missing
}

TEST(CpuMovementErrors, SliceConcatReshape) {
  Tensor x = random_tensor({4, 5}, DType::F32, 2);
  EXPECT_THROW(run_op(Op::Slice, {x}, Attrs{{"axis", int64_t(0)}, {"step", int64_t(0)}}), Error);
  EXPECT_THROW(run_op(Op::Slice, {x}, Attrs{{"axis", int64_t(2)}}), Error);
  EXPECT_THROW(run_op(Op::Slice, {Tensor::scalar_f32(1)}, Attrs{{"axis", int64_t(0)}}), Error);
  EXPECT_THROW(run_op(Op::Slice, {x},
                      Attrs{{"axis", int64_t(0)}, {"step", std::numeric_limits<int64_t>::min()}}),
               Error);
  Tensor y = random_tensor({4, 6}, DType::F32, 3);
  EXPECT_THROW(run_op(Op::Concat, {x, y}, Attrs{{"axis", int64_t(0)}}), Error);  // dim 1 differs
  EXPECT_THROW(
      run_op(Op::Concat, {x, random_tensor({4}, DType::F32, 4)}, Attrs{{"axis", int64_t(0)}}),
      Error);
  EXPECT_THROW(run_op(Op::Concat, {x, x.to(DType::F64)}, Attrs{{"axis", int64_t(0)}}), Error);
  EXPECT_THROW(run_op(Op::Concat, {x, x}, Attrs{{"axis", int64_t(-3)}}), Error);
  EXPECT_THROW(run_op(Op::Concat, {Tensor::scalar_f32(1), Tensor::scalar_f32(2)},
                      Attrs{{"axis", int64_t(0)}}),
               Error);
  EXPECT_THROW(run_op(Op::Reshape, {x}, Attrs{{"shape", V{3, 7}}}), Error);
  EXPECT_THROW(run_op(Op::Reshape, {x}, Attrs{{"shape", V{-1, -1}}}), Error);
  EXPECT_THROW(run_op(Op::Reshape, {x}, Attrs{{"shape", V{3, -1}}}), Error);
}

TEST(CpuMovementErrors, ExpandTileFlip) {
  Tensor x = random_tensor({3, 2}, DType::F32, 5);
  EXPECT_THROW(run_op(Op::Expand, {x}, Attrs{{"shape", V{3, 4}}}), Error);
  EXPECT_THROW(run_op(Op::Expand, {x}, Attrs{{"shape", V{2}}}), Error);
  EXPECT_THROW(run_op(Op::Expand, {x}, Attrs{{"shape", V{-1, 3, 2}}}), Error);
  EXPECT_THROW(run_op(Op::Tile, {x}, Attrs{{"repeats", V{2}}}), Error);
  EXPECT_THROW(run_op(Op::Tile, {x}, Attrs{{"repeats", V{2, -1}}}), Error);
  EXPECT_THROW(run_op(Op::Flip, {x}, Attrs{{"axes", V{0, -2}}}), Error);  // repeated
  EXPECT_THROW(run_op(Op::Flip, {x}, Attrs{{"axes", V{2}}}), Error);
}

TEST(CpuMovementErrors, Pad) {
  Tensor x = random_tensor({3, 4}, DType::F32, 6);
  auto pad = [&](const Tensor& t, V pads, std::string mode) {
    return run_op(Op::Pad, {t}, Attrs{{"pads", pads}, {"mode", mode}});
  };
  EXPECT_THROW(pad(x, {1, 1}, "constant"), Error);          // wrong count
  EXPECT_THROW(pad(x, {0, 0, 0, 0}, "wrap"), Error);        // unknown mode
  EXPECT_THROW(pad(x, {0, 4, 0, 0}, "reflect"), Error);     // pad == dim
  EXPECT_THROW(pad(x, {0, 0, 3, 0}, "reflect"), Error);     // end pad == dim
  EXPECT_THROW(pad(x, {0, 0, 0, 9}, "reflect"), Error);     // far too large
  EXPECT_THROW(pad(x, {-2, 0, -2, 0}, "constant"), Error);  // negative size
  EXPECT_THROW(pad(Tensor({0, 2}, DType::F32), {1, 0, 0, 0}, "replicate"), Error);
  EXPECT_THROW(pad(random_tensor({1}, DType::F32, 7), {1, 0}, "reflect"), Error);
  // Largest legal reflect pad (dim - 1) on both sides works.
  Tensor r = pad(x, {2, 3, 2, 3}, "reflect");
  EXPECT_EQ(r.dims(), (Dims{7, 10}));
}

TEST(ShapeInferFixes, ReduceOverScalarAxisAndHugeSliceSteps) {
  // A scalar's axis 0 / -1 (valid in PyTorch) was rejected or indexed past
  // an empty mask in inference.
  Tensor s = Tensor::scalar_f32(4.0f);
  EXPECT_EQ(run_op(Op::ReduceSum, {s}, Attrs{{"axes", V{0}}}).item_as_double(0), 4.0);
  EXPECT_EQ(run_op(Op::ReduceMax, {s}, Attrs{{"axes", V{-1}}, {"keepdims", int64_t(1)}}).rank(), 0);
  EXPECT_EQ(run_op(Op::ArgMax, {s}, Attrs{{"axis", int64_t(-1)}}).item_as_double(0), 0.0);
  EXPECT_THROW(run_op(Op::ReduceSum, {s}, Attrs{{"axes", V{1}}}), Error);
  // (e - s + step - 1) / step overflowed for steps near INT64_MAX.
  Tensor x = Tensor::from_vector<float>({5}, {0, 1, 2, 3, 4}, DType::F32);
  const int64_t big = std::numeric_limits<int64_t>::max();
  Tensor a =
      run_op(Op::Slice, {x}, Attrs{{"axis", int64_t(0)}, {"start", int64_t(1)}, {"step", big}});
  EXPECT_TRUE(all_equal(a, Tensor::from_vector<float>({1}, {1}, DType::F32)));
  Tensor b =
      run_op(Op::Slice, {x}, Attrs{{"axis", int64_t(0)}, {"start", int64_t(3)}, {"step", -big}});
  EXPECT_TRUE(all_equal(b, Tensor::from_vector<float>({1}, {3}, DType::F32)));
}

}  // namespace
}  // namespace rlx
