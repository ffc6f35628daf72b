// GGUF tensors as rlx tensors: f32 in PyTorch dim order.
#include "rlx/error.h"
#include "rlx/gguf.h"

namespace rlx::gguf {

Tensor to_f32(const gguf::File& f, const gguf::TensorInfo& t) {
  Dims dims(t.ne.rbegin(), t.ne.rend());
  if (t.type == quant::GgmlType::F32)
    return Tensor(make_borrowed_buffer(const_cast<uint8_t*>(t.data), t.nbytes,
                                       std::const_pointer_cast<void>(f.mapping)),
                  0, dims, DType::F32);
  Tensor out = Tensor::uninitialized(dims, DType::F32);
  try {
    quant::dequantize(t.type, t.data, out.data<float>(), t.numel());
  } catch (const Error& e) {
    throw make_error(f.source, ": tensor '", t.name, "': ", e.what());
  }
  return out;
}

}  // namespace rlx::gguf
