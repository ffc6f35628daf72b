// compile(graph) -> Executable; Session runs it with named inputs and outputs.
#pragma once
#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "rlx/backend.h"
#include "rlx/graph.h"
#include "rlx/io.h"

namespace rlx {
namespace runtime {
class ControlRunner;
}

// The optimization pipeline is built from these (src/opt/pass.h); see
// describe_pipeline() for the passes and what each one does.
struct CompileOptions {
  int opt_level = 1;  // 0: verify only; 1: fold constants (incl. weights), simplify, CSE, DCE
  // Upper bound on the bytes one folded constant may take, so folding never
  // blows memory up (an expand of a weight, say).
  size_t max_folded_bytes = size_t(64) << 20;
  // The backend to compile for; null: default_backend() (the CPU backend in
  // the `rlx` library). The executable keeps it alive.
  std::shared_ptr<const Backend> backend;
  std::vector<std::string> disabled_passes;  // pass names to skip (unknown names throw)
  // Input dims to specialize the graph to at compile time (the `specialize`
  // pass): symbolic dims become static, later passes see concrete shapes, and
  // the executable then runs only these dims. Empty: keep symbolic dims.
  std::map<std::string, Dims> input_shapes;
  bool verify_each = false;  // Graph::verify() after every pass (always on without NDEBUG)
  // Quantization-aware training / simulated quantization (the `qat` pass, off when 0): a
  // fake_quantize of `qat_bits` (8, 4 or 2) on the weight of every matmul and conv whose weight is
  // a param or constant (per output channel), and with qat_activations an 8-bit per-tensor one
  // on their activation input. The Trainer applies it before autodiff (TrainerOptions::compile).
  int qat_bits = 0;
  bool qat_activations = false;
  // Op names (e.g. "relu", "gelu") whose nodes the `remat` pass recomputes
  // right before a use far from the previous one, where their inputs are
  // alive anyway: less peak memory for more compute (activation
  // checkpointing in a training graph). Empty: off.
  std::vector<std::string> rematerialize;
  // Called after every pass that ran, with the graph it produced and the node
  // count before it (debugging: rlx inspect --after / --print-after-all).
  std::function<void(std::string_view pass, size_t nodes_before, const Graph& after)> after_pass;
};

// One registered pass as a pipeline for some options sees it.
struct PassInfo {
  std::string name, description;
  std::string needs, keeps;  // its contract, e.g. "params-bound" / "outputs, inputs"
  int min_level = 1;         // lowest opt_level that runs it
  bool enabled = false;      // whether the pipeline for the options runs it
  std::string why_not;       // when not: "disabled", "needs -O1", ...
};
// Every registered pass in pipeline order, marked with whether `options`
// run it. Throws rlx::Error naming the valid passes when
// options.disabled_passes has an unknown name.
std::vector<PassInfo> describe_pipeline(const CompileOptions& options);
// Runs the pipeline on a graph whose params stay unbound (for exporters, which
// write the weights themselves): passes that need bound weights (fold) are
// skipped. Executable::compile binds weights and runs every pass.
Graph optimize_unbound(Graph g, const CompileOptions& options = {});

// A memory plan for one set of concrete input shapes.
struct Plan {
  std::vector<Dims> dims;       // concrete dims of every node
  std::vector<int64_t> offset;  // arena byte offset, or -1 when not in the arena
  // Per node: the node whose buffer it views (a reshape of a contiguous value
  // costs no copy), or -1. Views are never graph outputs.
  std::vector<NodeId> alias;
  // Per node (empty when none is): whether its dims wait on a data-dependent
  // count not yet found (rlx/graph.h: has_data_dependent_dims); such a node
  // has no dims and no slot here, and the run plans again once it knows them.
  std::vector<bool> pending;
  size_t arena_bytes = 0;  // peak activation bytes
  bool is_pending(NodeId id) const { return !pending.empty() && pending[size_t(id)]; }
};

class Executable {
 public:
  // Verifies, binds params from `weights` by node name (zero-copy when dtype
  // and layout match), optimizes, and has the backend prepare every node once.
  // Lists every node the backend cannot run in one error.
  static std::shared_ptr<Executable> compile(Graph graph, const TensorMap& weights,
                                             const CompileOptions& options = {});

  const Graph& graph() const { return graph_; }
  // Plan for these input dims (cached per shape signature) and the extents
  // of the data-dependent dims the run has found so far, by symbol.
  std::shared_ptr<const Plan> plan_for(const std::map<std::string, Dims>& input_dims,
                                       const std::map<std::string, int64_t>& counts = {}) const;
  // Plan for the graph's declared input shapes (needs them static).
  std::shared_ptr<const Plan> static_plan() const;
  // A control node's body compiled on this executable's backend (once; later calls share it).
  std::shared_ptr<const Executable> body_executable(const Graph& body) const;
  const std::vector<Tensor>& bound() const { return bound_; }
  const Backend& backend() const { return *backend_; }

 private:
  Graph graph_;
  std::shared_ptr<const Backend> backend_;
  std::unique_ptr<CompiledGraph> compiled_;  // per-node kernels, built once
  std::vector<Tensor> bound_;                // per node: param/constant data
  mutable std::mutex mu_;
  mutable std::map<std::string, std::shared_ptr<const Plan>> plans_;
  mutable std::deque<std::string> plan_order_;  // insertion order, for eviction
  mutable std::map<const Graph*, std::shared_ptr<const Executable>> bodies_;
  friend class Session;
};

// Where a run's time went, per node (rlx run --profile).
struct NodeTime {
  double total_ms = 0;                    // summed over the profiled runs
  int64_t runs = 0;                       // how many profiled runs executed the node
  double last_start_ms = 0, last_ms = 0;  // the last run: offset from its start, duration
};

struct SessionOptions {
  // Convert an input whose dtype differs from the one the graph declares
  // (`rlx run --cast-inputs`). Off by default: a silent conversion would hide
  // a caller's mistake, such as i64 data fed to an f32 input.
  bool cast_inputs = false;
  // Checked before every node: once it reads true, run() stops with an
  // rlx::Error saying it was interrupted (Ctrl-C in Python's Model.run).
  const std::atomic<bool>* interrupt = nullptr;
};

class Session {
 public:
  explicit Session(std::shared_ptr<const Executable> exe, SessionOptions options = {})
      : exe_(std::move(exe)), options_(options) {}
  // Times every node of the following runs (a clock read around each kernel
  // call); off by default. Turning it on clears what was gathered.
  void set_profiling(bool on);
  // Per node id of the executable's graph; nodes that never ran stay zero.
  const std::vector<NodeTime>& profile() const { return profile_; }
  // Inputs by name; returns outputs by name. Throws rlx::Error naming the
  // input on missing/extra inputs, bad shapes, or a dtype other than the
  // declared one (unless options.cast_inputs).
  TensorMap run(const TensorMap& inputs);
  size_t last_arena_bytes() const { return arena_bytes_; }
  const Executable& executable() const { return *exe_; }

 private:
  Tensor output_buffer(const Node& n, const Dims& dims);
  std::vector<std::vector<std::shared_ptr<Buffer>>> out_cache_;  // per graph-output node
  std::shared_ptr<const Executable> exe_;
  SessionOptions options_;
  std::shared_ptr<Buffer> arena_;
  std::shared_ptr<runtime::ControlRunner> control_;  // made when the first control node runs
  size_t arena_bytes_ = 0;
  bool profiling_ = false;
  std::vector<NodeTime> profile_;
};

}  // namespace rlx
