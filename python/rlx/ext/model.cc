// rlx.load / Model / rlx.compile: the public C++ API (load_model,
// Executable, Session, coreml::export_package) as `rlx tools/rlx` uses it.
#include <pybind11/stl.h>

#include <csignal>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>

#include "bindings.h"
#include "convert.h"
#include "rlx/train.h"

namespace rlx::python {
namespace {

// Ctrl-C during a Model.run on Python's main thread: Python's own SIGINT
// handler only flags the interpreter, which is not running while rlx
// computes, so for the call's duration a handler of ours sets the flag every
// session checks before each node; KeyboardInterrupt is raised once rlx has
// stopped. Other threads' runs are not interruptible (a signal handler is
// process-wide).
std::atomic<bool> g_interrupted{false};
extern "C" void on_sigint(int) { g_interrupted.store(true, std::memory_order_relaxed); }

class SigintScope {
 public:
  SigintScope() {
    py::module_ threading = py::module_::import("threading");
    active_ = threading.attr("current_thread")().is(threading.attr("main_thread")());
    if (!active_) return;
    g_interrupted = false;
    struct sigaction sa {};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_);
  }
  ~SigintScope() {
    if (!active_) return;
    sigaction(SIGINT, &old_, nullptr);
    g_interrupted = false;  // runs on other threads read it too
  }
  SigintScope(const SigintScope&) = delete;
  SigintScope& operator=(const SigintScope&) = delete;
  // After the run (the GIL held): KeyboardInterrupt if Ctrl-C came during it.
  void raise_if_interrupted() const {
    if (active_ && g_interrupted) {
      PyErr_SetNone(PyExc_KeyboardInterrupt);
      throw py::error_already_set();
    }
  }

 private:
  bool active_ = false;
  struct sigaction old_ {};
};

struct TensorSpec {
  std::string name;
  py::tuple shape;
  std::string dtype;
  std::string repr() const {
    return "TensorSpec(name=" + py::repr(py::str(name)).cast<std::string>() +
           ", shape=" + py::repr(shape).cast<std::string>() + ", dtype='" + dtype + "')";
  }
};

TensorSpec spec_of(const std::string& name, const Shape& s) {
  return {name, dims_tuple(s), std::string(dtype_name(s.dtype))};
}

class PyModel {
 public:
  PyModel(Model m, const CompileOptions& copts, bool cast_inputs)
      : model_(std::move(m)), cast_inputs_(cast_inputs) {
    Graph g =
        model_.graph;  // the loaded graph stays for compile(); the executable optimizes a copy
    exe_ = Executable::compile(std::move(g), model_.weights, copts);
    session_ = std::make_unique<Session>(
        exe_, SessionOptions{.cast_inputs = cast_inputs, .interrupt = &g_interrupted});
  }

  const Model& model() const { return model_; }

  std::vector<TensorSpec> inputs() const {
    std::vector<TensorSpec> r;
    for (NodeId id : model_.graph.inputs())
      r.push_back(spec_of(model_.graph.node(id).name, model_.graph.node(id).shape));
    return r;
  }
  std::vector<TensorSpec> outputs() const {
    std::vector<TensorSpec> r;
    for (const auto& o : model_.graph.outputs())
      r.push_back(spec_of(o.name, model_.graph.node(o.node).shape));
    return r;
  }

  // Inputs by name from a dict of arrays; `keep` holds what is borrowed.
  TensorMap feeds_to_inputs(const py::dict& feeds, bool cast_inputs,
                            std::vector<py::object>& keep) const {
    const Graph& g = model_.graph;
    TensorMap inputs;
    std::string declared;
    for (NodeId id : g.inputs()) declared += (declared.empty() ? "" : ", ") + g.node(id).name;
    for (auto [key, value] : feeds) {
      if (!py::isinstance<py::str>(key))
        throw py::type_error("run(): input names must be str, got " +
                             py::str(py::type::of(key)).cast<std::string>());
      const std::string name = key.cast<std::string>();
      const Node* in = nullptr;
      for (NodeId id : g.inputs())
        if (g.node(id).name == name) in = &g.node(id);
      if (!in) throw make_error("unknown input '", name, "'; the model takes: ", declared);
      inputs[name] = to_tensor(value, name, in->shape, cast_inputs, keep);
    }
    for (NodeId id : g.inputs())
      if (!inputs.count(g.node(id).name))
        throw make_error("input '", g.node(id).name, "' (", g.node(id).shape.str(),
                         ") is missing; the model takes: ", declared);
    return inputs;
  }

  py::dict run(const py::dict& feeds, std::optional<bool> cast) {
    const Graph& g = model_.graph;
    std::vector<py::object> keep;  // borrowed arrays, alive until the run returns
    TensorMap inputs = feeds_to_inputs(feeds, cast.value_or(cast_inputs_), keep);
    TensorMap out;
    SigintScope sigint;
    try {
      py::gil_scoped_release nogil;
      std::lock_guard<std::mutex> lock(mu_);  // one Session: one run at a time
      out = session_->run(inputs);
    } catch (const Error&) {
      sigint.raise_if_interrupted();
      throw;
    }
    sigint.raise_if_interrupted();
    py::dict result;  // in the graph's output order
    for (const auto& o : g.outputs()) result[py::str(o.name)] = to_numpy(out.at(o.name));
    return result;
  }

  // Times every node over `runs` runs (as `rlx run --profile`): one dict per
  // node of the compiled graph that ran, slowest first.
  py::list profile(const py::dict& feeds, int runs, std::optional<bool> cast) {
    RLX_CHECK(runs > 0, "profile: runs must be > 0, got ", runs);
    std::vector<py::object> keep;
    TensorMap inputs = feeds_to_inputs(feeds, cast.value_or(cast_inputs_), keep);
    std::vector<NodeTime> times;
    {
      py::gil_scoped_release nogil;
      std::lock_guard<std::mutex> lock(mu_);
      session_->set_profiling(true);
      try {
        for (int i = 0; i < runs; ++i) session_->run(inputs);
      } catch (...) {
        session_->set_profiling(false);
        throw;
      }
      times = session_->profile();
      session_->set_profiling(false);
    }
    const Graph& g = exe_->graph();
    std::vector<size_t> order;
    for (size_t i = 0; i < times.size(); ++i)
      if (times[i].runs > 0) order.push_back(i);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return times[a].total_ms > times[b].total_ms; });
    py::list out;
    for (size_t i : order) {
      const Node& n = g.node(NodeId(i));
      py::dict d;
      d["node"] = n.id;
      d["op"] = op_name(n.op);
      d["name"] = n.name;
      d["origin"] = n.origin;
      d["runs"] = times[i].runs;
      d["total_ms"] = times[i].total_ms;
      d["mean_ms"] = times[i].total_ms / double(times[i].runs);
      out.append(d);
    }
    return out;
  }

  size_t last_arena_bytes() const { return session_->last_arena_bytes(); }

 private:
  Model model_;
  bool cast_inputs_;
  std::shared_ptr<Executable> exe_;
  std::unique_ptr<Session> session_;
  std::mutex mu_;
};

CompileOptions make_compile_options(int opt_level, const std::vector<std::string>& disabled) {
  CompileOptions o;
  o.opt_level = opt_level;
  o.disabled_passes = disabled;
  describe_pipeline(o);  // unknown pass names throw here, listing the valid ones
  return o;
}

std::string model_repr(const PyModel& m) {
  auto list = [](const std::vector<TensorSpec>& v) {
    std::string s;
    for (const auto& t : v) {
      std::string dims;
      for (auto d : t.shape) dims += (dims.empty() ? "" : ",") + py::str(d).cast<std::string>();
      s += (s.empty() ? "" : ", ") + t.name + " [" + dims + "] " + t.dtype;
    }
    return s;
  };
  return "<rlx.Model " + m.model().format + " '" + m.model().source +
         "' inputs: " + list(m.inputs()) + "; outputs: " + list(m.outputs()) + ">";
}

}  // namespace

void bind_model(py::module_& m) {
  py::class_<TensorSpec>(m, "TensorSpec",
                         "Name, shape and dtype of a model input or output. `shape` holds ints "
                         "for static dims and str for symbolic ones (bound per run), e.g. "
                         "('batch', 4); `dtype` is rlx's name ('f32', 'i64', 'bf16', ...).")
      .def_readonly("name", &TensorSpec::name)
      .def_readonly("shape", &TensorSpec::shape)
      .def_readonly("dtype", &TensorSpec::dtype)
      .def_property_readonly(
          "numpy_dtype", [](const TensorSpec& s) { return numpy_dtype(parse_dtype(s.dtype)); },
          "The NumPy dtype run() takes and returns for it (float32 for bf16).")
      .def("__repr__", &TensorSpec::repr);

  py::class_<PyModel>(m, "Model",
                      "A loaded and compiled model (CPU backend). Create it with rlx.load() or "
                      "rlx.from_torch().")
      .def_property_readonly("inputs", &PyModel::inputs, "Inputs as TensorSpec, in graph order.")
      .def_property_readonly("outputs", &PyModel::outputs, "Outputs as TensorSpec, in graph order.")
      .def_property_readonly(
          "format", [](const PyModel& p) { return p.model().format; },
          "The format it was loaded from: 'rlx-graph', 'torch-ir', 'gguf-llama', 'onnx', ...")
      .def_property_readonly(
          "source", [](const PyModel& p) { return p.model().source; }, "The path it came from.")
      .def_property_readonly(
          "summary", [](const PyModel& p) { return p.model().summary; },
          "One line about the model, when the format has one.")
      .def_property_readonly(
          "num_nodes", [](const PyModel& p) { return p.model().graph.size(); },
          "Nodes of the loaded (unoptimized) graph.")
      .def_property_readonly("last_arena_bytes", &PyModel::last_arena_bytes,
                             "Peak activation bytes of the last run.")
      .def("run", &PyModel::run, py::arg("inputs"), py::kw_only(),
           py::arg("cast_inputs") = py::none(),
           "Runs the model. `inputs` maps every input name to an array (np.ndarray, or "
           "anything np.asarray takes: lists and scalars get the declared dtype). Returns "
           "{output name: np.ndarray} in graph order; the arrays share rlx's output buffers "
           "(no copy). An array of another dtype than declared is an rlx.Error unless "
           "cast_inputs=True (default: load()'s setting). bf16 inputs take float32 (rounded "
           "to nearest even) or uint16 (raw bf16 bits); bf16 outputs come back as float32. "
           "C-contiguous inputs of the declared dtype are read in place. The GIL is released "
           "while rlx computes; one Model runs one call at a time. Ctrl-C on the main thread "
           "stops the run before its next node and raises KeyboardInterrupt.")
      .def("profile", &PyModel::profile, py::arg("inputs"), py::arg("runs") = 10, py::kw_only(),
           py::arg("cast_inputs") = py::none(),
           "Runs the model `runs` times timing every node (as `rlx run --profile`); returns "
           "one dict per node of the compiled graph that ran, slowest first: node, op, name, "
           "origin, runs, total_ms, mean_ms.")
      .def(
          "text", [](const PyModel& p) { return to_text(p.model().graph); },
          "The loaded graph, one line per node (as `rlx inspect --format text`).")
      .def("__repr__", &model_repr);

  m.def(
      "load",
      [](const py::object& path_like, std::optional<int> threads, int opt_level, bool cast_inputs,
         bool dequantize, const std::vector<std::string>& disable_passes,
         const std::map<std::string, Dims>& input_shapes, const py::dict& freeze,
         const std::string& matmul_precision) {
        const std::string path = fspath(path_like);
        if (threads) set_num_threads(*threads);
        CompileOptions copts = make_compile_options(opt_level, disable_passes);
        if (const MatmulPrecision p = parse_matmul_precision(matmul_precision);
            p != MatmulPrecision::f32)
          copts.backend = make_cpu_backend({.matmul_precision = p});
        LoadOptions lopts{.dequantize = dequantize, .input_shapes = input_shapes};
        for (const auto& [name, value] : freeze) {
          const std::string key = py::str(name);
          lopts.frozen_inputs.emplace(key, owned_tensor(value, "freeze['" + key + "']"));
        }
        py::gil_scoped_release nogil;
        Model model = load_model(path, lopts);
        return std::make_unique<PyModel>(std::move(model), copts, cast_inputs);
      },
      py::arg("path"), py::kw_only(), py::arg("threads") = py::none(), py::arg("opt_level") = 1,
      py::arg("cast_inputs") = false, py::arg("dequantize") = false,
      py::arg("disable_passes") = std::vector<std::string>{},
      py::arg("input_shapes") = std::map<std::string, Dims>{}, py::arg("freeze") = py::dict(),
      py::arg("matmul_precision") = "f32",
      "Loads and compiles a model for the CPU. `path`: any format rlx.load_model takes, picked "
      "from the file's content: a directory with model.rlx.json or torch-ir.json (the "
      "rlx_torch exporter's output), a graph JSON file, a GGUF language model (inputs "
      "`tokens`, `positions`; logits for every token) or an ONNX model. threads: worker "
      "threads for the process-wide pool (same as set_num_threads; None keeps the current "
      "count). opt_level: 0 verifies only, 1 runs the optimization pipeline. "
      "disable_passes: pass names to skip. dequantize: GGUF weights to f32 up front. "
      "input_shapes ({name: dims}) and freeze ({name: value}), ONNX only: import for these "
      "input dims, and with these inputs fixed to constants, so that shape code and If "
      "conditions fold (a frozen input is no longer an input). matmul_precision: 'f32' or "
      "'bf16' (matmuls and GEMM convs with a constant weight round both operands to bf16 and "
      "sum in f32, as torch.set_float32_matmul_precision('medium'), on CPUs with AVX-512 "
      "BF16). Raises rlx.Error with rlx's message when the file cannot be loaded or compiled.");

  m.def(
      "_export_coreml",
      [](const PyModel* model, const std::string& source, const std::string& out,
         const std::string& opset, bool fp16, int64_t seq_len, int opt_level,
         const std::vector<std::string>& disable_passes) {
        CompileOptions copts = make_compile_options(opt_level, disable_passes);
        coreml::ExportOptions eo;
        eo.opset = coreml::parse_opset(opset);
        eo.fp16 = fp16;
        py::gil_scoped_release nogil;
        // As `rlx compile`: GGUF models are rebuilt for a static token count;
        // the exporter writes the weights itself, so every pass but folding runs.
        Model m = model && !model->model().format.starts_with("gguf")
                      ? model->model()
                      : load_model(model ? model->model().source : source, {.n_tokens = seq_len});
        m.graph = optimize_unbound(std::move(m.graph), copts);
        coreml::export_package(m.graph, m.weights, out, eo);
      },
      py::arg("model"), py::arg("source"), py::arg("path"), py::arg("opset"), py::arg("fp16"),
      py::arg("seq_len"), py::arg("opt_level"), py::arg("disable_passes"));

  m.def(
      "grad",
      [](const py::object& model, const py::dict& inputs, const std::optional<py::dict>& cotangents,
         int opt_level, const std::vector<std::string>& disable_passes) {
        Model mod = py::isinstance<PyModel>(model) ? model.cast<const PyModel&>().model()
                                                   : load_model(fspath(model));
        const Graph& g = mod.graph;
        std::vector<py::object> keep;  // borrowed arrays, alive until the run ends
        std::vector<std::pair<std::string, Shape>> ins, outs;
        for (NodeId id : g.inputs()) ins.emplace_back(g.node(id).name, g.node(id).shape);
        for (const auto& o : g.outputs()) outs.emplace_back(o.name, g.node(o.node).shape);
        const TensorMap feed =
            named_tensors(inputs, ins, "grad()", "one of the model's inputs", keep);
        TensorMap cts;
        if (cotangents)
          cts = named_tensors(*cotangents, outs, "grad()", "one of the model's outputs", keep);
        const CompileOptions copts = make_compile_options(opt_level, disable_passes);
        const train::GradientSources sources{
            mod.source.empty() ? "model" : mod.source, "inputs", "cotangents",
            "(pass cotangents={output name: array}, one per float output)"};
        train::Gradients r;
        {
          py::gil_scoped_release nogil;
          r = train::compute_gradients(std::move(mod), feed, cotangents ? &cts : nullptr, copts,
                                       sources);
        }
        py::dict out;
        for (const auto& [name, t] : r.grads) out[py::str(name)] = to_numpy(t);
        return out;
      },
      py::arg("model"), py::arg("inputs"), py::kw_only(), py::arg("cotangents") = py::none(),
      py::arg("opt_level") = 1, py::arg("disable_passes") = std::vector<std::string>{},
      "Gradients of a model (as `rlx grad`): runs forward and backward and returns "
      "{'grad::<name>': np.ndarray} for every trained param (PyTorch state_dict names for "
      "torch exports) and every float input. `model`: an rlx.Model or a path rlx.load takes. "
      "`inputs`: every graph input by name. Without `cotangents` the loss is the output named "
      "'loss' (rlx_torch.export(train=True)) or the model's only scalar float output; with "
      "them ({output name: array}, one per float output) the gradients are those of "
      "sum_o <ct_o, o>. Raises rlx.Error with rlx's message.");

  m.def(
      "check_coreml",
      [](const std::string& path) {
        py::gil_scoped_release nogil;
        return coreml::check_package(path);
      },
      py::arg("path"),
      "Structural check of a .mlpackage (as `rlx coreml-check`): the problems found, empty "
      "when it is well formed.");
}

}  // namespace rlx::python
