// GGUF tensors as rlx tensors: f32 in PyTorch dim order.
#include <cstdint>
#include <cstring>

#include "rlx/error.h"
#include "rlx/gguf.h"

namespace rlx::gguf {

Tensor to_f32(const gguf::File& f, const gguf::TensorInfo& t) {
  Dims dims(t.ne.rbegin(), t.ne.rend());
  Tensor out = Tensor::uninitialized(dims, DType::F32);
  if (t.type == quant::GgmlType::F32) {
    // Zero-copy when the floats are aligned; a file with general.alignment
    // 1 or 2 may place them anywhere (found by fuzz_gguf), and they are copied.
    if (reinterpret_cast<uintptr_t>(t.data) % alignof(float) == 0)
      return Tensor(make_borrowed_buffer(const_cast<uint8_t*>(t.data), t.nbytes,
                                         std::const_pointer_cast<void>(f.mapping)),
                    0, dims, DType::F32);
    std::memcpy(out.raw(), t.data, size_t(t.nbytes));
    return out;
  }
  try {
    quant::dequantize(t.type, t.data, out.data<float>(), t.numel());
  } catch (const Error& e) {
    throw make_error(f.source, ": tensor '", t.name, "': ", e.what());
  }
  return out;
}

}  // namespace rlx::gguf
