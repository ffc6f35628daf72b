// moe_ffn: a mixture-of-experts FFN on the experts' ggml rows, read in place.
// The (token, slot) pairs are bucketed by expert, so each expert's rows are
// streamed once per call for all of its tokens (as ggml's mul_mat_id does):
// its gate and up products, act(gate) * up and its down product run through
// quant_matmul on its slice of rows, exactly as a dense FFN's dequant_matmuls
// would (regrouped decode GEMV, integer GEMM for prefill). Each token's
// outputs are then weighted and summed in slot order, as llama.cpp adds its
// expert views.
#include <algorithm>
#include <vector>

#include "backends/cpu/epilogue.h"
#include "backends/cpu/indexing_util.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/quant_matmul.h"
#include "rlx/error.h"
#include "rlx/thread_pool.h"

namespace rlx::cpu {
namespace {

// One expert weight: `experts` blocks of `per` rows of K elements.
struct ExpertRows {
  QuantRows all;
  int64_t per = 0;

  QuantRows expert(int64_t e) const {
    QuantRows r = all;
    r.w = all.w + size_t(e * per) * all.rb;
    r.N = per;
    r.first_group = e * per / quant::kGroupRows;
    return r;
  }
};

ExpertRows expert_rows(const KernelCall& c, int slot, const std::string& scheme, int64_t K,
                       int64_t experts, bool regroup) {
  const Tensor& w = c.in[size_t(3 + slot)];
  ExpertRows r;
  r.all.type = quant::parse_type_name(scheme);
  r.all.rb = quant::row_size(r.all.type, K);
  RLX_CHECK(w.dtype() == DType::U8 && w.dims().size() == 2 && w.dims()[1] == int64_t(r.all.rb) &&
                w.dims()[0] % experts == 0,
            c.node.label(), ": moe_ffn: expert weight ", slot, " is ", w.dims().size(),
            "-d, not u8 rows of ", K, " ", scheme, " elements for ", experts, " experts");
  r.all.w = static_cast<const uint8_t*>(w.raw());
  r.all.N = w.dims()[0];
  r.all.K = K;
  r.all.owner = w.buffer();
  r.per = r.all.N / experts;
  // An expert's rows are whole groups of the regrouped weight only when per % 16 == 0.
  if (regroup && r.per % quant::kGroupRows == 0)
    r.all.groups = regrouped(c.pack, slot, r.all.type, r.all.w, r.all.rb, r.all.N, K);
  return r;
}

}  // namespace

void moe_ffn(const KernelCall& c) {
  const Tensor &x = c.in[0], &ids = c.in[1], &weights = c.in[2];
  const auto& a = c.node.attrs_as<MoeFfnAttrs>();
  RLX_CHECK(x.dtype() == DType::F32 && x.dims().size() == 2 && ids.dims().size() == 2 &&
                weights.dtype() == DType::F32 && weights.dims() == ids.dims(),
            c.node.label(), ": moe_ffn: expects x f32 [T, D], ids and weights [T, k]");
  const int64_t T = x.dims()[0], D = x.dims()[1], k = ids.dims()[1], E = a.experts;
  RLX_CHECK(ids.dims()[0] == T, c.node.label(), ": moe_ffn: ids has ", ids.dims()[0], " rows for ",
            T, " tokens");
  idx::check_index_tensor(c, ids);
  float* y = c.out.data<float>();
  if (T == 0) return;
  if (k == 0) {  // no expert: a zero FFN output
    std::fill_n(y, T * D, 0.f);
    return;
  }

  // Counting sort of the T * k (token, slot) pairs by expert.
  const int64_t P = T * k;
  std::vector<int64_t> start(size_t(E + 1), 0), order(static_cast<size_t>(P)),
      at(static_cast<size_t>(P));
  for (int64_t p = 0; p < P; ++p) {
    const int64_t e = idx::index_at(ids, p);
    RLX_CHECK(e >= 0 && e < E, c.node.label(), ": moe_ffn: token ", p / k, " slot ", p % k,
              " selects expert ", e, ", outside [0, ", E, ")");
    ++start[size_t(e + 1)];
  }
  for (int64_t e = 0; e < E; ++e) start[size_t(e + 1)] += start[size_t(e)];
  {
    std::vector<int64_t> fill(start.begin(), start.end() - 1);
    for (int64_t p = 0; p < P; ++p) {
      const int64_t slot = fill[size_t(idx::index_at(ids, p))]++;
      order[size_t(slot)] = p;
      at[size_t(p)] = slot;
    }
  }
  int64_t most = 0, fewest = P;
  for (int64_t e = 0; e < E; ++e) {
    const int64_t n = start[size_t(e + 1)] - start[size_t(e)];
    most = std::max(most, n);
    if (n > 0) fewest = std::min(fewest, n);
  }
  // Regrouped rows serve the experts with few tokens (always so in decode).
  const bool few = fewest < kGemmMinRows;
  const ExpertRows gate = expert_rows(c, 0, a.gate_scheme, D, E, few);
  const ExpertRows up = expert_rows(c, 1, a.up_scheme, D, E, few);
  const int64_t F = gate.per;
  const ExpertRows down = expert_rows(c, 2, a.down_scheme, F, E, few);
  RLX_CHECK(up.per == F && down.per == D, c.node.label(), ": moe_ffn: gate, up and down ",
            "disagree on the experts' sizes");

  const float* xs = x.data<float>();
  std::vector<float> xe(size_t(most * D)), g(size_t(most * F)), u(size_t(most * F)),
      out(size_t(P * D));
  const GemmEpilogue<float> act{.act = a.activation};
  for (int64_t e = 0; e < E; ++e) {
    const int64_t p0 = start[size_t(e)], n = start[size_t(e + 1)] - p0;
    if (n == 0) continue;
    for (int64_t i = 0; i < n; ++i)
      std::copy_n(xs + (order[size_t(p0 + i)] / k) * D, D, xe.data() + i * D);
    quant_matmul(c.ctx, gate.expert(e), xe.data(), n, nullptr, g.data());
    quant_matmul(c.ctx, up.expert(e), xe.data(), n, nullptr, u.data());
    apply_epilogue(act, g.data(), F, n, F, 0, 0);
    for (int64_t i = 0; i < n * F; ++i) g[size_t(i)] *= u[size_t(i)];
    quant_matmul(c.ctx, down.expert(e), g.data(), n, nullptr, out.data() + p0 * D);
  }
  const float* w = weights.data<float>();
  parallel_for(T, std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(1, k * D)),
               [&](int64_t b, int64_t end) {
                 for (int64_t t = b; t < end; ++t) {
                   float* yt = y + t * D;
                   for (int64_t j = 0; j < k; ++j) {
                     const float wj = w[t * k + j];
                     const float* o = out.data() + at[size_t(t * k + j)] * D;
                     if (j == 0)
                       for (int64_t i = 0; i < D; ++i) yt[i] = wj * o[i];
                     else
                       for (int64_t i = 0; i < D; ++i) yt[i] += wj * o[i];
                   }
                 }
               });
}

}  // namespace rlx::cpu
