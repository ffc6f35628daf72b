#include "ir/shape_infer_control.h"

#include <map>
#include <span>

#include "rlx/error.h"
#include "rlx/op_attrs.h"

namespace rlx {
namespace {

// A body's symbols, bound to the dims the node gives the inputs that declare them.
using Binding = std::map<std::string, Dim>;

Binding bind_body_inputs(const Graph& body, std::span<const Shape* const> given,
                         const std::string& what) {
  const std::vector<NodeId> ins = body.inputs();
  RLX_CHECK(ins.size() == given.size(), "the ", what, " takes ", ins.size(),
            " inputs, the node gives it ", given.size());
  Binding b;
  for (size_t k = 0; k < ins.size(); ++k) {
    const Node& in = body.node(ins[k]);
    const Shape& g = *given[k];
    bool fits = in.shape.dtype == g.dtype && in.shape.rank() == g.rank();
    for (int j = 0; fits && j < g.rank(); ++j) {
      const Dim& d = in.shape.dims[size_t(j)];
      const Dim& v = g.dims[size_t(j)];
      if (d.is_static())
        fits = !v.is_static() || v.value == d.value;
      else if (d.sym != "?" && !b.emplace(d.sym, v).second && b.at(d.sym).is_static() &&
               v.is_static())
        fits = b.at(d.sym).value == v.value;
    }
    RLX_CHECK(fits, "the ", what, "'s input ", k, " '", in.name, "' is ", in.shape.str(),
              ", the node gives it ", g.str());
  }
  return b;
}

// The symbol of output k's dim j when only the run tells it.
Dim run_dim(const std::string& count, size_t k, size_t j) {
  return Dim::symbol(count + "." + std::to_string(k) + "." + std::to_string(j));
}

// The body's output shapes in the node's terms: symbols of its inputs replaced by the dims bound
// to them, any other (one only the body's run tells) by `count.k.j`, which the session binds
// from the tensors the run gave.
std::vector<Shape> outer_shapes(const Graph& body, const Binding& b, const std::string& count,
                                size_t first = 0) {
  std::vector<Shape> out;
  for (size_t k = first; k < body.outputs().size(); ++k) {
    Shape s = body.node(body.outputs()[k].node).shape;
    for (size_t j = 0; j < s.dims.size(); ++j) {
      Dim& d = s.dims[j];
      if (d.is_static()) continue;
      auto it = b.find(d.sym);
      d = it != b.end() ? it->second : run_dim(count, k - first, j);
    }
    out.push_back(std::move(s));
  }
  return out;
}

void check_flag(const Shape& s, DType t, const char* what) {
  RLX_CHECK(s.dtype == t, what, " must be ", dtype_name(t), ", got ", s.str());
  for (const Dim& d : s.dims)
    RLX_CHECK(!d.is_static() || d.value == 1, what, " must hold one element, got ", s.str());
}

}  // namespace

std::vector<Shape> infer_if(const Node& n, const std::vector<const Shape*>& in) {
  const auto& a = n.attrs_as<IfAttrs>();
  RLX_CHECK(!a.count.empty(), "if: `count` must name the branch it takes");
  RLX_CHECK(n.bodies.size() == 2, "if: needs two bodies (then, else), has ", n.bodies.size());
  check_flag(*in[0], DType::Bool, "if: the condition");
  const std::span<const Shape* const> captures(in.data() + 1, in.size() - 1);
  std::vector<std::vector<Shape>> branch;
  const char* names[2] = {"then branch", "else branch"};
  for (int k = 0; k < 2; ++k) {
    const std::string& error = k == 0 ? a.then_error : a.else_error;
    const auto& body = n.bodies[size_t(k)];
    RLX_CHECK(!body == !error.empty(), "if: the ", names[k],
              body ? " has both a body and an error" : " has neither a body nor an error");
    if (!body) continue;
    try {
      branch.push_back(outer_shapes(*body, bind_body_inputs(*body, captures, names[k]), a.count));
    } catch (const Error& e) {
      throw e.with_context(std::string("if: ") + names[k]);
    }
  }
  RLX_CHECK(!branch.empty(), "if: neither branch has a body");
  if (branch.size() == 1) return branch[0];
  std::vector<Shape>& out = branch[0];
  const std::vector<Shape>& other = branch[1];
  RLX_CHECK(out.size() == other.size(), "if: the then branch gives ", out.size(),
            " outputs, the else branch ", other.size());
  for (size_t k = 0; k < out.size(); ++k) {
    RLX_CHECK(out[k].dtype == other[k].dtype && out[k].rank() == other[k].rank(), "if: output ", k,
              " is ", out[k].str(), " in the then branch and ", other[k].str(),
              " in the else branch; the branches must agree in rank and dtype");
    for (size_t j = 0; j < out[k].dims.size(); ++j)
      if (!(out[k].dims[j] == other[k].dims[j])) out[k].dims[j] = run_dim(a.count, k, j);
  }
  return out;
}

std::vector<Shape> infer_loop(const Node& n, const std::vector<const Shape*>& in) {
  const auto& a = n.attrs_as<LoopAttrs>();
  RLX_CHECK(!a.count.empty(), "loop: `count` must name its trip count");
  RLX_CHECK(n.bodies.size() == 1 && n.bodies[0], "loop: needs one body, has ", n.bodies.size());
  const int64_t arity = int64_t(in.size());
  RLX_CHECK(a.carried >= 0 && a.scanned >= 0 && a.carried <= arity && a.scanned <= arity &&
                a.carried + a.scanned + 2 <= arity,
            "loop: ", a.carried, " carried and ", a.scanned, " scanned values do not fit its ",
            in.size(), " inputs");
  check_flag(*in[0], DType::I64, "loop: the trip count");
  check_flag(*in[1], DType::Bool, "loop: the condition");
  const Graph& body = *n.bodies[0];
  const size_t carried = size_t(a.carried);
  RLX_CHECK(body.outputs().size() >= 1 + carried, "loop: the body gives ", body.outputs().size(),
            " outputs, fewer than the condition and ", carried, " carried values");
  const Shape iter(Dims{}, DType::I64), cond(Dims{}, DType::Bool);
  std::vector<const Shape*> given{&iter, &cond};
  given.insert(given.end(), in.begin() + 2, in.end());
  std::vector<Shape> slices;  // a scanned input's slice: its axis 0 dropped
  for (size_t k = 0; k < size_t(a.scanned); ++k) {
    const Shape& x = *in[2 + carried + k];
    RLX_CHECK(x.rank() >= 1, "loop: scanned input ", k, " is ", x.str(), ", a scalar");
    slices.emplace_back(std::vector<Dim>(x.dims.begin() + 1, x.dims.end()), x.dtype);
  }
  for (size_t k = 0; k < slices.size(); ++k) given[2 + carried + k] = &slices[k];
  std::vector<Shape> outs;
  try {
    const Binding b = bind_body_inputs(body, given, "body");
    check_flag(body.node(body.outputs()[0].node).shape, DType::Bool, "the body's condition");
    outs = outer_shapes(body, b, a.count, 1);
  } catch (const Error& e) {
    throw e.with_context("loop");
  }
  for (size_t k = 0; k < outs.size(); ++k) {
    Shape& s = outs[k];
    if (k >= carried) {  // a scan output: one slice per iteration
      s.dims.insert(s.dims.begin(), Dim::symbol(a.count));
      continue;
    }
    const Shape& init = *in[2 + k];
    RLX_CHECK(s.dtype == init.dtype && s.rank() == init.rank(), "loop: carried value ", k,
              " enters as ", init.str(), " and the body gives it back as ", s.str());
    for (size_t j = 0; j < s.dims.size(); ++j)
      if (!(s.dims[j] == init.dims[j])) s.dims[j] = run_dim(a.count, k, j);
  }
  return outs;
}

}  // namespace rlx
