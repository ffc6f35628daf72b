// Tensor: a dtype, dims, element strides and a byte offset into a shared
// Buffer. Buffers are owned (64-byte aligned), memory-mapped files, or
// borrowed memory (an arena slot). Views share the buffer.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "rlx/error.h"
#include "rlx/shape.h"

namespace rlx {

class Buffer {
 public:
  virtual ~Buffer() = default;
  std::byte* data() const { return data_; }
  size_t size() const { return size_; }

  // Headroom for growing a value in place (a KV cache appended token by
  // token): the bytes before `claimed` belong to the tensors viewing the
  // buffer, the rest to whoever claims them next. A buffer starts fully
  // claimed; its owner may hand out a tail with `release_tail`.
  void release_tail(size_t claimed) { claimed_.store(claimed); }
  // Extends the claim from `end` (where the caller's tensor ends) to
  // `new_end`; false when another view already claimed past `end` (the same
  // old tensor grown twice) or the buffer is too small. Never moves data.
  bool claim(size_t end, size_t new_end) {
    if (new_end > size_) return false;
    return claimed_.compare_exchange_strong(end, new_end);
  }

 protected:
  std::byte* data_ = nullptr;
  size_t size_ = 0;

 private:
  std::atomic<size_t> claimed_{SIZE_MAX};  // SIZE_MAX: all of it
};

// Heap memory aligned to 64 bytes, zero-initialized unless `zero` is false.
std::shared_ptr<Buffer> make_aligned_buffer(size_t bytes, bool zero = true);
// Uncleared owned memory for `bytes` with half as much again behind them,
// released as headroom (Buffer::release_tail) for Tensor::grown_in_place.
std::shared_ptr<Buffer> make_growable_buffer(size_t bytes);
// Memory not owned by the buffer; `keep_alive` (may be null) outlives it.
std::shared_ptr<Buffer> make_borrowed_buffer(void* data, size_t bytes,
                                             std::shared_ptr<void> keep_alive = nullptr);
// Maps a whole file read-only. Throws rlx::Error naming the path on failure.
std::shared_ptr<Buffer> map_file(const std::string& path);

class Tensor {
 public:
  Tensor() = default;
  // Owned, contiguous, zero-filled.
  Tensor(const Dims& dims, DType dtype);
  // View of `buf` at `offset` bytes; contiguous strides.
  Tensor(std::shared_ptr<Buffer> buf, size_t offset, const Dims& dims, DType dtype);

  static Tensor empty(const Dims& dims, DType dtype) { return Tensor(dims, dtype); }
  // Owned and contiguous but not cleared: for outputs a kernel fully writes.
  static Tensor uninitialized(const Dims& dims, DType dtype);
  template <typename T>
  static Tensor from_vector(const Dims& dims, const std::vector<T>& v, DType dtype);
  static Tensor scalar_f32(float v);

  bool defined() const { return buf_ != nullptr; }
  DType dtype() const { return dtype_; }
  const Dims& dims() const { return dims_; }
  const Dims& strides() const { return strides_; }
  int rank() const { return int(dims_.size()); }
  int64_t dim(int i) const { return dims_[normalize_axis(i, rank())]; }
  int64_t numel() const { return rlx::numel(dims_); }
  size_t nbytes() const { return size_t(numel()) * dtype_size(dtype_); }
  bool is_contiguous() const;
  Shape shape() const { return Shape(dims_, dtype_); }

  void* raw() const { return buf_ ? buf_->data() + offset_ : nullptr; }
  template <typename T>
  T* data() const {
    return static_cast<T*>(raw());
  }
  const std::shared_ptr<Buffer>& buffer() const { return buf_; }
  size_t offset() const { return offset_; }

  // Views (share memory).
  Tensor reshape(const Dims& dims) const;  // requires contiguous
  Tensor permute(const std::vector<int>& perm) const;
  Tensor strided_view(const Dims& dims, const Dims& strides, int64_t elem_offset) const;

  // New owned tensors.
  Tensor contiguous() const;  // returns *this when already contiguous
  // This tensor (contiguous, not empty) widened to `dims` inside its
  // buffer's headroom, which it claims (Buffer::claim): its own bytes stay as
  // they are, the ones after them are the caller's to write. Empty when the
  // buffer has no unclaimed room right after this tensor.
  std::optional<Tensor> grown_in_place(const Dims& dims) const;
  Tensor clone() const;
  Tensor to(DType t) const;  // any dtype to any dtype, element-wise cast

  // Element i (row-major logical index) converted to double; for tests and printing.
  double item_as_double(int64_t i) const;
  std::vector<float> to_f32_vector() const;

 private:
  std::shared_ptr<Buffer> buf_;
  size_t offset_ = 0;
  Dims dims_;
  Dims strides_;
  DType dtype_ = DType::F32;
};

Dims contiguous_strides(const Dims& dims);
// Casts n contiguous elements between any two dtypes (float->int truncates,
// like PyTorch; ->bool is "!= 0").
void cast_elements(const void* src, DType st, void* dst, DType dt, int64_t n);

template <typename T>
Tensor Tensor::from_vector(const Dims& dims, const std::vector<T>& v, DType dtype) {
  Tensor t(dims, dtype);
  RLX_CHECK(int64_t(v.size()) == t.numel(), "from_vector: ", v.size(), " values for dims ",
            dims_str(dims));
  cast_elements(v.data(),
                std::is_same_v<T, float>     ? DType::F32
                : std::is_same_v<T, double>  ? DType::F64
                : std::is_same_v<T, int64_t> ? DType::I64
                : std::is_same_v<T, int32_t> ? DType::I32
                : std::is_same_v<T, uint8_t> ? DType::U8
                                             : DType::Bool,
                t.raw(), dtype, t.numel());
  return t;
}

}  // namespace rlx
