// A conv with a fused residual (the epilogue pass's form: bias, then the
// residual, then the activation) through the CoreML lowering and the MIL
// interpreter, against the CPU kernel; with and without bias and activation.
#include <gtest/gtest.h>

#include "backends/coreml/interp_support.h"

namespace rlx {
namespace {

TEST(CoreMLConvResidual, LowersAsConvAddActivation) {
  uint64_t seed = 5;
  for (const bool bias : {true, false})
    for (const Epilogue act : {Epilogue::relu, Epilogue::none}) {
      Graph g;
      std::vector<NodeId> ins{g.input("x", Shape(Dims{1, 3, 6, 6}, DType::F32)),
                              g.input("w", Shape(Dims{4, 3, 3, 3}, DType::F32))};
      if (bias) ins.push_back(g.input("b", Shape(Dims{4}, DType::F32)));
      ins.push_back(g.input("r", Shape(Dims{1, 4, 6, 6}, DType::F32)));
      g.add_output("y", g.add(Op::Conv, ins,
                              ConvAttrs{.stride = {},
                                        .pads = {1, 1, 1, 1},
                                        .dilation = {},
                                        .groups = 1,
                                        .activation = act,
                                        .residual = true}));
      TensorMap feed;
      for (NodeId id : g.inputs())
        feed[g.node(id).name] =
            testing::random_tensor(g.node(id).shape.concrete(), DType::F32, seed++);
      const TensorMap want = testing::run_graph(g, feed, {}, 0);
      const TensorMap got = coreml_test::export_and_interpret(g, {}, feed, {6, false});
      EXPECT_TRUE(testing::all_close(got.at("y"), want.at("y"), 1e-5, 1e-5))
          << "bias " << bias << " act " << int(act);
    }
}

}  // namespace
}  // namespace rlx
