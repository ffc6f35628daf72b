// Tensor file formats: safetensors (mmap, zero-copy views) and .npy.
#pragma once
#include <map>
#include <string>

#include "rlx/tensor.h"

namespace rlx {

using TensorMap = std::map<std::string, Tensor>;

// Maps the file and returns views into it (the mapping lives as long as any
// view); a tensor whose data is misaligned for its dtype, or a bool tensor
// with bytes other than 0/1, is copied instead. The header is validated
// against the file size before anything is allocated, following the format's
// rules (no duplicate keys, string->string __metadata__, tensors tiling the
// data section without overlaps or holes); every problem is an rlx::Error
// naming the file and tensor.
TensorMap read_safetensors(const std::string& path);
// Same, from memory the caller keeps alive (used by tests and fuzzing).
TensorMap read_safetensors_bytes(const void* data, size_t size, const std::string& source_name);
// Writes tensors (any layout; non-contiguous views are packed) and optional
// string metadata. Writes to a temporary file and renames, so a failed write
// never leaves a half file.
void write_safetensors(const std::string& path, const TensorMap& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// .npy: reads versions 1.0-3.0, dtypes f2 f4 f8 i1 i2 i4 i8 u1 b1 in either
// byte order and C or Fortran order (returned as an owned C-order tensor).
// Writes version 1.0 (2.0 when the header needs it); bf16 has no NumPy dtype
// and is an error.
Tensor read_npy(const std::string& path);
// Same, from memory (tests and fuzzing); errors name `source_name`.
Tensor read_npy_bytes(const void* data, size_t size, const std::string& source_name);
void write_npy(const std::string& path, const Tensor& t);

}  // namespace rlx
