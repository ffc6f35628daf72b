// Training: optimizers with torch.optim's update formulas, learning-rate
// schedules, global grad-norm clipping, and a Trainer that turns a model whose
// graph has a `loss` output into one compiled forward+backward step.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "rlx/io.h"
#include "rlx/model.h"
#include "rlx/runtime.h"

namespace rlx::train {

// ---- optimizers -------------------------------------------------------------

enum class OptimizerKind { sgd, adam, adamw, lion };
// "sgd" | "adam" | "adamw" | "lion"; throws rlx::Error listing them otherwise.
OptimizerKind parse_optimizer(std::string_view name);
const char* optimizer_name(OptimizerKind kind);

struct OptimizerOptions {
  OptimizerKind kind = OptimizerKind::sgd;
  double momentum = 0, dampening = 0;  // sgd
  bool nesterov = false;               // sgd: needs momentum > 0 and dampening 0 (as torch)
  // sgd/adam: L2 added to the gradient; adamw/lion: decoupled, p *= 1 - lr * wd.
  double weight_decay = 0;
  double beta1 = 0.9, beta2 = 0.999;  // adam/adamw; lion's defaults are 0.9, 0.99
  double eps = 1e-8;                  // adam/adamw
};

// Per-parameter state plus a step count, updated in place. Formulas are those
// of torch.optim (1.13) SGD, Adam and AdamW (amsgrad off), and of the Lion
// paper (Chen et al. 2023; lion-pytorch): one fused pass over param, grad and
// state per tensor, split over the thread pool for large tensors.
class Optimizer {
 public:
  explicit Optimizer(OptimizerOptions options);
  const OptimizerOptions& options() const { return options_; }

  // One update of every param in `params` (f32, contiguous, owned: updated in
  // place) with grads[name] * grad_scale (the clipping factor) at learning
  // rate `lr`. Every param needs a grad of its dims.
  void step(TensorMap& params, const TensorMap& grads, double lr, double grad_scale = 1);
  int64_t steps() const { return steps_; }

  // Checkpointing: "optim::step" (i64 scalar) and "optim::<buffer>::<param>"
  // (momentum_buffer, exp_avg, exp_avg_sq), named as torch's state_dict names them.
  TensorMap state() const;
  // Restores what state() returned (other keys are ignored); throws when a
  // buffer's dims differ from the param it belongs to.
  void load_state(const TensorMap& state, const TensorMap& params);

 private:
  OptimizerOptions options_;
  int64_t steps_ = 0;
  std::map<std::string, std::map<std::string, Tensor>> state_;  // buffer -> param -> tensor
  Tensor& buffer(const std::string& kind, const std::string& param, const Dims& dims);
};

inline constexpr const char* kOptimPrefix = "optim::";

// ---- learning-rate schedules --------------------------------------------------

enum class ScheduleKind { constant, step, cosine };
ScheduleKind parse_schedule(std::string_view name);  // "constant" | "step" | "cosine"
const char* schedule_name(ScheduleKind kind);

struct ScheduleOptions {
  ScheduleKind kind = ScheduleKind::constant;
  double lr = 1e-3;         // the base learning rate
  int64_t warmup = 0;       // steps of linear warmup from lr/warmup up to lr
  int64_t step_size = 1;    // step: multiply by gamma every step_size steps (torch StepLR)
  double gamma = 0.1;       // step
  int64_t total_steps = 0;  // cosine: steps over which lr falls to min_lr (warmup included)
  double min_lr = 0;        // cosine: torch CosineAnnealingLR's eta_min
};

// The learning rate of update number `step` (0-based). During warmup it is
// lr * (step + 1) / warmup; after it, the schedule runs on step - warmup:
// constant lr; step lr * gamma^floor(t / step_size); cosine
// min_lr + (lr - min_lr) * (1 + cos(pi * t / (total_steps - warmup))) / 2,
// held at min_lr past the end (torch's closed forms).
double learning_rate(const ScheduleOptions& s, int64_t step);

// ---- gradient clipping ---------------------------------------------------------

// The global 2-norm of all grads together (torch.nn.utils.clip_grad_norm_'s
// total_norm), and the factor the grads are to be multiplied by:
// min(1, max_norm / (norm + 1e-6)); max_norm <= 0 means no clipping (factor 1).
struct ClipResult {
  double norm = 0, scale = 1;
};
ClipResult clip_grad_norm(const TensorMap& grads, double max_norm);

// ---- gradients (`rlx grad`, rlx.grad) ----------------------------------------------

struct Gradients {
  TensorMap outputs;  // the model's outputs
  TensorMap grads;    // kGradPrefix + name for every trained param and float input
};
// What compute_gradients' errors name: the model, where the inputs and the
// cotangents came from, and how to give cotangents (appended when a model
// without a loss was differentiated without them).
struct GradientSources {
  std::string model = "model", inputs = "the inputs", cotangents = "the cotangents";
  std::string cotangent_hint;
};
// Forward and backward of `m` on `inputs` (every graph input, by name);
// symbolic dims are bound to the inputs' dims first (autodiff needs static
// shapes). With `cotangents` (one per float output, by output name) the
// gradients are those of sum_o <ct_o, o>; without, of the loss
// (GradientGraphOptions).
Gradients compute_gradients(Model m, const TensorMap& inputs, const TensorMap* cotangents,
                            const CompileOptions& options = {},
                            const GradientSources& sources = {});

// ---- Trainer --------------------------------------------------------------------

struct TrainerOptions {
  OptimizerOptions optimizer;
  ScheduleOptions schedule;
  double clip_norm = 0;  // > 0: global grad-norm clipping
  CompileOptions compile;
  // Called after backward with every trained param's gradient (by param name,
  // writable in place), before clipping and the update: data-parallel
  // training averages them across processes here.
  std::function<void(TensorMap& grads)> on_gradients;
  // Called after a step's buffer updates (update:: outputs, such as BatchNorm
  // running statistics) with those buffers, writable in place: data-parallel
  // training averages the float ones so every process keeps the same.
  std::function<void(TensorMap& buffers)> on_buffers;
};

// Graph outputs named update::<buffer> are the new values of non-trainable
// buffers (BatchNorm running statistics); the Trainer copies them into the
// buffer after each step. An i64 scalar input named rlx::step, when the graph
// declares one, is fed the number of the current step (seeded dropout).
inline constexpr const char* kUpdatePrefix = "update::";
inline constexpr const char* kStepInput = "rlx::step";
inline constexpr const char* kLossOutput = "loss";

// Trains a model whose graph has an output named `loss` (a float of one
// element); other outputs are allowed. Every float param not in
// Model::non_trainable is trained (they must be f32). Params become graph
// inputs of the compiled step, so passes never fold a weight that changes
// every step. Graphs with symbolic dims are specialized per batch shape (one
// compiled step per distinct shape, cached).
class Trainer {
 public:
  // Throws rlx::Error when the graph has no `loss` output, the loss is not one
  // float element, or no param is trainable.
  Trainer(Model model, TrainerOptions options);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Forward + backward on `batch` (every graph input but rlx::step, by name;
  // nothing else), clipping, one optimizer update, buffer updates. Returns
  // the loss (of the weights before the update).
  float step(const TensorMap& batch);
  // The forward graph on `batch` with the current weights: every output but
  // the update:: ones. Changes nothing.
  TensorMap evaluate(const TensorMap& batch);

  // The last step's outputs other than gradients and buffer updates (loss,
  // logits, ...), owned copies.
  const TensorMap& last_outputs() const { return last_outputs_; }
  // The global grad norm of the last step (before clipping). Without
  // clipping it is computed when first asked for, from that step's gradients.
  double last_grad_norm() const;
  double last_lr() const { return last_lr_; }
  int64_t step_count() const { return optimizer_.steps(); }
  const std::vector<std::string>& trainable() const { return trainable_; }
  const std::vector<std::string>& data_inputs() const { return data_inputs_; }
  const Model& model() const { return model_; }
  // Times every node of the training steps that follow (rlx train --profile);
  // turning it on clears what was gathered.
  void set_profiling(bool on);
  // The per-node times of the compiled training step that ran most (the
  // usual batch shape), with its graph; null when profiling is off or no
  // step ran.
  struct StepProfile {
    const Graph* graph = nullptr;
    const std::vector<NodeTime>* times = nullptr;
    size_t arena_bytes = 0;  // its peak activation memory (the arena of its plan)
  };
  StepProfile profile() const;
  // Replaces the schedule (the CLI knows steps per epoch only after reading data).
  void set_schedule(const ScheduleOptions& s) { options_.schedule = s; }
  // Every weight of the model, the trained ones with their current values.
  TensorMap weights() const;

  // Weights, optimizer state ("optim::..."), by name; load_state restores
  // them (the step count with the optimizer's).
  TensorMap state() const;
  void load_state(const TensorMap& state);
  // The model's graph and current weights as an rlx model directory
  // (model.rlx.json + weights.safetensors), loadable by load_model / rlx run.
  void save(const std::string& dir) const;

 private:
  struct Compiled;
  Compiled& compiled(const TensorMap& feed, bool train);
  TensorMap feed_for(const TensorMap& batch) const;

  Model model_;
  TrainerOptions options_;
  Optimizer optimizer_;
  std::vector<std::string> trainable_, data_inputs_, updated_;
  TensorMap params_;   // trained params: owned f32 copies, updated in place
  TensorMap buffers_;  // buffers with update:: outputs: owned copies
  bool has_step_input_ = false, profiling_ = false;
  std::map<std::string, std::unique_ptr<Compiled>> cache_;  // "train|dims..." -> step
  TensorMap last_outputs_;
  mutable double last_norm_ = 0;
  double last_lr_ = 0;
  mutable TensorMap unmeasured_grads_;  // the last step's, until last_grad_norm() reads them
};

// ---- a training step as one graph (`rlx compile --train`, CoreML) ----------------

// A whole step (forward, backward, clipping, the optimizer's update) as a pure
// graph, for runtimes with no Trainer: every tensor the step changes is a
// state input X (a trained param `param__<name>`, an optimizer buffer
// `<buffer>__<name>` such as exp_avg__fc1_weight, a buffer with an update::
// output `buffer__<name>`; names made MIL identifiers) and the graph returns
// its next value as output next__X, to be fed back as X on the next call.
// The other inputs are the model's data inputs, kLrInput (this step's
// learning rate: schedules stay with the caller) and kOptimStepInput (the
// update's number, 1 for the first, which Adam's bias corrections and SGD's
// first momentum step read); the other outputs are the model's (loss,
// logits, ...). The formulas are Optimizer's, op for op.
inline constexpr const char* kNextPrefix = "next__";
inline constexpr const char* kLrInput = "lr";                 // f32 []
inline constexpr const char* kOptimStepInput = "optim_step";  // f32 []
// The model's rlx::step input (seeded dropout), renamed: MIL identifiers have no "::".
inline constexpr const char* kDropoutStepInput = "rlx_step";
struct StepGraph {
  Graph graph;
  TensorMap weights;                         // params that stay constant
  TensorMap initial;                         // every state input's first value
  std::map<std::string, std::string> holds;  // state input -> what it is ("fc1.weight",
                                             // "optim::exp_avg::fc1.weight")
};
// Throws rlx::Error when the model has no one-element float `loss`, has
// symbolic dims (export with a fixed batch), or trains no f32 param.
StepGraph training_step_graph(const Model& model, const OptimizerOptions& optimizer,
                              double clip_norm = 0);

// ---- training curves -------------------------------------------------------------

// A named series of (x, y) points for write_curves_svg; `axis` picks the panel
// ("loss" or "accuracy": one panel per distinct axis, left to right).
struct Curve {
  std::string name, axis;
  std::vector<double> x, y;
  double width = 2;    // stroke width
  bool points = true;  // mark each point (only drawn for curves of <= 64 points)
};
// A self-contained SVG plot (axes, ticks, a legend per panel), written atomically.
void write_curves_svg(const std::string& path, const std::vector<Curve>& curves,
                      const std::string& title);
std::string curves_svg(const std::vector<Curve>& curves, const std::string& title);

}  // namespace rlx::train
