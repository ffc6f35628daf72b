// Read-only file mappings whose resident pages rlx may hand back to the OS.
// A weight that a kernel has copied into its own layout (sgemm panels,
// Winograd transforms) or that compile-time folding replaced is not read
// again, yet its mapped pages stay in the process's resident set: BERT-base
// held its 340 MB of weights twice. Dropping them is always safe for a
// PROT_READ, MAP_PRIVATE file mapping (nothing in it was ever written): a
// later read faults the same bytes back from the page cache or the file.
#pragma once
#include <cstddef>

namespace rlx {

// Called by whoever maps a file read-only (map_file, the GGUF reader).
void register_file_mapping(const void* data, size_t bytes);
void unregister_file_mapping(const void* data);

// Advises the OS to drop the pages wholly inside [data, data + bytes) when
// the range lies inside one registered mapping; anything else (heap memory,
// partial pages shared with a neighbour) is left alone. Returns the bytes advised.
size_t release_file_pages(const void* data, size_t bytes);

}  // namespace rlx
