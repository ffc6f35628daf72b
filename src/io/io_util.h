// Helpers shared by the tensor file readers and writers: overflow-safe element
// counts for untrusted shapes, and atomic (temp file + rename) writes.
#pragma once
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "rlx/error.h"
#include "rlx/tensor.h"

namespace rlx::io {

// No tensor we read may have more than this many elements, nor a product of
// its non-zero dims above it (so later numel()/stride math cannot overflow,
// even for empty tensors), nor more dims than NumPy allows.
constexpr uint64_t kMaxElements = uint64_t(1) << 60;
constexpr size_t kMaxRank = 64;

// Element count of an untrusted shape; returns false (and leaves `numel`
// unset) when the shape is too large to be real.
inline bool checked_numel(const std::vector<uint64_t>& dims, uint64_t& numel) {
  if (dims.size() > kMaxRank) return false;
  uint64_t nonzero = 1;
  bool empty = false;
  for (uint64_t d : dims) {
    if (d == 0) {
      empty = true;
      continue;
    }
    if (d > kMaxElements || nonzero > kMaxElements / d) return false;
    nonzero *= d;
  }
  numel = empty ? 0 : nonzero;
  return true;
}

// Writes `pieces` to path via a temporary file in the same directory, so a
// failed write never leaves a half-written file behind.
inline void write_file_atomic(const std::string& path,
                              const std::vector<std::string_view>& pieces) {
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  RLX_CHECK(f, path, ": cannot open for writing: ", std::strerror(errno));
  bool ok = true;
  for (std::string_view p : pieces)
    ok = ok && (p.empty() || std::fwrite(p.data(), 1, p.size(), f) == p.size());
  ok = std::fclose(f) == 0 && ok;
  std::error_code ec;
  if (ok) std::filesystem::rename(tmp, path, ec);
  if (!ok || ec) {
    std::remove(tmp.c_str());
    throw make_error(path, ": write failed", ec ? ": " + ec.message() : std::string());
  }
}

inline std::string_view bytes_of(const Tensor& contiguous) {
  return {static_cast<const char*>(contiguous.raw()), contiguous.nbytes()};
}

}  // namespace rlx::io
