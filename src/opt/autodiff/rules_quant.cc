// vjp of fake_quantize: a straight-through estimator, not the true derivative (which is zero
// almost everywhere). identity passes dy on; clipped and lsq emit one fake_quantize_grad node with
// the forward's attributes, which gives dx and (lsq) the scale's gradient in one pass. The zero
// point gets none (PyTorch's fake_quantize_per_*_affine treats it as a constant too).
#include "opt/autodiff/rules.h"

namespace rlx::opt::ad {

void vjp_fake_quantize(VjpCall& c) {
  const auto& a = c.n.attrs_as<FakeQuantAttrs>();
  if (a.ste == FakeQuantSte::identity) {
    c.dx[0] = c.grad();
    return;
  }
  std::vector<NodeId> in{c.in(0), c.grad()};
  for (size_t i = 1; i < c.n.inputs.size(); ++i) in.push_back(c.in(i));  // scale, zero point
  const auto outs = c.e.results(Op::FakeQuantizeGrad, std::move(in), a);
  c.dx[0] = outs[0];
  if (a.ste == FakeQuantSte::lsq && c.needs(1)) c.dx[1] = outs[1];
}

}  // namespace rlx::opt::ad
