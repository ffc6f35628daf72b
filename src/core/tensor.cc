#include "rlx/tensor.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "core/file_pages.h"
#include "rlx/checked.h"
#include "rlx/error.h"

namespace rlx {
namespace {

class AlignedBuffer : public Buffer {
 public:
  AlignedBuffer(size_t bytes, bool zero) {
    size_ = bytes;
    size_t rounded = (bytes + 63) / 64 * 64;
    if (rounded == 0) rounded = 64;
    data_ = static_cast<std::byte*>(std::aligned_alloc(64, rounded));
    if (!data_) throw make_error("out of memory allocating ", bytes, " bytes");
    if (zero) std::memset(data_, 0, rounded);
  }
  ~AlignedBuffer() override { std::free(data_); }
};

class BorrowedBuffer : public Buffer {
 public:
  BorrowedBuffer(void* d, size_t n, std::shared_ptr<void> keep) : keep_(std::move(keep)) {
    data_ = static_cast<std::byte*>(d);
    size_ = n;
  }

 private:
  std::shared_ptr<void> keep_;
};

class MappedBuffer : public Buffer {
 public:
  explicit MappedBuffer(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw make_error(path, ": cannot open: ", std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      throw make_error(path, ": not a regular file");
    }
    size_ = size_t(st.st_size);
    if (size_ > 0) {
      void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) {
        ::close(fd);
        throw make_error(path, ": mmap failed: ", std::strerror(errno));
      }
      data_ = static_cast<std::byte*>(p);
      register_file_mapping(data_, size_);
    }
    ::close(fd);
  }
  ~MappedBuffer() override {
    if (!data_) return;
    unregister_file_mapping(data_);
    ::munmap(data_, size_);
  }
};

template <typename F>
void visit_dtype(DType t, F&& f) {
  switch (t) {
#define X(e, n, ty, b)                   \
  case DType::e:                         \
    f.template operator()<ty>(DType::e); \
    break;
    RLX_DTYPES(X)
#undef X
  }
}

template <typename T>
double load_as_double(const T* p, DType t, int64_t i) {
  if (t == DType::F16) return f16_to_f32(uint16_t(p[i]));
  if (t == DType::BF16) return bf16_to_f32(uint16_t(p[i]));
  return double(p[i]);
}

template <typename D>
D store_from_double(double v, DType dt) {
  if (dt == DType::F16) return D(f32_to_f16(float(v)));
  if (dt == DType::BF16) return D(f32_to_bf16(float(v)));
  if constexpr (std::is_same_v<D, bool>) return v != 0;
  if constexpr (std::is_integral_v<D>) {
    if (std::isnan(v)) return D(0);
    // PyTorch truncates toward zero, and values past int64 (inf included) give
    // what x86's cvttsd2si gives PyTorch there, INT64_MIN (wrapped to D), as
    // the C++ cast would be undefined.
    if (!(std::fabs(v) < 0x1p63)) return D(std::numeric_limits<int64_t>::min());
    return D(int64_t(std::trunc(v)));
  }
  return D(v);
}

}  // namespace

std::shared_ptr<Buffer> make_aligned_buffer(size_t bytes, bool zero) {
  return std::make_shared<AlignedBuffer>(bytes, zero);
}
std::shared_ptr<Buffer> make_growable_buffer(size_t bytes) {
  auto buffer = make_aligned_buffer(std::max<size_t>(bytes + bytes / 2, 1), false);
  buffer->release_tail(bytes);
  return buffer;
}
std::shared_ptr<Buffer> make_borrowed_buffer(void* data, size_t bytes,
                                             std::shared_ptr<void> keep_alive) {
  return std::make_shared<BorrowedBuffer>(data, bytes, std::move(keep_alive));
}
std::shared_ptr<Buffer> map_file(const std::string& path) {
  return std::make_shared<MappedBuffer>(path);
}

Dims contiguous_strides(const Dims& dims) {
  check_dims(dims, "tensor");  // runs before any constructor allocates: no stride can overflow
  Dims s(dims.size());
  int64_t acc = 1;
  for (int i = int(dims.size()) - 1; i >= 0; --i) {
    s[i] = acc;
    acc *= dims[i];
  }
  return s;
}

Tensor::Tensor(const Dims& dims, DType dtype)
    : offset_(0), dims_(dims), strides_(contiguous_strides(dims)), dtype_(dtype) {
  buf_ = make_aligned_buffer(checked_nbytes(dims, dtype, "tensor"));
}

Tensor::Tensor(std::shared_ptr<Buffer> buf, size_t offset, const Dims& dims, DType dtype)
    : buf_(std::move(buf)),
      offset_(offset),
      dims_(dims),
      strides_(contiguous_strides(dims)),
      dtype_(dtype) {
  const size_t bytes = checked_nbytes(dims, dtype, "tensor view");
  RLX_CHECK(offset <= buf_->size() && bytes <= buf_->size() - offset, "tensor view ",
            dims_str(dims), " ", dtype_name(dtype), " at offset ", offset, " overruns a buffer of ",
            buf_->size(), " bytes");
}

Tensor Tensor::uninitialized(const Dims& dims, DType dtype) {
  auto buf = make_aligned_buffer(checked_nbytes(dims, dtype, "tensor"), false);
  return Tensor(std::move(buf), 0, dims, dtype);
}

Tensor Tensor::scalar_f32(float v) {
  Tensor t({}, DType::F32);
  *t.data<float>() = v;
  return t;
}

bool Tensor::is_contiguous() const {
  int64_t acc = 1;
  for (int i = rank() - 1; i >= 0; --i) {
    if (dims_[i] != 1 && strides_[i] != acc) return false;
    acc *= dims_[i];
  }
  return true;
}

Tensor Tensor::reshape(const Dims& dims) const {
  RLX_CHECK(rlx::numel(dims) == numel(), "cannot reshape ", dims_str(dims_), " to ",
            dims_str(dims));
  Tensor t = is_contiguous() ? *this : contiguous();
  t.dims_ = dims;
  t.strides_ = contiguous_strides(dims);
  return t;
}

Tensor Tensor::permute(const std::vector<int>& perm) const {
  RLX_CHECK(int(perm.size()) == rank(), "permute: ", perm.size(), " axes for rank ", rank());
  Tensor t = *this;
  for (int i = 0; i < rank(); ++i) {
    int p = normalize_axis(perm[i], rank());
    t.dims_[i] = dims_[p];
    t.strides_[i] = strides_[p];
  }
  return t;
}

Tensor Tensor::strided_view(const Dims& dims, const Dims& strides, int64_t elem_offset) const {
  Tensor t = *this;
  t.dims_ = dims;
  t.strides_ = strides;
  t.offset_ = offset_ + size_t(elem_offset) * dtype_size(dtype_);
  return t;
}

std::optional<Tensor> Tensor::grown_in_place(const Dims& dims) const {
  if (!defined() || !is_contiguous() || nbytes() == 0) return std::nullopt;
  const size_t end = offset_ + nbytes();
  const size_t grown = offset_ + size_t(rlx::numel(dims)) * dtype_size(dtype_);
  if (grown < end || !buf_->claim(end, grown)) return std::nullopt;
  return Tensor(buf_, offset_, dims, dtype_);
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  Tensor out(dims_, dtype_);
  const size_t es = dtype_size(dtype_);
  const int64_t n = numel();
  if (n == 0) return out;
  if (is_contiguous()) {
    std::memcpy(out.raw(), raw(), size_t(n) * es);
    return out;
  }
  // Walk the strided source with an odometer over all but the last dim.
  const int r = rank();
  Dims idx(r, 0);
  const auto* src = static_cast<const std::byte*>(raw());
  auto* dst = static_cast<std::byte*>(out.raw());
  const int64_t inner = r ? dims_[r - 1] : 1;
  const int64_t inner_stride = r ? strides_[r - 1] : 1;
  for (int64_t done = 0; done < n; done += inner) {
    int64_t off = 0;
    for (int i = 0; i < r - 1; ++i) off += idx[i] * strides_[i];
    for (int64_t j = 0; j < inner; ++j)
      std::memcpy(dst + (done + j) * es, src + (off + j * inner_stride) * int64_t(es), es);
    for (int i = r - 2; i >= 0; --i) {
      if (++idx[i] < dims_[i]) break;
      idx[i] = 0;
    }
  }
  return out;
}

void cast_elements(const void* src, DType st, void* dst, DType dt, int64_t n) {
  if (n <= 0) return;  // empty tensors may have null data
  if (st == dt) {
    std::memcpy(dst, src, size_t(n) * dtype_size(st));
    return;
  }
  visit_dtype(st, [&]<typename S>(DType) {
    const S* s = static_cast<const S*>(src);
    visit_dtype(dt, [&]<typename D>(DType) {
      D* d = static_cast<D*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = store_from_double<D>(load_as_double(s, st, i), dt);
    });
  });
}

Tensor Tensor::to(DType t) const {
  Tensor src = contiguous();
  Tensor out(dims_, t);
  cast_elements(src.raw(), dtype_, out.raw(), t, numel());
  return out;
}

double Tensor::item_as_double(int64_t i) const {
  RLX_CHECK(i >= 0 && i < numel(), "element ", i, " out of range for ", dims_str(dims_));
  int64_t off = 0;
  for (int d = rank() - 1; d >= 0; --d) {
    off += (i % dims_[d]) * strides_[d];
    i /= dims_[d];
  }
  double v = 0;
  visit_dtype(dtype_, [&]<typename T>(DType) {
    v = load_as_double(static_cast<const T*>(raw()), dtype_, off);
  });
  return v;
}

std::vector<float> Tensor::to_f32_vector() const {
  Tensor f = to(DType::F32);
  const float* p = f.data<float>();
  return std::vector<float>(p, p + f.numel());
}

}  // namespace rlx
