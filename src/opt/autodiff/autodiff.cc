// The reverse sweep: walks the forward nodes from last to first, applies each
// node's vjp rule to the cotangents accumulated so far and adds its results
// into its inputs' cotangents. Only nodes on a float path from a wrt node to
// an output are visited, and rules are asked only for the inputs that lead
// back to a wrt node.
#include <algorithm>
#include <cctype>
#include <set>

#include "opt/autodiff/rules.h"
#include "rlx/autodiff.h"
#include "rlx/error.h"

namespace rlx {
namespace {

using opt::ad::Emit;
using opt::ad::VjpCall;

// Whether node `n` produces a float value (any output, for multi-output nodes).
bool float_valued(const Node& n) {
  if (n.results.empty()) return is_float(n.shape.dtype);
  return std::any_of(n.results.begin(), n.results.end(),
                     [](const Shape& s) { return is_float(s.dtype); });
}

void check_ids(const Graph& g, const std::vector<NodeId>& ids, const char* what) {
  for (NodeId id : ids)
    RLX_CHECK(id >= 0 && size_t(id) < g.size(), "vjp: ", what, " %", id,
              " is not a node of the graph");
}

}  // namespace

OpGradient op_gradient(Op op) {
  const opt::ad::VjpEntry e = opt::ad::vjp_entry(op);
  return {e.support, e.why ? e.why : ""};
}

namespace {

std::vector<NodeId> vjp_impl(Graph& g, const std::vector<NodeId>& outputs,
                             const std::vector<NodeId>& cotangents, const std::vector<NodeId>& wrt,
                             bool partial) {
  RLX_CHECK(outputs.size() == cotangents.size(), "vjp: ", outputs.size(), " outputs but ",
            cotangents.size(), " cotangents");
  check_ids(g, outputs, "output");
  check_ids(g, cotangents, "cotangent");
  check_ids(g, wrt, "wrt node");
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Node &o = g.node(outputs[i]), &ct = g.node(cotangents[i]);
    RLX_CHECK(o.results.empty(), "vjp: ", o.label(), " has several outputs; pass its result nodes");
    RLX_CHECK(is_float(o.shape.dtype) && ct.shape == o.shape, "vjp: the cotangent of ", o.label(),
              " ", o.shape.str(), " must be a float of the same shape, got ", ct.label(), " ",
              ct.shape.str());
  }
  for (NodeId w : wrt)
    RLX_CHECK(g.node(w).results.empty() && is_float(g.node(w).shape.dtype),
              "vjp: cannot differentiate with respect to ", g.node(w).label(), " ",
              g.node(w).shape.str(), ": not a single float value");

  // reach[n]: n's value depends on a wrt node through float values.
  const size_t n0 = g.size();
  std::vector<char> reach(n0, 0);
  for (NodeId w : wrt) reach[size_t(w)] = 1;
  for (size_t i = 0; i < n0; ++i) {
    const Node& n = g.node(NodeId(i));
    if (reach[i] || !float_valued(n)) continue;
    for (NodeId in : n.inputs) reach[i] = reach[i] || reach[size_t(in)];
  }

  Emit e(g);
  std::vector<NodeId> ct(n0, -1);
  auto accumulate = [&](NodeId id, NodeId d) {
    ct[size_t(id)] = ct[size_t(id)] < 0 ? d : e.add(ct[size_t(id)], d);
  };
  e.set_origin("vjp seed");
  for (size_t i = 0; i < outputs.size(); ++i)
    if (reach[size_t(outputs[i])]) accumulate(outputs[i], cotangents[i]);

  std::vector<char> is_wrt(n0, 0);
  for (NodeId w : wrt) is_wrt[size_t(w)] = 1;
  for (size_t i = n0; i-- > 0;) {
    if (!reach[i] || (partial && is_wrt[i])) continue;
    const Node n = g.node(NodeId(i));  // a copy: the graph grows below
    if (n.inputs.empty() || n.op == Op::Result) continue;
    std::vector<NodeId> dy;
    if (n.results.empty())
      dy.push_back(ct[i]);
    else
      for (size_t k = 0; k < n.results.size(); ++k)
        dy.push_back(ct[size_t(g.result(n.id, int(k)))]);
    if (std::all_of(dy.begin(), dy.end(), [](NodeId d) { return d < 0; })) continue;
    std::vector<bool> need(n.inputs.size());
    for (size_t k = 0; k < n.inputs.size(); ++k) need[k] = reach[size_t(n.inputs[k])];
    if (std::none_of(need.begin(), need.end(), [](bool b) { return b; })) continue;
    const opt::ad::VjpEntry entry = opt::ad::vjp_entry(n.op);
    if (entry.support == GradSupport::none) continue;
    RLX_CHECK(entry.support == GradSupport::rule || entry.support == GradSupport::estimator,
              "vjp: no gradient through ", node_context(g, n), ": ", entry.why);
    std::vector<NodeId> dx(n.inputs.size(), -1);
    e.set_origin("vjp of " + n.label() + (n.origin.empty() ? "" : " from " + n.origin));
    VjpCall call{e, n, dy, need, dx};
    try {
      entry.fn(call);
    } catch (const Error& err) {
      throw err.with_context("vjp of " + node_context(g, n));
    }
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      if (dx[k] < 0 || !need[k]) continue;
      const Shape want = g.node(n.inputs[k]).shape, got = g.node(dx[k]).shape;
      RLX_CHECK(want == got, "vjp of ", node_context(g, n), ": the rule made a gradient ",
                got.str(), " for input ", k, " of ", want.str(), " (a bug in its rule)");
      accumulate(n.inputs[k], dx[k]);
    }
  }

  std::vector<NodeId> out;
  e.set_origin("vjp: no path to the outputs");
  for (NodeId w : wrt) out.push_back(ct[size_t(w)] >= 0 ? ct[size_t(w)] : e.zeros(g.node(w).shape));
  return out;
}

}  // namespace

std::vector<NodeId> vjp(Graph& g, const std::vector<NodeId>& outputs,
                        const std::vector<NodeId>& cotangents, const std::vector<NodeId>& wrt) {
  return vjp_impl(g, outputs, cotangents, wrt, false);
}

namespace opt::ad {
std::vector<NodeId> vjp_partial(Graph& g, const std::vector<NodeId>& outputs,
                                const std::vector<NodeId>& cotangents,
                                const std::vector<NodeId>& wrt) {
  return vjp_impl(g, outputs, cotangents, wrt, true);
}
}  // namespace opt::ad

std::vector<NodeId> grad(Graph& g, NodeId loss, const std::vector<NodeId>& wrt) {
  check_ids(g, {loss}, "loss");
  const Shape s = g.node(loss).shape;
  RLX_CHECK(is_float(s.dtype) && s.is_static() && s.numel() == 1, "grad: the loss ",
            g.node(loss).label(), " must be a float of one element, got ", s.str());
  const NodeId seed =
      g.add(Op::Full, {}, FullAttrs{.shape = s.concrete(), .value = 1, .dtype = s.dtype}, {},
            "grad seed");
  return vjp(g, {loss}, {seed}, wrt);
}

GradientGraph gradient_graph(Graph g, const GradientGraphOptions& options) {
  GradientGraph r;
  std::vector<NodeId> wrt;
  std::vector<std::string> names;
  for (const Node& n : g.nodes()) {
    const bool param = n.op == Op::Param && !options.non_trainable.count(n.name);
    if ((param || n.op == Op::Input) && is_float(n.shape.dtype)) {
      wrt.push_back(n.id);
      names.push_back(n.name);
    }
  }
  std::vector<NodeId> outs, cts;
  std::string listing;
  for (const auto& o : g.outputs()) {
    listing += (listing.empty() ? "" : ", ") + o.name + " " + g.node(o.node).shape.str();
    if (is_float(g.node(o.node).shape.dtype)) outs.push_back(o.node);
  }
  std::vector<NodeId> grads;
  if (options.cotangents) {
    std::set<std::string> taken;
    for (const Node& n : g.nodes())
      if (n.op == Op::Input) taken.insert(n.name);
    for (const auto& o : g.outputs()) {
      if (!is_float(g.node(o.node).shape.dtype)) continue;
      std::string base = "cotangent_" + o.name;
      for (char& ch : base)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      std::string name = base;
      for (int k = 2; taken.count(name); ++k) name = base + "_" + std::to_string(k);
      taken.insert(name);
      r.cotangents[o.name] = name;
      cts.push_back(g.input(name, g.node(o.node).shape));
    }
    RLX_CHECK(!outs.empty(), "gradients need a float output; the graph has ",
              listing.empty() ? "none" : listing);
    grads = vjp(g, outs, cts, wrt);
  } else {
    NodeId loss = -1;
    for (const auto& o : g.outputs())
      if (o.name == kLossOutput) loss = o.node;
    if (loss < 0) {
      RLX_CHECK(outs.size() == 1 && g.node(outs[0]).shape.is_static() &&
                    g.node(outs[0]).shape.numel() == 1,
                "gradients without cotangents need exactly one scalar float output or one "
                "named 'loss'; the graph has ",
                listing.empty() ? "none" : listing, ": give a cotangent per output instead");
      loss = outs[0];
    }
    grads = grad(g, loss, wrt);
  }
  for (size_t i = 0; i < wrt.size(); ++i) {
    r.grads.push_back(kGradPrefix + names[i]);
    g.add_output(r.grads.back(), grads[i]);
  }
  r.graph = std::move(g);
  return r;
}

}  // namespace rlx
