// Backend queries the runtime answers for any backend, and the process-wide
// default backend (set by the `rlx` library's wiring or by the caller).
#include "rlx/backend.h"

#include <atomic>
#include <map>
#include <mutex>

#include "rlx/error.h"
#include "rlx/runtime.h"
#include "runtime/control.h"

namespace rlx {

std::vector<Unsupported> unsupported_nodes(const Backend& backend, const Graph& g) {
  std::vector<Unsupported> r;
  for (const Node& n : g.nodes()) {
    if (is_leaf(n.op)) continue;
    Support s = backend.supports(n);
    if (!s) r.push_back({n.id, op_name(n.op), std::move(s.reason)});
    if (!s || !is_control(n.op)) continue;
    for (const auto& body : n.bodies)  // what the node runs must run here too
      for (Unsupported& u : body ? unsupported_nodes(backend, *body) : std::vector<Unsupported>{})
        r.push_back({n.id, std::move(u.op), std::move(u.reason) + " (in " + n.label() + ")"});
  }
  return r;
}

std::string unsupported_report(const Backend& backend, const Graph& g) {
  struct Kind {
    int count = 0;
    std::string reason;
  };
  std::map<std::string, Kind> kinds;
  int total = 0;
  for (const Unsupported& u : unsupported_nodes(backend, g)) {
    Kind& k = kinds[u.op];
    if (k.count++ == 0) k.reason = u.reason;
    ++total;
  }
  if (kinds.empty()) return {};
  std::string s = "the " + backend.name() + " backend cannot run " + std::to_string(total) +
                  " node(s) of " + std::to_string(kinds.size()) + " op kind(s): ";
  bool first = true;
  for (const auto& [op, k] : kinds) {
    s += (first ? "" : ", ") + op + " (x" + std::to_string(k.count) + ")";
    if (!k.reason.empty()) s += ": " + k.reason;
    first = false;
  }
  return s;
}

void check_supported(const Backend& backend, const Graph& g) {
  std::string report = unsupported_report(backend, g);
  RLX_CHECK(report.empty(), report);
}

namespace {
std::atomic<BackendFactory> g_factory{nullptr};
std::mutex g_mu;
std::shared_ptr<const Backend> g_default;  // guarded by g_mu
}  // namespace

void set_default_backend_factory(BackendFactory factory) { g_factory.store(factory); }

void set_default_backend(std::shared_ptr<const Backend> backend) {
  std::lock_guard lk(g_mu);
  g_default = std::move(backend);
}

std::vector<Tensor> evaluate(const Backend& backend, const Node& n, std::span<const Tensor> in) {
  if (is_control(n.op)) {  // folding: the bodies compiled for this once
    std::shared_ptr<const Backend> shared(&backend, [](const Backend*) {});
    runtime::ControlRunner runner(
        [&](const Graph& body) {
          CompileOptions options;
          options.backend = shared;
          return std::shared_ptr<const Executable>(Executable::compile(body, {}, options));
        },
        {});
    return runner.run(n, in).outputs;
  }
  std::vector<Tensor> out;
  for (const Shape& s : shapes_for_run(n, in)) out.emplace_back(s.concrete(), s.dtype);
  backend.run_node(n, in, out);
  return out;
}

std::shared_ptr<const Backend> default_backend() {
  std::lock_guard lk(g_mu);
  if (!g_default) {
    BackendFactory f = g_factory.load();
    RLX_CHECK(f,
              "no backend: pass CompileOptions::backend, call set_default_backend, or link the "
              "`rlx` library (which wires the CPU backend as the default)");
    g_default = f();
  }
  return g_default;
}

}  // namespace rlx
