#include "core/file_pages.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <map>
#include <mutex>

namespace rlx {
namespace {

struct Mappings {
  std::mutex mu;
  std::map<uintptr_t, uintptr_t> ends;  // start -> end of each registered mapping
};

Mappings& mappings() {
  static Mappings m;
  return m;
}

}  // namespace

void register_file_mapping(const void* data, size_t bytes) {
  if (!data || bytes == 0) return;
  Mappings& m = mappings();
  std::lock_guard lock(m.mu);
  m.ends[uintptr_t(data)] = uintptr_t(data) + bytes;
}

void unregister_file_mapping(const void* data) {
  Mappings& m = mappings();
  std::lock_guard lock(m.mu);
  m.ends.erase(uintptr_t(data));
}

size_t release_file_pages(const void* data, size_t bytes) {
  const uintptr_t begin = uintptr_t(data), end = begin + bytes;
  if (!data || end <= begin) return 0;
  static const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
  const uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;
  if (last <= first) return 0;
  Mappings& m = mappings();
  // Held across madvise: the mapping cannot be unmapped (and the range reused) meanwhile.
  std::lock_guard lock(m.mu);
  auto it = m.ends.upper_bound(begin);
  if (it == m.ends.begin() || (--it)->second < end) return 0;
  return ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED) == 0
             ? size_t(last - first)
             : 0;
}

}  // namespace rlx
