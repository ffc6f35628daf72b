// The vjp table: every op of ops.def, in its order, with its rule or the
// reason it has none. The switch has no default, so a new op is a compile
// error (-Wswitch, -Werror) until it gets a line here.
#include "opt/autodiff/rules.h"

namespace rlx::opt::ad {
namespace {

VjpEntry rule(VjpFn fn) { return {GradSupport::rule, fn, nullptr}; }
VjpEntry none(const char* why) { return {GradSupport::none, nullptr, why}; }
VjpEntry gap(const char* why) { return {GradSupport::gap, nullptr, why}; }
VjpEntry estimator(VjpFn fn, const char* why) { return {GradSupport::estimator, fn, why}; }

constexpr const char* kLeaf = "a leaf";
constexpr const char* kBoolOut = "bool output";
constexpr const char* kIntOut = "integer output";
constexpr const char* kPiecewise = "piecewise constant: zero gradient almost everywhere";
constexpr const char* kSecondOrder =
    "a backward op: second derivatives (double backward) are not provided";

}  // namespace

VjpEntry vjp_entry(Op op) {
  switch (op) {
    case Op::Input:
    case Op::Param:
    case Op::Constant:
    case Op::Full:
    case Op::Arange:
      return none(kLeaf);
    case Op::Result:
      return none("read by its multi-output node's rule");

    case Op::Relu:
    case Op::Gelu:
    case Op::GeluTanh:
    case Op::Silu:
    case Op::Sigmoid:
    case Op::Tanh:
    case Op::Exp:
    case Op::Log:
    case Op::Sqrt:
    case Op::Rsqrt:
    case Op::Neg:
    case Op::Abs:
    case Op::Sin:
    case Op::Cos:
    case Op::Tan:
    case Op::Atan:
    case Op::Erf:
    case Op::Reciprocal:
    case Op::Softplus:
    case Op::Elu:
    case Op::LeakyRelu:
    case Op::HardSigmoid:
    case Op::HardSwish:
    case Op::Mish:
    case Op::Clamp:
      return rule(vjp_unary);
    case Op::Round:
    case Op::Floor:
    case Op::Ceil:
    case Op::Sign:
      return none(kPiecewise);

    case Op::LogicalNot:
    case Op::LogicalAnd:
    case Op::LogicalOr:
      return none(kBoolOut);
    case Op::BitwiseNot:
      return none("integer or bool output");

    case Op::Add:
      return rule(vjp_add);
    case Op::Sub:
      return rule(vjp_sub);
    case Op::Mul:
      return rule(vjp_mul);
    case Op::Div:
      return rule(vjp_div);  // rounding trunc/floor: piecewise constant, no gradient
    case Op::Max:
    case Op::Min:
      return rule(vjp_max_min);
    case Op::Pow:
      return rule(vjp_pow);
    case Op::Mod:
      return rule(vjp_mod);
    case Op::Fmod:
      return rule(vjp_fmod);
    case Op::SpecialUnary:
    case Op::SpecialBinary:
      return gap("special functions (lgamma, bessel, ...) have no gradient rules yet");
    case Op::Linalg:
      return gap("linalg (cholesky, solve, qr, svd, eigh, ...) has no gradient rules yet");

    case Op::Eq:
    case Op::Ne:
    case Op::Lt:
    case Op::Le:
    case Op::Gt:
    case Op::Ge:
      return none(kBoolOut);

    case Op::Where:
      return rule(vjp_where);
    case Op::Cast:
      return rule(vjp_cast);  // between float types; integer ends carry none
    case Op::FusedElementwise:
      return rule(vjp_fused_elementwise);
    case Op::ConvBlocked:
      return rule(vjp_conv_blocked);
    case Op::ConvBlockedChain:
      return rule(vjp_conv_blocked_chain);

    case Op::ReduceSum:
      return rule(vjp_reduce_sum);
    case Op::ReduceMean:
      return rule(vjp_reduce_mean);
    case Op::ReduceMax:
    case Op::ReduceMin:
      return rule(vjp_reduce_max_min);
    case Op::ReduceProd:
      return rule(vjp_reduce_prod);
    case Op::ArgMax:
    case Op::ArgMin:
    case Op::MaxPool2dIndices:
      return none(kIntOut);
    case Op::Softmax:
      return rule(vjp_softmax);
    case Op::LogSoftmax:
      return rule(vjp_log_softmax);
    case Op::CumProd:
      return rule(vjp_cumprod);
    case Op::CumSum:
      return rule(vjp_cumsum);

    case Op::Reshape:
      return rule(vjp_reshape);
    case Op::ReshapeLike:
      return rule(vjp_reshape_like);
    case Op::Transpose:
      return rule(vjp_transpose);
    case Op::Slice:
      return rule(vjp_slice);
    case Op::Concat:
      return rule(vjp_concat);
    case Op::Expand:
      return rule(vjp_expand);
    case Op::Pad:
      return rule(vjp_pad);
    case Op::Tile:
      return rule(vjp_tile);
    case Op::Flip:
      return rule(vjp_flip);
    case Op::Split:
      return rule(vjp_split);

    case Op::Gather:
      return rule(vjp_gather);
    case Op::GatherElements:
      return rule(vjp_gather_elements);
    case Op::GatherND:
      return rule(vjp_gather_nd);
    case Op::ScatterElements:
      return rule(vjp_scatter_elements);
    case Op::ScatterND:
      return rule(vjp_scatter_nd);
    case Op::TopK:
      return rule(vjp_topk);
    case Op::OneHot:
      return none("integer input (the output is a function of indices only)");
    case Op::Embedding:
      return rule(vjp_embedding);
    case Op::DequantEmbedding:
      return none("its table is quantized ggml blocks (u8) and its ids are integers");

    case Op::MatMul:
      return rule(vjp_matmul);
    case Op::DequantMatmul:
      return rule(vjp_dequant_matmul);  // x and bias; the quantized weight carries none
    case Op::MoeFfn:
      return gap(
          "an inference op of GGUF MoE models: x and the routing weights' gradients not written");

    case Op::Conv:
      return rule(vjp_conv);
    case Op::ConvTranspose:
      return rule(vjp_conv_transpose);
    case Op::MaxPool2d:
      return rule(vjp_max_pool);
    case Op::MaxPool2dGrad:
      return rule(vjp_max_pool_grad);
    case Op::AvgPool2d:
      return rule(vjp_avg_pool);
    case Op::AdaptiveAvgPool2d:
      return rule(vjp_adaptive_avg_pool);
    case Op::LayerNorm:
      return rule(vjp_layer_norm);
    case Op::RmsNorm:
      return rule(vjp_rms_norm);
    case Op::GroupNorm:
      return rule(vjp_group_norm);
    case Op::BatchNorm:
      return rule(vjp_batch_norm);
    case Op::BatchNormTrain:
      return rule(vjp_batch_norm_train);
    case Op::LayerNorm2d:
      return rule(vjp_layer_norm_2d);
    case Op::Attention:
      return rule(vjp_attention);
    case Op::Rope:
      return rule(vjp_rope);
    case Op::Resize:
      return rule(vjp_resize);
    case Op::GridSample:
      return rule(vjp_grid_sample);

    case Op::RmsNormGrad:
    case Op::LayerNormGrad:
    case Op::GroupNormGrad:
    case Op::ActivationGrad:
    case Op::SoftmaxCrossEntropyGrad:
    case Op::FakeQuantizeGrad:
    case Op::BatchNormTrainGrad:
    case Op::AttentionGrad:
      return gap(kSecondOrder);
    case Op::SoftmaxCrossEntropy:
      return rule(vjp_softmax_cross_entropy);
    case Op::Dropout:
      return rule(vjp_dropout);
    case Op::FakeQuantize:
      return estimator(vjp_fake_quantize,
                       "straight-through estimator (identity, clipped or lsq): the true "
                       "derivative of rounding is zero almost everywhere");
    case Op::Lstm:
    case Op::Gru:
    case Op::Rnn:
    case Op::GatedDeltaNet:
    case Op::SelectiveScan:
      return rule(vjp_sequence);

    case Op::NonZero:
    case Op::NonMaxSuppression:
      return none("integer output (indices)");
    case Op::Unique:
      return gap("unique's values (a gather of x at the data-dependent first indices) not written");
    case Op::If:
    case Op::Loop:
      return gap("control flow: differentiating a body (and a loop's iterations) not written");
  }
  return gap("unknown op id");
}

}  // namespace rlx::opt::ad
