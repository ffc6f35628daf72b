// Trainer: one compiled forward+backward graph per batch shape (trained
// params turned into inputs so no pass folds them), then clipping, the
// optimizer and the update:: buffer copies on the host.
#include <algorithm>
#include <cstring>
#include <set>

#include "opt/passes.h"
#include "rlx/autodiff.h"
#include "rlx/error.h"
#include "rlx/train.h"
#include "train/before_autodiff.h"
#include "train/trained_set.h"

namespace rlx::train {

struct Trainer::Compiled {
  std::shared_ptr<Executable> exe;
  std::unique_ptr<Session> session;
  bool train = false;
};

namespace {

NodeId output_node(const Graph& g, const std::string& name) {
  for (const auto& o : g.outputs())
    if (o.name == name) return o.node;
  return -1;
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

bool is_symbolic(const Graph& g) {
  for (const Node& n : g.nodes())
    if (!n.shape.is_static()) return true;
  return false;
}

// Copies `src` into the owned tensor `dst` (same dims and dtype).
void copy_into(Tensor& dst, const Tensor& src, const std::string& what) {
  RLX_CHECK(src.dims() == dst.dims() && src.dtype() == dst.dtype(), what, " is ", src.shape().str(),
            ", expected ", dst.shape().str());
  const Tensor c = src.contiguous();
  std::memcpy(dst.raw(), c.raw(), dst.nbytes());
}

}  // namespace

Trainer::Trainer(Model model, TrainerOptions options)
    : model_(std::move(model)), options_(std::move(options)), optimizer_(options_.optimizer) {
  if (options_.compile.qat_bits) {
    // Quantization-aware training: fake_quantize goes into the forward graph before autodiff, so
    // the loss sees quantized weights and the gradient reaches the float params through the
    // straight-through estimator; the saved model keeps the fake_quantize nodes. The compiled
    // step must not run the pass again on the gradient graph.
    model_.graph = opt::insert_fake_quant(model_.graph, options_.compile.qat_bits,
                                          options_.compile.qat_activations);
    options_.compile.qat_bits = 0;
    options_.compile.qat_activations = false;
  }
  const TrainedSet ts = trained_set(model_);
  for (const Node& n : model_.graph.nodes()) {
    if (n.op != Op::Input) continue;
    if (n.name == kStepInput) {
      RLX_CHECK(n.shape.dtype == DType::I64 && n.shape.rank() == 0, model_.source, ": input '",
                kStepInput, "' must be an i64 scalar, got ", n.shape.str());
      has_step_input_ = true;
    } else {
      data_inputs_.push_back(n.name);
    }
  }
  trainable_ = ts.params;
  for (const std::string& name : trainable_)  // owned: weights may be mmapped
    params_[name] = model_.weights.at(name).to(DType::F32).clone();
  updated_ = ts.buffers;
  for (const std::string& name : updated_) buffers_[name] = model_.weights.at(name).clone();
}

Trainer::~Trainer() = default;

TensorMap Trainer::feed_for(const TensorMap& batch) const {
  TensorMap feed;
  for (const std::string& name : data_inputs_) {
    auto it = batch.find(name);
    RLX_CHECK(it != batch.end(), model_.source, ": the batch has no tensor for input '", name, "'");
    feed[name] = it->second;
  }
  for (const auto& [name, t] : batch)
    RLX_CHECK(feed.count(name), model_.source, ": the batch holds '", name,
              "', which is not an input of the model");
  for (const auto& [name, t] : params_) feed[name] = t;
  for (const auto& [name, t] : buffers_) feed[name] = t;
  if (has_step_input_)
    feed[kStepInput] = Tensor::from_vector<int64_t>({}, {step_count()}, DType::I64);
  return feed;
}

Trainer::Compiled& Trainer::compiled(const TensorMap& feed, bool train) {
  std::string key = train ? "train" : "eval";
  std::map<std::string, Dims> dims;
  for (const std::string& name : data_inputs_) {
    dims[name] = feed.at(name).dims();
    key += "|" + name + dims_str(dims[name]);
  }
  auto& slot = cache_[key];
  if (slot) return *slot;

  Graph g = model_.graph;
  if (is_symbolic(g)) {
    // Autodiff needs static shapes: bind symbolic dims to the batch's first.
    if (has_step_input_) dims[kStepInput] = {};
    CompileOptions only_specialize;
    only_specialize.opt_level = 0;
    only_specialize.input_shapes = dims;
    g = optimize_unbound(std::move(g), only_specialize);
  }
  std::set<std::string> as_inputs(trainable_.begin(), trainable_.end());
  as_inputs.insert(updated_.begin(), updated_.end());
  g = before_autodiff(std::move(g), options_.compile);
  if (train) {
    std::vector<NodeId> wrt;
    for (const std::string& name : trainable_)
      for (const Node& n : g.nodes())
        if (n.op == Op::Param && n.name == name) wrt.push_back(n.id);
    const NodeId loss = output_node(g, kLossOutput);
    const Shape& ls = g.node(loss).shape;
    RLX_CHECK(ls.numel() == 1, model_.source, ": the loss must have one element, got ", ls.str());
    std::vector<NodeId> grads;
    try {
      grads = grad(g, loss, wrt);
    } catch (const Error& e) {
      throw e.with_context(model_.source + ": differentiating the loss");
    }
    for (size_t i = 0; i < wrt.size(); ++i)
      g.add_output(kGradPrefix + g.node(wrt[i]).name, grads[i]);
  } else {
    auto& outs = g.outputs();
    std::erase_if(outs, [](const GraphOutput& o) { return starts_with(o.name, kUpdatePrefix); });
  }
  // Trained params and updated buffers change every step: inputs, not constants.
  for (NodeId id = 0; id < NodeId(g.size()); ++id) {
    Node& n = g.node(id);
    if (n.op == Op::Param && as_inputs.count(n.name)) n.op = Op::Input;
  }
  auto c = std::make_unique<Compiled>();
  c->exe = Executable::compile(std::move(g), model_.weights, options_.compile);
  c->session = std::make_unique<Session>(c->exe);
  c->train = train;
  if (train && profiling_) c->session->set_profiling(true);
  slot = std::move(c);
  return *slot;
}

float Trainer::step(const TensorMap& batch) {
  const TensorMap feed = feed_for(batch);
  Compiled& c = compiled(feed, true);
  const TensorMap out = c.session->run(feed);
  const float loss = float(out.at(kLossOutput).item_as_double(0));

  TensorMap grads;
  for (const std::string& name : trainable_) grads[name] = out.at(kGradPrefix + name);
  if (options_.on_gradients) options_.on_gradients(grads);
  // The norm costs a pass over every gradient: only clipping needs it now.
  ClipResult clip;
  unmeasured_grads_.clear();
  if (options_.clip_norm > 0) {
    clip = clip_grad_norm(grads, options_.clip_norm);
    last_norm_ = clip.norm;
  } else {
    unmeasured_grads_ = grads;
  }
  last_lr_ = learning_rate(options_.schedule, step_count());
  optimizer_.step(params_, grads, last_lr_, clip.scale);
  for (const std::string& name : updated_)
    copy_into(buffers_.at(name), out.at(kUpdatePrefix + name),
              model_.source + ": output '" + kUpdatePrefix + name + "'");
  if (options_.on_buffers && !updated_.empty()) {
    TensorMap updated;  // handles of buffers_' tensors: the hook writes them in place
    for (const std::string& name : updated_) updated[name] = buffers_.at(name);
    options_.on_buffers(updated);
  }

  last_outputs_.clear();
  for (const auto& [name, t] : out)
    if (!starts_with(name, kGradPrefix) && !starts_with(name, kUpdatePrefix))
      last_outputs_[name] = t.clone();  // output buffers are reused by the next run
  return loss;
}

void Trainer::set_profiling(bool on) {
  profiling_ = on;
  for (auto& [key, c] : cache_)
    if (c->train) c->session->set_profiling(on);
}

Trainer::StepProfile Trainer::profile() const {
  StepProfile best;
  int64_t most = 0;
  if (!profiling_) return best;
  for (const auto& [key, c] : cache_) {
    if (!c->train) continue;
    int64_t runs = 0;
    for (const NodeTime& t : c->session->profile()) runs = std::max(runs, t.runs);
    if (runs > most) {
      most = runs;
      best = {&c->exe->graph(), &c->session->profile(), c->session->last_arena_bytes()};
    }
  }
  return best;
}

double Trainer::last_grad_norm() const {
  if (!unmeasured_grads_.empty()) {
    last_norm_ = clip_grad_norm(unmeasured_grads_, 0).norm;
    unmeasured_grads_.clear();
  }
  return last_norm_;
}

TensorMap Trainer::evaluate(const TensorMap& batch) {
  const TensorMap feed = feed_for(batch);
  Compiled& c = compiled(feed, false);
  TensorMap out;
  for (const auto& [name, t] : c.session->run(feed)) out[name] = t.clone();
  return out;
}

TensorMap Trainer::weights() const {
  TensorMap w = model_.weights;
  for (const auto& [name, t] : params_) w[name] = t;
  for (const auto& [name, t] : buffers_) w[name] = t;
  return w;
}

TensorMap Trainer::state() const {
  TensorMap s = weights();
  for (auto& [name, t] : optimizer_.state()) s[name] = t;
  return s;
}

void Trainer::load_state(const TensorMap& state) {
  for (auto& [name, t] : params_) {
    auto it = state.find(name);
    RLX_CHECK(it != state.end(), "training state: no value for trained param '", name, "'");
    copy_into(t, it->second, "training state: '" + name + "'");
  }
  for (auto& [name, t] : buffers_) {
    auto it = state.find(name);
    RLX_CHECK(it != state.end(), "training state: no value for buffer '", name, "'");
    copy_into(t, it->second, "training state: '" + name + "'");
  }
  optimizer_.load_state(state, params_);
}

void Trainer::save(const std::string& dir) const { save_model(dir, model_.graph, weights()); }

}  // namespace rlx::train
