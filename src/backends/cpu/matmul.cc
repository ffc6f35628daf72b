// Batched matmul with NumPy semantics: 1-d operands get a unit dim (removed
// from the result), batch dims broadcast. Floats go to gemm (see gemm.h for
// the kernels and the threading policy); integers use a plain loop with wrap-around
// arithmetic like PyTorch.
#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "backends/cpu/activation.h"
#include "backends/cpu/gemm.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/weight_pack.h"
#include "rlx/error.h"
#include "rlx/thread_pool.h"

namespace rlx::cpu {
namespace {

struct MatmulPlan {
  int64_t M = 0, N = 0, K = 0;
  bool ta = false, tb = false;        // operands stored [K,M] / [N,K] (transpose_a/b)
  int64_t a_batch = 1, b_batch = 1;   // numel of each operand's own batch dims
  std::vector<int64_t> a_off, b_off;  // per output batch: element offsets into a, b
};

MatmulPlan make_matmul_plan(const KernelCall& c) {
  const Tensor &a = c.in[0], &b = c.in[1];
  const std::string where =
      c.node.label() + ": matmul " + dims_str(a.dims()) + " @ " + dims_str(b.dims());
  RLX_CHECK(a.dtype() == b.dtype(), where, ": dtypes differ (", dtype_name(a.dtype()), " vs ",
            dtype_name(b.dtype()), ")");
  RLX_CHECK(a.rank() >= 1 && b.rank() >= 1, where, ": scalars are not allowed");
  Dims ad = a.dims(), bd = b.dims();
  if (ad.size() == 1) ad.insert(ad.begin(), 1);
  if (bd.size() == 1) bd.push_back(1);
  MatmulPlan p;
  const auto& t = c.node.attrs_as<MatMulAttrs>();
  p.ta = t.transpose_a;
  p.tb = t.transpose_b;
  RLX_CHECK((!p.ta || a.rank() >= 2) && (!p.tb || b.rank() >= 2), where,
            ": transpose needs rank >= 2");
  // The logical (transposed) dims; the data keeps its stored layout.
  if (p.ta) std::swap(ad[ad.size() - 1], ad[ad.size() - 2]);
  if (p.tb) std::swap(bd[bd.size() - 1], bd[bd.size() - 2]);
  p.M = ad[ad.size() - 2];
  p.K = ad.back();
  p.N = bd.back();
  RLX_CHECK(bd[bd.size() - 2] == p.K, where, ": inner dims differ");
  // Broadcast batch dims; strides are in matrices, 0 where broadcast.
  const size_t ra = ad.size() - 2, rb = bd.size() - 2, r = std::max(ra, rb);
  Dims batch(r), sa(r, 0), sb(r, 0);
  int64_t stride_a = 1, stride_b = 1;
  for (size_t i = r; i-- > 0;) {
    int64_t da = i >= r - ra ? ad[i - (r - ra)] : 1, db = i >= r - rb ? bd[i - (r - rb)] : 1;
    RLX_CHECK(da == db || da == 1 || db == 1, where, ": batch dims do not broadcast");
    batch[i] = std::max(da, db);
    if (da == 0 || db == 0) batch[i] = 0;
    if (da != 1) sa[i] = stride_a;
    if (db != 1) sb[i] = stride_b;
    stride_a *= da;
    stride_b *= db;
  }
  p.a_batch = stride_a;
  p.b_batch = stride_b;
  const int64_t nb = numel(batch);
  RLX_CHECK(c.out.numel() == nb * p.M * p.N, where, ": output ", dims_str(c.out.dims()),
            " does not match");
  p.a_off.resize(size_t(nb));
  p.b_off.resize(size_t(nb));
  std::vector<int64_t> idx(r, 0);
  for (int64_t t = 0; t < nb; ++t) {
    int64_t oa = 0, ob = 0;
    for (size_t i = 0; i < r; ++i) {
      oa += idx[i] * sa[i];
      ob += idx[i] * sb[i];
    }
    p.a_off[size_t(t)] = oa * p.M * p.K;
    p.b_off[size_t(t)] = ob * p.K * p.N;
    for (size_t i = r; i-- > 0;) {  // odometer increment
      if (++idx[i] < batch[i]) break;
      idx[i] = 0;
    }
  }
  return p;
}

// `epi` (bias over columns, fused activation) runs on each block as it is computed.
// bf16: the constant b is packed for sgemm_kernel_bf16() (MatmulPrecision::bf16).
template <typename T>
void matmul_float(const MatmulPlan& p, const T* a, const T* b, T* out, const GemmEpilogue<T>& epi,
                  WeightPack* pack, bool bf16) {
  const int64_t nb = int64_t(p.a_off.size()), M = p.M, N = p.N, K = p.K;
  if (nb == 0 || M == 0 || N == 0) return;
  const int64_t lda = p.ta ? M : K, ldb = p.tb ? K : N;
  // b shared by every batch and a not broadcast (nor transposed): one tall GEMM.
  if (p.b_batch == 1 && p.a_batch == nb && !p.ta) {
    if constexpr (std::is_same_v<T, float>) {
      // A constant b (a Linear weight) is packed once per compiled graph.
      GemmPacked packed;
      if (pack && gemm_uses_packed_operands(N))
        packed.b = pack->get(b, size_t(K * N), [&] {
          return pack_b_operand(p.tb, b, ldb, K, N, bf16 ? sgemm_kernel_bf16() : nullptr);
        });
      gemm(false, p.tb, nb * M, N, K, T(1), a, lda, b, ldb, T(0), out, N, epi, packed);
    } else {
      gemm(false, p.tb, nb * M, N, K, T(1), a, lda, b, ldb, T(0), out, N, epi);
    }
    return;
  }
  // Product t's epilogue: a residual (laid out as the output) from its own block.
  auto epi_of = [&](int64_t t) {
    GemmEpilogue<T> e = epi;
    if (e.residual) e.residual += t * M * N;
    return e;
  };
  const int64_t macs = M * N * std::max<int64_t>(K, 1);
  if (nb >= num_threads() || macs < kGemmSplitMacs) {
    // Many (or small) products: threads take whole batches.
    int64_t grain = std::max<int64_t>(1, kGemmSplitMacs / macs);
    parallel_for(nb, grain, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t)
        gemm_serial(p.ta, p.tb, M, N, K, T(1), a + p.a_off[size_t(t)], lda, b + p.b_off[size_t(t)],
                    ldb, T(0), out + t * M * N, N, epi_of(t));
    });
  } else {
    for (int64_t t = 0; t < nb; ++t)
      gemm(p.ta, p.tb, M, N, K, T(1), a + p.a_off[size_t(t)], lda, b + p.b_off[size_t(t)], ldb,
           T(0), out + t * M * N, N, epi_of(t));
  }
}

// Integer matmul: accumulate in uint64 (two's-complement wrap, no UB) and
// truncate, which equals PyTorch's wrapping arithmetic in the narrow type.
template <typename T>
void matmul_int(const MatmulPlan& p, const T* a, const T* b, const T* bias, T* out) {
  const int64_t nb = int64_t(p.a_off.size()), M = p.M, N = p.N, K = p.K;
  const int64_t rows = nb * M;
  int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, N * K));
  parallel_for(rows, grain, [&](int64_t r0, int64_t r1) {
    std::vector<uint64_t> acc(static_cast<size_t>(N));
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t t = r / M, i = r % M;
      const T* am = a + p.a_off[size_t(t)];
      const T* bm = b + p.b_off[size_t(t)];
      // Element (row, col) of a stored operand, transposed or not.
      const int64_t a_row = p.ta ? 1 : K, a_col = p.ta ? M : 1;
      const int64_t b_row = p.tb ? 1 : N, b_col = p.tb ? K : 1;
      std::fill(acc.begin(), acc.end(), 0);
      for (int64_t k = 0; k < K; ++k) {
        const uint64_t av = uint64_t(int64_t(am[i * a_row + k * a_col]));
        const T* br = bm + k * b_row;
        for (int64_t j = 0; j < N; ++j) acc[size_t(j)] += av * uint64_t(int64_t(br[j * b_col]));
      }
      T* o = out + r * N;
      for (int64_t j = 0; j < N; ++j)
        o[j] = T(acc[size_t(j)] + (bias ? uint64_t(int64_t(bias[j])) : 0));
    }
  });
}

}  // namespace

void matmul(const KernelCall& c) {
  const MatmulPlan p = make_matmul_plan(c);
  const Tensor &a = c.in[0], &b = c.in[1];
  RLX_CHECK(c.out.dtype() == a.dtype(), c.node.label(), ": matmul output dtype ",
            dtype_name(c.out.dtype()), " differs from inputs ", dtype_name(a.dtype()));
  const auto& attrs = c.node.attrs_as<MatMulAttrs>();
  const Tensor* bias = matmul_has_bias(attrs.residual, c.in.size()) ? &c.in[2] : nullptr;
  const Tensor* res = attrs.residual ? &c.in.back() : nullptr;
  RLX_CHECK(!res || (res->dims() == c.out.dims() && res->dtype() == c.out.dtype()), c.node.label(),
            ": matmul residual ", res ? res->shape().str() : "", " does not match the output ",
            c.out.shape().str());
  RLX_CHECK(!bias || (bias->dtype() == a.dtype() && bias->numel() == p.N), c.node.label(),
            ": matmul bias ", bias ? bias->shape().str() : "", " is not [", p.N, "]");
  const Epilogue act = attrs.activation;
  auto floats = [&]<typename T>() {
    // ggml's GELU-tanh goes through an f16 table: applied after the product.
    const bool ggml_gelu =
        std::is_same_v<T, float> && c.ctx.ggml_numerics && act == Epilogue::gelu_tanh;
    GemmEpilogue<T> epi{ggml_gelu ? Epilogue::none : act, bias ? bias->data<T>() : nullptr, false};
    if (res) {
      epi.residual = res->data<T>();
      epi.residual_ld = p.N;
    }
    matmul_float(p, a.data<T>(), b.data<T>(), c.out.data<T>(), epi, c.pack, c.ctx.bf16_matmul);
    if constexpr (std::is_same_v<T, float>)
      if (ggml_gelu) {
        float* y = c.out.data<float>();
        parallel_for(c.out.numel(), 4096, [&](int64_t b0, int64_t e) {
          for (int64_t i = b0; i < e; ++i) y[i] = gelu_tanh_ggml(y[i]);
        });
      }
  };
  auto ints = [&]<typename T>() {
    RLX_CHECK(act == Epilogue::none && !res, c.node.label(),
              ": a fused activation or residual needs floats");
    matmul_int(p, a.data<T>(), b.data<T>(), bias ? bias->data<T>() : nullptr, c.out.data<T>());
  };
  switch (a.dtype()) {
    case DType::F32:
      return floats.operator()<float>();
    case DType::F64:
      return floats.operator()<double>();
    case DType::I8:
      return ints.operator()<int8_t>();
    case DType::I16:
      return ints.operator()<int16_t>();
    case DType::I32:
      return ints.operator()<int32_t>();
    case DType::I64:
      return ints.operator()<int64_t>();
    case DType::U8:
      return ints.operator()<uint8_t>();
    default:
      throw make_error(c.node.label(), ": matmul does not support dtype ", dtype_name(a.dtype()));
  }
}

}  // namespace rlx::cpu
