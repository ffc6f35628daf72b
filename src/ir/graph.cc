#include "rlx/graph.h"

#include <algorithm>
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
bool has_results(Op op) { return op_info(op).outputs != 1; }

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
  bool valid = true;
  for (NodeId in : n.inputs) valid = valid && in >= 0 && size_t(in) < g.size();
  if (!n.inputs.empty() && valid && n.op != Op::Result) {
    s += " with inputs ";
    const auto shapes = g.input_shapes(n);
    for (size_t i = 0; i < shapes.size(); ++i) s += (i ? ", " : "") + shapes[i]->str();
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
  for (NodeId in : n.inputs) {
    RLX_CHECK(in >= 0 && in < n.id, n.label(), ": input %", in, " is not an earlier node");
    RLX_CHECK(n.op == Op::Result || !has_results(nodes_[size_t(in)].op), n.label(),
              ": reads multi-output node %", in, " directly; its outputs are its result nodes");
  }
  if (std::holds_alternative<std::monostate>(n.attrs)) n.attrs = default_attrs(n.op);
  RLX_CHECK(attrs_match(n.op, n.attrs), n.label(), ": attributes are not ", op_info(n.op).attr_set,
            "Attrs");
  RLX_CHECK(is_control(n.op) || n.bodies.empty(), n.label(), ": only control nodes have bodies");
  if (n.op == Op::Result) {
    const Node& src = nodes_[size_t(n.inputs[0])];
    const int64_t index = n.attrs_as<ResultAttrs>().index;
    RLX_CHECK(has_results(src.op), n.label(), ": reads ", src.label(),
              ", which is not a multi-output node");
    RLX_CHECK(index >= 0 && size_t(index) < src.results.size(), n.label(), ": output ", index,
              " of ", src.label(), ", which has ", src.results.size());
    RLX_CHECK(n.id == src.id + 1 + index, n.label(), ": output ", index, " of ", src.label(),
              " must be node %", src.id + 1 + index, " (results follow their node in order)");
  }
  if (has_results(n.op)) {
    const int fixed = info.outputs;
    RLX_CHECK(!n.results.empty() && (fixed < 0 || int(n.results.size()) == fixed), n.label(),
              ": has ", n.results.size(), " output shapes, the op makes ",
              fixed < 0 ? std::string("one or more") : std::to_string(fixed));
  }
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
  return add_with_bodies(op, std::move(inputs), std::move(attrs), {}, std::move(name),
                         std::move(origin));
}

NodeId Graph::add_with_bodies(Op op, std::vector<NodeId> inputs, OpAttrs attrs,
                              std::vector<std::shared_ptr<const Graph>> bodies, std::string name,
                              std::string origin) {
  Node n;
  n.op = op;
  n.inputs = std::move(inputs);
  n.attrs = std::move(attrs);
  n.bodies = std::move(bodies);
  n.name = std::move(name);
  n.origin = std::move(origin);
  std::vector<Shape> shapes;
  try {
    // Inference needs the typed attributes and inputs checked; the node is
    // appended once its shapes are known (append_raw wants them).
    if (std::holds_alternative<std::monostate>(n.attrs)) n.attrs = default_attrs(op);
    RLX_CHECK(attrs_match(op, n.attrs), "attributes are not ", op_info(op).attr_set, "Attrs");
    const int k = int(n.inputs.size());
    for (NodeId in : n.inputs)
      RLX_CHECK(in >= 0 && size_t(in) < nodes_.size(), "input %", in, " is not an earlier node");
    const OpInfo& info = op_info(op);
    if (k >= info.min_inputs && (info.max_inputs < 0 || k <= info.max_inputs) &&
        (op == Op::Result || std::none_of(n.inputs.begin(), n.inputs.end(), [&](NodeId in) {
           return has_results(nodes_[size_t(in)].op);
         })))
      shapes = infer_shapes(n, input_shapes(n));
  } catch (const Error& e) {
    n.id = NodeId(nodes_.size());
    throw e.with_context(node_context(*this, n));
  }
  if (has_results(op))
    n.results = shapes;
  else if (!shapes.empty())
    n.shape = shapes[0];
  const NodeId id = append_raw(std::move(n));  // arity and readers: clear errors there
  for (size_t i = 0; has_results(op) && i < shapes.size(); ++i) {
    Node r;
    r.op = Op::Result;
    r.inputs = {id};
    r.attrs = ResultAttrs{.index = int64_t(i)};
    r.shape = shapes[i];
    r.origin = nodes_[size_t(id)].origin;
    append_raw(std::move(r));
  }
  return id;
}

void Graph::truncate(size_t n) {
  if (n >= nodes_.size()) return;
  for (const auto& o : outputs_)
    RLX_CHECK(size_t(o.node) < n, "truncate: output '", o.name, "' is node ", o.node);
  nodes_.resize(n);
}

NodeId Graph::result(NodeId id, int index) const {
  const Node& n = node(id);
  RLX_CHECK(has_results(n.op) && index >= 0 && size_t(index) < n.results.size(), n.label(),
            ": has no output ", index);
  return id + 1 + index;
}

std::vector<const Shape*> Graph::input_shapes(const Node& n) const {
  std::vector<const Shape*> in;
  for (NodeId i : n.inputs) {
    const Node& src = node(i);
    if (n.op == Op::Result && has_results(src.op)) {
      const int64_t index = n.attrs_as<ResultAttrs>().index;
      RLX_CHECK(index >= 0 && size_t(index) < src.results.size(), n.label(), ": output ", index,
                " of ", src.label(), ", which has ", src.results.size());
      in.push_back(&src.results[size_t(index)]);
    } else {
      in.push_back(&src.shape);
    }
  }
  return in;
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
  RLX_CHECK(!has_results(nodes_[size_t(id)].op), "output '", name, "' refers to multi-output ",
            nodes_[size_t(id)].label(), "; name one of its result nodes");
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
  std::set<std::string> counts;       // each data-dependent dim is one node's
  for (const auto& n : nodes_) {
    if (n.op == Op::Input)
      RLX_CHECK(input_names.insert(n.name).second, n.label(), ": duplicate graph input '", n.name,
                "'");
    if (has_data_dependent_dims(n.op))
      RLX_CHECK(counts.insert(data_dependent_dim(n)).second, n.label(), ": its count '",
                data_dependent_dim(n), "' names another node's data-dependent dim too");
    const OpInfo& info = op_info(n.op);
    const int k = int(n.inputs.size());
    RLX_CHECK(k >= info.min_inputs && (info.max_inputs < 0 || k <= info.max_inputs), n.label(),
              ": wrong number of inputs (", k, ")");
    RLX_CHECK(is_control(n.op) || n.bodies.empty(), n.label(), ": only control nodes have bodies");
    for (NodeId in : n.inputs)
      RLX_CHECK(in >= 0 && in < n.id, n.label(), ": input %", in, " is not an earlier node");
    if (n.op == Op::Constant)
      RLX_CHECK(n.value.defined() && n.value.shape() == n.shape, n.label(),
                ": constant data does not match its shape ", n.shape.str());
    if (n.op == Op::Input || n.op == Op::Param)
      RLX_CHECK(!n.name.empty(), n.label(), ": inputs and params need a name");
    RLX_CHECK(attrs_match(n.op, n.attrs), n.label(), ": attributes are not ",
              op_info(n.op).attr_set, "Attrs");
    if (has_results(n.op))
      for (size_t i = 0; i < n.results.size(); ++i) {
        const size_t r = size_t(n.id) + 1 + i;
        RLX_CHECK(r < nodes_.size() && nodes_[r].op == Op::Result, n.label(), ": output ", i,
                  " has no result node (results follow their node in order)");
      }
    try {
      const std::vector<Shape> inferred = infer_shapes(n, input_shapes(n));
      const std::span<const Shape> recorded = n.output_shapes();
      RLX_CHECK(inferred.size() == recorded.size(), "records ", recorded.size(),
                " outputs, inference gives ", inferred.size());
      for (size_t i = 0; i < inferred.size(); ++i) {
        const Shape &s = inferred[i], &r = recorded[i];
        bool same = s.dtype == r.dtype && s.rank() == r.rank();
        for (int d = 0; same && d < s.rank(); ++d)
          same = !s.dims[d].is_static() || !r.dims[d].is_static() ||
                 s.dims[d].value == r.dims[d].value;
        RLX_CHECK(same, "recorded shape ", r.str(), " disagrees with inferred ", s.str());
      }
    } catch (const Error& e) {
      throw e.with_context("verify: " + node_context(*this, n));
    }
  }
  for (const auto& o : outputs_)
    RLX_CHECK(o.node >= 0 && size_t(o.node) < nodes_.size(), "output '", o.name,
              "' refers to missing node %", o.node);
}

}  // namespace rlx
