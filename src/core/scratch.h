// A thread's work buffer for kernels: it only grows, and never initializes.
// std::vector::resize value-initializes every element it grows by, even
// within its capacity, so a thread_local vector shared by kernels of
// different sizes was zero-filled again by the larger one on every run
// (resnet18 at 1 thread: ~2.6 MB of Winograd buffers before its first 56x56
// conv, grown back from the 7x7 convs' size).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>

namespace rlx {

template <class T>
class ScratchBuffer {
  static_assert(std::is_trivially_default_constructible_v<T> &&
                std::is_trivially_destructible_v<T>);
  static constexpr size_t kAlign = 64;

 public:
  // n elements at a 64-byte boundary, holding whatever the last user left.
  T* get(size_t n) {
    if (n > capacity_ || !storage_) {
      storage_.reset(new unsigned char[n * sizeof(T) + kAlign]);  // uninitialized
      capacity_ = n;
    }
    const auto at = reinterpret_cast<uintptr_t>(storage_.get());
    return reinterpret_cast<T*>((at + kAlign - 1) & ~uintptr_t(kAlign - 1));
  }

 private:
  std::unique_ptr<unsigned char[]> storage_;
  size_t capacity_ = 0;
};

}  // namespace rlx
