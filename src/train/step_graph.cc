// One whole training step as a pure graph: forward, backward, clipping and the
// optimizer's update written as IR ops, so a backend with no Trainer (CoreML)
// runs training by calling it once per step and feeding its next__ outputs
// back. The update formulas are Optimizer's (optimizer.cc), op for op.
#include <cctype>
#include <cmath>
#include <cstring>
#include <set>

#include "rlx/autodiff.h"
#include "rlx/builder.h"
#include "rlx/error.h"
#include "rlx/train.h"
#include "train/before_autodiff.h"
#include "train/trained_set.h"

namespace rlx::train {
namespace {

// A MIL-valid identifier (letters, digits, '_'; not starting with a digit).
std::string identifier(const std::string& s) {
  std::string r;
  for (char c : s) r += std::isalnum(uint8_t(c)) ? c : '_';
  if (r.empty() || std::isdigit(uint8_t(r[0]))) r = "_" + r;
  return r;
}

// The update of one param: its new value, and its buffers' (by torch's buffer name).
struct Update {
  NodeId param = -1;
  std::vector<std::pair<std::string, NodeId>> buffers;
};

class StepBuilder {
 public:
  // t: the update's number (1 for the first), which the bias corrections and
  // SGD's first step depend on.
  StepBuilder(Graph& g, const OptimizerOptions& o, NodeId lr, NodeId t)
      : b_(g), o_(o), lr_(lr), t_(t) {}

  NodeId c(double v) { return b_.scalar(float(v)); }

  // `buf(name)` makes (or returns) the state input of buffer `name`.
  template <typename Buf>
  Update update(NodeId p, NodeId g, Buf&& buf) {
    Update u;
    const double wd = o_.weight_decay;
    switch (o_.kind) {
      case OptimizerKind::sgd: {
        NodeId d = g;
        if (wd != 0) d = b_.add(d, b_.mul(c(wd), p));
        if (o_.momentum != 0) {
          const NodeId old = buf("momentum_buffer");
          // torch starts the buffer at d on the first step.
          const NodeId later = b_.add(b_.mul(old, c(o_.momentum)), b_.mul(c(1 - o_.dampening), d));
          const NodeId first = b_.binary(Op::Eq, t_, c(1));
          const NodeId mb = b_.op(Op::Where, {first, d, later});
          u.buffers.emplace_back("momentum_buffer", mb);
          d = o_.nesterov ? b_.add(d, b_.mul(c(o_.momentum), mb)) : mb;
        }
        u.param = b_.sub(p, b_.mul(lr_, d));
        break;
      }
      case OptimizerKind::adam:
      case OptimizerKind::adamw: {
        NodeId d = g, w = p;
        if (wd != 0) {
          if (o_.kind == OptimizerKind::adamw)
            w = b_.mul(w, b_.sub(c(1), b_.mul(lr_, c(wd))));
          else
            d = b_.add(d, b_.mul(c(wd), w));
        }
        const NodeId m = b_.add(b_.mul(buf("exp_avg"), c(o_.beta1)), b_.mul(c(1 - o_.beta1), d));
        const NodeId v =
            b_.add(b_.mul(buf("exp_avg_sq"), c(o_.beta2)), b_.mul(c(1 - o_.beta2), b_.mul(d, d)));
        const NodeId bc1 = one_minus_pow(o_.beta1), bc2 = one_minus_pow(o_.beta2);
        const NodeId step_size = b_.div(lr_, bc1);
        const NodeId denom =
            b_.add(b_.div(b_.unary(Op::Sqrt, v), b_.unary(Op::Sqrt, bc2)), c(o_.eps));
        u.param = b_.sub(w, b_.mul(step_size, b_.div(m, denom)));
        u.buffers = {{"exp_avg", m}, {"exp_avg_sq", v}};
        break;
      }
      case OptimizerKind::lion: {
        const NodeId w = wd != 0 ? b_.mul(p, b_.sub(c(1), b_.mul(lr_, c(wd)))) : p;
        const NodeId m = buf("exp_avg");
        const NodeId dir =
            b_.unary(Op::Sign, b_.add(b_.mul(m, c(o_.beta1)), b_.mul(c(1 - o_.beta1), g)));
        u.param = b_.sub(w, b_.mul(lr_, dir));
        u.buffers = {{"exp_avg", b_.add(b_.mul(m, c(o_.beta2)), b_.mul(c(1 - o_.beta2), g))}};
        break;
      }
    }
    return u;
  }

  // 1 - beta^t without f32's cancellation (1 - 0.999f is off by 1e-5): with
  // L = t log(beta) (the log taken in double), -expm1(L) by its Taylor series
  // while |L| < 0.1, 1 - exp(L) beyond. The Optimizer computes it in double.
  NodeId one_minus_pow(double beta) {
    const NodeId L = b_.mul(t_, c(std::log(beta)));
    NodeId series = c(1.0 / 720);
    for (double k : {120.0, 24.0, 6.0, 2.0, 1.0}) series = b_.add(c(1 / k), b_.mul(L, series));
    const NodeId small = b_.unary(Op::Neg, b_.mul(L, series));
    const NodeId big = b_.sub(c(1), b_.unary(Op::Exp, L));
    return b_.op(Op::Where, {b_.binary(Op::Lt, b_.unary(Op::Abs, L), c(0.1)), small, big});
  }

  // clip_grad_norm's factor min(1, max_norm / (norm + 1e-6)) over all grads.
  NodeId clip_scale(const std::vector<NodeId>& grads, double max_norm) {
    NodeId sq = -1;
    for (NodeId g : grads) {
      const NodeId s = b_.reduce(Op::ReduceSum, b_.mul(g, g), {});
      sq = sq < 0 ? s : b_.add(sq, s);
    }
    const NodeId norm = b_.unary(Op::Sqrt, sq);
    return b_.binary(Op::Min, c(1), b_.div(c(max_norm), b_.add(norm, c(1e-6))));
  }

 private:
  Builder b_;
  const OptimizerOptions& o_;
  NodeId lr_, t_;
};

}  // namespace

StepGraph training_step_graph(const Model& model, const OptimizerOptions& opt, double clip_norm) {
  Optimizer check(opt);  // the options' own checks
  Model fused = model;
  fused.graph = before_autodiff(model.graph, {});
  const TrainedSet ts = trained_set(fused);  // the Trainer's params and buffers
  Graph& g = fused.graph;
  const std::string& src = model.source;
  for (const Node& n : g.nodes())
    RLX_CHECK(n.shape.is_static(), src, ": ", n.label(), " has symbolic dims ", n.shape.str(),
              "; a training step graph needs static shapes (bind them, e.g. rlx compile "
              "--input-shape, or export with a fixed batch)");

  StepGraph sg;
  // rlx::step (seeded dropout) is no MIL identifier: the step takes it as kDropoutStepInput.
  for (NodeId id : g.inputs())
    if (g.node(id).name == kStepInput) g.node(id).name = kDropoutStepInput;
  std::set<std::string> taken;
  for (NodeId id : g.inputs()) taken.insert(g.node(id).name);
  // A state input: a node turned into (or made as) an input named `name`, fed `initial`.
  auto state_input = [&](const std::string& name, const std::string& holds, const Tensor& initial) {
    RLX_CHECK(taken.insert(name).second, src, ": the training step's input '", name,
              "' collides with another input");
    sg.holds[name] = holds;
    sg.initial[name] = initial;
  };

  const std::vector<std::string>& trained = ts.params;
  std::vector<NodeId> wrt;
  for (const std::string& name : trained)
    for (const Node& n : g.nodes())
      if (n.op == Op::Param && n.name == name) wrt.push_back(n.id);
  std::vector<NodeId> grads;
  try {
    grads = grad(g, ts.loss, wrt);
  } catch (const Error& e) {
    throw e.with_context(src + ": differentiating the loss");
  }

  Builder b(g);
  const NodeId lr = b.input(kLrInput, Shape(Dims{}, DType::F32));
  const NodeId t = b.input(kOptimStepInput, Shape(Dims{}, DType::F32));
  taken.insert(kLrInput);
  taken.insert(kOptimStepInput);
  StepBuilder step(g, opt, lr, t);
  if (clip_norm > 0) {
    const NodeId scale = step.clip_scale(grads, clip_norm);
    for (NodeId& gr : grads) gr = b.mul(gr, scale);
  }

  // Outputs: the model's own (loss, logits; not the update:: ones), then next__X per state X.
  std::vector<GraphOutput> outs;
  for (const auto& o : g.outputs())
    if (!o.name.starts_with(kUpdatePrefix) && !o.name.starts_with(kGradPrefix)) outs.push_back(o);
  for (size_t i = 0; i < wrt.size(); ++i) {
    const std::string& name = trained[i];
    const Tensor& w = model.weights.at(name);
    const std::string in = identifier("param__" + name);
    g.node(wrt[i]).op = Op::Input;
    g.node(wrt[i]).name = in;
    state_input(in, name, w.to(DType::F32).clone());
    const Update u = step.update(wrt[i], grads[i], [&](const std::string& buf) {
      const std::string bin = identifier(buf + "__" + name);
      state_input(bin, std::string(kOptimPrefix) + buf + "::" + name, Tensor(w.dims(), DType::F32));
      return b.input(bin, Shape(w.dims(), DType::F32));
    });
    outs.push_back({std::string(kNextPrefix) + in, u.param});
    for (const auto& [buf, node] : u.buffers)
      outs.push_back({std::string(kNextPrefix) + identifier(buf + "__" + name), node});
  }
  // Buffers with update:: outputs (BatchNorm running statistics) carry over as state too.
  for (const auto& o : g.outputs()) {
    if (!o.name.starts_with(kUpdatePrefix)) continue;
    const std::string buf = o.name.substr(std::strlen(kUpdatePrefix));
    const std::string in = identifier("buffer__" + buf);
    for (NodeId id = 0; id < NodeId(g.size()); ++id)
      if (Node& n = g.node(id); n.op == Op::Param && n.name == buf) {
        n.op = Op::Input;
        n.name = in;
      }
    state_input(in, buf, model.weights.at(buf).clone());
    outs.push_back({std::string(kNextPrefix) + in, o.node});
  }
  g.outputs() = std::move(outs);
  // What the step does not change stays a bound weight.
  sg.weights = model.weights;
  for (const std::string& name : ts.params) sg.weights.erase(name);
  for (const std::string& name : ts.buffers) sg.weights.erase(name);
  g.verify();
  sg.graph = std::move(g);
  return sg;
}

}  // namespace rlx::train
