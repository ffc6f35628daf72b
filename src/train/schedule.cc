// Learning-rate schedules: torch's closed forms (StepLR, CosineAnnealingLR)
// behind an optional linear warmup, as a pure function of the step number so
// a resumed run needs no scheduler state.
#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "rlx/error.h"
#include "rlx/thread_pool.h"
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

namespace {

// Elements per block of sum_squares: blocks run in parallel, and their sums
// are added in block order, so the result does not depend on the thread count.
constexpr int64_t kNormBlock = 1 << 15;

// sum x^2 in double, over eight interleaved accumulators (independent adds
// instead of one serial chain; the compiler may pack them into SIMD lanes).
double sum_squares(const float* x, int64_t n) {
  const int64_t blocks = (n + kNormBlock - 1) / kNormBlock;
  std::vector<double> sums(size_t(blocks), 0.0);
  auto block = [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t begin = b * kNormBlock, end = std::min(n, begin + kNormBlock);
      double acc[8] = {};
      int64_t i = begin;
      for (; i + 8 <= end; i += 8)
        for (int j = 0; j < 8; ++j) acc[j] += double(x[i + j]) * double(x[i + j]);
      for (; i < end; ++i) acc[0] += double(x[i]) * double(x[i]);
      sums[size_t(b)] =
          ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    }
  };
  if (blocks > 1) {
    parallel_for(blocks, 1, block);
  } else {
    block(0, blocks);
  }
  double s = 0;
  for (double v : sums) s += v;
  return s;
}

}  // namespace

ClipResult clip_grad_norm(const TensorMap& grads, double max_norm) {
  // Per-tensor norms first, then the norm of those, as torch stacks them.
  double sq = 0;
  for (const auto& [name, g] : grads) {
    RLX_CHECK(g.dtype() == DType::F32, "clip_grad_norm: gradient '", name, "' is ", g.shape().str(),
              ", expected f32");
    const Tensor c = g.contiguous();
    const double norm = double(float(std::sqrt(sum_squares(c.data<float>(), c.numel()))));
    sq += norm * norm;
  }
  ClipResult r;
  r.norm = double(float(std::sqrt(sq)));
  if (max_norm > 0) r.scale = std::min(1.0, double(float(max_norm / (r.norm + 1e-6))));
  return r;
}

}  // namespace rlx::train
