// Backward ops against PyTorch autograd (float64, one torch_goldens batch for the file):
// layer_norm / group_norm (dx, dgamma, dbeta), every activation torch has, and
// F.cross_entropy (loss and gradient, every reduction, ignore_index).
// Tolerance 1e-10: float64 on both sides, sums of at most ~40 terms.
#include <gtest/gtest.h>

#include <map>

#include "support/testing.h"
#include "support/torch_golden.h"

namespace rlx {
namespace {

using testing::all_close;
using testing::random_tensor;
using testing::run_op;

constexpr double kGradTol = 1e-10;

struct ActivationCase {
  const char* kind;
  const char* torch;  // expression of xx
  double lo, hi;
  Attrs attrs;
};

const std::vector<ActivationCase>& acts() {
  static const std::vector<ActivationCase> v{
      {"relu", "F.relu(xx)", -2, 2, {}},
      {"gelu", "F.gelu(xx)", -4, 4, {}},
      {"gelu_tanh", "F.gelu(xx, approximate='tanh')", -4, 4, {}},
      {"silu", "F.silu(xx)", -6, 6, {}},
      {"sigmoid", "torch.sigmoid(xx)", -6, 6, {}},
      {"tanh", "torch.tanh(xx)", -3, 3, {}},
      {"exp", "torch.exp(xx)", -2, 2, {}},
      {"log", "torch.log(xx)", 0.2, 3, {}},
      {"sqrt", "torch.sqrt(xx)", 0.2, 3, {}},
      {"rsqrt", "torch.rsqrt(xx)", 0.2, 3, {}},
      {"neg", "torch.neg(xx)", -2, 2, {}},
      {"abs", "torch.abs(xx)", -2, 2, {}},
      {"sin", "torch.sin(xx)", -3, 3, {}},
      {"cos", "torch.cos(xx)", -3, 3, {}},
      {"tan", "torch.tan(xx)", -1.2, 1.2, {}},
      {"atan", "torch.atan(xx)", -3, 3, {}},
      {"erf", "torch.erf(xx)", -2, 2, {}},
      {"reciprocal", "torch.reciprocal(xx)", 0.3, 3, {}},
      {"floor", "torch.floor(xx)", -3, 3, {}},
      {"ceil", "torch.ceil(xx)", -3, 3, {}},
      {"sign", "torch.sign(xx)", -3, 3, {}},
      {"softplus",
       "F.softplus(xx, beta=2.0, threshold=3.0)",
       -3,
       3,
       {{"beta", 2.0}, {"threshold", 3.0}}},
      {"elu", "F.elu(xx, alpha=0.7)", -3, 3, {{"alpha", 0.7}}},
      {"leaky_relu", "F.leaky_relu(xx, 0.2)", -3, 3, {{"slope", 0.2}}},
      {"hard_sigmoid", "F.hardsigmoid(xx)", -5, 5, {}},
      {"hard_swish", "F.hardswish(xx)", -5, 5, {}},
      {"mish", "F.mish(xx)", -4, 4, {}},
      {"clamp", "torch.clamp(xx, -0.5, 0.8)", -2, 2, {{"min", -0.5}, {"max", 0.8}}},
  };
  return v;
}

const char* kReductions[] = {"mean", "sum", "none"};

// Inputs of every case, built once (same seeds for the goldens and our kernels).
struct Data {
  Tensor ln_x = random_tensor({3, 4, 5}, DType::F64, 1, -2, 2),
         ln_dy = random_tensor({3, 4, 5}, DType::F64, 2),
         ln_g = random_tensor({4, 5}, DType::F64, 3), ln_b = random_tensor({4, 5}, DType::F64, 4);
  Tensor gn_x = random_tensor({2, 6, 3, 2}, DType::F64, 5, -2, 2),
         gn_dy = random_tensor({2, 6, 3, 2}, DType::F64, 6),
         gn_g = random_tensor({6}, DType::F64, 7), gn_b = random_tensor({6}, DType::F64, 8);
  Tensor ce_logits = random_tensor({6, 5}, DType::F64, 9, -4, 4),
         ce_dl = random_tensor({6}, DType::F64, 10);
  // ignore_index -100 (row 2) and 2 (rows 3, 4).
  Tensor ce_labels = Tensor::from_vector<int64_t>({6}, {0, 4, -100, 2, 2, 1}, DType::I64);
  Tensor ce_labels2 = Tensor::from_vector<int64_t>({6}, {0, 4, 3, 2, 2, 1}, DType::I64);
  std::map<std::string, std::pair<Tensor, Tensor>> act;  // kind -> (x, dy)
  Data() {
    uint64_t seed = 20;
    for (const auto& a : acts())
      act[a.kind] = {random_tensor({4, 9}, DType::F64, seed, a.lo, a.hi),
                     random_tensor({4, 9}, DType::F64, seed + 1)};
  }
};

const Data& data() {
  static const Data d;
  return d;
}

const std::map<std::string, std::vector<Tensor>>& grad_goldens() {
  static const auto g = [] {
    const Data& d = data();
    std::vector<testing::GoldenCase> cases;
    const std::string grad3 = "y = torch.autograd.grad(out, [xx, g, b], x['dy'])";
    const std::string prep =
        "xx = x['x'].clone().requires_grad_(); g = x['g'].clone().requires_grad_(); "
        "b = x['b'].clone().requires_grad_()\n";
    cases.push_back({"ln",
                     prep + "out = F.layer_norm(xx, (4, 5), g, b, 1e-5)\n" + grad3,
                     {{"x", d.ln_x}, {"dy", d.ln_dy}, {"g", d.ln_g}, {"b", d.ln_b}}});
    cases.push_back(
        {"ln_plain",
         "xx = x['x'].clone().requires_grad_()\n"
         "y = torch.autograd.grad(F.layer_norm(xx, (5,), None, None, 1e-3), xx, x['dy'])",
         {{"x", d.ln_x}, {"dy", d.ln_dy}}});
    cases.push_back({"gn",
                     prep + "out = F.group_norm(xx, 3, g, b, 1e-5)\n" + grad3,
                     {{"x", d.gn_x}, {"dy", d.gn_dy}, {"g", d.gn_g}, {"b", d.gn_b}}});
    for (const auto& a : acts()) {
      const auto& [x, dy] = d.act.at(a.kind);
      cases.push_back({std::string("act_") + a.kind,
                       std::string("xx = x['x'].clone().requires_grad_()\n"
                                   "y = torch.autograd.grad(") +
                           a.torch + ", xx, x['dy'])",
                       {{"x", x}, {"dy", dy}}});
    }
    for (const char* r : kReductions)
      for (int64_t ig : {-100, 2}) {
        const std::string dl = std::string(r) == "none" ? "x['dl']" : "x['dl'][0]";
        cases.push_back({std::string("ce_") + r + std::to_string(ig == 2),
                         "ll = x['logits'].clone().requires_grad_()\n"
                         "out = F.cross_entropy(ll, x['labels'], reduction='" +
                             std::string(r) + "', ignore_index=" + std::to_string(ig) +
                             ")\n"
                             "y = (out.detach(), torch.autograd.grad(out, ll, " +
                             dl + ")[0])",
                         {{"logits", d.ce_logits},
                          {"labels", ig == 2 ? d.ce_labels2 : d.ce_labels},
                          {"dl", d.ce_dl}}});
      }
    return testing::torch_goldens(cases);
  }();
  return g;
}

TEST(GradTorch, LayerAndGroupNorm) {
  const Data& d = data();
  const auto& ln = grad_goldens().at("ln");
  const auto ln_got = testing::run_op_outputs(Op::LayerNormGrad, {d.ln_x, d.ln_dy, d.ln_g},
                                              {{"naxes", int64_t(2)}});
  for (size_t o = 0; o < 3; ++o)
    EXPECT_TRUE(all_close(ln_got.at(o), ln[o], kGradTol, kGradTol)) << "layer_norm output " << o;
  EXPECT_TRUE(all_close(
      testing::run_op_outputs(Op::LayerNormGrad, {d.ln_x, d.ln_dy}, {{"eps", 1e-3}}).at(0),
      grad_goldens().at("ln_plain")[0], kGradTol, kGradTol));
  const auto& gn = grad_goldens().at("gn");
  const auto gn_got = testing::run_op_outputs(Op::GroupNormGrad, {d.gn_x, d.gn_dy, d.gn_g},
                                              {{"groups", int64_t(3)}});
  for (size_t o = 0; o < 3; ++o)
    EXPECT_TRUE(all_close(gn_got.at(o), gn[o], kGradTol, kGradTol)) << "group_norm output " << o;
}

TEST(GradTorch, Activations) {
  for (const auto& a : acts()) {
    const auto& [x, dy] = data().act.at(a.kind);
    Attrs at = a.attrs;
    at.set("kind", std::string(a.kind));
    // torch's hardsigmoid backward multiplies by the float constant 1.0f/6 (3e-8 relative off).
    const double tol = std::string(a.kind) == "hard_sigmoid" ? 1e-7 : kGradTol;
    EXPECT_TRUE(all_close(run_op(Op::ActivationGrad, {x, dy}, at),
                          grad_goldens().at(std::string("act_") + a.kind)[0], tol, tol))
        << a.kind;
  }
}

TEST(GradTorch, CrossEntropy) {
  const Data& d = data();
  for (const char* r : kReductions)
    for (int64_t ig : {-100, 2}) {
      SCOPED_TRACE(std::string(r) + " ignore_index " + std::to_string(ig));
      const auto& want = grad_goldens().at(std::string("ce_") + r + std::to_string(ig == 2));
      Attrs a{{"reduction", std::string(r)}, {"ignore_index", ig}};
      const Tensor& labels = ig == 2 ? d.ce_labels2 : d.ce_labels;
      Tensor dl = std::string(r) == "none" ? d.ce_dl
                                           : Tensor::from_vector<double>(
                                                 Dims{}, {d.ce_dl.item_as_double(0)}, DType::F64);
      EXPECT_TRUE(all_close(run_op(Op::SoftmaxCrossEntropy, {d.ce_logits, labels}, a), want[0],
                            kGradTol, kGradTol));
      EXPECT_TRUE(all_close(run_op(Op::SoftmaxCrossEntropyGrad, {d.ce_logits, labels, dl}, a),
                            want[1], kGradTol, kGradTol));
    }
}

}  // namespace
}  // namespace rlx
