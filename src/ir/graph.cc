#include "rlx/graph.h"

#include <set>
#include <unordered_map>

#include "rlx/error.h"

namespace rlx {
namespace {
const OpInfo kOps[] = {
#define RLX_OP(e, name, fam, set, mn, mx, outs, infer) \
  {Op::e, name, OpFamily::fam, #set, mn, mx, outs},
#include "rlx/ops.def"
#undef RLX_OP
};
}  // namespace

const OpInfo& op_info(Op op) { return kOps[size_t(op)]; }
int num_ops() { return int(std::size(kOps)); }

Op parse_op(std::string_view name) {
  static const auto* by_name = [] {
    auto* m = new std::unordered_map<std::string_view, Op>();
    for (const auto& o : kOps) (*m)[o.name] = o.op;
    return m;
  }();
  auto it = by_name->find(name);
  if (it == by_name->end()) throw make_error("unknown op '", name, "'");
  return it->second;
}

bool is_leaf(Op op) { return op_info(op).max_inputs == 0; }

Op activation_kind(Op kind) {
  if (op_family(kind) == OpFamily::Unary) return kind;
  std::string valid;
  for (const auto& o : kOps)
    if (o.family == OpFamily::Unary) valid += std::string(valid.empty() ? "" : ", ") + o.name;
  throw make_error("activation_grad: '", op_name(kind),
                   "' is not a unary activation (valid: ", valid, ")");
}

Op activation_kind(std::string_view kind) { return activation_kind(parse_op(kind)); }

void Node::throw_wrong_attrs() const {
  throw make_error(label(), ": holds ", op_info(op).attr_set,
                   "Attrs, read as another attribute set");
}

std::string Node::label() const {
  std::string s = "node %" + std::to_string(id) + " (" + op_name(op);
  if (!name.empty()) s += " '" + name + "'";
  return s + ")";
}

std::string node_context(const Graph& g, const Node& n) {
  std::string s = n.label();
  if (!n.inputs.empty()) {
    s += " with inputs ";
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      NodeId in = n.inputs[i];
      s += (i ? ", " : "");
      s += in >= 0 && size_t(in) < g.size() ? g.node(in).shape.str() : "<bad id>";
    }
  }
  const Attrs a = attrs_to_map(n.attrs, true);
  if (!a.items().empty()) s += " {" + a.str() + "}";
  if (!n.origin.empty()) s += " from " + n.origin;
  return s;
}

NodeId Graph::append_raw(Node n) {
  const OpInfo& info = op_info(n.op);
  n.id = NodeId(nodes_.size());
  const int k = int(n.inputs.size());
  if (k < info.min_inputs || (info.max_inputs >= 0 && k > info.max_inputs))
    throw make_error(n.label(), ": takes ", info.min_inputs,
                     info.max_inputs == info.min_inputs ? ""
                     : info.max_inputs < 0              ? " or more"
                                                        : ".." + std::to_string(info.max_inputs),
                     " inputs, got ", k);
  for (NodeId in : n.inputs)
    RLX_CHECK(in >= 0 && in < n.id, n.label(), ": input %", in, " is not an earlier node");
  if (std::holds_alternative<std::monostate>(n.attrs)) n.attrs = default_attrs(n.op);
  RLX_CHECK(attrs_match(n.op, n.attrs), n.label(), ": attributes are not ", op_info(n.op).attr_set,
            "Attrs");
  nodes_.push_back(std::move(n));
  return nodes_.back().id;
}

NodeId Graph::add(Op op, std::vector<NodeId> inputs, const Attrs& attrs, std::string name,
                  std::string origin) {
  OpAttrs typed;
  try {
    typed = parse_attrs(op, attrs);
  } catch (const Error& e) {
    Node n;
    n.op = op;
    n.id = NodeId(nodes_.size());
    n.name = name;
    throw e.with_context(n.label() + (origin.empty() ? "" : " from " + origin));
  }
  return add_typed(op, std::move(inputs), std::move(typed), std::move(name), std::move(origin));
}

NodeId Graph::add_typed(Op op, std::vector<NodeId> inputs, OpAttrs attrs, std::string name,
                        std::string origin) {
  Node n;
  n.op = op;
  n.inputs = std::move(inputs);
  n.attrs = std::move(attrs);
  n.name = std::move(name);
  n.origin = std::move(origin);
  NodeId id = append_raw(std::move(n));
  Node& added = nodes_.back();
  try {
    std::vector<const Shape*> in;
    for (NodeId i : added.inputs) in.push_back(&nodes_[size_t(i)].shape);
    added.shape = infer_shape(added, in);
  } catch (const Error& e) {
    std::string ctx = node_context(*this, added);
    nodes_.pop_back();
    throw e.with_context(ctx);
  }
  return id;
}

NodeId Graph::input(const std::string& name, Shape shape) {
  Node n;
  n.op = Op::Input;
  n.name = name;
  n.shape = std::move(shape);
  for (const auto& o : nodes_)
    RLX_CHECK(!(o.op == Op::Input && o.name == name), "duplicate graph input '", name, "'");
  return append_raw(std::move(n));
}

NodeId Graph::param(const std::string& name, Shape shape) {
  Node n;
  n.op = Op::Param;
  n.name = name;
  n.shape = std::move(shape);
  return append_raw(std::move(n));
}

NodeId Graph::constant(Tensor value, std::string name) {
  Node n;
  n.op = Op::Constant;
  n.name = std::move(name);
  n.shape = value.shape();
  n.value = value.contiguous();
  return append_raw(std::move(n));
}

void Graph::add_output(const std::string& name, NodeId id) {
  RLX_CHECK(id >= 0 && size_t(id) < nodes_.size(), "output '", name, "' refers to node %", id,
            " but the graph has ", nodes_.size(), " nodes");
  for (const auto& o : outputs_) RLX_CHECK(o.name != name, "duplicate graph output '", name, "'");
  outputs_.push_back({name, id});
}

std::vector<NodeId> Graph::inputs() const {
  std::vector<NodeId> r;
  for (const auto& n : nodes_)
    if (n.op == Op::Input) r.push_back(n.id);
  return r;
}

std::vector<NodeId> Graph::params() const {
  std::vector<NodeId> r;
  for (const auto& n : nodes_)
    if (n.op == Op::Param) r.push_back(n.id);
  return r;
}

void Graph::verify() const {
  std::set<std::string> input_names;  // append_raw (deserialization) bypasses input()'s check
  for (const auto& n : nodes_) {
    if (n.op == Op::Input)
      RLX_CHECK(input_names.insert(n.name).second, n.label(), ": duplicate graph input '", n.name,
                "'");
    const OpInfo& info = op_info(n.op);
    const int k = int(n.inputs.size());
    RLX_CHECK(k >= info.min_inputs && (info.max_inputs < 0 || k <= info.max_inputs), n.label(),
              ": wrong number of inputs (", k, ")");
    for (NodeId in : n.inputs)
      RLX_CHECK(in >= 0 && in < n.id, n.label(), ": input %", in, " is not an earlier node");
    if (n.op == Op::Constant)
      RLX_CHECK(n.value.defined() && n.value.shape() == n.shape, n.label(),
                ": constant data does not match its shape ", n.shape.str());
    if (n.op == Op::Input || n.op == Op::Param)
      RLX_CHECK(!n.name.empty(), n.label(), ": inputs and params need a name");
    RLX_CHECK(attrs_match(n.op, n.attrs), n.label(), ": attributes are not ",
              op_info(n.op).attr_set, "Attrs");
    try {
      std::vector<const Shape*> in;
      for (NodeId i : n.inputs) in.push_back(&nodes_[size_t(i)].shape);
      Shape s = infer_shape(n, in);
      RLX_CHECK(s.dtype == n.shape.dtype && s.rank() == n.shape.rank(), "recorded shape ",
                n.shape.str(), " disagrees with inferred ", s.str());
      for (int d = 0; d < s.rank(); ++d)
        RLX_CHECK(!s.dims[d].is_static() || !n.shape.dims[d].is_static() ||
                      s.dims[d].value == n.shape.dims[d].value,
                  "recorded shape ", n.shape.str(), " disagrees with inferred ", s.str());
    } catch (const Error& e) {
      throw e.with_context("verify: " + node_context(*this, n));
    }
  }
  for (const auto& o : outputs_)
    RLX_CHECK(o.node >= 0 && size_t(o.node) < nodes_.size(), "output '", o.name,
              "' refers to missing node %", o.node);
}

}  // namespace rlx
