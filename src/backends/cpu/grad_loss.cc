// softmax_cross_entropy(logits [N, C], labels int [N]) and its gradient.
//
// loss_n = logsumexp(logits_n) - logits_n[label_n], computed stably (max subtracted, sums in
// double). Rows whose label equals ignore_index give loss 0 and gradient 0 and are not counted:
// reduction "mean" divides by the number of counted rows (NaN when there are none, like PyTorch),
// "sum" adds, "none" returns [N]. Any other label outside [0, C) is an error.
// grad: dlogits_n = (softmax(logits_n) - onehot(label_n)) * w_n with w_n = dloss / count (mean),
// dloss (sum) or dloss[n] (none).
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/kernels.h"
#include "rlx/error.h"
#include "rlx/thread_pool.h"

namespace rlx::cpu {
namespace {

constexpr int64_t kLossGrain = 16384;

// Labels as i64, validated: ignore_index stays as is, anything else must be in [0, C).
std::vector<int64_t> read_labels(const KernelCall& c, int64_t C, int64_t ignore) {
  const Tensor& t = c.in[1];
  const int64_t N = c.in[0].dim(0);
  RLX_CHECK(t.rank() == 1 && t.dim(0) == N, c.node.label(), ": labels ", dims_str(t.dims()),
            " do not match logits ", dims_str(c.in[0].dims()));
  std::vector<int64_t> l(static_cast<size_t>(N));
  for (int64_t i = 0; i < N; ++i) {
    if (t.dtype() == DType::I64)
      l[size_t(i)] = t.data<int64_t>()[i];
    else if (t.dtype() == DType::I32)
      l[size_t(i)] = t.data<int32_t>()[i];
    else
      throw make_error(c.node.label(), ": labels must be i32 or i64, got ", dtype_name(t.dtype()));
    const int64_t v = l[size_t(i)];
    RLX_CHECK(v == ignore || (v >= 0 && v < C), c.node.label(), ": label ", v, " at row ", i,
              " is out of range for ", C, " classes (ignore_index ", ignore, ")");
  }
  return l;
}

struct Setup {
  int64_t N, C, ignore;
  LossReduction reduction;
  std::vector<int64_t> labels;
  int64_t count = 0;  // rows not ignored
};

Setup setup(const KernelCall& c) {
  const Tensor& lg = c.in[0];
  RLX_CHECK(lg.rank() == 2, c.node.label(), ": logits must be [N, C], got ", dims_str(lg.dims()));
  const auto& a = c.node.attrs_as<CrossEntropyAttrs>();
  Setup s{lg.dim(0), lg.dim(1), a.ignore_index, a.reduction, {}, 0};
  s.labels = read_labels(c, s.C, s.ignore);
  for (int64_t v : s.labels) s.count += v != s.ignore;
  return s;
}

// max and log(sum(exp(x - max))) of one row, in double.
template <typename T>
double logsumexp(const T* x, int64_t C, double* max_out) {
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < C; ++j) m = std::max(m, double(x[j]));
  double s = 0;
  if (std::isinf(m)) {  // all -inf (or +inf): the sum would be NaN; let the result say so
    *max_out = m;
    return m;
  }
  for (int64_t j = 0; j < C; ++j) s += std::exp(double(x[j]) - m);
  *max_out = m;
  return m + std::log(s);
}

template <typename T>
void loss_typed(const KernelCall& c, const Setup& s) {
  const T* x = c.in[0].data<T>();
  std::vector<double> per(size_t(s.N), 0.0);
  const int64_t grain = std::max<int64_t>(1, kLossGrain / std::max<int64_t>(1, s.C));
  parallel_for(s.N, grain, [&](int64_t b, int64_t e) {
    for (int64_t n = b; n < e; ++n) {
      const int64_t l = s.labels[size_t(n)];
      if (l == s.ignore) continue;
      double m;
      per[size_t(n)] = logsumexp(x + n * s.C, s.C, &m) - double(x[n * s.C + l]);
    }
  });
  T* out = c.out.data<T>();
  if (s.reduction == LossReduction::none) {
    for (int64_t n = 0; n < s.N; ++n) out[n] = T(per[size_t(n)]);
    return;
  }
  double sum = 0;
  for (double v : per) sum += v;
  // mean: 0/0 = NaN when every row is ignored
  out[0] = T(s.reduction == LossReduction::sum ? sum : sum / double(s.count));
}

template <typename T>
void grad_typed(const KernelCall& c, const Setup& s) {
  const T *x = c.in[0].data<T>(), *dl = c.in[2].data<T>();
  T* out = c.out.data<T>();
  const bool none = s.reduction == LossReduction::none;
  const double scale = none ? 1.0 : s.reduction == LossReduction::sum ? 1.0 : 1.0 / double(s.count);
  const int64_t grain = std::max<int64_t>(1, kLossGrain / std::max<int64_t>(1, s.C));
  parallel_for(s.N, grain, [&](int64_t b, int64_t e) {
    for (int64_t n = b; n < e; ++n) {
      const int64_t l = s.labels[size_t(n)];
      T* o = out + n * s.C;
      if (l == s.ignore) {
        for (int64_t j = 0; j < s.C; ++j) o[j] = T(0);
        continue;
      }
      const T* xr = x + n * s.C;
      const double w = double(dl[none ? n : 0]) * scale;
      double m;
      const double lse = logsumexp(xr, s.C, &m);
      for (int64_t j = 0; j < s.C; ++j)
        o[j] = T((std::exp(double(xr[j]) - lse) - (j == l ? 1.0 : 0.0)) * w);
    }
  });
}

template <template <typename> class F>
void by_dtype(const KernelCall& c, const Setup& s) {
  switch (c.in[0].dtype()) {
    case DType::F32:
      return F<float>::run(c, s);
    case DType::F64:
      return F<double>::run(c, s);
    default:
      throw make_error(c.node.label(), ": logits must be floating point, got ",
                       dtype_name(c.in[0].dtype()));
  }
}
template <typename T>
struct Loss {
  static void run(const KernelCall& c, const Setup& s) { loss_typed<T>(c, s); }
};
template <typename T>
struct Grad {
  static void run(const KernelCall& c, const Setup& s) { grad_typed<T>(c, s); }
};

}  // namespace

void softmax_cross_entropy(const KernelCall& c) {
  const Setup s = setup(c);
  if (c.out.numel() == 0) return;
  by_dtype<Loss>(c, s);
}

void softmax_cross_entropy_grad(const KernelCall& c) {
  const Setup s = setup(c);
  const int64_t want = s.reduction == LossReduction::none ? s.N : 1;
  RLX_CHECK(c.in[2].numel() == want, c.node.label(), ": dloss ", dims_str(c.in[2].dims()),
            " does not fit reduction '", to_string(s.reduction), "'");
  if (c.out.numel() == 0) return;
  by_dtype<Grad>(c, s);
}

}  // namespace rlx::cpu
