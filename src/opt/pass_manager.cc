#include <algorithm>

#include "opt/pass.h"
#include "rlx/error.h"

namespace rlx::opt {
namespace {

std::string valid_pass_names() {
  std::string s;
  for (const auto& p : pass_registry()) s += (s.empty() ? "" : ", ") + std::string(p->name());
  return s;
}

struct Signature {
  std::vector<std::pair<std::string, Shape>> inputs, outputs;
  bool operator==(const Signature&) const = default;
};

Signature signature(const Graph& g) {
  Signature s;
  for (NodeId id : g.inputs()) s.inputs.emplace_back(g.node(id).name, g.node(id).shape);
  for (const auto& o : g.outputs()) s.outputs.emplace_back(o.name, g.node(o.node).shape);
  return s;
}

bool params_bound(const Graph& g) {
  return std::none_of(g.nodes().begin(), g.nodes().end(),
                      [](const Node& n) { return n.op == Op::Param; });
}

}  // namespace

std::string property_names(unsigned props) {
  std::string s;
  auto add = [&](unsigned bit, const char* name) {
    if (props & bit) s += (s.empty() ? "" : ", ") + std::string(name);
  };
  add(kParamsBound, "params-bound");
  add(kOutputs, "outputs");
  add(kInputs, "inputs");
  return s.empty() ? "nothing" : s;
}

const std::vector<std::unique_ptr<Pass>>& pass_registry() {
  static const std::vector<std::unique_ptr<Pass>> passes = [] {
    std::vector<std::unique_ptr<Pass>> v;
    // specialize before everything: the others then see static shapes.
    v.push_back(make_specialize_pass());
    // qat before folding, so bound weights fold into their fake-quantized values once.
    v.push_back(make_qat_pass());
    // simplify next: it is structural, and folding a transpose it removes
    // (x @ w^T) would copy the weight at load time for nothing.
    v.push_back(make_simplify_pass());
    // Before folding and CSE: it matches the decomposition's structure (and runs CSE itself).
    v.push_back(make_batch_norm_train_pass());
    v.push_back(make_fold_pass());
    // After folding: attention masks are constants then.
    v.push_back(make_attention_pass());
    // Fusions after folding: they match constant weights and biases.
    v.push_back(make_conv_bn_pass());
    v.push_back(make_epilogue_pass());
    // After the epilogues, whose activations and residuals conv_blocked takes along.
    v.push_back(make_blocked_conv_pass());
    v.push_back(make_cse_pass());
    // After CSE, which would merge its copies back into the originals.
    v.push_back(make_remat_pass());
    // Last of the fusions: what no conv/matmul epilogue or attention absorbed, and remat's
    // copies (a region holds each copy next to its reader).
    v.push_back(make_elementwise_pass());
    v.push_back(make_dce_pass());
    return v;
  }();
  return passes;
}

PassManager::PassManager(const CompileOptions& options) : options_(options) {
  for (const std::string& name : options.disabled_passes) {
    bool known = std::any_of(pass_registry().begin(), pass_registry().end(),
                             [&](const auto& p) { return p->name() == name; });
    RLX_CHECK(known, "unknown pass '", name, "'; valid passes: ", valid_pass_names());
  }
  for (const auto& p : pass_registry()) {
    PassInfo info;
    info.name = p->name();
    info.description = p->description();
    info.needs = property_names(p->needs());
    info.keeps = property_names(p->keeps());
    info.min_level = p->min_level();
    bool disabled = std::find(options.disabled_passes.begin(), options.disabled_passes.end(),
                              info.name) != options.disabled_passes.end();
    if (disabled)
      info.why_not = "disabled";
    else if (options.opt_level < p->min_level())
      info.why_not = "needs -O" + std::to_string(p->min_level());
    else
      info.why_not = p->skip_reason(options);
    info.enabled = info.why_not.empty();
    if (info.enabled) pipeline_.push_back(p.get());
    info_.push_back(std::move(info));
  }
}

Graph PassManager::run(Graph g, const Evaluator& eval) const {
#ifdef NDEBUG
  const bool verify = options_.verify_each;
#else
  const bool verify = true;
#endif
  PassContext ctx{options_, eval};
  for (const Pass* p : pipeline_) {
    RLX_CHECK(!(p->needs() & kParamsBound) || params_bound(g), "pass '", p->name(),
              "' needs params bound to weights; the graph still has param nodes");
    const size_t before = g.size();
    Signature sig;
    if (verify) sig = signature(g);
    Graph out = p->run(g, ctx);
    if (verify) {
      try {
        out.verify();
      } catch (const Error& e) {
        throw e.with_context("verifying the graph after pass '" + std::string(p->name()) + "'");
      }
      Signature now = signature(out);
      RLX_CHECK(!(p->keeps() & kOutputs) || now.outputs == sig.outputs, "pass '", p->name(),
                "' changed the graph outputs (names, dims or dtypes)");
      RLX_CHECK(!(p->keeps() & kInputs) || now.inputs == sig.inputs, "pass '", p->name(),
                "' changed the graph inputs");
    }
    g = std::move(out);
    if (options_.after_pass) options_.after_pass(p->name(), before, g);
  }
  return g;
}

}  // namespace rlx::opt

namespace rlx {
std::vector<PassInfo> describe_pipeline(const CompileOptions& options) {
  return opt::PassManager(options).describe();
}

Graph optimize_unbound(Graph g, const CompileOptions& options) {
  g.verify();
  CompileOptions o = options;
  for (const auto& p : opt::pass_registry())
    if (p->needs() & opt::kParamsBound) o.disabled_passes.emplace_back(p->name());
  return opt::PassManager(o).run(std::move(g), nullptr);
}
}  // namespace rlx
