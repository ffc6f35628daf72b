// The update rules of torch.optim (1.13) SGD / Adam / AdamW and of Lion, one
// fused loop per param tensor (param, grad and state read once), split over
// the thread pool when the tensor is large enough to pay for it.
#include <cmath>

#include "rlx/error.h"
#include "rlx/thread_pool.h"
#include "rlx/train.h"

namespace rlx::train {
namespace {

// Elements per chunk: below this a tensor is updated on the calling thread.
constexpr int64_t kGrain = 1 << 15;

template <typename F>
void for_range(int64_t n, F&& f) {
  if (n <= kGrain) {
    f(int64_t(0), n);
  } else {
    parallel_for(n, kGrain, [&](int64_t b, int64_t e) { f(b, e); });
  }
}

// Scalars are cast to float once, as torch casts a Python scalar to the
// tensor's dtype before the kernel runs.
void sgd(float* p, const float* g, float* buf, bool first, int64_t n, const OptimizerOptions& o,
         float lr, float scale) {
  const float wd = float(o.weight_decay), mom = float(o.momentum), damp = float(1 - o.dampening);
  const bool use_wd = o.weight_decay != 0, use_mom = o.momentum != 0;
  for_range(n, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      float d = g[i] * scale;
      if (use_wd) d = d + wd * p[i];
      if (use_mom) {
        buf[i] = first ? d : buf[i] * mom + damp * d;
        d = o.nesterov ? d + mom * buf[i] : buf[i];
      }
      p[i] = p[i] - lr * d;
    }
  });
}

void adam(float* p, const float* g, float* m, float* v, int64_t n, const OptimizerOptions& o,
          bool decoupled, double lr, int64_t step, float scale) {
  const float b1 = float(o.beta1), b2 = float(o.beta2), c1 = float(1 - o.beta1),
              c2 = float(1 - o.beta2), eps = float(o.eps), wd = float(o.weight_decay);
  const bool use_wd = o.weight_decay != 0;
  const float shrink = float(1 - lr * o.weight_decay);  // adamw: p *= 1 - lr * wd
  const double bc1 = 1 - std::pow(o.beta1, double(step)), bc2 = 1 - std::pow(o.beta2, double(step));
  const float step_size = float(lr / bc1), bc2_sqrt = float(std::sqrt(bc2));
  for_range(n, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      float d = g[i] * scale;
      float w = p[i];
      if (use_wd) {
        if (decoupled) {
          w = w * shrink;
        } else {
          d = d + wd * w;
        }
      }
      m[i] = m[i] * b1 + c1 * d;
      v[i] = v[i] * b2 + c2 * (d * d);
      const float denom = std::sqrt(v[i]) / bc2_sqrt + eps;
      p[i] = w - step_size * (m[i] / denom);
    }
  });
}

void lion(float* p, const float* g, float* m, int64_t n, const OptimizerOptions& o, double lr,
          float scale) {
  const float b1 = float(o.beta1), b2 = float(o.beta2), c1 = float(1 - o.beta1),
              c2 = float(1 - o.beta2), lrf = float(lr);
  const float shrink = float(1 - lr * o.weight_decay);
  const bool use_wd = o.weight_decay != 0;
  for_range(n, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const float d = g[i] * scale;
      float w = use_wd ? p[i] * shrink : p[i];
      const float u = m[i] * b1 + c1 * d;
      const float sign = u > 0 ? 1.f : u < 0 ? -1.f : 0.f;
      p[i] = w - lrf * sign;
      m[i] = m[i] * b2 + c2 * d;
    }
  });
}

}  // namespace

OptimizerKind parse_optimizer(std::string_view name) {
  if (name == "sgd") return OptimizerKind::sgd;
  if (name == "adam") return OptimizerKind::adam;
  if (name == "adamw") return OptimizerKind::adamw;
  if (name == "lion") return OptimizerKind::lion;
  throw make_error("unknown optimizer '", name, "' (expected sgd, adam, adamw or lion)");
}

const char* optimizer_name(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::sgd:
      return "sgd";
    case OptimizerKind::adam:
      return "adam";
    case OptimizerKind::adamw:
      return "adamw";
    case OptimizerKind::lion:
      return "lion";
  }
  return "?";
}

Optimizer::Optimizer(OptimizerOptions o) : options_(o) {
  RLX_CHECK(o.momentum >= 0 && o.weight_decay >= 0 && o.eps >= 0, "optimizer: momentum ",
            o.momentum, ", weight decay ", o.weight_decay, " and eps ", o.eps,
            " must not be negative");
  RLX_CHECK(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1, "optimizer: betas (",
            o.beta1, ", ", o.beta2, ") must lie in [0, 1)");
  RLX_CHECK(!o.nesterov || (o.kind == OptimizerKind::sgd && o.momentum > 0 && o.dampening == 0),
            "optimizer: Nesterov momentum needs sgd with momentum > 0 and dampening 0");
}

Tensor& Optimizer::buffer(const std::string& kind, const std::string& param, const Dims& dims) {
  Tensor& t = state_[kind][param];
  if (!t.defined()) t = Tensor(dims, DType::F32);
  return t;
}

void Optimizer::step(TensorMap& params, const TensorMap& grads, double lr, double grad_scale) {
  const int64_t step = steps_ + 1;
  const float scale = float(grad_scale);
  for (auto& [name, p] : params) {
    auto it = grads.find(name);
    RLX_CHECK(it != grads.end(), "optimizer: no gradient for param '", name, "'");
    RLX_CHECK(p.dtype() == DType::F32 && p.is_contiguous(), "optimizer: param '", name,
              "' must be contiguous f32, got ", p.shape().str());
    RLX_CHECK(it->second.dtype() == DType::F32 && it->second.dims() == p.dims(),
              "optimizer: the gradient of '", name, "' is ", it->second.shape().str(),
              ", its param ", p.shape().str());
    const Tensor g = it->second.contiguous();
    float* pw = p.data<float>();
    const float* gw = g.data<float>();
    const int64_t n = p.numel();
    const OptimizerOptions& o = options_;
    switch (o.kind) {
      case OptimizerKind::sgd: {
        float* buf = nullptr;
        bool first = false;
        if (o.momentum != 0) {
          first = !state_["momentum_buffer"].count(name);
          buf = buffer("momentum_buffer", name, p.dims()).data<float>();
        }
        sgd(pw, gw, buf, first, n, o, float(lr), scale);
        break;
      }
      case OptimizerKind::adam:
      case OptimizerKind::adamw:
        adam(pw, gw, buffer("exp_avg", name, p.dims()).data<float>(),
             buffer("exp_avg_sq", name, p.dims()).data<float>(), n, o,
             o.kind == OptimizerKind::adamw, lr, step, scale);
        break;
      case OptimizerKind::lion:
        lion(pw, gw, buffer("exp_avg", name, p.dims()).data<float>(), n, o, lr, scale);
        break;
    }
  }
  steps_ = step;
}

TensorMap Optimizer::state() const {
  TensorMap out;
  out[std::string(kOptimPrefix) + "step"] = Tensor::from_vector<int64_t>({}, {steps_}, DType::I64);
  for (const auto& [kind, per_param] : state_)
    for (const auto& [param, t] : per_param)
      out[std::string(kOptimPrefix) + kind + "::" + param] = t;
  return out;
}

void Optimizer::load_state(const TensorMap& state, const TensorMap& params) {
  const std::string prefix = kOptimPrefix;
  auto s = state.find(prefix + "step");
  RLX_CHECK(s != state.end() && s->second.numel() == 1, "optimizer state: no ", prefix, "step");
  std::map<std::string, std::map<std::string, Tensor>> loaded;
  for (const auto& [key, t] : state) {
    if (key.rfind(prefix, 0) != 0 || key == prefix + "step") continue;
    const size_t sep = key.find("::", prefix.size());
    RLX_CHECK(sep != std::string::npos, "optimizer state: bad key '", key, "'");
    const std::string kind = key.substr(prefix.size(), sep - prefix.size()),
                      param = key.substr(sep + 2);
    auto p = params.find(param);
    RLX_CHECK(p != params.end(), "optimizer state: '", key, "' belongs to no trained param");
    RLX_CHECK(t.dims() == p->second.dims(), "optimizer state: '", key, "' is ", t.shape().str(),
              ", its param ", p->second.shape().str());
    loaded[kind][param] = t.to(DType::F32).clone();
  }
  state_ = std::move(loaded);
  steps_ = int64_t(s->second.item_as_double(0));
}

}  // namespace rlx::train
