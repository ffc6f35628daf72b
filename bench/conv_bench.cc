// The distinct conv shapes of ResNet-18 at batch 1 (no bias: BatchNorm follows
// each conv; the weight a bound param, as in a model), and mobilenet_v2's depthwise and widest
// pointwise ones. Named conv/<Cin>x<H>x<W>-<Cout>k<k>s<stride>, with g<groups> for grouped convs.
#include "bench_util.h"

namespace rlx::bench {

namespace {

struct ConvShape {
  int64_t cin, hw, cout, k, stride, pad, groups = 1;
};

}  // namespace

void register_conv() {
  const ConvShape shapes[] = {
      {3, 224, 64, 7, 2, 3},         // stem
      {64, 56, 64, 3, 1, 1},         // layer1
      {128, 28, 128, 3, 1, 1},       // layer2
      {256, 14, 256, 3, 1, 1},       // layer3
      {512, 7, 512, 3, 1, 1},        // layer4
      {64, 56, 128, 1, 2, 0},        // 1x1 downsample into layer2
      {128, 28, 256, 1, 2, 0},       // ... layer3
      {256, 14, 512, 1, 2, 0},       // ... layer4
      {64, 56, 128, 3, 2, 1},        // 3x3/2 into layer2
      {128, 28, 256, 3, 2, 1},       // ... layer3
      {256, 14, 512, 3, 2, 1},       // ... layer4
      {96, 112, 96, 3, 2, 1, 96},    // mobilenet_v2: depthwise, stride 2
      {144, 56, 144, 3, 2, 1, 144},  //
      {576, 14, 576, 3, 2, 1, 576},  //
      {144, 56, 144, 3, 1, 1, 144},  // ... depthwise, stride 1
      {960, 7, 960, 3, 1, 1, 960},   //
      {16, 112, 96, 1, 1, 0},        // ... pointwise
      {320, 7, 1280, 1, 1, 0},       //
      {64, 8, 64, 3, 2, 1},          // the small CNN's last conv
  };
  for (const ConvShape& s : shapes) {
    const int64_t ho = (s.hw + 2 * s.pad - s.k) / s.stride + 1;
    const double flop =
        2.0 * double(s.cout) * double(ho * ho) * double(s.cin / s.groups * s.k * s.k);
    std::string name = "conv/" + std::to_string(s.cin) + "x" + std::to_string(s.hw) + "x" +
                       std::to_string(s.hw) + "-" + std::to_string(s.cout) + "k" +
                       std::to_string(s.k) + "s" + std::to_string(s.stride) +
                       (s.groups > 1 ? "g" + std::to_string(s.groups) : "");
    add(
        name,
        [s] {
          Case c;
          Builder b(c.graph);
          const Dims xd{1, s.cin, s.hw, s.hw}, wd{s.cout, s.cin / s.groups, s.k, s.k};
          auto x = b.input("x", Shape(xd, DType::F32));
          auto w = b.param("w", Shape(wd, DType::F32));
          Attrs a{{"stride", std::vector<int64_t>{s.stride, s.stride}},
                  {"pads", std::vector<int64_t>{s.pad, s.pad, s.pad, s.pad}},
                  {"dilation", std::vector<int64_t>{1, 1}},
                  {"groups", s.groups}};
          c.graph.add_output("y", b.op(Op::Conv, {x, w}, a));
          c.inputs["x"] = random_f32(xd, 9);
          c.weights["w"] = random_f32(wd, 10, -0.1f, 0.1f);
          return c;
        },
        flop, 0);
  }
}

}  // namespace rlx::bench
