#include <sstream>

#include "rlx/graph.h"

namespace rlx {
namespace {
// "[2,3] f32", or "([2,3] f32, [2,3] i64)" for a multi-output node.
std::string shapes_str(const Node& n) {
  if (!has_results(n.op)) return n.shape.str();
  std::string s = "(";
  for (size_t i = 0; i < n.results.size(); ++i) s += (i ? ", " : "") + n.results[i].str();
  return s + ")";
}

const char* body_name(const Node& n, size_t b) {
  if (n.op == Op::If) return b == 0 ? "then" : "else";
  return "body";
}
}  // namespace

std::string to_text(const Graph& g) {
  std::ostringstream os;
  for (const Node& n : g.nodes()) {
    os << "%" << n.id << " = " << op_name(n.op);
    if (n.op == Op::Input || n.op == Op::Param) os << " \"" << n.name << "\"";
    for (size_t i = 0; i < n.inputs.size(); ++i) os << (i ? ", %" : " %") << n.inputs[i];
    const Attrs a = attrs_to_map(n.attrs, true);
    if (!a.items().empty()) os << " {" << a.str() << "}";
    os << " : " << shapes_str(n);
    if (!n.origin.empty())
      os << "   # " << n.origin;
    else if (!n.name.empty() && n.op != Op::Input && n.op != Op::Param)
      os << "   # " << n.name;
    os << "\n";
    for (size_t b = 0; b < n.bodies.size(); ++b) {
      os << "  " << body_name(n, b) << ":\n";
      if (!n.bodies[b]) os << "    (not lowered)\n";
      std::istringstream body(n.bodies[b] ? to_text(*n.bodies[b]) : "");
      for (std::string line; std::getline(body, line);) os << "    " << line << "\n";
    }
  }
  for (const auto& o : g.outputs()) os << "output \"" << o.name << "\" = %" << o.node << "\n";
  return os.str();
}

std::string to_dot(const Graph& g) {
  auto esc = [](std::string s) {
    std::string r;
    for (char c : s) r += c == '"' ? std::string("\\\"") : std::string(1, c);
    return r;
  };
  std::ostringstream os;
  os << "digraph rlx {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\", fontsize=10];\n";
  for (const Node& n : g.nodes()) {
    std::string label = "%" + std::to_string(n.id) + " " + op_name(n.op);
    if (!n.name.empty()) label += "\\n" + esc(n.name);
    label += "\\n" + shapes_str(n);
    const char* style = n.op == Op::Input ? ", style=filled, fillcolor=\"#d0e8ff\""
                        : is_leaf(n.op)   ? ", style=filled, fillcolor=\"#eeeeee\""
                                          : "";
    os << "  n" << n.id << " [label=\"" << label << "\"" << style << "];\n";
    for (NodeId in : n.inputs) os << "  n" << in << " -> n" << n.id << ";\n";
  }
  for (const auto& o : g.outputs()) {
    os << "  out_" << o.node << " [label=\"" << esc(o.name)
       << "\", shape=ellipse, style=filled, fillcolor=\"#d8f5d0\"];\n";
    os << "  n" << o.node << " -> out_" << o.node << ";\n";
  }
  os << "}\n";
  return os.str();
}

}  // namespace rlx
