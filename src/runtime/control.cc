#include "runtime/control.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "rlx/error.h"

namespace rlx::runtime {
namespace {

bool truth(const Tensor& t, const char* what) {
  RLX_CHECK(t.numel() == 1, what, " must hold one element, got ", t.shape().str());
  return t.item_as_double(0) != 0;
}

// The slices of one scan output, one per iteration, stacked along a new axis 0.
Tensor stack(const std::vector<Tensor>& slices, const Shape& empty_slice, size_t k) {
  Shape s = slices.empty() ? empty_slice : slices[0].shape();
  RLX_CHECK(s.is_static(), "loop: scan output ", k,
            " is empty (no iteration ran) and its slice shape ", s.str(),
            " has dims only a run tells");
  Dims d = s.concrete();
  d.insert(d.begin(), int64_t(slices.size()));
  Tensor out(d, s.dtype);
  auto* dst = static_cast<std::byte*>(out.raw());
  for (size_t i = 0; i < slices.size(); ++i) {
    RLX_CHECK(slices[i].shape() == slices[0].shape(), "loop: scan output ", k, " is ",
              slices[i].shape().str(), " in iteration ", i, " and ", slices[0].shape().str(),
              " in iteration 0; a scan output keeps one shape");
    const Tensor c = slices[i].contiguous();
    std::memcpy(dst, c.raw(), c.nbytes());
    dst += c.nbytes();
  }
  return out;
}

// The node's output shapes for these inputs, the dims only a run tells still symbolic.
std::vector<Shape> declared_shapes(const Node& n, std::span<const Tensor> in) {
  std::vector<Shape> shapes;
  for (const Tensor& t : in) shapes.push_back(t.shape());
  std::vector<const Shape*> ptrs;
  for (const Shape& s : shapes) ptrs.push_back(&s);
  return infer_shapes(n, ptrs);
}

Tensor i64_scalar(int64_t v) { return Tensor::from_vector<int64_t>({}, {v}, DType::I64); }
Tensor bool_scalar(bool v) { return Tensor::from_vector<uint8_t>({}, {uint8_t(v)}, DType::Bool); }

}  // namespace

ControlResult ControlRunner::run(const Node& n, std::span<const Tensor> in) {
  RLX_CHECK(is_control(n.op), n.label(), ": not a control node");
  return n.op == Op::If ? run_if(n, in) : run_loop(n, in);
}

std::vector<Tensor> ControlRunner::run_body(const Graph& body, std::span<const Tensor> args) {
  Body& b = bodies_[&body];
  if (!b.session) {
    b.session = std::make_unique<Session>(compile_(body), options_);
    // The input names in the body's order; empty for one the compiled body no longer reads.
    const Graph& compiled = b.session->executable().graph();
    std::set<std::string> kept;
    for (NodeId id : compiled.inputs()) kept.insert(compiled.node(id).name);
    for (NodeId id : body.inputs())
      b.inputs.push_back(kept.count(body.node(id).name) ? body.node(id).name : std::string());
  }
  RLX_CHECK(b.inputs.size() == args.size(), "the body takes ", b.inputs.size(), " inputs, given ",
            args.size());
  TensorMap named;
  for (size_t k = 0; k < args.size(); ++k)
    if (!b.inputs[k].empty()) named[b.inputs[k]] = args[k];
  TensorMap result = b.session->run(named);
  std::vector<Tensor> outs;
  for (const auto& o : body.outputs()) {
    auto it = result.find(o.name);
    RLX_CHECK(it != result.end(), "the body gives no output '", o.name, "'");
    outs.push_back(it->second);
  }
  return outs;
}

ControlResult ControlRunner::run_if(const Node& n, std::span<const Tensor> in) {
  const bool then = truth(in[0], "if: the condition");
  const auto& body = n.bodies.at(then ? 0 : 1);
  const auto& a = n.attrs_as<IfAttrs>();
  RLX_CHECK(body, "the condition is ", then ? "true" : "false", ", and the ",
            then ? "then" : "else",
            " branch did not lower at import: ", then ? a.then_error : a.else_error);
  try {
    return {run_body(*body, in.subspan(1)), then ? 1 : 0};
  } catch (const Error& e) {
    throw e.with_context(std::string("in the ") + (then ? "then" : "else") + " branch");
  }
}

ControlResult ControlRunner::run_loop(const Node& n, std::span<const Tensor> in) {
  const Graph& body = *n.bodies.at(0);
  const auto& a = n.attrs_as<LoopAttrs>();
  const size_t carried = size_t(a.carried);
  // Read as an integer: INT64_MAX (ONNX's "no trip count") does not survive a double.
  RLX_CHECK(in[0].numel() == 1 && in[0].dtype() == DType::I64,
            "loop: the trip count must be one i64, got ", in[0].shape().str());
  int64_t trips = in[0].contiguous().data<int64_t>()[0];
  bool go = truth(in[1], "loop: the condition");
  std::vector<Tensor> args(in.begin(), in.end());  // (i, cond, carried..., slices..., captures...)
  // Scanned inputs: contiguous, walked by views of one slice each.
  std::vector<Tensor> scanned;
  for (size_t k = 0; k < size_t(a.scanned); ++k) {
    scanned.push_back(in[2 + carried + k].contiguous());
    const int64_t len = scanned[k].dims()[0];
    RLX_CHECK(len == scanned[0].dims()[0], "loop: scanned input ", k, " has ", len,
              " slices, scanned input 0 has ", scanned[0].dims()[0]);
    trips = std::min(trips, len);
  }
  auto slice = [&](size_t k, int64_t i) {
    const Tensor& x = scanned[k];
    const Dims d(x.dims().begin() + 1, x.dims().end());
    return Tensor(x.buffer(), x.offset() + size_t(i) * size_t(numel(d)) * dtype_size(x.dtype()), d,
                  x.dtype());
  };
  const size_t n_scan = body.outputs().size() - 1 - carried;
  std::vector<std::vector<Tensor>> scans(n_scan);
  int64_t i = 0;
  for (; go && i < trips; ++i) {
    if (options_.interrupt && options_.interrupt->load(std::memory_order_relaxed))
      throw make_error("loop interrupted in iteration ", i);
    args[0] = i64_scalar(i);
    args[1] = bool_scalar(go);
    for (size_t k = 0; k < scanned.size(); ++k) args[2 + carried + k] = slice(k, i);
    std::vector<Tensor> outs;
    try {
      outs = run_body(body, args);
      go = truth(outs[0], "the body's condition");
    } catch (const Error& e) {
      throw e.with_context("in iteration " + std::to_string(i));
    }
    for (size_t k = 0; k < carried; ++k) args[2 + k] = outs[1 + k];
    for (size_t k = 0; k < n_scan; ++k) scans[k].push_back(outs[1 + carried + k]);
  }
  ControlResult r;
  r.count = i;
  r.outputs.assign(args.begin() + 2, args.begin() + 2 + std::ptrdiff_t(carried));
  // A loop that runs no iteration sizes its empty scans from the body's declared shapes.
  std::vector<Shape> declared;
  if (i == 0 && n_scan) {
    declared = declared_shapes(n, in);
  }
  for (size_t k = 0; k < n_scan; ++k) {
    Shape slice;
    if (!declared.empty()) {
      slice = declared[carried + k];
      slice.dims.erase(slice.dims.begin());
    }
    r.outputs.push_back(stack(scans[k], slice, k));
  }
  return r;
}

void bind_run_dims(const Node& n, std::span<const Tensor> in, std::span<const Tensor> outputs,
                   std::map<std::string, int64_t>& counts) {
  const std::vector<Shape> declared = declared_shapes(n, in);
  RLX_CHECK(declared.size() == outputs.size(), n.label(), ": ran into ", outputs.size(),
            " outputs, declares ", declared.size());
  for (size_t k = 0; k < declared.size(); ++k) {
    const Shape& d = declared[k];
    const Tensor& t = outputs[k];
    bool fits = d.dtype == t.dtype() && d.rank() == t.rank();
    for (int j = 0; fits && j < d.rank(); ++j) {
      const Dim& dim = d.dims[size_t(j)];
      const int64_t v = t.dims()[size_t(j)];
      if (dim.is_static()) {
        fits = dim.value == v;
      } else {
        auto [it, fresh] = counts.emplace(dim.sym, v);
        fits = fresh || it->second == v;
      }
    }
    RLX_CHECK(fits, n.label(), ": output ", k, " came out ", t.shape().str(),
              ", the node declares ", d.str());
  }
}

}  // namespace rlx::runtime
