// compute_gradients: what `rlx grad` and Python's rlx.grad run (train.h).
#include <map>

#include "rlx/autodiff.h"
#include "rlx/error.h"
#include "rlx/train.h"
#include "train/before_autodiff.h"
#include "train/output_list.h"

namespace rlx::train {

Gradients compute_gradients(Model m, const TensorMap& inputs, const TensorMap* cotangents,
                            const CompileOptions& options, const GradientSources& sources) {
  std::map<std::string, Dims> dims;
  for (NodeId id : m.graph.inputs()) {
    const std::string& name = m.graph.node(id).name;
    auto it = inputs.find(name);
    RLX_CHECK(it != inputs.end(), sources.model, ": input '", name, "' is missing from ",
              sources.inputs);
    dims[name] = it->second.dims();
  }
  // Autodiff needs static shapes: bind symbolic dims to the inputs' first.
  bool symbolic = false;
  for (const Node& n : m.graph.nodes()) symbolic = symbolic || !n.shape.is_static();
  if (symbolic) {
    CompileOptions only_specialize;
    only_specialize.opt_level = 0;
    only_specialize.input_shapes = dims;
    m.graph = optimize_unbound(std::move(m.graph), only_specialize);
  }

  m.graph = before_autodiff(std::move(m.graph), options);
  const std::string outputs = output_list(m.graph);
  GradientGraphOptions go;
  go.non_trainable = m.non_trainable;
  go.cotangents = cotangents != nullptr;
  GradientGraph gg;
  try {
    gg = gradient_graph(std::move(m.graph), go);
  } catch (const Error& e) {
    if (cotangents) throw;
    throw make_error(sources.model, ": ", e.what(),
                     sources.cotangent_hint.empty() ? "" : " " + sources.cotangent_hint);
  }

  TensorMap feed = inputs;
  if (cotangents) {
    TensorMap cts = *cotangents;
    for (const auto& [out, in] : gg.cotangents) {
      auto it = cts.find(out);
      RLX_CHECK(it != cts.end(), sources.cotangents, ": no cotangent for output '", out,
                "'; the model's outputs are ", outputs);
      feed[in] = it->second;
      cts.erase(it);
    }
    RLX_CHECK(cts.empty(), sources.cotangents, ": '", cts.begin()->first,
              "' is not a float output of the model; its outputs are ", outputs);
  }

  Session session(Executable::compile(std::move(gg.graph), m.weights, options));
  TensorMap result = session.run(feed);
  Gradients r;
  for (const std::string& name : gg.grads) r.grads[name] = result.at(name);
  for (auto& [name, t] : result)
    if (!r.grads.count(name)) r.outputs[name] = std::move(t);
  return r;
}

}  // namespace rlx::train
