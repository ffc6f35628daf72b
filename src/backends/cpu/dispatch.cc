// Op -> CPU kernel. The switch has no default: a new op in the op table is a
// compile error here until it is given a kernel or listed as a gap (nullptr).
#include "backends/cpu/kernels.h"

namespace rlx::cpu {

KernelEntry kernel_for(Op op) {
  constexpr bool any = true;   // kernel handles all dtypes itself
  constexpr bool f32 = false;  // f16/bf16 go through the f32 upcast path
  // One row per op family reads better than one line per case.
  // clang-format off
  switch (op) {
    case Op::Input:
    case Op::Param:
    case Op::Constant:
    case Op::Result:
      return {nullptr, any};  // bound by the runtime or written by their node, never executed
    case Op::Full: return {full, any};
    case Op::Arange: return {arange, any};

    case Op::Relu: case Op::Gelu: case Op::GeluTanh: case Op::Silu: case Op::Sigmoid:
    case Op::Tanh: case Op::Exp: case Op::Log: case Op::Sqrt: case Op::Rsqrt: case Op::Neg:
    case Op::Abs: case Op::Sin: case Op::Cos: case Op::Tan: case Op::Atan: case Op::Erf:
    case Op::Reciprocal: case Op::Round: case Op::Floor: case Op::Ceil: case Op::Sign:
    case Op::Softplus: case Op::Elu: case Op::LeakyRelu: case Op::HardSigmoid:
    case Op::HardSwish: case Op::Mish: case Op::Clamp:
      return {unary, f32};
    case Op::Add: case Op::Sub: case Op::Mul: case Op::Div: case Op::Max: case Op::Min:
    case Op::Pow: case Op::Mod: case Op::Fmod:
      return {binary, f32};
    case Op::SpecialUnary: case Op::SpecialBinary: return {special, f32};
    case Op::Linalg: return {linalg, any};  // f32 / f64 only (LAPACK)
    case Op::Eq: case Op::Ne: case Op::Lt: case Op::Le: case Op::Gt: case Op::Ge:
      return {compare, f32};
    case Op::LogicalNot: case Op::LogicalAnd: case Op::LogicalOr: case Op::BitwiseNot:
      return {logical, any};
    case Op::Where: return {where, any};
    case Op::Cast: return {cast, any};
    case Op::FusedElementwise: return {fused_elementwise, f32};
    case Op::ConvBlocked: return {conv_blocked_kernel, any};
    case Op::ConvBlockedChain: return {conv_blocked_chain_kernel, any};

    case Op::ReduceSum: case Op::ReduceMean: case Op::ReduceMax: case Op::ReduceMin:
    case Op::ReduceProd:
      return {reduce, f32};
    case Op::ArgMax: case Op::ArgMin: return {arg_reduce, f32};
    case Op::Softmax: case Op::LogSoftmax: return {softmax, f32};
    case Op::CumSum: case Op::CumProd: return {cumsum, f32};

    case Op::Reshape:
    case Op::ReshapeLike: return {reshape, any};
    case Op::Transpose: return {transpose, any};
    case Op::Slice: return {slice, any};
    case Op::Concat: return {concat, any};
    case Op::Expand: return {expand, any};
    case Op::Pad: return {pad, any};
    case Op::Tile: return {tile, any};
    case Op::Flip: return {flip, any};
    case Op::Split: return {split, any};

    case Op::Gather: return {gather, any};
    case Op::GatherElements: return {gather_elements, any};
    case Op::GatherND: return {gather_nd, any};
    case Op::ScatterElements: return {scatter_elements, f32};
    case Op::ScatterND: return {scatter_nd, f32};
    case Op::TopK: return {topk, f32};
    case Op::OneHot: return {one_hot, any};
    case Op::Embedding: return {embedding, any};
    case Op::DequantEmbedding: return {dequant_embedding, any};

    case Op::MatMul: return {matmul, f32};
    case Op::Conv: return {conv, f32};
    case Op::ConvTranspose: return {conv_transpose, f32};
    case Op::MaxPool2d: return {max_pool2d, f32};
    case Op::MaxPool2dIndices: return {max_pool2d_indices, any};
    case Op::MaxPool2dGrad: return {max_pool2d_grad, f32};
    case Op::AvgPool2d: return {avg_pool2d, f32};
    case Op::AdaptiveAvgPool2d: return {adaptive_avg_pool2d, f32};
    case Op::LayerNorm: return {layer_norm, f32};
    case Op::RmsNorm: return {rms_norm, f32};
    case Op::GroupNorm: return {group_norm, f32};
    case Op::BatchNorm: return {batch_norm, f32};
    case Op::BatchNormTrain: return {batch_norm_train, f32};
    case Op::BatchNormTrainGrad: return {batch_norm_train_grad, f32};
    case Op::LayerNorm2d: return {layer_norm_2d, f32};
    case Op::Attention: return {attention, f32, 0b110};  // k, v may be an f16 cache
    case Op::AttentionGrad: return {attention_grad, f32};
    case Op::Rope: return {rope, f32};
    case Op::Resize: return {resize, f32};
    case Op::GridSample: return {grid_sample, f32};
    case Op::DequantMatmul: return {dequant_matmul, f32};
    case Op::MoeFfn: return {moe_ffn, f32};

    case Op::RmsNormGrad: return {rms_norm_grad, f32};
    case Op::LayerNormGrad: return {layer_norm_grad, f32};
    case Op::GroupNormGrad: return {group_norm_grad, f32};
    case Op::ActivationGrad: return {activation_grad, f32};
    case Op::SoftmaxCrossEntropy: return {softmax_cross_entropy, f32};
    case Op::SoftmaxCrossEntropyGrad: return {softmax_cross_entropy_grad, f32};
    case Op::Dropout: return {dropout, f32};
    case Op::FakeQuantize: return {fake_quantize, f32};
    case Op::FakeQuantizeGrad: return {fake_quantize_grad, f32};
    case Op::Lstm: case Op::Gru: case Op::Rnn: return {recurrent, f32};
    case Op::GatedDeltaNet: return {gated_delta_net, f32};
    case Op::SelectiveScan: return {selective_scan, f32};
    case Op::NonZero: return {nonzero, any};
    case Op::Unique: return {unique, any};
    case Op::NonMaxSuppression: return {non_max_suppression, any};
    case Op::If: case Op::Loop:
      return {nullptr, any};  // run by the session, body by body (src/runtime/control.cc)
  }
  // clang-format on
  return {};
}

}  // namespace rlx::cpu
