// Passes as named objects with a declared contract, and the pass manager that
// builds a pipeline from CompileOptions and runs it.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "opt/passes.h"
#include "rlx/runtime.h"

namespace rlx::opt {

// What a pass needs before it runs and what it keeps. The manager checks
// `needs` before the pipeline and, when verifying, the kept properties after
// each pass (all checks are linear in the graph).
enum Property : unsigned {
  kParamsBound = 1u << 0,  // no Param nodes: weights are constants (folding sees them)
  kOutputs = 1u << 1,      // graph outputs keep their names, order, dims and dtypes
  kInputs = 1u << 2,       // the Input nodes (the signature) stay, same names and shapes
};
// "params-bound, outputs" (or "nothing").
std::string property_names(unsigned props);

struct PassContext {
  const CompileOptions& options;
  Evaluator eval;  // the backend's kernels, for passes that compute (folding)
};

class Pass {
 public:
  virtual ~Pass() = default;
  virtual std::string_view name() const = 0;
  virtual std::string_view description() const = 0;  // one line
  virtual unsigned needs() const { return 0; }
  virtual unsigned keeps() const { return kOutputs | kInputs; }
  // Lowest CompileOptions::opt_level that runs the pass.
  virtual int min_level() const { return 1; }
  // Why these options give the pass nothing to do (it is then skipped), or "".
  virtual std::string skip_reason(const CompileOptions&) const { return ""; }
  virtual Graph run(const Graph& g, const PassContext& ctx) const = 0;
};

// Every pass, in pipeline order.
const std::vector<std::unique_ptr<Pass>>& pass_registry();
std::unique_ptr<Pass> make_specialize_pass();
std::unique_ptr<Pass> make_qat_pass();
std::unique_ptr<Pass> make_fold_pass();
std::unique_ptr<Pass> make_simplify_pass();
std::unique_ptr<Pass> make_batch_norm_train_pass();
std::unique_ptr<Pass> make_attention_pass();
std::unique_ptr<Pass> make_conv_bn_pass();
std::unique_ptr<Pass> make_epilogue_pass();
std::unique_ptr<Pass> make_blocked_conv_pass();
std::unique_ptr<Pass> make_cse_pass();
std::unique_ptr<Pass> make_remat_pass();
std::unique_ptr<Pass> make_elementwise_pass();
std::unique_ptr<Pass> make_dce_pass();

class PassManager {
 public:
  // The pipeline for these options. Throws rlx::Error listing the valid names
  // when options.disabled_passes names an unknown pass.
  explicit PassManager(const CompileOptions& options);
  // Every registered pass with whether this pipeline runs it, and why not.
  const std::vector<PassInfo>& describe() const { return info_; }
  // Runs the enabled passes in order. Verifies after each one in debug builds
  // or with options.verify_each, and calls options.after_pass after each one.
  Graph run(Graph g, const Evaluator& eval) const;

 private:
  CompileOptions options_;
  std::vector<const Pass*> pipeline_;
  std::vector<PassInfo> info_;
};

}  // namespace rlx::opt
