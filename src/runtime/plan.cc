#include "runtime/plan.h"

#include <algorithm>

#include "rlx/error.h"

namespace rlx::runtime {
namespace {
// Whether numel * 8 bytes of `d` is far from overflowing (zeros skipped, so an
// empty tensor with huge other dims is rejected too: numel() would overflow).
bool sane_size(const Dims& d) {
  uint64_t n = 1;
  for (int64_t v : d) {
    if (v == 0) continue;
    if (n > (uint64_t(1) << 56) / uint64_t(v)) return false;
    n *= uint64_t(v);
  }
  return true;
}

// The node's data-dependent dims in s replaced by what its run found: the count, and for a
// control node the dims only its run told (runtime/control.h: bind_run_dims).
void bind_count(Shape& s, const Counts& counts) {
  for (Dim& d : s.dims)
    if (auto it = counts.find(d.sym); !d.is_static() && it != counts.end()) d = Dim(it->second);
}
}  // namespace

std::vector<Dims> specialize(const Graph& g, const std::map<std::string, Dims>& input_dims,
                             const Counts& counts, std::vector<bool>* pending) {
  std::map<std::string, int64_t> symbols;
  std::vector<Shape> shapes(g.size());
  std::vector<Dims> dims(g.size());
  std::vector<Shape> results;  // the outputs of the last multi-output node
  std::vector<bool> waits(g.size(), false);
  for (const Node& n : g.nodes()) {
    Shape s;
    bool reads_pending = false;
    for (NodeId i : n.inputs) reads_pending = reads_pending || waits[size_t(i)];
    if (reads_pending) {
      waits[size_t(n.id)] = true;
      continue;
    }
    if (has_data_dependent_dims(n.op) && !counts.count(data_dependent_dim(n))) {
      RLX_CHECK(pending, n.label(), ": its output dim '", data_dependent_dim(n),
                "' depends on the input values (run the graph to know it)");
      waits[size_t(n.id)] = true;
      continue;
    }
    if (n.op == Op::Input) {
      auto it = input_dims.find(n.name);
      RLX_CHECK(it != input_dims.end(), "missing input '", n.name, "' (", n.shape.str(), ")");
      const Dims& d = it->second;
      RLX_CHECK(int(d.size()) == n.shape.rank(), "input '", n.name, "' has shape ", dims_str(d),
                ", expected ", n.shape.str());
      for (size_t i = 0; i < d.size(); ++i) {
        const Dim& decl = n.shape.dims[i];
        if (decl.is_static()) {
          RLX_CHECK(decl.value == d[i], "input '", n.name, "' has shape ", dims_str(d),
                    ", expected ", n.shape.str());
        } else if (decl.sym != "?") {
          auto [sit, fresh] = symbols.emplace(decl.sym, d[i]);
          RLX_CHECK(fresh || sit->second == d[i], "input '", n.name, "': dim '", decl.sym, "' is ",
                    d[i], " here but ", sit->second, " in another input");
        }
      }
      s = Shape(d, n.shape.dtype);
    } else if (is_leaf(n.op)) {
      s = n.shape;
      for (auto& d : s.dims)
        if (!d.is_static()) {
          auto it = symbols.find(d.sym);
          RLX_CHECK(it != symbols.end(), n.label(), ": dim '", d.sym,
                    "' is not bound by any input");
          d = Dim(it->second);
        }
    } else if (n.op == Op::Result) {  // right after its node, in order
      s = results.at(size_t(n.attrs_as<ResultAttrs>().index));
    } else {
      std::vector<const Shape*> in;
      for (NodeId i : n.inputs) in.push_back(&shapes[size_t(i)]);
      try {
        if (has_results(n.op)) {
          // The node itself holds no buffer; its results take these shapes.
          results = infer_shapes(n, in);
          if (has_data_dependent_dims(n.op))
            for (Shape& r : results) bind_count(r, counts);
          continue;
        }
        s = infer_shape(n, in);
        if (has_data_dependent_dims(n.op)) bind_count(s, counts);
      } catch (const Error& e) {
        std::string ctx = n.label() + " with inputs ";
        for (size_t k = 0; k < in.size(); ++k) ctx += (k ? ", " : "") + in[k]->str();
        throw e.with_context(ctx + (n.origin.empty() ? "" : " from " + n.origin));
      }
    }
    dims[size_t(n.id)] = s.concrete();
    // A huge static dim (an expand to [2^40, 2^40]) must fail here, not
    // overflow the arena size computation.
    RLX_CHECK(sane_size(dims[size_t(n.id)]), n.label(), ": shape ", s.str(), " is too large",
              n.origin.empty() ? "" : " (from " + n.origin + ")");
    shapes[size_t(n.id)] = std::move(s);
  }
  if (pending) *pending = std::move(waits);
  return dims;
}

Plan plan_memory(const Graph& g, std::vector<Dims> dims, std::vector<bool> pending) {
  Plan p;
  pending.resize(g.size(), false);
  p.offset.assign(g.size(), -1);
  std::vector<bool> is_output(g.size(), false);
  for (const auto& o : g.outputs()) is_output[size_t(o.node)] = true;
  // A reshape (not a graph output: callers must own those) views its input's
  // buffer; the buffer it views, through chains of views, stays live until the
  // view's last reader has run.
  p.alias.assign(g.size(), -1);
  for (const Node& n : g.nodes()) {
    if (n.op != Op::Reshape || is_output[size_t(n.id)]) continue;
    NodeId src = n.inputs[0];
    p.alias[size_t(n.id)] = p.alias[size_t(src)] >= 0 ? p.alias[size_t(src)] : src;
  }
  // A graph output that reshapes a computed value read by nothing else (GPT-2's
  // logits, [128, 50257] -> [1, 128, 50257]) views it too: the value gets an
  // output buffer of its own, which the caller then owns through the view,
  // instead of an arena slot copied out (25 MB, 1 ms a run).
  std::vector<int> readers(g.size(), 0);
  for (const Node& n : g.nodes())
    for (NodeId in : n.inputs) ++readers[size_t(in)];
  for (const auto& o : g.outputs()) {
    const Node& out = g.node(o.node);
    if (out.op != Op::Reshape || readers[size_t(o.node)] > 0) continue;
    const NodeId v = out.inputs[0];
    const Node& src = g.node(v);
    if (is_leaf(src.op) || src.op == Op::Reshape || readers[size_t(v)] != 1 || is_output[size_t(v)])
      continue;
    is_output[size_t(v)] = true;
    p.alias[size_t(o.node)] = v;
  }
  std::vector<size_t> last_use(g.size(), 0);
  for (const Node& n : g.nodes())
    for (NodeId in : n.inputs) {
      last_use[size_t(in)] = size_t(n.id);
      if (NodeId root = p.alias[size_t(in)]; root >= 0) last_use[size_t(root)] = size_t(n.id);
    }

  struct Block {
    size_t offset, size;
  };
  std::vector<Block> live;  // sorted by offset
  std::vector<std::vector<NodeId>> frees_after(g.size());
  size_t peak = 0;
  // A value's buffer is placed when the node computing it runs: a result's
  // when its multi-output node does, and it lives until the result's last
  // reader (an unread one is freed right after), so each output has its own
  // lifetime.
  auto place = [&](const Node& n) {
    const size_t id = size_t(n.id);
    if (!is_leaf(n.op) && !is_output[id] && p.alias[id] < 0 && !pending[id]) {
      size_t bytes = size_t(numel(dims[id])) * dtype_size(n.shape.dtype);
      size_t need = std::max<size_t>(64, (bytes + 63) / 64 * 64);
      size_t at = 0;
      auto it = live.begin();
      for (; it != live.end(); ++it) {
        if (it->offset >= at + need) break;
        at = std::max(at, it->offset + it->size);
      }
      live.insert(it, {at, need});
      p.offset[id] = int64_t(at);
      peak = std::max(peak, at + need);
      // A node nobody reads is freed right after it runs.
      frees_after[std::max(last_use[id], id)].push_back(n.id);
    }
  };
  for (const Node& n : g.nodes()) {
    const size_t id = size_t(n.id);
    if (has_results(n.op))
      for (size_t i = 0; i < n.results.size(); ++i) place(g.node(g.result(n.id, int(i))));
    else if (n.op != Op::Result)
      place(n);
    for (NodeId dead : frees_after[id]) {
      auto off = size_t(p.offset[size_t(dead)]);
      live.erase(
          std::find_if(live.begin(), live.end(), [&](const Block& b) { return b.offset == off; }));
    }
  }
  p.dims = std::move(dims);
  p.pending = std::move(pending);
  p.arena_bytes = peak;
  return p;
}

std::string shape_signature(const std::map<std::string, Dims>& input_dims, const Counts& counts) {
  std::string s;
  for (const auto& [name, d] : input_dims) s += name + dims_str(d) + ";";
  for (const auto& [name, v] : counts) s += name + "=" + std::to_string(v) + ";";
  return s;
}

}  // namespace rlx::runtime
