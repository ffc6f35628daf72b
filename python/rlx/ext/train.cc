// rlx.Trainer: train::Trainer (the optimizers, schedules and clipping of
// `rlx train`) stepping on batches of NumPy arrays.
#include <pybind11/stl.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <tuple>

#include "bindings.h"
#include "convert.h"
#include "rlx/coreml.h"
#include "rlx/train.h"

namespace rlx::python {
namespace {

// Optimizer options from the keyword arguments of rlx.Trainer and
// rlx.compile_training_step; without betas, the optimizer's defaults (lion: 0.9, 0.99).
train::OptimizerOptions optimizer_options(const std::string& optimizer, double weight_decay,
                                          double momentum, double dampening, bool nesterov,
                                          std::optional<std::pair<double, double>> betas,
                                          double eps) {
  train::OptimizerOptions o;
  o.kind = train::parse_optimizer(optimizer);
  o.weight_decay = weight_decay;
  o.momentum = momentum;
  o.dampening = dampening;
  o.nesterov = nesterov;
  if (o.kind == train::OptimizerKind::lion) o.beta2 = 0.99;
  if (betas) std::tie(o.beta1, o.beta2) = *betas;
  o.eps = eps;
  return o;
}

py::dict to_dict(const TensorMap& m) {
  py::dict d;
  for (const auto& [name, t] : m) d[py::str(name)] = to_numpy(t);
  return d;
}

class PyTrainer {
 public:
  PyTrainer(Model m, train::TrainerOptions o)
      : t_(std::make_unique<train::Trainer>(std::move(m), std::move(o))) {}

  float step(const py::dict& batch) {
    std::vector<py::object> keep;
    const TensorMap b = to_batch(batch, keep);
    py::gil_scoped_release nogil;
    return t_->step(b);
  }

  py::dict evaluate(const py::dict& batch) {
    std::vector<py::object> keep;
    const TensorMap b = to_batch(batch, keep);
    TensorMap out;
    {
      py::gil_scoped_release nogil;
      out = t_->evaluate(b);
    }
    return to_dict(out);
  }

  py::dict weights() const { return to_dict(t_->weights()); }
  py::dict last_outputs() const { return to_dict(t_->last_outputs()); }
  const train::Trainer& trainer() const { return *t_; }
  void save(const std::string& dir) const { t_->save(dir); }

 private:
  // The batch by data input name, each checked against the input's declared shape and dtype.
  TensorMap to_batch(const py::dict& batch, std::vector<py::object>& keep) const {
    const Graph& g = t_->model().graph;
    const auto& names = t_->data_inputs();
    std::vector<std::pair<std::string, Shape>> data;
    for (NodeId id : g.inputs())
      if (std::find(names.begin(), names.end(), g.node(id).name) != names.end())
        data.emplace_back(g.node(id).name, g.node(id).shape);
    TensorMap r = named_tensors(batch, data, "Trainer", "a data input of the model", keep);
    for (const auto& n : names)
      if (!r.count(n)) {
        std::string known;
        for (const auto& m : names) known += (known.empty() ? "" : ", ") + m;
        throw make_error("Trainer: the batch has no '", n, "' (needs ", known, ")");
      }
    return r;
  }

  std::unique_ptr<train::Trainer> t_;
};

}  // namespace

void bind_train(py::module_& m) {
  m.def(
      "_compile_training_step",
      [](const py::object& model, const std::string& out, const std::string& opset, bool fp16,
         const std::string& optimizer, double weight_decay, double momentum, double dampening,
         bool nesterov, std::optional<std::pair<double, double>> betas, double eps,
         double clip_norm, const std::map<std::string, std::vector<int64_t>>& input_shapes) {
        Model mod = load_model(fspath(model));
        const train::OptimizerOptions o =
            optimizer_options(optimizer, weight_decay, momentum, dampening, nesterov, betas, eps);
        coreml::ExportOptions eo;
        eo.opset = coreml::parse_opset(opset);
        eo.fp16 = fp16;
        train::StepGraph step;
        {
          py::gil_scoped_release nogil;
          // As `rlx compile --train`: bind symbolic dims, build the step, run every pass but
          // folding, export.
          if (!input_shapes.empty()) {
            CompileOptions bind;
            bind.opt_level = 0;
            for (const auto& [name, dims] : input_shapes) bind.input_shapes[name] = dims;
            mod.graph = optimize_unbound(std::move(mod.graph), bind);
          }
          step = train::training_step_graph(mod, o, clip_norm);
          step.graph = optimize_unbound(std::move(step.graph), {});
          coreml::export_package(step.graph, step.weights, out, eo);
        }
        py::dict holds;
        for (const auto& [name, what] : step.holds) holds[py::str(name)] = what;
        return py::make_tuple(to_dict(step.initial), holds);
      },
      py::arg("model"), py::arg("path"), py::arg("opset"), py::arg("fp16"), py::arg("optimizer"),
      py::arg("weight_decay"), py::arg("momentum"), py::arg("dampening"), py::arg("nesterov"),
      py::arg("betas"), py::arg("eps"), py::arg("clip_norm"), py::arg("input_shapes"));

  py::class_<PyTrainer>(m, "Trainer",
                        "Trains a model whose graph has an output named 'loss' "
                        "(rlx_torch.export(train=True)), as `rlx train` does: every float param "
                        "not marked non-trainable is trained.")
      .def(py::init([](const py::object& model, const std::string& optimizer, double lr,
                       const std::string& schedule, int64_t warmup, int64_t total_steps,
                       int64_t step_size, double gamma, double min_lr, double weight_decay,
                       double momentum, double dampening, bool nesterov,
                       std::pair<double, double> betas, double eps, double clip_norm) {
             Model mod = load_model(fspath(model));
             train::TrainerOptions o;
             o.optimizer = optimizer_options(optimizer, weight_decay, momentum, dampening, nesterov,
                                             betas, eps);
             o.schedule.kind = train::parse_schedule(schedule);
             o.schedule.lr = lr;
             o.schedule.warmup = warmup;
             o.schedule.total_steps = total_steps;
             o.schedule.step_size = step_size;
             o.schedule.gamma = gamma;
             o.schedule.min_lr = min_lr;
             o.clip_norm = clip_norm;
             return std::make_unique<PyTrainer>(std::move(mod), std::move(o));
           }),
           py::arg("model"), py::kw_only(), py::arg("optimizer") = "adamw", py::arg("lr") = 1e-3,
           py::arg("schedule") = "constant", py::arg("warmup") = 0, py::arg("total_steps") = 0,
           py::arg("step_size") = 1, py::arg("gamma") = 0.1, py::arg("min_lr") = 0.0,
           py::arg("weight_decay") = 0.0, py::arg("momentum") = 0.0, py::arg("dampening") = 0.0,
           py::arg("nesterov") = false, py::arg("betas") = std::pair<double, double>{0.9, 0.999},
           py::arg("eps") = 1e-8, py::arg("clip_norm") = 0.0,
           "model: a path rlx.load takes (a train=True export). optimizer: sgd | adam | adamw | "
           "lion (torch.optim's formulas); schedule: constant | step | cosine, with linear "
           "warmup; clip_norm > 0 clips the global gradient norm.")
      .def("step", &PyTrainer::step, py::arg("batch"),
           "Forward, backward and one update on `batch` ({data input: array}); returns the loss "
           "of the weights before the update. The GIL is released while it runs.")
      .def("evaluate", &PyTrainer::evaluate, py::arg("batch"),
           "The forward graph's outputs on `batch` with the current weights; changes nothing.")
      .def("weights", &PyTrainer::weights, "Every weight, the trained ones as they are now.")
      .def("save", &PyTrainer::save, py::arg("dir"),
           "Writes the graph and the current weights as an rlx model directory (rlx.load reads "
           "it).")
      .def_property_readonly("last_outputs", &PyTrainer::last_outputs,
                             "The last step's outputs (loss, logits, ...).")
      .def_property_readonly(
          "step_count", [](const PyTrainer& t) { return t.trainer().step_count(); },
          "Updates done so far.")
      .def_property_readonly(
          "last_lr", [](const PyTrainer& t) { return t.trainer().last_lr(); },
          "The learning rate of the last update.")
      .def_property_readonly(
          "last_grad_norm", [](const PyTrainer& t) { return t.trainer().last_grad_norm(); },
          "The global gradient norm of the last step, before clipping.")
      .def_property_readonly(
          "trainable", [](const PyTrainer& t) { return t.trainer().trainable(); },
          "The names of the trained params.")
      .def_property_readonly(
          "data_inputs", [](const PyTrainer& t) { return t.trainer().data_inputs(); },
          "The inputs a batch holds.");
}

}  // namespace rlx::python
