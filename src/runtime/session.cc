#include <algorithm>
#include <chrono>
#include <optional>
#include <set>

#include "rlx/error.h"
#include "rlx/runtime.h"
#include "runtime/control.h"

namespace rlx {
namespace {
using Clock = std::chrono::steady_clock;
double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// A concat whose first operand is a prefix of the result (every axis before
// the concat axis has size 1) and ends where its buffer's claim ends grows
// into that buffer's headroom: the result views it, and the kernel writes
// only the other operands. A KV cache fed back as the next step's input so
// grows by a token without copying what it holds (output_buffer leaves the
// headroom). The first operand's own bytes are never written, so a caller's
// tensor keeps its value; growing the same tensor twice finds the claim
// taken and copies.
std::optional<Tensor> append_in_place(const Node& n, const std::vector<Tensor>& args,
                                      const Dims& dims) {
  if (n.op != Op::Concat || args.empty()) return std::nullopt;
  const Tensor& x = args[0];
  if (!x.defined() || x.rank() != int(dims.size()) || x.dtype() != n.shape.dtype)
    return std::nullopt;
  const int ax = normalize_axis(n.attrs_as<AxisAttrs>().axis, x.rank());
  for (int i = 0; i < ax; ++i)
    if (dims[size_t(i)] != 1) return std::nullopt;
  return x.grown_in_place(dims);
}

}  // namespace

Tensor Session::output_buffer(const Node& n, const Dims& dims) {
  // Reuse an earlier run's output buffer once the caller has dropped it (we
  // hold the only reference): fresh pages cost more than most kernels. Two
  // slots per output, so a caller that feeds each output back as the next
  // input (a KV cache) still alternates between two warm buffers; outputs
  // with symbolic dims get headroom so a growing length reuses them too.
  if (out_cache_.size() < exe_->graph_.size()) out_cache_.resize(exe_->graph_.size());
  auto& slots = out_cache_[size_t(n.id)];
  const size_t bytes = size_t(numel(dims)) * dtype_size(n.shape.dtype);
  std::shared_ptr<Buffer>* spare = nullptr;
  for (auto& b : slots) {
    if (b.use_count() != 1) continue;
    if (b->size() >= bytes) {
      b->release_tail(bytes);
      return Tensor(b, 0, dims, n.shape.dtype);
    }
    spare = &b;
  }
  auto fresh = n.shape.is_static() ? make_aligned_buffer(std::max<size_t>(bytes, 1), false)
                                   : make_growable_buffer(bytes);
  if (spare)
    *spare = fresh;
  else if (slots.size() < 2)
    slots.push_back(fresh);
  return Tensor(fresh, 0, dims, n.shape.dtype);
}

void Session::set_profiling(bool on) {
  profiling_ = on;
  profile_.assign(on ? exe_->graph_.size() : 0, NodeTime{});
}

TensorMap Session::run(const TensorMap& inputs) {
  const Graph& g = exe_->graph_;
  std::map<std::string, Dims> input_dims;
  std::set<std::string> declared;
  for (NodeId id : g.inputs()) declared.insert(g.node(id).name);
  for (const auto& [name, t] : inputs) {
    RLX_CHECK(declared.count(name), "unknown input '", name, "'; the graph takes: ", [&] {
      std::string s;
      for (const auto& d : declared) s += (s.empty() ? "" : ", ") + d;
      return s;
    }());
    input_dims[name] = t.dims();
  }
  std::map<std::string, int64_t> counts;  // data-dependent dims found by this run
  std::shared_ptr<const Plan> plan;
  // Plans for the same inputs agree on the slot of every node before a count
  // (neither their dims nor their lifetimes depend on it, and the planner
  // places in node order), so a plan made after a count keeps the values
  // already computed where they are; a larger arena is a new buffer, and
  // those values stay alive in the old one.
  auto plan_next = [&](NodeId done) {
    auto next = exe_->plan_for(input_dims, counts);
    const bool grows = !arena_ || arena_->size() < next->arena_bytes;
    // With headroom and without zeroing: decoding plans a slightly larger arena each step.
    if (grows) arena_ = make_aligned_buffer(next->arena_bytes + next->arena_bytes / 2, false);
    for (NodeId i = 0; plan && !grows && i <= done; ++i)
      RLX_CHECK(next->offset[size_t(i)] == plan->offset[size_t(i)] || plan->offset[size_t(i)] < 0,
                g.node(i).label(), ": planned into another slot after a count");
    plan = std::move(next);
    arena_bytes_ = std::max(arena_bytes_, plan->arena_bytes);
  };
  arena_bytes_ = 0;
  plan_next(-1);

  std::vector<Tensor> values(g.size());
  std::vector<Tensor> args, outs;
  const auto run_start = Clock::now();
  for (const Node& n : g.nodes()) {
    const size_t id = size_t(n.id);
    if (n.op == Op::Input) {
      const Tensor& t = inputs.at(n.name);
      RLX_CHECK(t.dtype() == n.shape.dtype || options_.cast_inputs, "input '", n.name, "' is ",
                dtype_name(t.dtype()), " but the graph declares ", n.shape.str(),
                " (convert it, or ask for conversion: SessionOptions::cast_inputs, "
                "rlx run --cast-inputs)");
      values[id] = t.dtype() == n.shape.dtype ? t.contiguous() : t.to(n.shape.dtype);
      continue;
    }
    if (n.op == Op::Constant) {
      values[id] = exe_->bound_[id];
      continue;
    }
    RLX_CHECK(n.op != Op::Param, n.label(), ": parameter '", n.name, "' was never bound");
    if (options_.interrupt && options_.interrupt->load(std::memory_order_relaxed))
      throw make_error("run interrupted before ", n.label());
    if (n.op == Op::Result) continue;  // written by its multi-output node
    if (plan->alias[id] >= 0) {        // a reshape: a view of its input (copied only if strided)
      values[id] = values[size_t(n.inputs[0])].reshape(plan->dims[id]);
      continue;
    }
    // The buffers the node writes: its own, or each of its results'.
    auto buffer = [&](const Node& v) {
      const size_t at = size_t(v.id);
      const Dims& d = plan->dims[at];
      return plan->offset[at] >= 0 ? Tensor(arena_, size_t(plan->offset[at]), d, v.shape.dtype)
                                   : output_buffer(v, d);
    };
    args.clear();
    for (NodeId in : n.inputs) args.push_back(values[size_t(in)]);
    outs.clear();
    const bool finds_count = plan->is_pending(n.id);
    const bool control = is_control(n.op);  // run by this session, its outputs made by the run
    if (control) {
      if (!control_)
        control_ = std::make_shared<runtime::ControlRunner>(
            [exe = exe_](const Graph& body) { return exe->body_executable(body); }, options_);
    } else if (finds_count) {
      // Sized for the count's bound; the kernel shrinks them to what it finds.
      RLX_CHECK(has_data_dependent_dims(n.op), n.label(), ": planned without dims");
      for (const Shape& s : shapes_for_run(n, args))
        outs.push_back(Tensor::uninitialized(s.concrete(), s.dtype));
    } else if (has_results(n.op))
      for (size_t i = 0; i < n.results.size(); ++i)
        outs.push_back(buffer(g.node(g.result(n.id, int(i)))));
    else if (auto grown = append_in_place(n, args, plan->dims[id]))
      outs.push_back(std::move(*grown));
    else
      outs.push_back(buffer(n));
    try {
      const auto t0 = profiling_ ? Clock::now() : Clock::time_point{};
      if (control) {
        runtime::ControlResult r = control_->run(n, args);
        outs = std::move(r.outputs);
        counts[data_dependent_dim(n)] = r.count;
        runtime::bind_run_dims(n, args, outs, counts);
      } else {
        exe_->compiled_->run(n, args, outs);
      }
      if (profiling_) {
        NodeTime& p = profile_[id];
        p.last_start_ms = ms_between(run_start, t0);
        p.last_ms = ms_between(t0, Clock::now());
        p.total_ms += p.last_ms;
        ++p.runs;
      }
    } catch (const Error& e) {
      throw e.with_context("while running " + node_context(g, n));
    }
    if (finds_count) {  // the nodes after it are planned for the count it found
      if (!control) counts[data_dependent_dim(n)] = data_dependent_count(n, outs[0].shape());
      plan_next(n.id);
    }
    if (has_results(n.op))
      for (size_t i = 0; i < outs.size(); ++i) values[size_t(g.result(n.id, int(i)))] = outs[i];
    else
      values[id] = std::move(outs[0]);
  }
  TensorMap result;
  // Computed outputs never live in the arena (the planner skips them), so
  // callers own them; inputs and constants are copied so callers cannot
  // change the caller's data or the compiled graph through them.
  for (const auto& o : g.outputs()) {
    const Tensor& t = values[size_t(o.node)];
    result[o.name] = is_leaf(g.node(o.node).op) ? t.clone() : t;
  }
  return result;
}

}  // namespace rlx
