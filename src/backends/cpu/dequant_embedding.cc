// Embedding lookup on a table of ggml quant blocks: only the selected rows are
// dequantized, so a quantized vocabulary never becomes f32 as a whole.
#include "backends/cpu/indexing_util.h"
#include "backends/cpu/kernels.h"
#include "rlx/quant.h"
#include "rlx/thread_pool.h"

namespace rlx::cpu {

void dequant_embedding(const KernelCall& c) {
  const Tensor &table = c.in[0], &ids = c.in[1];
  idx::check_index_tensor(c, ids);
  const auto& a = c.node.attrs_as<QuantAttrs>();
  const quant::TypeTraits& tr = quant::traits(quant::parse_type_name(a.scheme));
  const int64_t k = a.k;
  const int64_t rows = table.dims()[0], row_bytes = table.dims()[1];
  RLX_CHECK(table.dtype() == DType::U8 && int64_t(quant::row_size(tr.type, k)) == row_bytes,
            c.node.label(), ": table ", table.shape().str(), " does not hold rows of ", k, " ",
            tr.name, " elements");
  const auto* src = static_cast<const uint8_t*>(table.raw());
  float* dst = c.out.data<float>();
  parallel_for(ids.numel(), idx::grain_for(k), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      int64_t v = idx::index_at(ids, i);
      RLX_CHECK(v >= 0 && v < rows, c.node.label(), ": id ", v,
                " is out of range for an embedding table of ", rows, " rows");
      tr.dequantize_row(src + v * row_bytes, dst + i * k, k);
    }
  });
}

}  // namespace rlx::cpu
