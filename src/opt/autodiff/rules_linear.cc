// vjp rules of matmul (transposes folded into MatMulAttrs, never explicit),
// dequant_matmul, conv and conv_transpose (input grads by the adjoint conv,
// weight grads by a conv over the transposed input).
#include "opt/autodiff/rules.h"
#include "rlx/error.h"

namespace rlx::opt::ad {

void vjp_matmul(VjpCall& c) {
  Emit& e = c.e;
  const auto& t = c.n.attrs_as<MatMulAttrs>();
  RLX_CHECK(t.activation == Epilogue::none && c.n.inputs.size() == 2, c.n.label(),
            ": matmul with a fused bias, residual or activation (the epilogue pass's form) has no "
            "gradient "
            "rule; differentiate the graph before optimizing it (rlx inspect -O0)");
  const Shape as = c.in_shape(0), bs = c.in_shape(1);
  // A 1-d operand is a matrix with a unit dim (NumPy), which the output drops:
  // put the unit dims back, differentiate the matrix product, drop them again.
  const bool a1 = as.rank() == 1, b1 = bs.rank() == 1;
  const NodeId a = a1 ? e.reshape(c.in(0), {Dim(1), as.dims[0]}) : c.in(0);
  const NodeId b = b1 ? e.reshape(c.in(1), {bs.dims[0], Dim(1)}) : c.in(1);
  std::vector<Dim> cd = e.shape(c.n.id).dims;
  if (a1) cd.insert(cd.end() - (b1 ? 0 : 1), Dim(1));
  if (b1) cd.emplace_back(1);
  const NodeId dc = e.reshape(c.grad(), cd);
  // C = op(A) op(B): d op(A) = dC op(B)^T, d op(B) = op(A)^T dC; a transposed
  // operand takes the transpose of its gradient, folded into the flags.
  if (c.needs(0)) {
    const NodeId da = t.transpose_a ? e.matmul(b, dc, t.transpose_b, true)
                                    : e.matmul(dc, b, false, !t.transpose_b);
    c.dx[0] = e.reshape(e.sum_to(da, e.shape(a)), as.dims);
  }
  if (c.needs(1)) {
    const NodeId db = t.transpose_b ? e.matmul(dc, a, true, t.transpose_a)
                                    : e.matmul(a, dc, !t.transpose_a, false);
    c.dx[1] = e.reshape(e.sum_to(db, e.shape(b)), bs.dims);
  }
}

void vjp_dequant_matmul(VjpCall& c) {
  // y = x W^T (+ b) with W the N dequantized rows of the ggml blocks: dx = dy W.
  Emit& e = c.e;
  const auto& q = c.n.attrs_as<QuantAttrs>();
  if (c.needs(0)) {
    const int64_t rows = e.dims(c.in(1), "dequant_matmul's gradient")[0];
    const NodeId w =
        e.op(Op::DequantEmbedding, {c.in(1), e.op(Op::Arange, {}, ArangeAttrs{.count = rows})}, q);
    c.dx[0] = e.cast(e.matmul(c.grad(), w), e.dtype(c.in(0)));
  }
  if (c.needs(2)) c.dx[2] = e.sum_to(c.grad(), c.in_shape(2));
}

namespace {

struct Window {
  std::vector<int64_t> stride, pads, dilation;
  int64_t groups;
};

template <typename A>
Window window_of(const A& a, int sp) {
  return {list_or(a.stride, size_t(sp), 1), list_or(a.pads, size_t(2 * sp), 0),
          list_or(a.dilation, size_t(sp), 1), a.groups};
}

// Crops every spatial dim of `x` ([N, C, *S]) to `want`.
NodeId crop_spatial(Emit& e, NodeId x, const Dims& want) {
  const Dims have = e.dims(x, "conv's gradient");
  for (size_t i = 2; i < want.size(); ++i)
    if (have[i] > want[i]) x = e.slice(x, int64_t(i), 0, want[i]);
  return x;
}

// The weight gradient of conv(input, w) -> out with gradient gout, as one
// grouped conv: input [N, G*ci, *S] -> [ci, G*N, *S] is the batch, gout
// [N, G*co, *Y] -> [G*co, N, *Y] the kernel, stride and dilation swap roles.
// The result [ci, G*co, *K'] is cropped to the kernel dims and transposed to
// the weight's [G*co, ci, *K].
NodeId conv_weight_grad(Emit& e, NodeId input, NodeId gout, const Dims& wdims, const Window& w) {
  const Dims is = e.dims(input, "conv's gradient"), os = e.dims(gout, "conv's gradient");
  const int sp = int(is.size()) - 2;
  const int64_t g = w.groups, n = is[0], ci = is[1] / g, co = os[1] / g;
  auto regroup = [&](NodeId x, const Dims& d, int64_t per, std::vector<int64_t> perm, Dims to) {
    std::vector<Dim> split{Dim(n), Dim(g), Dim(per)};
    for (int i = 0; i < sp; ++i) split.emplace_back(d[size_t(2 + i)]);
    for (int i = 0; i < sp; ++i) perm.push_back(3 + i);
    for (int i = 0; i < sp; ++i) to.push_back(d[size_t(2 + i)]);
    return e.reshape(e.transpose(e.reshape(x, split), perm),
                     std::vector<Dim>(to.begin(), to.end()));
  };
  const NodeId x2 = regroup(input, is, ci, {2, 1, 0}, {ci, g * n});
  const NodeId k2 = regroup(gout, os, co, {1, 2, 0}, {g * co, n});
  NodeId dw =
      e.op(Op::Conv, {x2, k2},
           ConvAttrs{.stride = w.dilation, .pads = w.pads, .dilation = w.stride, .groups = g});
  Dims want{ci, g * co};
  want.insert(want.end(), wdims.begin() + 2, wdims.end());
  dw = crop_spatial(e, dw, want);
  std::vector<int64_t> perm{1, 0};
  for (int i = 0; i < sp; ++i) perm.push_back(2 + i);
  return e.transpose(dw, perm);
}

// Bias gradient of a channels-first op: dy summed over every axis but 1.
NodeId channel_sum(Emit& e, NodeId dy) {
  std::vector<int64_t> axes{0};
  for (int i = 2; i < e.rank(dy); ++i) axes.push_back(i);
  return e.sum(dy, axes, false);
}

}  // namespace

void vjp_conv(VjpCall& c) {
  Emit& e = c.e;
  const Dims x = e.dims(c.in(0), "conv's gradient"), wd = e.dims(c.in(1), "conv's gradient");
  const Dims y = e.dims(c.n.id, "conv's gradient");
  const int sp = int(x.size()) - 2;
  const auto& a = c.n.attrs_as<ConvAttrs>();
  // The epilogue pass runs after autodiff; a graph saved after it differentiates wrongly here.
  RLX_CHECK(a.activation == Epilogue::none && !a.residual, c.n.label(),
            ": conv with a fused activation or residual (the epilogue pass's form) has no "
            "gradient rule; differentiate the graph before optimizing it (rlx inspect -O0)");
  const Window w = window_of(a, sp);
  if (c.needs(0)) {
    // The adjoint conv; output_padding restores the rows the forward windows never reached.
    std::vector<int64_t> opad;
    for (int i = 0; i < sp; ++i) {
      const size_t u = size_t(i);
      const int64_t reach = (y[2 + u] - 1) * w.stride[u] - w.pads[u] - w.pads[u + size_t(sp)] +
                            w.dilation[u] * (wd[2 + u] - 1) + 1;
      opad.push_back(x[2 + u] - reach);
    }
    c.dx[0] = e.op(Op::ConvTranspose, {c.grad(), c.in(1)},
                   ConvTransposeAttrs{.stride = w.stride,
                                      .pads = w.pads,
                                      .dilation = w.dilation,
                                      .groups = w.groups,
                                      .output_padding = opad});
  }
  if (c.needs(1)) c.dx[1] = conv_weight_grad(e, c.in(0), c.grad(), wd, w);
  if (c.needs(2)) c.dx[2] = channel_sum(e, c.grad());
}

void vjp_conv_transpose(VjpCall& c) {
  Emit& e = c.e;
  const Dims x = e.dims(c.in(0), "conv_transpose's gradient");
  const Dims wd = e.dims(c.in(1), "conv_transpose's gradient");
  const int sp = int(x.size()) - 2;
  const auto& a = c.n.attrs_as<ConvTransposeAttrs>();
  const Window w{list_or(a.stride, size_t(sp), 1), list_or(a.pads, size_t(2 * sp), 0),
                 list_or(a.dilation, size_t(sp), 1), a.groups};
  // conv_transpose is the adjoint of conv with the same weight: dx = conv(dy, w).
  if (c.needs(0)) {
    const NodeId dx = e.op(
        Op::Conv, {c.grad(), c.in(1)},
        ConvAttrs{.stride = w.stride, .pads = w.pads, .dilation = w.dilation, .groups = w.groups});
    c.dx[0] = crop_spatial(e, dx, x);
  }
  // Its weight gradient is that conv's, with dy as the input and x as the output gradient.
  if (c.needs(1)) c.dx[1] = conv_weight_grad(e, c.grad(), c.in(0), wd, w);
  if (c.needs(2)) c.dx[2] = channel_sum(e, c.grad());
}

}  // namespace rlx::opt::ad
