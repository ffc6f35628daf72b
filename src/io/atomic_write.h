// Atomic outputs: a file or a directory tree is written under a temporary
// name beside its destination and renamed into place only once complete, so
// an error midway (disk full, a file-size limit, a bad name) never leaves a
// truncated safetensors, npy, GGUF, graph or .mlpackage behind, and never
// destroys the previous one.
#pragma once
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rlx::io {

// Writes the concatenation of `pieces` to `path`.
void write_file_atomic(const std::string& path, const std::vector<std::string_view>& pieces);

// Writes `files` (paths relative to `dir`, subdirectories created as needed)
// as the directory `dir`, replacing any existing `dir` only after every file
// is written.
void write_dir_atomic(const std::string& dir,
                      const std::vector<std::pair<std::string, std::string_view>>& files);

}  // namespace rlx::io
