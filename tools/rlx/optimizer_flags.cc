// The optimizer flags of rlx train and rlx compile --train.
#include "commands.h"

namespace rlx::cli {

void add_optimizer_flags(CLI::App* cmd, OptimizerFlags& f) {
  cmd->add_option("--optimizer", f.optimizer, "sgd, adam, adamw or lion")->capture_default_str();
  cmd->add_option("--momentum", f.momentum, "SGD momentum")->capture_default_str();
  cmd->add_option("--dampening", f.dampening, "SGD dampening")->capture_default_str();
  cmd->add_flag("--nesterov", f.nesterov, "SGD with Nesterov momentum");
  cmd->add_option("--weight-decay", f.weight_decay,
                  "Weight decay (L2 in the gradient for sgd/adam, decoupled for adamw/lion)")
      ->capture_default_str();
  cmd->add_option("--betas", f.betas,
                  "Two betas for adam/adamw/lion (default 0.9 0.999; lion 0.9 0.99)")
      ->expected(2);
}

train::OptimizerOptions optimizer_options(const OptimizerFlags& f) {
  train::OptimizerOptions o;
  o.kind = train::parse_optimizer(f.optimizer);
  o.momentum = f.momentum;
  o.dampening = f.dampening;
  o.nesterov = f.nesterov;
  o.weight_decay = f.weight_decay;
  if (o.kind == train::OptimizerKind::lion) o.beta2 = 0.99;
  if (!f.betas.empty()) {
    RLX_CHECK(f.betas.size() == 2, "--betas takes two values, got ", f.betas.size());
    o.beta1 = f.betas[0];
    o.beta2 = f.betas[1];
  }
  return o;
}

}  // namespace rlx::cli
