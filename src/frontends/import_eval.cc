#include "frontends/import_eval.h"

namespace rlx {
namespace {
NodeEvaluator& slot() {
  static NodeEvaluator e;
  return e;
}
}  // namespace

void set_import_evaluator(NodeEvaluator eval) { slot() = std::move(eval); }
const NodeEvaluator& import_evaluator() { return slot(); }

}  // namespace rlx
