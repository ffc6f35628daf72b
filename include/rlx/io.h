// Tensor file formats: safetensors (mmap, zero-copy views) and .npy.
#pragma once
#include <map>
#include <string>

#include "rlx/tensor.h"

namespace rlx {

using TensorMap = std::map<std::string, Tensor>;

// Maps the file and returns views into it (the mapping lives as long as any
// view). The header is validated against the file size before anything is
// allocated; every problem is an rlx::Error naming the file and tensor.
TensorMap read_safetensors(const std::string& path);
// Same, from memory the caller keeps alive (used by tests and fuzzing).
TensorMap read_safetensors_bytes(const void* data, size_t size, const std::string& source_name);
// Writes tensors (any layout; non-contiguous views are packed) and optional
// string metadata. Writes to a temporary file and renames, so a failed write
// never leaves a half file.
void write_safetensors(const std::string& path, const TensorMap& tensors,
                       const std::map<std::string, std::string>& metadata = {});

Tensor read_npy(const std::string& path);
void write_npy(const std::string& path, const Tensor& t);

}  // namespace rlx
