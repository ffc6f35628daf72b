#include <map>
#include <vector>

#include "opt/pass.h"
#include "opt/passes.h"
#include "rlx/error.h"

namespace rlx::opt {

Graph specialize_shapes(const Graph& g, const std::map<std::string, Dims>& input_dims) {
  // Symbols take their values from the inputs that declare them.
  std::map<std::string, int64_t> symbols;
  for (NodeId id : g.inputs()) {
    const Node& n = g.node(id);
    auto it = input_dims.find(n.name);
    RLX_CHECK(it != input_dims.end(), "specialize: no dims given for input '", n.name, "' ",
              n.shape.str());
    const Dims& d = it->second;
    RLX_CHECK(int(d.size()) == n.shape.rank(), "specialize: input '", n.name, "' is ",
              n.shape.str(), ", given ", dims_str(d));
    for (size_t i = 0; i < d.size(); ++i) {
      const Dim& decl = n.shape.dims[i];
      RLX_CHECK(d[i] >= 0 && (!decl.is_static() || decl.value == d[i]), "specialize: input '",
                n.name, "' is ", n.shape.str(), ", given ", dims_str(d));
      if (decl.is_static() || decl.sym == "?") continue;
      auto [s, fresh] = symbols.emplace(decl.sym, d[i]);
      RLX_CHECK(fresh || s->second == d[i], "specialize: dim '", decl.sym, "' is ", d[i],
                " in input '", n.name, "' but ", s->second, " in another input");
    }
  }
  for (const auto& [name, d] : input_dims) {
    bool known = false;
    for (NodeId id : g.inputs()) known = known || g.node(id).name == name;
    RLX_CHECK(known, "specialize: the graph has no input '", name, "'");
  }
  // Leaves take the bound values; every other node is added again, so its
  // shapes are inferred from static inputs.
  Graph out;
  std::vector<NodeId> map(g.size(), -1);
  for (const Node& n : g.nodes()) {
    std::vector<NodeId> ins;
    for (NodeId in : n.inputs) ins.push_back(map[size_t(in)]);
    NodeId id;
    if (n.op == Op::Result) {
      id = out.result(ins[0], int(n.attrs_as<ResultAttrs>().index));
    } else if (is_leaf(n.op)) {
      Node leaf = n;
      if (n.op == Op::Input) {
        leaf.shape = Shape(input_dims.at(n.name), n.shape.dtype);
      } else {
        for (Dim& d : leaf.shape.dims)
          if (auto it = symbols.find(d.sym); !d.is_static() && it != symbols.end())
            d = Dim(it->second);
      }
      id = out.append_raw(std::move(leaf));
    } else {
      id = out.add_with_bodies(n.op, std::move(ins), n.attrs, n.bodies, n.name, n.origin);
    }
    map[size_t(n.id)] = id;
  }
  for (const auto& o : g.outputs()) out.add_output(o.name, map[size_t(o.node)]);
  return out;
}

namespace {
class SpecializePass final : public Pass {
 public:
  std::string_view name() const override { return "specialize"; }
  std::string_view description() const override {
    return "make symbolic dims static from CompileOptions::input_shapes, so later passes see "
           "concrete shapes (the executable then takes only those dims)";
  }
  unsigned keeps() const override { return 0; }  // symbolic dims become static
  int min_level() const override { return 0; }   // a request, not an optimization
  std::string skip_reason(const CompileOptions& o) const override {
    return o.input_shapes.empty() ? "no input shapes given" : "";
  }
  Graph run(const Graph& g, const PassContext& ctx) const override {
    return specialize_shapes(g, ctx.options.input_shapes);
  }
};
}  // namespace

std::unique_ptr<Pass> make_specialize_pass() { return std::make_unique<SpecializePass>(); }

}  // namespace rlx::opt
