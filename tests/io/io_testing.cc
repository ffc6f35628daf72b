#include "io/io_testing.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <iterator>

namespace rlx::testing {

namespace fs = std::filesystem;

ScratchDir::ScratchDir(const std::string& tag) {
  static std::atomic<int> counter{0};
  dir_ = fs::temp_directory_path() /
         ("rlx_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  fs::remove_all(dir_);
  fs::create_directories(dir_);
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

void run_python(const std::string& code, const fs::path& dir) {
  write_file_bytes((dir / "script.py").string(), code);
  std::string cmd = "cd '" + dir.string() + "' && /usr/bin/python3 script.py 2> err.txt";
  if (std::system(cmd.c_str()) != 0)
    throw make_error("python failed: ", read_file_bytes((dir / "err.txt").string()));
}

std::string read_file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  RLX_CHECK(f, "cannot read ", path);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void write_file_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), std::streamsize(bytes.size()));
  RLX_CHECK(f, "cannot write ", path);
}

double reference_value(DType t, int64_t i) {
  switch (t) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
    case DType::F64:
      return double(i - 7) / 4;
    case DType::I8:
      return double((i * 37) % 251 - 120);
    case DType::I16:
      return double((i - 7) * 1000);
    case DType::I32:
      return double((i - 7) * 123456789);
    case DType::I64:
      return double((i - 7) * 1234567891011);
    case DType::U8:
      return double((i * 37) % 251);
    case DType::Bool:
      return i % 3 == 0;
  }
  return 0;
}

std::string python_reference(DType t) {
  switch (t) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
    case DType::F64:
      return "(i - 7) / 4";
    case DType::I8:
      return "(i * 37) % 251 - 120";
    case DType::I16:
      return "(i - 7) * 1000";
    case DType::I32:
      return "(i - 7) * 123456789";
    case DType::I64:
      return "(i - 7) * 1234567891011";
    case DType::U8:
      return "(i * 37) % 251";
    case DType::Bool:
      return "i % 3 == 0";
  }
  return "0";
}

const char* numpy_name(DType t) {
  switch (t) {
    case DType::F32:
      return "float32";
    case DType::F16:
      return "float16";
    case DType::F64:
      return "float64";
    case DType::I8:
      return "int8";
    case DType::I16:
      return "int16";
    case DType::I32:
      return "int32";
    case DType::I64:
      return "int64";
    case DType::U8:
      return "uint8";
    case DType::Bool:
      return "bool_";
    case DType::BF16:
      break;
  }
  return "?";
}

Tensor reference_tensor(const Dims& dims, DType t) {
  Tensor d(dims, DType::F64);
  for (int64_t i = 0; i < d.numel(); ++i) d.data<double>()[i] = reference_value(t, i);
  return d.to(t);
}

void mutate(std::string& b, std::mt19937_64& rng, size_t text_len) {
  auto pick = [&](size_t n) { return n ? size_t(rng() % n) : 0; };
  static const char kInteresting[] = "0123456789{}[]\",:- \n'()TFL\x93\xff";
  static const char* kNumbers[] = {"0",
                                   "1",
                                   "7",
                                   "8",
                                   "255",
                                   "4294967296",
                                   "1152921504606846976",
                                   "18446744073709551615",
                                   "18446744073709551616",
                                   "-1",
                                   "1e3",
                                   "99999999999999999999999"};
  switch (rng() % 8) {
    case 0:
      if (!b.empty()) b[pick(b.size())] ^= char(1 << (rng() % 8));
      break;
    case 1:
      if (!b.empty()) b[pick(b.size())] = char(rng());
      break;
    case 2:
      if (!b.empty())
        b[pick(std::min(b.size(), text_len + 16))] = kInteresting[pick(sizeof kInteresting - 1)];
      break;
    case 3:
      b.resize(pick(b.size() + 1));
      break;
    case 4:
      b.insert(pick(b.size() + 1), std::string(1 + pick(8), char(rng())));
      break;
    case 5:
      if (!b.empty()) {
        size_t at = pick(b.size());
        b.erase(at, 1 + pick(std::min<size_t>(8, b.size() - at)));
      }
      break;
    default: {  // rewrite a decimal number inside the header text
      std::vector<std::pair<size_t, size_t>> nums;
      const size_t lim = std::min(b.size(), text_len);
      for (size_t i = 0; i < lim;) {
        if (b[i] >= '0' && b[i] <= '9') {
          size_t j = i;
          while (j < lim && b[j] >= '0' && b[j] <= '9') ++j;
          nums.emplace_back(i, j - i);
          i = j;
        } else {
          ++i;
        }
      }
      if (nums.empty()) break;
      auto [at, len] = nums[pick(nums.size())];
      b.replace(at, len, kNumbers[pick(std::size(kNumbers))]);
    }
  }
}

}  // namespace rlx::testing
