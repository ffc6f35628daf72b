// Helpers for the file-format tests: scratch directories, running a Python
// snippet (numpy/torch write reference files at test time), raw file access,
// deterministic reference values, and the byte mutator of the mini-fuzz.
#pragma once
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "rlx/rlx.h"

namespace rlx::testing {

// A fresh directory under the system temp dir, removed on destruction.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  std::string path(const std::string& file) const { return (dir_ / file).string(); }
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
};

// Runs `code` with /usr/bin/python3 (cwd = `dir`); throws rlx::Error with
// Python's stderr on failure.
void run_python(const std::string& code, const std::filesystem::path& dir);

std::string read_file_bytes(const std::string& path);
void write_file_bytes(const std::string& path, const std::string& bytes);

// Value i of the reference arrays both Python and C++ build (exact in every
// dtype, f16 included): floats (i - 7) / 4, ints scaled per width, bools i % 3 == 0.
double reference_value(DType t, int64_t i);
Tensor reference_tensor(const Dims& dims, DType t);
// The same formula as a Python expression over `i` (a numpy arange) for dtype `t`.
std::string python_reference(DType t);
// numpy's name of a dtype ("float32", "bool", ...).
const char* numpy_name(DType t);

// One random structural mutation of a file (bit flips, interesting bytes,
// truncation, insertion, deletion, and rewriting decimal numbers in the first
// `text_len` bytes, where a header is, to extreme values).
void mutate(std::string& bytes, std::mt19937_64& rng, size_t text_len);

// The dtypes NumPy has (all but bf16).
inline const std::vector<DType> kNumpyDTypes = {DType::F32, DType::F16, DType::F64,
                                                DType::I8,  DType::I16, DType::I32,
                                                DType::I64, DType::U8,  DType::Bool};

}  // namespace rlx::testing
