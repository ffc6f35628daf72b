// A conv_blocked node spelt back into layout moves around a plain conv.
#include "opt/autodiff/primitives.h"

namespace rlx::opt::ad {
namespace {

constexpr int64_t kBlock = kConvChannelBlock;

std::vector<Dim> dims_of(std::initializer_list<int64_t> d) { return {d.begin(), d.end()}; }

}  // namespace

NodeId to_channel_blocks(Emit& e, NodeId x) {
  const Dims d = e.dims(x, "the channel-blocked layout");
  const int64_t CB = conv_channel_blocks(d[1]);
  x = e.pad(x, {0, 0, 0, 0, 0, CB * kBlock - d[1], 0, 0});
  x = e.reshape(x, dims_of({d[0], CB, kBlock, d[2], d[3]}));
  return e.transpose(x, {0, 1, 3, 4, 2});
}

NodeId from_channel_blocks(Emit& e, NodeId x, int64_t channels) {
  const Dims d = e.dims(x, "the channel-blocked layout");  // [N, CB, H, W, 16]
  x = e.transpose(x, {0, 1, 4, 2, 3});
  x = e.reshape(x, dims_of({d[0], d[1] * kBlock, d[2], d[3]}));
  return d[1] * kBlock == channels ? x : e.slice(x, 1, 0, channels);
}

NodeId conv_blocked_primitives(Emit& e, const Node& n, const std::vector<NodeId>& in) {
  const auto& a = n.attrs_as<ConvBlockedAttrs>();
  const Dims wd = e.dims(in[1], "conv_blocked's weight");
  const int64_t C = a.channels, O = a.out_channels;
  NodeId x = a.in_blocked ? from_channel_blocks(e, in[0], C) : in[0];
  NodeId w;
  if (a.depthwise) {  // [CB, KH, KW, 16] -> [C, 1, KH, KW]
    w = e.transpose(in[1], {0, 3, 1, 2});
    w = e.reshape(w, dims_of({wd[0] * kBlock, 1, wd[1], wd[2]}));
    w = e.slice(w, 0, 0, C);
  } else {  // [OB, G, KH, KW, L, 16] -> [O, C, KH, KW]
    w = e.transpose(in[1], {0, 5, 1, 4, 2, 3});
    w = e.reshape(w, dims_of({wd[0] * kBlock, wd[1] * wd[4], wd[2], wd[3]}));
    w = e.slice(e.slice(w, 0, 0, O), 1, 0, C);
  }
  // A plain conv, then the residual and the activation as ops of their own: autodiff has rules
  // for these, not for the epilogue pass's fused form.
  const ConvAttrs ca{.stride = a.stride,
                     .pads = a.pads,
                     .dilation = {1, 1},
                     .groups = a.depthwise ? C : 1,
                     .activation = Epilogue::none,
                     .residual = false};
  NodeId y = e.op(Op::Conv, {x, w, e.slice(in[2], 0, 0, O)}, ca);
  if (a.residual) y = e.add(y, from_channel_blocks(e, in[3], O));
  if (a.activation == Epilogue::relu) y = e.op(Op::Relu, {y});
  if (a.activation == Epilogue::relu6) y = e.op(Op::Clamp, {y}, ClampAttrs{.min = 0, .max = 6});
  return to_channel_blocks(e, y);
}

NodeId conv_blocked_chain_primitives(Emit& e, const Node& n, const std::vector<NodeId>& in) {
  const auto& a = n.attrs_as<ConvBlockedChainAttrs>();
  NodeId y = in[0];
  for (int stage = 0; stage < 3; ++stage) {
    Node s;
    s.op = Op::ConvBlocked;
    s.attrs = conv_chain_stage(a, stage);
    y = conv_blocked_primitives(e, s, conv_chain_stage_inputs(a, stage, y, in));
  }
  return y;
}

}  // namespace rlx::opt::ad
