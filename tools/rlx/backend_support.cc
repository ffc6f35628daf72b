// rlx inspect MODEL --backend NAME: which nodes a backend cannot take, all at
// once, from the backend's own supports() answers.
#include <cstdio>
#include <map>

#include "commands.h"

namespace rlx::cli {

std::string join_backend_names() {
  std::string s;
  for (const auto& n : backend_names()) s += (s.empty() ? "" : ", ") + n;
  return s;
}

void print_backend_support(const Model& m, const std::string& name) {
  auto backend = make_backend(name);
  std::vector<Unsupported> gaps = unsupported_nodes(*backend, m.graph);
  std::printf("model: %s (%s)\n", m.source.c_str(), m.format.c_str());
  if (gaps.empty()) {
    std::printf("backend %s: supports all %zu nodes\n", backend->name().c_str(), m.graph.size());
    return;
  }
  std::map<std::string, std::pair<int, std::string>> by_op;  // op -> (count, reason)
  for (const auto& u : gaps) {
    auto& [count, reason] = by_op[u.op];
    if (count++ == 0) reason = u.reason;
  }
  std::printf("backend %s: %zu of %zu nodes unsupported (%zu op kind(s))\n",
              backend->name().c_str(), gaps.size(), m.graph.size(), by_op.size());
  for (const auto& [op, cr] : by_op)
    std::printf("  %-22s x%-4d %s\n", op.c_str(), cr.first, cr.second.c_str());
}

}  // namespace rlx::cli
