#include <algorithm>
#include <utility>
#include <vector>

#include "core/file_pages.h"
#include "opt/pass.h"
#include "rlx/error.h"
#include "rlx/runtime.h"
#include "runtime/plan.h"

namespace rlx {
namespace {

// Params become constants holding the weight (a zero-copy view of the mmap
// when dtype matches), so folding and the runtime treat them alike.
Graph bind_params(const Graph& g, const TensorMap& weights) {
  std::string missing;
  Graph out;
  std::vector<NodeId> map(g.size());
  for (const Node& src : g.nodes()) {
    Node n = src;
    for (NodeId& in : n.inputs) in = map[size_t(in)];
    if (n.op == Op::Param) {
      auto it = weights.find(n.name);
      if (it == weights.end()) {
        missing += (missing.empty() ? "" : ", ") + n.name + " " + n.shape.str();
        map[size_t(src.id)] = out.append_raw(std::move(n));
        continue;
      }
      const Tensor& w = it->second;
      bool fits = w.rank() == n.shape.rank();
      for (int d = 0; fits && d < w.rank(); ++d)
        fits = !n.shape.dims[size_t(d)].is_static() ||
               n.shape.dims[size_t(d)].value == w.dims()[size_t(d)];
      RLX_CHECK(fits, "weight '", n.name, "' has shape ", w.shape().str(),
                " but the graph declares ", n.shape.str());
      n.op = Op::Constant;
      n.value = w.dtype() == n.shape.dtype ? w.contiguous() : w.to(n.shape.dtype);
      n.shape = n.value.shape();
    }
    map[size_t(src.id)] = out.append_raw(std::move(n));
  }
  RLX_CHECK(missing.empty(), "missing weights: ", missing);
  for (const auto& o : g.outputs()) out.add_output(o.name, map[size_t(o.node)]);
  return out;
}

// The mapped pages of weights that compiling folded away (a conv's weight
// once batch norm is folded into a copy, a weight cast to another dtype) go
// back to the OS: the compiled graph no longer reads them (core/file_pages.h).
void release_folded_weights(const Graph& g, const TensorMap& weights) {
  std::vector<std::pair<const std::byte*, const std::byte*>> kept;
  for (const Node& n : g.nodes())
    if (n.op == Op::Constant && n.value.nbytes() > 0) {
      const auto* p = static_cast<const std::byte*>(n.value.raw());
      kept.emplace_back(p, p + n.value.nbytes());
    }
  std::sort(kept.begin(), kept.end());
  // reach[i]: the furthest end among the first i + 1 ranges (views may nest).
  std::vector<const std::byte*> reach(kept.size());
  for (size_t i = 0; i < kept.size(); ++i)
    reach[i] = i ? std::max(reach[i - 1], kept[i].second) : kept[i].second;
  for (const auto& [name, w] : weights) {
    const auto* p = static_cast<const std::byte*>(w.raw());
    if (!p) continue;
    const size_t i =
        size_t(std::lower_bound(kept.begin(), kept.end(), p,
                                [](const auto& r, const std::byte* q) { return r.first < q; }) -
               kept.begin());
    const bool used =
        (i < kept.size() && kept[i].first < p + w.nbytes()) || (i > 0 && reach[i - 1] > p);
    if (!used) release_file_pages(p, w.nbytes());
  }
}

}  // namespace

std::shared_ptr<Executable> Executable::compile(Graph graph, const TensorMap& weights,
                                                const CompileOptions& options) {
  graph.verify();
  RLX_CHECK(!graph.outputs().empty(), "graph has no outputs");
  std::shared_ptr<const Backend> backend = options.backend ? options.backend : default_backend();
  check_supported(*backend, graph);
  opt::PassManager passes(options);  // validates the options before binding weights
  auto eval = [&backend](const Node& n, std::span<const Tensor> in) {
    return evaluate(*backend, n, in);
  };
  Graph g = passes.run(bind_params(graph, weights), eval);
  auto exe = std::shared_ptr<Executable>(new Executable());
  exe->bound_.resize(g.size());
  for (const Node& n : g.nodes())
    if (n.op == Op::Constant) exe->bound_[size_t(n.id)] = n.value;
  release_folded_weights(g, weights);
  exe->compiled_ = backend->compile(g);
  exe->backend_ = std::move(backend);
  exe->graph_ = std::move(g);
  return exe;
}

std::shared_ptr<const Plan> Executable::plan_for(const std::map<std::string, Dims>& input_dims,
                                                 const runtime::Counts& counts) const {
  std::string key = runtime::shape_signature(input_dims, counts);
  std::lock_guard lk(mu_);
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  std::vector<bool> pending;
  std::vector<Dims> dims = runtime::specialize(graph_, input_dims, counts, &pending);
  auto plan = std::make_shared<const Plan>(
      runtime::plan_memory(graph_, std::move(dims), std::move(pending)));
  // Decoding with a growing KV cache sees a new shape every step: keep the
  // most recent plans only, so the cache cannot grow without bound.
  constexpr size_t kMaxPlans = 32;
  if (plans_.size() >= kMaxPlans) {
    plans_.erase(plan_order_.front());
    plan_order_.pop_front();
  }
  plans_.emplace(key, plan);
  plan_order_.push_back(key);
  return plan;
}

std::shared_ptr<const Executable> Executable::body_executable(const Graph& body) const {
  {
    std::lock_guard lk(mu_);
    if (auto it = bodies_.find(&body); it != bodies_.end()) return it->second;
  }
  CompileOptions options;
  options.backend = backend_;
  std::shared_ptr<const Executable> exe = compile(body, {}, options);
  std::lock_guard lk(mu_);
  return bodies_.emplace(&body, std::move(exe)).first->second;
}

std::shared_ptr<const Plan> Executable::static_plan() const {
  std::map<std::string, Dims> dims;
  for (NodeId id : graph_.inputs()) dims[graph_.node(id).name] = graph_.node(id).shape.concrete();
  return plan_for(dims);
}

}  // namespace rlx
