// rlx train MODEL --data TRAIN.safetensors [--eval EVAL.safetensors] --optimizer adamw
//   --lr 1e-3 --schedule cosine --warmup 100 --epochs N --batch B --out DIR [--resume DIR]
// Trains the model's `loss` output with shuffled mini-batches; after every
// epoch DIR holds the model (model.rlx.json + weights.safetensors, runnable by
// `rlx run`), checkpoint.safetensors (weights, optimizer state, step, epoch,
// curves) and curves.svg.
// Under `mpirun -np N`, the N processes train one model data-parallel: each
// takes a contiguous part of every global batch of --batch samples, the
// gradients are averaged with MPI_Allreduce, and rank 0 prints and writes.
#include <filesystem>
#include <memory>
#include <thread>

#include "commands.h"
#include "rlx/distributed.h"
#include "train_data.h"

namespace rlx::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kCheckpoint = "checkpoint.safetensors";
constexpr const char* kCurves = "curves.svg";
constexpr const char* kEpochKey = "train::epoch";
constexpr const char* kHistoryPrefix = "train::history::";
constexpr const char* kOptimizerKey = "train::optimizer";  // OptimizerKind as i64

struct TrainCliOptions {
  std::string model, data, eval, out, resume;
  std::string schedule = "constant";
  OptimizerFlags opt;
  double lr = 1e-3, clip_norm = 0, min_lr = 0;
  double gamma = 0.1;
  int64_t step_every = 1;  // step schedule: epochs between decays
  bool profile = false;
  int64_t warmup = 0, epochs = 1, batch = 32;
  uint64_t seed = 0;
  int threads = 0;
  PassFlags passes;
};

// Per-epoch curves, kept in the checkpoint so a resumed run plots them all.
struct History {
  // step_loss: the loss of every step (a thin line under the per-epoch ones).
  std::vector<std::string> names = {"step_loss", "train_loss", "train_accuracy", "eval_loss",
                                    "eval_accuracy"};
  std::map<std::string, std::vector<double>> values;
  void add(const std::string& name, double v) { values[name].push_back(v); }
};

struct EpochResult {
  double loss = 0, accuracy = -1;
  int64_t samples = 0;
};

std::string percent(double a) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f%%", a * 100);
  return b;
}

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.4f", v);
  return b;
}

std::string num_g(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}

// Whether every data input's leading dim is symbolic (then a last partial
// batch can run); with a static one, each process's part of --batch must
// equal it.
bool symbolic_batch(const train::Trainer& t, int64_t batch, int processes) {
  const Graph& g = t.model().graph;
  bool symbolic = true;
  for (NodeId id : g.inputs()) {
    const Node& n = g.node(id);
    if (n.name == train::kStepInput || n.shape.rank() == 0) continue;
    const Dim& d = n.shape.dims[0];
    if (d.is_static()) {
      const std::string per = processes > 1 ? " (" + std::to_string(d.value) + " per process x " +
                                                  std::to_string(processes) + " processes)"
                                            : "";
      RLX_CHECK(d.value * processes == batch, t.model().source, ": input '", n.name,
                "' has a static batch dim ", d.value, "; pass --batch ", d.value * processes, per);
      symbolic = false;
    }
  }
  return symbolic;
}

// This process's part of the global batch [b, e): contiguous, the parts'
// sizes differing by at most one.
std::pair<int64_t, int64_t> shard(int64_t b, int64_t e, const dist::World& w) {
  const int64_t n = e - b;
  return {b + n * w.rank() / w.size(), b + n * (w.rank() + 1) / w.size()};
}

// A batch's or an epoch's loss x samples, correct predictions and samples.
struct Sums {
  double loss = 0, correct = 0, samples = 0;
  void add(const Sums& o) { loss += o.loss, correct += o.correct, samples += o.samples; }
  // Summed over every process of the run.
  Sums total(const dist::World& w) const {
    double v[3] = {loss, correct, samples};
    w.sum(v);
    return {v[0], v[1], v[2]};
  }
  EpochResult result(bool labelled) const {
    EpochResult r;
    r.samples = int64_t(samples);
    if (samples > 0) {
      r.loss = loss / samples;
      if (labelled) r.accuracy = correct / samples;
    }
    return r;
  }
};

// Batches of `batch` in file order; process r of N evaluates batches r, r+N, ...
EpochResult evaluate(train::Trainer& t, const DataSet& d, int64_t batch, bool partial,
                     const dist::World& w) {
  std::vector<int64_t> order(static_cast<size_t>(d.samples));
  for (int64_t i = 0; i < d.samples; ++i) order[size_t(i)] = i;
  Sums sums;
  const std::string label = label_input(t, d.tensors);  // a batch has the data's dtypes and ranks
  for (int64_t b = batch * w.rank(); b < d.samples; b += batch * w.size()) {
    const int64_t e = std::min(d.samples, b + batch);
    if (e - b < batch && !partial) break;
    const TensorMap in = gather_batch(d, order, b, e);
    const TensorMap out = t.evaluate(in);
    sums.add({out.at(train::kLossOutput).item_as_double(0) * double(e - b),
              label.empty() ? 0 : double(count_correct(out.at("logits"), in.at(label))),
              double(e - b)});
  }
  return sums.total(w).result(!label.empty());
}

void write_outputs(const train::Trainer& t, const TrainCliOptions& o, const History& h,
                   int64_t epoch, int64_t per_epoch) {
  fs::create_directories(o.out);
  t.save(o.out);
  TensorMap ckpt = t.state();
  ckpt[kEpochKey] = Tensor::from_vector<int64_t>({}, {epoch}, DType::I64);
  ckpt[kOptimizerKey] = Tensor::from_vector<int64_t>(
      {}, {int64_t(train::parse_optimizer(o.opt.optimizer))}, DType::I64);
  for (const auto& [name, v] : h.values)
    ckpt[kHistoryPrefix + name] = Tensor::from_vector<double>({int64_t(v.size())}, v, DType::F64);
  write_safetensors((fs::path(o.out) / kCheckpoint).string(), ckpt,
                    {{"optimizer", o.opt.optimizer}, {"model", o.model}});
  std::vector<train::Curve> curves;
  for (const std::string& name : h.names) {
    auto it = h.values.find(name);
    if (it == h.values.end() || it->second.empty()) continue;
    train::Curve c;
    c.name = name;
    c.axis = name.find("accuracy") != std::string::npos ? "accuracy" : "loss";
    const bool steps = name == "step_loss";
    if (steps) c.name = "train_loss (per step)", c.width = 0.75, c.points = false;
    for (size_t i = 0; i < it->second.size(); ++i) {
      c.x.push_back(steps ? double(i + 1) / double(per_epoch) : double(i + 1));
      c.y.push_back(it->second[i]);
    }
    curves.push_back(std::move(c));
  }
  train::write_curves_svg((fs::path(o.out) / kCurves).string(), curves,
                          "rlx train " + fs::path(o.model).filename().string() + " (" +
                              o.opt.optimizer + ", lr " + num_g(o.lr) + ")");
}

void train(const TrainCliOptions& o, const dist::World& world) {
  // Processes on one machine share its cores unless -t says otherwise.
  const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  set_num_threads(o.threads > 0 || world.local_size() == 1
                      ? o.threads
                      : std::max(1, cores / world.local_size()));
  RLX_CHECK(o.batch > 0 && o.epochs > 0, "--batch and --epochs must be positive");
  RLX_CHECK(o.batch >= world.size(), "--batch ", o.batch, " is smaller than the ", world.size(),
            " processes of this run: each needs at least one sample of every batch");
  train::TrainerOptions to;
  to.optimizer = optimizer_options(o.opt);
  to.schedule.kind = train::parse_schedule(o.schedule);
  to.schedule.lr = o.lr;
  to.schedule.warmup = o.warmup;
  to.schedule.gamma = o.gamma;
  to.schedule.min_lr = o.min_lr;
  to.clip_norm = o.clip_norm;
  to.compile = compile_options(o.passes, stderr);
  // This process's share of the current global batch: its gradients and
  // buffer updates are weighted by it and summed over the processes.
  double share = 1;
  if (world.size() > 1) {
    to.on_gradients = [&](TensorMap& grads) { dist::reduce_weighted(world, grads, share); };
    to.on_buffers = [&](TensorMap& buffers) {
      std::erase_if(buffers, [](const auto& b) { return b.second.dtype() != DType::F32; });
      dist::reduce_weighted(world, buffers, share);
    };
  }

  Model model = load_model(o.model);
  // Train and evaluation data are checked against the model's inputs before
  // anything is compiled, so a bad file fails fast.
  train::Trainer t(std::move(model), to);
  const DataSet data = load_data(o.data, t);
  DataSet eval;
  if (!o.eval.empty()) eval = load_data(o.eval, t);
  const bool partial = symbolic_batch(t, o.batch, world.size());
  // A last partial batch runs when the batch dim is symbolic, unless it has
  // fewer samples than there are processes.
  const int64_t tail = data.samples % o.batch;
  const int64_t per_epoch = data.samples / o.batch + (partial && tail >= world.size() ? 1 : 0);
  RLX_CHECK(per_epoch > 0, o.data, ": ", data.samples, " samples make no full batch of ", o.batch,
            " and the model's batch dim is static");
  if (world.root() && world.size() > 1 && partial && tail > 0 && tail < world.size())
    std::fprintf(stderr,
                 "the last %lld samples of every epoch are left out: fewer than the %d "
                 "processes\n",
                 (long long)tail, world.size());
  // With a static batch dim, evaluation runs in batches of that dim.
  const int64_t eval_batch = partial ? o.batch : o.batch / world.size();
  // The schedule runs in steps; step decays and the cosine span are in epochs.
  to.schedule.step_size = o.step_every * per_epoch;
  to.schedule.total_steps = o.epochs * per_epoch;
  t.set_schedule(to.schedule);

  History h;
  int64_t start = 0;
  if (!o.resume.empty()) {
    const std::string path = (fs::path(o.resume) / kCheckpoint).string();
    const TensorMap ckpt = read_safetensors(path);
    // Another optimizer's state would be ignored silently: refuse instead.
    if (auto k = ckpt.find(kOptimizerKey); k != ckpt.end()) {
      const auto saved = train::OptimizerKind(int64_t(k->second.item_as_double(0)));
      RLX_CHECK(saved == to.optimizer.kind, path, ": the checkpoint was trained with ",
                train::optimizer_name(saved), ", not ", o.opt.optimizer, " (pass --optimizer ",
                train::optimizer_name(saved), ")");
    }
    try {
      t.load_state(ckpt);
    } catch (const Error& e) {
      throw e.with_context(path);
    }
    auto ep = ckpt.find(kEpochKey);
    RLX_CHECK(ep != ckpt.end(), path, ": no ", kEpochKey, " (not an rlx train checkpoint)");
    start = int64_t(ep->second.item_as_double(0));
    for (const auto& [key, v] : ckpt)
      if (key.rfind(kHistoryPrefix, 0) == 0) {
        auto& dst = h.values[key.substr(std::strlen(kHistoryPrefix))];
        for (int64_t i = 0; i < v.numel(); ++i) dst.push_back(v.item_as_double(i));
      }
    if (world.root())
      std::fprintf(stderr, "resuming from %s at epoch %lld (step %lld)\n", path.c_str(),
                   (long long)start, (long long)t.step_count());
  }

  if (world.root()) {
    std::printf("training %s: %zu trained params, %lld samples, %lld steps/epoch, %s lr %g (%s)\n",
                o.model.c_str(), t.trainable().size(), (long long)data.samples,
                (long long)per_epoch, o.opt.optimizer.c_str(), o.lr, o.schedule.c_str());
    if (world.size() > 1)
      std::printf("data-parallel over %d processes: each takes 1/%d of every batch of %lld\n",
                  world.size(), world.size(), (long long)o.batch);
    std::fflush(stdout);
  }
  t.set_profiling(o.profile);
  const std::string label = label_input(t, data.tensors);
  const auto t0 = std::chrono::steady_clock::now();
  EpochResult last_train, last_eval;
  for (int64_t epoch = start; epoch < o.epochs; ++epoch) {
    const std::vector<int64_t> order = epoch_order(data.samples, o.seed, epoch);
    Progress bar(world.root() ? stderr : nullptr, epoch + 1, o.epochs,
                 std::min(data.samples, per_epoch * o.batch));
    Sums epoch_sums;
    for (int64_t k = 0; k < per_epoch; ++k) {
      const int64_t b = k * o.batch, e = std::min(data.samples, b + o.batch);
      const auto [mine, mine_end] = shard(b, e, world);
      share = double(mine_end - mine) / double(e - b);
      const TensorMap in = gather_batch(data, order, mine, mine_end);
      const float loss = t.step(in);
      const double n = double(mine_end - mine);
      const double correct =
          label.empty() ? 0 : double(count_correct(t.last_outputs().at("logits"), in.at(label)));
      const Sums batch = Sums{double(loss) * n, correct, n}.total(world);
      h.add("step_loss", batch.loss / batch.samples);
      epoch_sums.add(batch);
      const EpochResult so_far = epoch_sums.result(!label.empty());
      bar.update(so_far.samples, so_far.loss, so_far.accuracy);
    }
    const EpochResult r = epoch_sums.result(!label.empty());
    h.add("train_loss", r.loss);
    if (r.accuracy >= 0) h.add("train_accuracy", r.accuracy);
    std::string line = "epoch " + std::to_string(epoch + 1) + "/" + std::to_string(o.epochs) +
                       "  loss " + num(r.loss) +
                       (r.accuracy >= 0 ? "  acc " + percent(r.accuracy) : "");
    const double secs = bar.seconds();
    if (!o.eval.empty()) {
      last_eval = evaluate(t, eval, eval_batch, partial, world);
      h.add("eval_loss", last_eval.loss);
      if (last_eval.accuracy >= 0) h.add("eval_accuracy", last_eval.accuracy);
      line += "  eval loss " + num(last_eval.loss) +
              (last_eval.accuracy >= 0 ? "  eval acc " + percent(last_eval.accuracy) : "");
    }
    char tail[96];
    std::snprintf(tail, sizeof tail, "  %.0f samples/s  %.2fs  lr %.3g", double(r.samples) / secs,
                  secs, t.last_lr());
    bar.finish(line + tail);
    if (world.root()) write_outputs(t, o, h, epoch + 1, per_epoch);
    last_train = r;
  }
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!world.root()) return;
  if (start >= o.epochs) write_outputs(t, o, h, start, per_epoch);
  std::printf("trained %lld epoch(s), %lld steps in %.2fs\n", (long long)(o.epochs - start),
              (long long)t.step_count(), total);
  if (const train::Trainer::StepProfile p = t.profile(); p.graph) {
    std::printf("training step (forward + backward) ");
    std::printf("%s", profile_report(*p.graph, *p.times, 15).c_str());
    std::printf("a whole step (with the optimizer and batching): %.3f ms on average; "
                "peak activation memory %s\n",
                1e3 * total / double(std::max<int64_t>(1, t.step_count())),
                human_bytes(double(p.arena_bytes)).c_str());
  }
  if (last_train.samples > 0)
    std::printf(
        "final train loss %s%s\n", num(last_train.loss).c_str(),
        last_train.accuracy >= 0 ? ("  accuracy " + percent(last_train.accuracy)).c_str() : "");
  if (last_eval.samples > 0)
    std::printf(
        "final eval loss %s%s\n", num(last_eval.loss).c_str(),
        last_eval.accuracy >= 0 ? ("  accuracy " + percent(last_eval.accuracy)).c_str() : "");
  std::printf("wrote %s (model.rlx.json, weights.safetensors, %s), curves %s\n", o.out.c_str(),
              kCheckpoint, (fs::path(o.out) / kCurves).string().c_str());
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto o = std::make_shared<TrainCliOptions>();
  auto* cmd = app.add_subcommand(
      "train",
      "Train a model on its `loss` output: shuffled mini-batches, an optimizer, checkpoints "
      "and --resume; DIR ends up a model directory `rlx run` loads. Under `mpirun -np N` the "
      "N processes train data-parallel: each takes 1/N of every batch, gradients are averaged");
  cmd->add_option("model", o->model,
                  "Model with a `loss` output: a directory with model.rlx.json or "
                  "torch-ir.json, or a graph JSON")
      ->required();
  cmd->add_option("--data", o->data,
                  "Training data (safetensors): one tensor per model input, keyed by input "
                  "name, all with the same leading sample dim")
      ->required();
  cmd->add_option("--eval", o->eval, "Evaluation data, same layout; evaluated after each epoch");
  add_optimizer_flags(cmd, o->opt);
  cmd->add_option("--lr", o->lr, "Base learning rate")->capture_default_str();
  cmd->add_option("--schedule", o->schedule, "constant, step or cosine")->capture_default_str();
  cmd->add_option("--warmup", o->warmup, "Steps of linear warmup before the schedule")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--step-every", o->step_every, "step schedule: epochs between decays by --gamma")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--gamma", o->gamma, "step schedule: decay factor")->capture_default_str();
  cmd->add_option("--min-lr", o->min_lr, "cosine schedule: the final learning rate")
      ->capture_default_str();
  cmd->add_option("--epochs", o->epochs, "Epochs to train (in all, counting resumed ones)")
      ->capture_default_str();
  cmd->add_option("--batch", o->batch, "Mini-batch size")->capture_default_str();
  cmd->add_option("--clip-norm", o->clip_norm, "Clip the global gradient norm to this (0: off)")
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of the per-epoch shuffle")->capture_default_str();
  cmd->add_flag("--profile", o->profile,
                "Time every node of the training step; prints, after training, the time per "
                "op kind and the slowest nodes per step");
  cmd->add_option("-t,--threads", o->threads, "Worker threads (default: all cores)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("-o,--out", o->out,
                  "Output directory: the trained model, checkpoint.safetensors, curves.svg")
      ->required();
  cmd->add_option("--resume", o->resume,
                  "Continue from the checkpoint in this directory (usually --out's)");
  add_pass_flags(cmd, o->passes);
  cmd->callback([o] {
    const dist::World world;
    try {
      train(*o, world);
    } catch (const std::exception& e) {
      if (world.size() == 1) throw;
      // The other processes may be waiting in a collective: end them all.
      std::fprintf(stderr, "rlx: error (process %d of %d): %s\n", world.rank(), world.size(),
                   e.what());
      world.abort(1);
    }
  });
}

}  // namespace rlx::cli
