// Memory for a buffer that kernels stream from end to end on every step
// (decode weights): on 2 MiB boundaries and advised as transparent huge
// pages when large. With 4 KiB pages each page costs a fault on first use
// and a TLB miss after, and the hardware prefetcher stops at every page
// boundary: 1B q4_K decode went 67 -> 85 tok/s, 1B f32 7.5 -> 11.9 (2
// threads, Zen 5) on huge pages.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

namespace rlx {

struct FreeBytes {
  void operator()(uint8_t* p) const { std::free(p); }
};
using HugeBuffer = std::unique_ptr<uint8_t, FreeBytes>;

// Buffers from this size up are made of huge pages. Smaller ones stay on 64
// bytes: rounding each up to 2 MiB made the 100M model's decode slower (562
// -> 530 tok/s, q4_0), its many small weights then sharing fewer cache sets.
inline constexpr size_t kHugeBufferMin = size_t(4) << 20;

// `bytes` of uninitialized memory (at least one byte's worth); throws
// rlx::Error when the allocation fails.
HugeBuffer alloc_huge(size_t bytes);

}  // namespace rlx
