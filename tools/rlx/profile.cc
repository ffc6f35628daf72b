// rlx run --profile: where the time went, per op kind and per node, and a
// Chrome trace (chrome://tracing, Perfetto) of the last profiled run.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "commands.h"

namespace rlx::cli {

std::string profile_report(const Graph& g, const std::vector<NodeTime>& p, size_t top) {
  struct Kind {
    double ms = 0;
    int nodes = 0;
  };
  std::map<std::string, Kind> kinds;
  std::vector<NodeId> ran;
  double total = 0;
  int64_t runs = 0;
  for (const Node& n : g.nodes()) {
    const NodeTime& t = p.at(size_t(n.id));
    if (t.runs == 0) continue;
    Kind& k = kinds[op_name(n.op)];
    k.ms += t.total_ms;
    ++k.nodes;
    total += t.total_ms;
    runs = std::max(runs, t.runs);
    ran.push_back(n.id);
  }
  if (ran.empty()) return "profile: no node ran\n";
  const double per_run = 1.0 / double(runs);
  std::string s;
  char line[512];
  std::snprintf(line, sizeof line, "profile over %lld run(s): %.3f ms per run in kernels\n",
                static_cast<long long>(runs), total * per_run);
  s += line;
  std::vector<std::pair<std::string, Kind>> by_kind(kinds.begin(), kinds.end());
  std::sort(by_kind.begin(), by_kind.end(),
            [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
  s += "  op kind                  ms/run      %   nodes\n";
  for (const auto& [name, k] : by_kind) {
    std::snprintf(line, sizeof line, "  %-22s %8.3f %6.1f %7d\n", name.c_str(), k.ms * per_run,
                  100 * k.ms / total, k.nodes);
    s += line;
  }
  // top 0: every node in run order, to set beside another runtime's layer by layer.
  if (top == 0) {
    top = ran.size();
    s += "  nodes in run order:\n";
  } else {
    std::sort(ran.begin(), ran.end(),
              [&](NodeId a, NodeId b) { return p[size_t(a)].total_ms > p[size_t(b)].total_ms; });
    std::snprintf(line, sizeof line, "  slowest %zu nodes:\n", std::min(top, ran.size()));
    s += line;
  }
  for (size_t i = 0; i < std::min(top, ran.size()); ++i) {
    const Node& n = g.node(ran[i]);
    const std::string shape = has_results(n.op) ? n.results[0].str() : n.shape.str();
    std::snprintf(line, sizeof line, "  %8.3f ms %5.1f%%  %s %s%s%s\n",
                  p[size_t(n.id)].total_ms * per_run, 100 * p[size_t(n.id)].total_ms / total,
                  n.label().c_str(), shape.c_str(), n.origin.empty() ? "" : "  # ",
                  n.origin.c_str());
    s += line;
  }
  return s;
}

void write_chrome_trace(const std::string& path, const Graph& g, const std::vector<NodeTime>& p) {
  nlohmann::json events = nlohmann::json::array();
  for (const Node& n : g.nodes()) {
    const NodeTime& t = p.at(size_t(n.id));
    if (t.runs == 0) continue;
    events.push_back({{"name", n.label()},
                      {"cat", op_name(n.op)},
                      {"ph", "X"},
                      {"ts", t.last_start_ms * 1e3},
                      {"dur", t.last_ms * 1e3},
                      {"pid", 0},
                      {"tid", 0},
                      {"args", {{"origin", n.origin}}}});
  }
  std::ofstream f(path);
  RLX_CHECK(f, "cannot write ", path);
  f << nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump();
  RLX_CHECK(f.good(), "error writing ", path);
}

}  // namespace rlx::cli
