// The epilogue pass: conv/matmul followed by a bias add and/or an activation,
// each read by nothing else, become one conv/matmul node whose kernel applies
// them to each output block while it is in cache; so does a residual add
// (resnet's conv + add + relu, mobilenet's projection + add, a transformer's
// projection + skip connection), whose other operand the conv/matmul then
// reads as its last input. conv_bn folds an inference
// BatchNorm into the conv before it, so conv + BN + ReLU ends as one node.
#include <cmath>

#include "opt/pass.h"
#include "opt/passes.h"
#include "opt/rewrite.h"

namespace rlx::opt {
namespace {

// The fused form of activation node `n`, or none.
Epilogue epilogue_of(const Node& n) {
  switch (n.op) {
    case Op::Relu:
      return Epilogue::relu;
    case Op::Clamp: {
      const auto& a = n.attrs_as<ClampAttrs>();
      return a.min == 0 && a.max == 6 ? Epilogue::relu6 : Epilogue::none;
    }
    case Op::Gelu:
      return Epilogue::gelu;
    case Op::GeluTanh:
      return Epilogue::gelu_tanh;
    case Op::Silu:
      return Epilogue::silu;
    case Op::Sigmoid:
      return Epilogue::sigmoid;
    case Op::Tanh:
      return Epilogue::tanh;
    case Op::HardSwish:
      return Epilogue::hard_swish;
    default:
      return Epilogue::none;
  }
}

bool float_node(const Node& n) {
  return n.shape.dtype == DType::F32 || n.shape.dtype == DType::F64;
}

class Fuser {
 public:
  explicit Fuser(const Graph& g) : g_(g), rw_(g), uses_(use_counts(g)), reader_(g.size(), -1) {
    for (const Node& n : g.nodes())
      for (NodeId in : n.inputs) reader_[size_t(in)] = n.id;
  }

  Graph run() {
    for (const Node& n : g_.nodes())
      if (!fuse(n)) rw_.copy(n.id);
    return rw_.finish();
  }

 private:
  // A conv/matmul with no activation fused yet, read only by the node being
  // fused; for a bias add, also a matmul with no bias yet (an activation
  // takes one that has its bias: addmm's).
  bool open(const Node& p, bool for_bias = true) const {
    if (uses_[size_t(p.id)] != 1 || !float_node(p)) return false;
    if (p.op == Op::Conv) return p.attrs_as<ConvAttrs>().activation == Epilogue::none;
    if (p.op == Op::MatMul)
      return (!for_bias || p.inputs.size() == 2) &&
             p.attrs_as<MatMulAttrs>().activation == Epilogue::none;
    return false;
  }

  // add(matmul(a, b), bias) with bias [N] over the last dim: the matmul and
  // the bias, else {nullptr, -1}.
  std::pair<const Node*, NodeId> matmul_bias(const Node& add) const {
    if (add.op != Op::Add || !float_node(add)) return {nullptr, -1};
    for (int k = 0; k < 2; ++k) {
      const Node& m = g_.node(add.inputs[size_t(k)]);
      const Node& b = g_.node(add.inputs[size_t(1 - k)]);
      if (m.op != Op::MatMul || !open(m) || !(m.shape == add.shape) || m.shape.rank() < 1) continue;
      if (b.shape.rank() == 1 && b.shape.dtype == m.shape.dtype &&
          b.shape.dims[0] == m.shape.dims.back())
        return {&m, b.id};
    }
    return {nullptr, -1};
  }

  static bool has_residual(const Node& p) {
    return p.op == Op::Conv ? p.attrs_as<ConvAttrs>().residual : p.attrs_as<MatMulAttrs>().residual;
  }

  // What an add fuses into: a conv/matmul, with a matmul's bias and/or a
  // residual (-1: none), through `via` (a bias add between them) or not.
  struct AddFusion {
    const Node* into = nullptr;
    NodeId bias = -1, residual = -1;
    const Node* via = nullptr;
    // The residual add reads the product through this view (torch's addmm +
    // view + skip connection): the residual is viewed as the product, and
    // the fused node viewed back.
    const Node* view = nullptr;
  };

  // add(p, r) for a conv or matmul p, or a matmul's bias add p (either maybe
  // through a view read by nothing else), and r of the add's shape and dtype.
  // p has no residual or activation yet (r is added before the activation); a
  // matmul may have its bias.
  AddFusion residual_add(const Node& add) const {
    if (add.op != Op::Add || !float_node(add) || !add.shape.is_static()) return {};
    for (int k = 0; k < 2; ++k) {
      const Node* c = &g_.node(add.inputs[size_t(k)]);
      const Node& r = g_.node(add.inputs[size_t(1 - k)]);
      if (c->id == r.id || !(c->shape == add.shape) || !(r.shape == add.shape)) continue;
      const Node* view = nullptr;
      if (c->op == Op::Reshape && uses_[size_t(c->id)] == 1) {
        view = c;
        c = &g_.node(c->inputs[0]);
        if (!c->shape.is_static()) continue;
      }
      if (c->op == Op::Add && uses_[size_t(c->id)] == 1)
        if (auto [m, bias] = matmul_bias(*c); m) return {m, bias, r.id, c, view};
      if ((c->op == Op::Conv || c->op == Op::MatMul) && open(*c, false) && !has_residual(*c))
        return {c, -1, r.id, nullptr, view};
    }
    return {};
  }

  AddFusion fusable_add(const Node& add) const {
    if (auto [m, bias] = matmul_bias(add); m) return {m, bias, -1, nullptr};
    return residual_add(add);
  }

  // `n` becomes the producer f.into with f's bias and residual and `act`
  // fused; `also` is a further node fused on the way (for its origin).
  void replace(const Node& n, const AddFusion& f, Epilogue act, const Node* also = nullptr) {
    const Node& p = *f.into;
    std::vector<NodeId> ins;
    for (NodeId in : p.inputs) ins.push_back(rw_.mapped(in));
    if (f.bias >= 0) ins.push_back(rw_.mapped(f.bias));
    if (f.residual >= 0)
      ins.push_back(f.view ? rw_.out().add(Op::Reshape, {rw_.mapped(f.residual)},
                                           ReshapeAttrs{.shape = p.shape.concrete()}, {}, n.origin)
                           : rw_.mapped(f.residual));
    OpAttrs attrs = p.attrs;
    const bool residual = f.residual >= 0;
    if (auto* c = std::get_if<ConvAttrs>(&attrs)) {
      c->activation = act;
      c->residual = c->residual || residual;
    }
    if (auto* m = std::get_if<MatMulAttrs>(&attrs)) {
      m->activation = act;
      m->residual = m->residual || residual;
    }
    std::string origin = p.origin;
    for (const Node* v : {f.via, f.view, also})
      if (v) origin = join_origins(origin, v->origin);
    origin = join_origins(origin, n.origin);
    if (!f.view) {
      rw_.map(n.id, rw_.out().add_typed(p.op, std::move(ins), std::move(attrs), n.name, origin));
      return;
    }
    const NodeId fused = rw_.out().add_typed(p.op, std::move(ins), std::move(attrs), {}, origin);
    rw_.map(n.id, rw_.out().add(Op::Reshape, {fused}, ReshapeAttrs{.shape = n.shape.concrete()},
                                n.name, origin));
  }

  bool fuse(const Node& n) {
    if (n.op == Op::Add) {
      // An add whose only reader is an activation fuses with it instead.
      if (uses_[size_t(n.id)] == 1 && reader_is_activation(n)) return false;
      const AddFusion f = fusable_add(n);
      if (!f.into) return false;
      replace(n, f, Epilogue::none);
      return true;
    }
    const Epilogue act = epilogue_of(n);
    if (act == Epilogue::none || !float_node(n)) return false;
    // act(reshape(x)) = reshape(act(x)): torch's addmm + view + gelu (GPT-2's
    // MLP) fuses too, and the view moves after the fused node.
    const Node* view = nullptr;
    const Node* p = &g_.node(n.inputs[0]);
    if (p->op == Op::Reshape && uses_[size_t(p->id)] == 1 && n.shape.is_static()) {
      view = p;
      p = &g_.node(p->inputs[0]);
    }
    const Node& at = view ? *view : n;  // the node the fused producer replaces
    if (open(*p, false)) {
      replace(at, AddFusion{p}, act, view ? &n : nullptr);
    } else {
      if (uses_[size_t(p->id)] != 1) return false;
      AddFusion f = fusable_add(*p);
      if (!f.into) return false;
      replace(at, f, act, p);  // p: the add between them
    }
    if (view)
      rw_.map(n.id, rw_.out().add(Op::Reshape, {rw_.mapped(view->id)},
                                  ReshapeAttrs{.shape = n.shape.concrete()}, n.name, view->origin));
    return true;
  }

  // Whether the last node reading `n` is an activation the epilogue takes,
  // directly or through a reshape read by nothing else.
  bool reader_is_activation(const Node& n) const {
    NodeId r = reader_[size_t(n.id)];
    if (r >= 0 && g_.node(r).op == Op::Reshape && uses_[size_t(r)] == 1) r = reader_[size_t(r)];
    return r >= 0 && epilogue_of(g_.node(r)) != Epilogue::none && float_node(g_.node(r));
  }

  const Graph& g_;
  Rewriter rw_;
  std::vector<int> uses_;
  std::vector<NodeId> reader_;  // the last node reading each node, or -1
};

class EpiloguePass final : public Pass {
 public:
  std::string_view name() const override { return "epilogue"; }
  std::string_view description() const override {
    return "fuse a bias add, a residual add and an activation (relu, relu6, gelu, silu, "
           "sigmoid, tanh, hard_swish) into the conv/matmul before them";
  }
  Graph run(const Graph& g, const PassContext&) const override { return fuse_epilogues(g); }
};

// A constant that scales or shifts a conv's output [N, O, ...] by one value
// per output channel (a scalar, or [O, 1, ...] / [1, O, 1, ...] right-aligned),
// as doubles; empty when it is not one.
std::vector<double> per_channel(const Tensor& t, const Shape& out) {
  const int r = out.rank();
  if (t.dtype() != DType::F32 || t.rank() > r || r < 2 || !out.dims[1].is_static()) return {};
  const int64_t O = out.dims[1].value;
  const Tensor c = t.contiguous();
  if (c.numel() == 1) return std::vector<double>(size_t(O), double(c.data<float>()[0]));
  for (int d = 0; d < c.rank(); ++d) {
    const int axis = r - c.rank() + d;  // the output dim this one broadcasts over
    if (c.dims()[size_t(d)] != (axis == 1 ? O : 1)) return {};
  }
  return std::vector<double>(c.data<float>(), c.data<float>() + O);
}

// Folds into the conv before it, whose weights are constants and which
// nothing else reads: an inference batch_norm (mean, var, gamma, beta) as
// w' = w * s, b' = (b - mean) * s + beta per output channel, s = gamma / sqrt(var + eps);
// and a per-channel constant multiply (w' = w * s, b' = b * s) or add
// (b' = b + t), the learnable affine that PP-LCNet-style exports put after
// every conv. Convs are looked up in the rewritten graph, so a chain
// conv -> mul -> add -> batch_norm folds in one walk.
Graph fold_conv_batchnorm(const Graph& g) {
  const std::vector<int> uses = use_counts(g);
  Rewriter rw(g);
  auto constant = [&](NodeId id) -> const Tensor* {  // id in the rewritten graph
    const Node& c = rw.out().node(id);
    return c.op == Op::Constant ? &c.value : nullptr;
  };
  // The rewritten conv that node n's input k is, when it can absorb n.
  auto open_conv = [&](const Node& n, size_t k) -> const Node* {
    if (uses[size_t(n.inputs[k])] != 1) return nullptr;
    const Node& conv = rw.out().node(rw.mapped(n.inputs[k]));
    const bool ok = conv.op == Op::Conv && conv.shape.dtype == DType::F32 &&
                    conv.attrs_as<ConvAttrs>().activation == Epilogue::none &&
                    !conv.attrs_as<ConvAttrs>().residual && constant(conv.inputs[1]) &&
                    (conv.inputs.size() == 2 || constant(conv.inputs[2])) && conv.shape == n.shape;
    return ok ? &conv : nullptr;
  };
  for (const Node& n : g.nodes()) {
    const Node* conv = nullptr;
    std::vector<double> scale, shift;  // per output channel: y' = y * scale + shift
    if (n.op == Op::BatchNorm && (conv = open_conv(n, 0))) {
      std::vector<const float*> p;  // mean, var, gamma, beta
      for (size_t k = 1; k < 5; ++k) {
        const Tensor* t = constant(rw.mapped(n.inputs[k]));
        if (!t || t->dtype() != DType::F32) break;
        p.push_back(t->data<float>());
      }
      if (p.size() == 4) {
        const double eps = n.attrs_as<EpsAttrs>().eps;
        for (int64_t o = 0; o < conv->shape.dims[1].value; ++o) {
          scale.push_back(double(p[2][o]) / std::sqrt(double(p[1][o]) + eps));
          shift.push_back(double(p[3][o]) - double(p[0][o]) * scale.back());
        }
      }
    } else if (n.op == Op::Mul || n.op == Op::Add) {
      for (size_t k = 0; k < 2 && scale.empty(); ++k) {
        const Tensor* t = constant(rw.mapped(n.inputs[1 - k]));
        if (!t || !(conv = open_conv(n, k))) continue;
        std::vector<double> v = per_channel(*t, conv->shape);
        if (v.empty()) continue;
        const bool mul = n.op == Op::Mul;
        scale = mul ? v : std::vector<double>(v.size(), 1.0);
        shift = mul ? std::vector<double>(v.size(), 0.0) : v;
      }
    }
    if (scale.empty()) {
      rw.copy(n.id);
      continue;
    }
    const Tensor& w = *constant(conv->inputs[1]);
    const Tensor* b = conv->inputs.size() == 3 ? constant(conv->inputs[2]) : nullptr;
    const int64_t O = w.dims()[0], per = O ? w.numel() / O : 0;
    Tensor w2(w.dims(), DType::F32), b2(Dims{O}, DType::F32);
    for (int64_t o = 0; o < O; ++o) {
      const double s = scale[size_t(o)];
      for (int64_t i = 0; i < per; ++i)
        w2.data<float>()[o * per + i] = float(double(w.data<float>()[o * per + i]) * s);
      const double bias = b ? double(b->data<float>()[o]) : 0.0;
      b2.data<float>()[o] = float(bias * s + shift[size_t(o)]);
    }
    // Taken before adding nodes, which may move the rewritten graph's nodes.
    const NodeId x = conv->inputs[0];
    const OpAttrs attrs = conv->attrs;
    const std::string origin = join_origins(conv->origin, n.origin);
    const std::string w_name = rw.out().node(conv->inputs[1]).name;
    NodeId wn = rw.out().constant(w2, w_name);
    NodeId bn = rw.out().constant(b2);
    rw.map(n.id, rw.out().add_typed(Op::Conv, {x, wn, bn}, attrs, n.name, origin));
  }
  return rw.finish();
}

class ConvBnPass final : public Pass {
 public:
  std::string_view name() const override { return "conv_bn"; }
  std::string_view description() const override {
    return "fold an inference batch_norm, and constant per-channel multiplies and adds, into the "
           "conv before them (new weights and bias)";
  }
  unsigned needs() const override { return kParamsBound; }
  Graph run(const Graph& g, const PassContext&) const override { return fold_conv_batchnorm(g); }
};

}  // namespace

Graph fuse_epilogues(const Graph& g) { return Fuser(g).run(); }
Graph fold_batchnorm_into_conv(const Graph& g) { return fold_conv_batchnorm(g); }
std::unique_ptr<Pass> make_epilogue_pass() { return std::make_unique<EpiloguePass>(); }
std::unique_ptr<Pass> make_conv_bn_pass() { return std::make_unique<ConvBnPass>(); }

}  // namespace rlx::opt
