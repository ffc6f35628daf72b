#include "train/trained_set.h"

#include <cstring>
#include <set>

#include "rlx/error.h"
#include "rlx/train.h"
#include "train/output_list.h"

namespace rlx::train {

TrainedSet trained_set(const Model& m) {
  const Graph& g = m.graph;
  TrainedSet ts;
  for (const auto& o : g.outputs())
    if (o.name == kLossOutput) ts.loss = o.node;
  RLX_CHECK(ts.loss >= 0, m.source, ": the model has no output named '", kLossOutput,
            "' to train on; its outputs are ", output_list(g));
  const Shape& ls = g.node(ts.loss).shape;
  RLX_CHECK(is_float(ls.dtype) && (!ls.is_static() || ls.numel() == 1), m.source,
            ": the loss must be a float of one element, got ", ls.str());

  std::set<std::string> seen;
  for (const Node& n : g.nodes()) {
    if (n.op != Op::Param || !is_float(n.shape.dtype) || m.non_trainable.count(n.name)) continue;
    RLX_CHECK(seen.insert(n.name).second, m.source, ": param '", n.name,
              "' is bound by more than one node; the Trainer needs one node per param");
    RLX_CHECK(n.shape.dtype == DType::F32, m.source, ": param '", n.name, "' is ", n.shape.str(),
              "; only f32 params are trained");
    RLX_CHECK(m.weights.count(n.name), m.source, ": no weight for param '", n.name, "'");
    ts.params.push_back(n.name);
  }
  RLX_CHECK(!ts.params.empty(), m.source, ": the model has no trainable f32 param");
  for (const auto& o : g.outputs()) {
    if (!o.name.starts_with(kUpdatePrefix)) continue;
    const std::string buf = o.name.substr(std::strlen(kUpdatePrefix));
    RLX_CHECK(m.weights.count(buf) && !seen.count(buf), m.source, ": output '", o.name,
              "' updates '", buf, "', which is not a non-trainable weight of the model");
    ts.buffers.push_back(buf);
  }
  return ts;
}

}  // namespace rlx::train
