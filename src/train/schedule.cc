// Learning-rate schedules: torch's closed forms (StepLR, CosineAnnealingLR)
// behind an optional linear warmup, as a pure function of the step number so
// a resumed run needs no scheduler state.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "rlx/error.h"
#include "rlx/train.h"

namespace rlx::train {

ScheduleKind parse_schedule(std::string_view name) {
  if (name == "constant") return ScheduleKind::constant;
  if (name == "step") return ScheduleKind::step;
  if (name == "cosine") return ScheduleKind::cosine;
  throw make_error("unknown schedule '", name, "' (expected constant, step or cosine)");
}

const char* schedule_name(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::constant:
      return "constant";
    case ScheduleKind::step:
      return "step";
    case ScheduleKind::cosine:
      return "cosine";
  }
  return "?";
}

double learning_rate(const ScheduleOptions& s, int64_t step) {
  RLX_CHECK(step >= 0 && s.warmup >= 0, "learning_rate: negative step or warmup");
  if (step < s.warmup) return s.lr * double(step + 1) / double(s.warmup);
  const int64_t t = step - s.warmup;
  switch (s.kind) {
    case ScheduleKind::constant:
      return s.lr;
    case ScheduleKind::step:
      RLX_CHECK(s.step_size > 0, "step schedule: step size must be positive, got ", s.step_size);
      return s.lr * std::pow(s.gamma, double(t / s.step_size));
    case ScheduleKind::cosine: {
      const int64_t span = s.total_steps - s.warmup;
      if (span <= 0 || t >= span) return s.min_lr;
      return s.min_lr +
             (s.lr - s.min_lr) * (1 + std::cos(std::numbers::pi * double(t) / double(span))) / 2;
    }
  }
  return s.lr;
}

ClipResult clip_grad_norm(const TensorMap& grads, double max_norm) {
  // Per-tensor norms first, then the norm of those, as torch stacks them.
  double sq = 0;
  for (const auto& [name, g] : grads) {
    RLX_CHECK(g.dtype() == DType::F32, "clip_grad_norm: gradient '", name, "' is ", g.shape().str(),
              ", expected f32");
    const Tensor c = g.contiguous();
    const float* p = c.data<float>();
    double s = 0;
    for (int64_t i = 0, n = c.numel(); i < n; ++i) s += double(p[i]) * double(p[i]);
    const double norm = double(float(std::sqrt(s)));
    sq += norm * norm;
  }
  ClipResult r;
  r.norm = double(float(std::sqrt(sq)));
  if (max_norm > 0) r.scale = std::min(1.0, double(float(max_norm / (r.norm + 1e-6))));
  return r;
}

}  // namespace rlx::train
