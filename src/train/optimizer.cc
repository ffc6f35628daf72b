// The update rules of torch.optim (1.13) SGD / Adam / AdamW and of Lion, one
// fused loop per param tensor (param, grad and state read once), split over
// the thread pool when the tensor is large enough to pay for it, on AVX2
// where the CPU path has it.
#include <immintrin.h>

#include <cmath>

#include "rlx/cpu_isa.h"
#include "rlx/error.h"
#include "rlx/thread_pool.h"
#include "rlx/train.h"

// AVX2 without FMA: the compiler would contract mul + add into fma otherwise.
#define RLX_TRAIN_AVX2 __attribute__((target("avx2")))

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
// tensor's dtype before the kernel runs. Each rule has a scalar loop over
// [b, e) and an AVX2 loop over its 8-lane blocks that leaves the tail to the
// scalar one. The AVX2 loops multiply and add separately (no FMA) and sqrt
// and divide exactly, so both paths give the same bits.

struct SgdK {
  float wd, mom, damp, lr, scale;
  bool use_wd, use_mom, nesterov, first;
};

void sgd_scalar(const SgdK& k, float* p, const float* g, float* buf, int64_t i, int64_t e) {
  for (; i < e; ++i) {
    float d = g[i] * k.scale;
    if (k.use_wd) d = d + k.wd * p[i];
    if (k.use_mom) {
      buf[i] = k.first ? d : buf[i] * k.mom + k.damp * d;
      d = k.nesterov ? d + k.mom * buf[i] : buf[i];
    }
    p[i] = p[i] - k.lr * d;
  }
}

RLX_TRAIN_AVX2 void sgd_avx2(const SgdK& k, float* p, const float* g, float* buf, int64_t i,
                             int64_t e) {
  const __m256 wd = _mm256_set1_ps(k.wd), mom = _mm256_set1_ps(k.mom),
               damp = _mm256_set1_ps(k.damp), lr = _mm256_set1_ps(k.lr),
               scale = _mm256_set1_ps(k.scale);
  for (; i + 8 <= e; i += 8) {
    const __m256 w = _mm256_loadu_ps(p + i);
    __m256 d = _mm256_mul_ps(_mm256_loadu_ps(g + i), scale);
    if (k.use_wd) d = _mm256_add_ps(d, _mm256_mul_ps(wd, w));
    if (k.use_mom) {
      const __m256 b = k.first ? d
                               : _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(buf + i), mom),
                                               _mm256_mul_ps(damp, d));
      _mm256_storeu_ps(buf + i, b);
      d = k.nesterov ? _mm256_add_ps(d, _mm256_mul_ps(mom, b)) : b;
    }
    _mm256_storeu_ps(p + i, _mm256_sub_ps(w, _mm256_mul_ps(lr, d)));
  }
  sgd_scalar(k, p, g, buf, i, e);
}

struct AdamK {
  float b1, b2, c1, c2, eps, wd, shrink, step_size, bc2_sqrt, scale;
  bool use_wd, decoupled;
};

void adam_scalar(const AdamK& k, float* p, const float* g, float* m, float* v, int64_t i,
                 int64_t e) {
  for (; i < e; ++i) {
    float d = g[i] * k.scale;
    float w = p[i];
    if (k.use_wd) {
      if (k.decoupled) {
        w = w * k.shrink;
      } else {
        d = d + k.wd * w;
      }
    }
    m[i] = m[i] * k.b1 + k.c1 * d;
    v[i] = v[i] * k.b2 + k.c2 * (d * d);
    const float denom = std::sqrt(v[i]) / k.bc2_sqrt + k.eps;
    p[i] = w - k.step_size * (m[i] / denom);
  }
}

RLX_TRAIN_AVX2 void adam_avx2(const AdamK& k, float* p, const float* g, float* m, float* v,
                              int64_t i, int64_t e) {
  const __m256 b1 = _mm256_set1_ps(k.b1), b2 = _mm256_set1_ps(k.b2), c1 = _mm256_set1_ps(k.c1),
               c2 = _mm256_set1_ps(k.c2), eps = _mm256_set1_ps(k.eps), wd = _mm256_set1_ps(k.wd),
               shrink = _mm256_set1_ps(k.shrink), step_size = _mm256_set1_ps(k.step_size),
               bc2_sqrt = _mm256_set1_ps(k.bc2_sqrt), scale = _mm256_set1_ps(k.scale);
  for (; i + 8 <= e; i += 8) {
    __m256 d = _mm256_mul_ps(_mm256_loadu_ps(g + i), scale);
    __m256 w = _mm256_loadu_ps(p + i);
    if (k.use_wd) {
      if (k.decoupled) {
        w = _mm256_mul_ps(w, shrink);
      } else {
        d = _mm256_add_ps(d, _mm256_mul_ps(wd, w));
      }
    }
    const __m256 mi =
        _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(m + i), b1), _mm256_mul_ps(c1, d));
    const __m256 vi = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(v + i), b2),
                                    _mm256_mul_ps(c2, _mm256_mul_ps(d, d)));
    _mm256_storeu_ps(m + i, mi);
    _mm256_storeu_ps(v + i, vi);
    const __m256 denom = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(vi), bc2_sqrt), eps);
    _mm256_storeu_ps(p + i, _mm256_sub_ps(w, _mm256_mul_ps(step_size, _mm256_div_ps(mi, denom))));
  }
  adam_scalar(k, p, g, m, v, i, e);
}

struct LionK {
  float b1, b2, c1, c2, lr, shrink, scale;
  bool use_wd;
};

void lion_scalar(const LionK& k, float* p, const float* g, float* m, int64_t i, int64_t e) {
  for (; i < e; ++i) {
    const float d = g[i] * k.scale;
    const float w = k.use_wd ? p[i] * k.shrink : p[i];
    const float u = m[i] * k.b1 + k.c1 * d;
    const float sign = u > 0 ? 1.f : u < 0 ? -1.f : 0.f;
    p[i] = w - k.lr * sign;
    m[i] = m[i] * k.b2 + k.c2 * d;
  }
}

RLX_TRAIN_AVX2 void lion_avx2(const LionK& k, float* p, const float* g, float* m, int64_t i,
                              int64_t e) {
  const __m256 b1 = _mm256_set1_ps(k.b1), b2 = _mm256_set1_ps(k.b2), c1 = _mm256_set1_ps(k.c1),
               c2 = _mm256_set1_ps(k.c2), lr = _mm256_set1_ps(k.lr),
               shrink = _mm256_set1_ps(k.shrink), scale = _mm256_set1_ps(k.scale),
               one = _mm256_set1_ps(1), zero = _mm256_setzero_ps();
  for (; i + 8 <= e; i += 8) {
    const __m256 d = _mm256_mul_ps(_mm256_loadu_ps(g + i), scale);
    __m256 w = _mm256_loadu_ps(p + i);
    if (k.use_wd) w = _mm256_mul_ps(w, shrink);
    const __m256 mi = _mm256_loadu_ps(m + i);
    const __m256 u = _mm256_add_ps(_mm256_mul_ps(mi, b1), _mm256_mul_ps(c1, d));
    // +1, -1 or 0 (NaN compares false both ways: 0, as the scalar rule).
    const __m256 sign = _mm256_sub_ps(_mm256_and_ps(_mm256_cmp_ps(u, zero, _CMP_GT_OQ), one),
                                      _mm256_and_ps(_mm256_cmp_ps(u, zero, _CMP_LT_OQ), one));
    _mm256_storeu_ps(p + i, _mm256_sub_ps(w, _mm256_mul_ps(lr, sign)));
    _mm256_storeu_ps(m + i, _mm256_add_ps(_mm256_mul_ps(mi, b2), _mm256_mul_ps(c2, d)));
  }
  lion_scalar(k, p, g, m, i, e);
}

// Runs a rule's AVX2 loop when the CPU path allows it, else its scalar loop.
template <typename Scalar, typename Avx2>
void update(int64_t n, Scalar scalar, Avx2 avx2) {
  const bool simd = cpu_isa() >= Isa::avx2;
  for_range(n, [&](int64_t b, int64_t e) { simd ? avx2(b, e) : scalar(b, e); });
}

void sgd(float* p, const float* g, float* buf, bool first, int64_t n, const OptimizerOptions& o,
         float lr, float scale) {
  const SgdK k{float(o.weight_decay),
               float(o.momentum),
               float(1 - o.dampening),
               lr,
               scale,
               o.weight_decay != 0,
               o.momentum != 0,
               o.nesterov,
               first};
  update(
      n, [&](int64_t b, int64_t e) { sgd_scalar(k, p, g, buf, b, e); },
      [&](int64_t b, int64_t e) { sgd_avx2(k, p, g, buf, b, e); });
}

void adam(float* p, const float* g, float* m, float* v, int64_t n, const OptimizerOptions& o,
          bool decoupled, double lr, int64_t step, float scale) {
  const double bc1 = 1 - std::pow(o.beta1, double(step)), bc2 = 1 - std::pow(o.beta2, double(step));
  const AdamK k{float(o.beta1),
                float(o.beta2),
                float(1 - o.beta1),
                float(1 - o.beta2),
                float(o.eps),
                float(o.weight_decay),
                float(1 - lr * o.weight_decay),  // adamw: p *= 1 - lr * wd
                float(lr / bc1),
                float(std::sqrt(bc2)),
                scale,
                o.weight_decay != 0,
                decoupled};
  update(
      n, [&](int64_t b, int64_t e) { adam_scalar(k, p, g, m, v, b, e); },
      [&](int64_t b, int64_t e) { adam_avx2(k, p, g, m, v, b, e); });
}

void lion(float* p, const float* g, float* m, int64_t n, const OptimizerOptions& o, double lr,
          float scale) {
  const LionK k{float(o.beta1),
                float(o.beta2),
                float(1 - o.beta1),
                float(1 - o.beta2),
                float(lr),
                float(1 - lr * o.weight_decay),
                scale,
                o.weight_decay != 0};
  update(
      n, [&](int64_t b, int64_t e) { lion_scalar(k, p, g, m, b, e); },
      [&](int64_t b, int64_t e) { lion_avx2(k, p, g, m, b, e); });
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
