// Control flow: If, Loop, Scan. A condition known at import (a constant, a
// frozen input, or shape code on static dims, which is what exporters mostly
// branch on: "squeeze when this dim is 1") lowers only the branch taken, so
// its shape code keeps folding. A condition only the run knows makes an `if`
// node whose branches are graphs of their own (regions), and the run takes
// one. A Loop whose trip count and condition are known at import, and whose
// body keeps its condition, is unrolled when that stays small; any other
// becomes a `loop` node running its body region. Scan likewise: unrolled
// when its length is known and small, else a `loop` node walking its inputs.
#include <algorithm>
#include <limits>

#include "frontends/onnx/context.h"
#include "rlx/error.h"

namespace rlx::onnx {
namespace {

const Graph& branch(Ctx& c, const char* name) {
  const Attribute* a = c.node.attr(name);
  RLX_CHECK(a && a->kind == Attribute::GraphK && a->g, "attribute '", name,
            "' (a graph) is required");
  return *a->g;
}

// A subgraph's outputs, lowered in a scope of its own that reads the
// enclosing ones, with its inputs bound to `args` (`what` names it in errors).
std::vector<Val> lower_body(Ctx& c, const Graph& g, const std::string& what,
                            const std::vector<Val>& args = {}) {
  std::map<std::string, Val> env;
  for (const auto& [init, t] : g.initializers) env[init] = tensor_val(t);
  ImportState scope{c.b(), c.state().model, c.state().weights, env, &c.state()};
  std::vector<Val> outs;
  try {
    RLX_CHECK(g.inputs.size() == args.size(), "takes ", g.inputs.size(), " inputs, the node gives ",
              args.size());
    for (size_t k = 0; k < args.size(); ++k) env[g.inputs[k].name] = args[k];
    lower_nodes(scope, g, c.opset);
    for (const auto& o : g.outputs) {
      Val* v = scope.find(o.name);
      RLX_CHECK(v, "output '", o.name, "' is not computed by any node");
      outs.push_back(*v);
    }
  } catch (const Error& e) {
    throw e.with_context("in " + what);
  }
  return outs;
}

std::vector<Val> lower_branch(Ctx& c, const char* name) {
  return lower_body(c, branch(c, name), name);
}

}  // namespace

// The outer values the bodies of one control node read, in the order first read: the node's
// inputs after its own, and in every body the inputs "capture.k" after its formal ones.
struct Captures {
  std::vector<NodeId> outer;
  std::vector<Shape> shapes;
};

struct Region {
  Ctx& outer;  // the control node's context, in the enclosing graph
  Captures& captures;
  rlx::Graph& body;
};

Val* capture(Region& r, ImportState& s, const std::string& name) {
  Val* v = r.outer.state().find(name);
  if (!v) return nullptr;
  Val copy;
  if (v->konst.defined() || (v->ints && v->id < 0)) {  // known at import: the body's own copy
    copy = *v;
    copy.id = -1;
    copy.param.clear();  // a body binds no weights: an initializer is a constant there
  } else {
    const NodeId o = r.outer.node_of(*v, "'" + name + "'");
    auto& outer = r.captures.outer;
    const size_t k = size_t(std::find(outer.begin(), outer.end(), o) - outer.begin());
    if (k == outer.size()) {
      outer.push_back(o);
      r.captures.shapes.push_back(r.outer.shape_of(o));
    }
    const std::string input = "capture." + std::to_string(k);
    NodeId in = -1;
    for (NodeId id : r.body.inputs())
      if (r.body.node(id).name == input) in = id;
    copy = node_val(in >= 0 ? in : r.body.input(input, r.captures.shapes[k]));
  }
  return &(s.env[name] = std::move(copy));
}

namespace {

// A region's formal inputs: (name, shape) each.
using Formals = std::vector<std::pair<std::string, Shape>>;

// A body lowered as a region: its formal inputs `formals` (name, shape), the first `hidden` of
// them the node's own (a Scan's iteration and condition), the rest the subgraph's; its outputs
// "out.k". Its capture inputs are ordered and completed by finish_region once every body of the
// node is lowered.
std::shared_ptr<rlx::Graph> lower_region(Ctx& c, const Graph& g, const std::string& what,
                                         Captures& captures, const Formals& formals,
                                         size_t hidden = 0) {
  auto body = std::make_shared<rlx::Graph>();
  Builder bb(*body);
  Region region{c, captures, *body};
  std::map<std::string, Val> env;
  for (const auto& [init, t] : g.initializers) env[init] = tensor_val(t);
  ImportState scope{bb, c.state().model, c.state().weights, env, &c.state(), &region};
  try {
    RLX_CHECK(g.inputs.size() + hidden == formals.size(), "takes ", g.inputs.size(),
              " inputs, the node gives ", formals.size() - hidden);
    for (size_t k = 0; k < formals.size(); ++k) {
      const NodeId in = body->input(formals[k].first, formals[k].second);
      if (k >= hidden) env[g.inputs[k - hidden].name] = node_val(in);
    }
    lower_nodes(scope, g, c.opset);
    Ctx bc(scope, c.node, c.opset);
    for (size_t k = 0; k < g.outputs.size(); ++k) {
      Val* v = scope.find(g.outputs[k].name);
      RLX_CHECK(v, "output '", g.outputs[k].name, "' is not computed by any node");
      body->add_output("out." + std::to_string(k),
                       bc.node_of(*v, "output '" + g.outputs[k].name + "'"));
    }
  } catch (const Error& e) {
    throw e.with_context("in " + what);
  }
  return body;
}

// The body with its inputs in the node's order: the formal ones, then every capture of the node
// (those it does not read too, unused), then its other nodes as they were.
std::shared_ptr<const rlx::Graph> finish_region(const rlx::Graph& g, size_t formals,
                                                const Captures& captures) {
  auto out = std::make_shared<rlx::Graph>();
  std::vector<NodeId> map(g.size(), -1);
  const std::vector<NodeId> ins = g.inputs();
  for (size_t k = 0; k < formals; ++k) map[size_t(ins[k])] = out->append_raw(g.node(ins[k]));
  for (size_t k = 0; k < captures.outer.size(); ++k) {
    const std::string name = "capture." + std::to_string(k);
    NodeId id = -1;
    for (NodeId in : ins)
      if (g.node(in).name == name) id = in;
    const NodeId copy = out->input(name, captures.shapes[k]);
    if (id >= 0) map[size_t(id)] = copy;
  }
  for (const rlx::Node& n : g.nodes()) {
    if (n.op == rlx::Op::Input) continue;
    rlx::Node m = n;
    for (NodeId& in : m.inputs) in = map[size_t(in)];
    map[size_t(n.id)] = out->append_raw(std::move(m));
  }
  for (const auto& o : g.outputs()) out->add_output(o.name, map[size_t(o.node)]);
  return out;
}

// A control node's outputs: the node's results.
std::vector<Val> control_outputs(Ctx& c, NodeId id) {
  std::vector<Val> outs;
  for (size_t k = 0; k < c.g().node(id).results.size(); ++k)
    outs.push_back(node_val(c.g().result(id, int(k))));
  return outs;
}

NodeId flag(Ctx& c, size_t i, DType t) {
  NodeId x = c.cast(c.in(i), t);
  const Shape& s = c.shape_of(x);
  RLX_CHECK(!s.is_static() || s.numel() == 1, "input ", i, " '", c.node.inputs[i],
            "' must hold one element, got ", s.str());
  return s.rank() > 0 ? c.b().reshape(x, {}) : x;
}

std::vector<Val> lower_if(Ctx& c) {
  RLX_CHECK(!c.node.inputs.empty() && !c.node.inputs[0].empty(),
            "If has no condition input");  // the messages below name it
  const size_t n_out = c.node.outputs.size();
  for (const char* name : {"then_branch", "else_branch"})
    RLX_CHECK(branch(c, name).outputs.size() == n_out, name, " gives ",
              branch(c, name).outputs.size(), " outputs, the If node has ", n_out);
  if (const Tensor* cond = c.known(0)) {
    RLX_CHECK(cond->numel() == 1, "the condition must hold one element, got ", cond->shape().str());
    return lower_branch(c, cond->item_as_double(0) != 0 ? "then_branch" : "else_branch");
  }
  // Only the run knows which branch: each becomes a region. One that does not lower for these
  // shapes (Silero's 8 kHz branch on a 16 kHz window) keeps its error, raised if a run takes it.
  const NodeId cond = flag(c, 0, DType::Bool);
  Captures captures;
  std::shared_ptr<rlx::Graph> bodies[2];
  std::string errors[2];
  const char* names[2] = {"then_branch", "else_branch"};
  for (int k = 0; k < 2; ++k) {
    try {
      bodies[k] = lower_region(c, branch(c, names[k]), names[k], captures, {});
    } catch (const Error& e) {
      errors[k] = e.what();
    }
  }
  RLX_CHECK(bodies[0] || bodies[1], "neither branch lowers: ", errors[0], "; ", errors[1]);
  std::vector<NodeId> inputs{cond};
  inputs.insert(inputs.end(), captures.outer.begin(), captures.outer.end());
  std::vector<std::shared_ptr<const rlx::Graph>> finished;
  for (int k = 0; k < 2; ++k)
    finished.push_back(bodies[k] ? finish_region(*bodies[k], 0, captures) : nullptr);
  IfAttrs a{.count = c.b().count_symbol("if"), .then_error = errors[0], .else_error = errors[1]};
  return control_outputs(c, c.g().add_with_bodies(Op::If, inputs, a, finished));
}

// Unrolling stops here: a longer loop (or a hostile trip count) becomes a
// loop node instead of millions of nodes.
constexpr int64_t kMaxUnrolledNodes = int64_t(1) << 20;

// A value's tensor when it is known at import, else nullptr.
const Tensor* known_val(Val& v) {
  if (!v.konst.defined() && v.ints && v.ints->is_static()) v.konst = to_tensor(*v.ints);
  return v.konst.defined() ? &v.konst : nullptr;
}

// x[..., i, ...] along `axis`, that axis dropped (x of static shape).
NodeId take(Ctx& c, NodeId x, int64_t axis, int64_t i) {
  Dims d = c.shape_of(x).concrete();
  NodeId s = c.b().op(Op::Slice, {x}, {{"axis", axis}, {"start", i}, {"end", i + 1}, {"step", 1}});
  d.erase(d.begin() + axis);
  return c.b().reshape(s, d);
}

// The tensors `xs` (of one static shape) stacked along a new axis `axis`.
NodeId stack(Ctx& c, const std::vector<NodeId>& xs, int64_t axis) {
  std::vector<NodeId> parts;
  for (NodeId x : xs) {
    Dims d = c.shape_of(x).concrete();
    d.insert(d.begin() + axis, 1);
    parts.push_back(c.b().reshape(x, d));
  }
  return parts.size() == 1 ? parts[0] : c.b().concat(parts, axis);
}

NodeId static_node(Ctx& c, Val& v, const std::string& what) {
  NodeId id = c.node_of(v, what);
  RLX_CHECK(c.shape_of(id).is_static(), what, " is ", c.shape_of(id).str(),
            "; rlx unrolls Loop and Scan over static shapes (give static input dims)");
  return id;
}

// Before unrolling: `iterations` of `body` must fit the limit. While
// unrolling (nested loops included): the nodes added since `start` must.
void check_unroll(int64_t iterations, const Graph& body) {
  const int64_t per = std::max<int64_t>(1, int64_t(body.nodes.size()));
  RLX_CHECK(iterations <= kMaxUnrolledNodes / per, "unrolling ", iterations, " iterations of a ",
            body.nodes.size(), "-node body passes rlx's limit of ", kMaxUnrolledNodes, " nodes");
}
void check_unrolled(Ctx& c, size_t start) {
  RLX_CHECK(c.g().size() - start <= size_t(kMaxUnrolledNodes), "unrolling passes rlx's limit of ",
            kMaxUnrolledNodes, " nodes");
}

Tensor true_tensor() { return Tensor::from_vector<uint8_t>({}, {1}, DType::Bool); }

// No trip limit: ONNX's absent trip count, and a Scan's (its inputs' length bounds it).
NodeId no_trip_limit(Ctx& c) {
  return c.constant(
      Tensor::from_vector<int64_t>({}, {std::numeric_limits<int64_t>::max()}, DType::I64));
}

// A loop body's own formal inputs, ahead of the rest: the iteration and the condition.
Formals loop_formals() {
  return {{"iteration", Shape(Dims{}, DType::I64)}, {"condition", Shape(Dims{}, DType::Bool)}};
}

// The `loop` node of body region g, its inputs `inputs` then g's captures; its outputs.
std::vector<Val> loop_node(Ctx& c, std::vector<NodeId> inputs, const rlx::Graph& g, size_t formals,
                           const Captures& captures, const LoopAttrs& a) {
  inputs.insert(inputs.end(), captures.outer.begin(), captures.outer.end());
  return control_outputs(
      c, c.g().add_with_bodies(Op::Loop, inputs, a, {finish_region(g, formals, captures)}));
}

// The loop as a `loop` node running its body region.
std::vector<Val> loop_region(Ctx& c, const Graph& body, size_t n_carried) {
  std::vector<NodeId> inputs{c.has(0) ? flag(c, 0, DType::I64) : no_trip_limit(c),
                             c.has(1) ? flag(c, 1, DType::Bool) : c.constant(true_tensor())};
  Formals formals = loop_formals();
  for (size_t k = 0; k < n_carried; ++k) {
    inputs.push_back(c.in(2 + k));
    formals.emplace_back("carried." + std::to_string(k), c.shape_of(inputs.back()));
  }
  Captures captures;
  std::shared_ptr<rlx::Graph> g = lower_region(c, body, "body", captures, formals);
  {  // the body's condition as the loop reads it: one bool
    const rlx::GraphOutput out = g->outputs()[0];
    Builder bb(*g);
    NodeId cond_out = out.node;
    if (g->node(cond_out).shape.dtype != DType::Bool) cond_out = bb.cast(cond_out, DType::Bool);
    if (g->node(cond_out).shape.rank() > 0) cond_out = bb.reshape(cond_out, {});
    g->outputs()[0].node = cond_out;
  }
  return loop_node(c, inputs, *g, formals.size(), captures,
                   {.carried = int64_t(n_carried), .count = c.b().count_symbol("loop")});
}

// Whether unrolling the loop at import is possible and small: its trip count and condition
// known, its body keeping the condition (a constant or the condition passed through, as
// exporters write counted loops), and trips x body nodes under the limit.
bool unrollable(Ctx& c, const Graph& body) {
  std::optional<int64_t> trips;
  if (c.has(0)) {
    trips = c.scalar_int(0, "trip count");
    if (!trips) return false;
    RLX_CHECK(*trips >= 0, "trip count ", *trips, " is negative");
  }
  if (c.has(1) && !c.scalar(1)) return false;
  if (!trips || *trips > kMaxUnrolledNodes / std::max<int64_t>(1, int64_t(body.nodes.size())))
    return false;
  if (!c.has(1)) return true;
  const std::string& cond_out = body.outputs[0].name;
  if (body.inputs.size() > 1 && cond_out == body.inputs[1].name) return true;
  for (const auto& [name, t] : body.initializers)
    if (name == cond_out) return true;
  for (const auto& n : body.nodes)
    if (std::find(n.outputs.begin(), n.outputs.end(), cond_out) != n.outputs.end())
      return n.op_type == "Constant" ||
             (n.op_type == "Identity" && !n.inputs.empty() && body.inputs.size() > 1 &&
              n.inputs[0] == body.inputs[1].name);
  return false;
}

// Loop(M, cond, v...): body(i, cond, v...) -> (cond, v..., scan...).
// Outputs: the final v..., then each scan output stacked along a new axis 0.
std::vector<Val> lower_loop(Ctx& c) {
  const Graph& body = branch(c, "body");
  RLX_CHECK(c.num_inputs() >= 2, "takes M, cond and the loop-carried values; got ", c.num_inputs(),
            " inputs");
  const size_t n_carried = c.num_inputs() - 2;
  RLX_CHECK(body.outputs.size() >= 1 + n_carried, "body gives ", body.outputs.size(),
            " outputs, fewer than the condition and ", n_carried, " loop-carried values");
  const size_t n_scan = body.outputs.size() - 1 - n_carried;
  RLX_CHECK(c.has(0) || c.has(1), "has neither a trip count nor a condition (an endless loop)");
  if (!unrollable(c, body)) return loop_region(c, body, n_carried);
  const int64_t trips = *c.scalar_int(0, "trip count");
  bool go = !c.has(1) || *c.scalar(1) != 0;
  std::vector<Val> carried;
  for (size_t k = 0; k < n_carried; ++k) carried.push_back(c.val(2 + k));
  std::vector<std::vector<NodeId>> scans(n_scan);
  const size_t start = c.g().size();
  for (int64_t i = 0; go && i < trips; ++i) {
    check_unrolled(c, start);
    const std::string what = "body, iteration " + std::to_string(i);
    std::vector<Val> args{tensor_val(Tensor::from_vector<int64_t>({}, {i}, DType::I64)),
                          tensor_val(true_tensor())};
    args.insert(args.end(), carried.begin(), carried.end());
    std::vector<Val> outs = lower_body(c, body, what, args);
    if (c.has(1)) {
      const Tensor* cond = known_val(outs[0]);
      RLX_CHECK(cond && cond->numel() == 1, "the body's condition '", body.outputs[0].name,
                "' is not known at import in iteration ", i);
      go = cond->item_as_double(0) != 0;
    }
    for (size_t k = 0; k < n_carried; ++k) carried[k] = outs[1 + k];
    for (size_t k = 0; k < n_scan; ++k)
      scans[k].push_back(
          static_node(c, outs[1 + n_carried + k],
                      what + ": scan output '" + body.outputs[1 + n_carried + k].name + "'"));
  }
  std::vector<Val> result = carried;
  for (size_t k = 0; k < n_scan; ++k) {
    RLX_CHECK(!scans[k].empty(), "runs no iteration, so the shape of scan output '",
              c.node.outputs.size() > n_carried + k ? c.node.outputs[n_carried + k] : "",
              "' is unknown at import");
    result.push_back(node_val(stack(c, scans[k], 0)));
  }
  return result;
}

struct ScanSpec {
  std::vector<int64_t> in_axes, in_reverse, out_axes, out_reverse;
};

// One Scan over static tensors: body(states..., slices...) -> (states..., outs...)
// for each step along the scan inputs' axes; the final states and the outputs
// stacked along their axes.
std::vector<NodeId> scan_once(Ctx& c, const Graph& body, std::vector<Val> states,
                              const std::vector<NodeId>& xs, const ScanSpec& sp) {
  const int64_t steps = c.shape_of(xs[0]).concrete()[size_t(sp.in_axes[0])];
  for (size_t k = 0; k < xs.size(); ++k)
    RLX_CHECK(c.shape_of(xs[k]).concrete()[size_t(sp.in_axes[k])] == steps, "scan input ", k,
              " has ", c.shape_of(xs[k]).concrete()[size_t(sp.in_axes[k])],
              " steps along its axis, scan input 0 has ", steps);
  check_unroll(steps, body);
  const size_t n_out = body.outputs.size() - states.size();
  std::vector<std::vector<NodeId>> outs(n_out);
  const size_t start = c.g().size();
  for (int64_t t = 0; t < steps; ++t) {
    check_unrolled(c, start);
    std::vector<Val> args = states;
    for (size_t k = 0; k < xs.size(); ++k)
      args.push_back(node_val(take(c, xs[k], sp.in_axes[k], sp.in_reverse[k] ? steps - 1 - t : t)));
    std::vector<Val> r = lower_body(c, body, "body, step " + std::to_string(t), args);
    for (size_t k = 0; k < states.size(); ++k) states[k] = r[k];
    for (size_t k = 0; k < n_out; ++k)
      outs[k].push_back(static_node(c, r[states.size() + k], "scan output " + std::to_string(k)));
  }
  RLX_CHECK(steps > 0, "scans zero steps, so its outputs' shapes are unknown at import");
  std::vector<NodeId> result;
  for (Val& v : states) result.push_back(static_node(c, v, "a final state"));
  for (size_t k = 0; k < n_out; ++k) {
    if (sp.out_reverse[k]) std::reverse(outs[k].begin(), outs[k].end());
    const int64_t rank = c.shape_of(outs[k][0]).rank() + 1;
    result.push_back(stack(c, outs[k], norm_axis(sp.out_axes[k], rank, "scan_output_axes")));
  }
  return result;
}

// Whether a Scan (opset 9+) unrolls at import: static inputs and states, a length known at import
// and above 0, and the unrolled graph under the limit.
bool scan_unrollable(Ctx& c, const Graph& body, std::vector<Val>& states,
                     const std::vector<NodeId>& xs, const ScanSpec& sp) {
  for (Val& v : states)
    if (!c.shape_of(c.node_of(v, "a state")).is_static()) return false;
  for (NodeId x : xs)
    if (!c.shape_of(x).is_static()) return false;
  const int64_t steps = c.shape_of(xs[0]).concrete()[size_t(sp.in_axes[0])];
  return steps > 0 && steps <= kMaxUnrolledNodes / std::max<int64_t>(1, int64_t(body.nodes.size()));
}

// x with `axis` moved to the front (from_front: the front moved to `axis`).
NodeId move_axis(Ctx& c, NodeId x, int64_t axis, bool from_front) {
  if (axis == 0) return x;
  const int64_t rank = c.shape_of(x).rank();
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < rank; ++d) perm.push_back(d);
  if (from_front)
    std::rotate(perm.begin(), perm.begin() + 1, perm.begin() + axis + 1);
  else
    std::rotate(perm.begin(), perm.begin() + axis, perm.begin() + axis + 1);
  return c.b().op(Op::Transpose, {x}, {{"perm", perm}});
}

NodeId flip_front(Ctx& c, NodeId x) {
  return c.b().op(Op::Flip, {x}, {{"axes", std::vector<int64_t>{0}}});
}

// A Scan whose length only the run knows (or too long to unroll): a loop node walking its
// inputs along axis 0 (each moved there, and reversed when scanned backwards), the states
// carried, its outputs stacked along axis 0 and then moved to their axes.
std::vector<Val> scan_region(Ctx& c, const Graph& body, std::vector<Val>& states,
                             const std::vector<NodeId>& xs, const ScanSpec& sp) {
  std::vector<NodeId> inputs{no_trip_limit(c), c.constant(true_tensor())};
  Formals formals = loop_formals();
  for (size_t k = 0; k < states.size(); ++k) {
    inputs.push_back(c.node_of(states[k], "a state"));
    formals.emplace_back("state." + std::to_string(k), c.shape_of(inputs.back()));
  }
  for (size_t k = 0; k < xs.size(); ++k) {
    NodeId x = move_axis(c, xs[k], sp.in_axes[k], false);
    if (sp.in_reverse[k]) x = flip_front(c, x);
    inputs.push_back(x);
    const Shape& s = c.shape_of(x);
    formals.emplace_back("slice." + std::to_string(k),
                         Shape(std::vector<Dim>(s.dims.begin() + 1, s.dims.end()), s.dtype));
  }
  Captures captures;
  std::shared_ptr<rlx::Graph> g = lower_region(c, body, "body", captures, formals, 2);
  g->outputs().insert(g->outputs().begin(), {"condition", g->inputs()[1]});  // always true
  std::vector<Val> outs = loop_node(c, inputs, *g, formals.size(), captures,
                                    {.carried = int64_t(states.size()),
                                     .scanned = int64_t(xs.size()),
                                     .count = c.b().count_symbol("scan")});
  for (size_t k = 0; k < outs.size() - states.size(); ++k) {
    Val& v = outs[states.size() + k];
    NodeId y = v.id;
    if (sp.out_reverse[k]) y = flip_front(c, y);
    const int64_t rank = c.shape_of(y).rank();
    v = node_val(move_axis(c, y, norm_axis(sp.out_axes[k], rank, "scan_output_axes"), true));
  }
  return outs;
}

// Scan: opset 9+ scans inputs along their scan_input_axes; opset 8 has a
// batch axis 0 on every input and output (scanned per batch row) and an
// optional sequence_lens, which must be absent or the full length.
std::vector<Val> lower_scan(Ctx& c) {
  const Graph& body = branch(c, "body");
  const size_t first = c.opset < 9 ? 1 : 0;
  const int64_t m = c.i("num_scan_inputs");
  RLX_CHECK(m >= 1 && first + size_t(m) <= c.num_inputs(), "num_scan_inputs ", m, " does not fit ",
            c.num_inputs(), " inputs");
  const size_t n_states = c.num_inputs() - first - size_t(m);
  RLX_CHECK(body.outputs.size() >= n_states, "body gives ", body.outputs.size(),
            " outputs, fewer than its ", n_states, " states");
  const size_t n_out = body.outputs.size() - n_states;
  const int64_t batch_axis = c.opset < 9 ? 1 : 0;  // opset 8 scans axis 1, after the batch
  auto attr = [&](const char* name, size_t n, int64_t def) {
    std::vector<int64_t> v = c.ints_attr(name, std::vector<int64_t>(n, def));
    RLX_CHECK(v.size() == n, name, " has ", v.size(), " values for ", n);
    return v;
  };
  ScanSpec sp;
  if (c.opset < 9) {  // no axes: every input and output scans its axis 0 per batch row
    sp = {std::vector<int64_t>(size_t(m), 0), attr("directions", size_t(m), 0),
          std::vector<int64_t>(n_out, 0), std::vector<int64_t>(n_out, 0)};
  } else {
    sp = {attr("scan_input_axes", size_t(m), 0), attr("scan_input_directions", size_t(m), 0),
          attr("scan_output_axes", n_out, 0), attr("scan_output_directions", n_out, 0)};
  }
  std::vector<NodeId> xs;
  for (size_t k = 0; k < size_t(m); ++k) {
    const std::string what = "scan input '" + c.node.inputs[first + n_states + k] + "'";
    Val& v = c.val(first + n_states + k);
    xs.push_back(c.opset < 9 ? static_node(c, v, what) : c.node_of(v, what));
    const int64_t rank = c.shape_of(xs.back()).rank() - batch_axis;
    sp.in_axes[k] = norm_axis(sp.in_axes[k], rank, "scan_input_axes");
  }
  std::vector<Val> states;
  for (size_t k = 0; k < n_states; ++k) states.push_back(c.val(first + k));
  if (c.opset >= 9 && !scan_unrollable(c, body, states, xs, sp))
    return scan_region(c, body, states, xs, sp);
  if (c.opset >= 9) {
    std::vector<NodeId> r = scan_once(c, body, states, xs, sp);
    std::vector<Val> outs;
    for (NodeId id : r) outs.push_back(node_val(id));
    return outs;
  }
  // Opset 8: per batch row b, the scan of row b of every input.
  const int64_t batch = c.shape_of(xs[0]).concrete()[0];
  if (c.has(0)) {
    const Tensor* lens = c.known(0);
    RLX_CHECK(lens, "sequence_lens is not known at import");
    const int64_t full = c.shape_of(xs[0]).concrete()[1];
    for (int64_t b = 0; b < lens->numel(); ++b)
      RLX_CHECK(lens->item_as_double(b) == double(full), "sequence_lens[", b, "] is ",
                lens->item_as_double(b), "; rlx scans full sequences only (", full, " steps)");
  }
  std::vector<std::vector<NodeId>> rows(n_states + n_out);
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<Val> sb;
    for (size_t k = 0; k < n_states; ++k)
      sb.push_back(node_val(take(c, static_node(c, states[k], "a state"), 0, b)));
    std::vector<NodeId> xb;
    for (NodeId x : xs) xb.push_back(take(c, x, 0, b));
    std::vector<NodeId> r = scan_once(c, body, sb, xb, sp);
    for (size_t k = 0; k < r.size(); ++k) rows[k].push_back(r[k]);
  }
  std::vector<Val> outs;
  for (auto& r : rows) outs.push_back(node_val(stack(c, r, 0)));
  return outs;
}

}  // namespace

void register_control(Registry& r) {
  r.add("If", lower_if);
  r.add("Loop", lower_loop);
  r.add("Scan", lower_scan);
}

}  // namespace rlx::onnx
