// Loading a file whose counts or shapes lie must fail before it allocates
// more than the file's size: every reader checks a declared size against the
// bytes that are there before it reserves memory for it. This binary replaces
// the global operator new with a counting one (hence its own executable, not
// part of rlx_tests); while a Budget is in scope, a single allocation above
// the budget throws std::bad_alloc and is recorded, and the peak of live bytes
// is measured.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <new>
#include <sstream>
#include <string>
#include <vector>

#include "backends/coreml/interp/package.h"
#include "frontends/torch/torch_ir.h"
#include "io/onnx/model.h"
#include "model.pb.h"
#include "rlx/builder.h"
#include "rlx/coreml.h"
#include "rlx/gguf.h"
#include "rlx/graph.h"
#include "rlx/io.h"

namespace {

std::atomic<bool> g_counting{false};
std::atomic<int64_t> g_live{0}, g_peak{0}, g_limit{0}, g_refused{0};

void* counted_alloc(size_t n) {
  if (g_counting.load(std::memory_order_relaxed)) {
    if (int64_t(n) > g_limit.load()) {
      g_refused.fetch_add(1);
      throw std::bad_alloc();
    }
    const int64_t live = g_live.fetch_add(int64_t(n)) + int64_t(n);
    int64_t peak = g_peak.load();
    while (live > peak && !g_peak.compare_exchange_weak(peak, live)) {
    }
  }
  // The size sits in a 16-byte header so delete can count it back.
  void* p = std::malloc(n + 16);
  if (!p) throw std::bad_alloc();
  *static_cast<size_t*>(p) = n;
  return static_cast<char*>(p) + 16;
}

void counted_free(void* p) noexcept {
  if (!p) return;
  char* b = static_cast<char*>(p) - 16;
  if (g_counting.load(std::memory_order_relaxed))
    g_live.fetch_sub(int64_t(*reinterpret_cast<size_t*>(b)));
  std::free(b);
}

// Measures what happens while it lives: the peak of live bytes allocated
// with new (from 0 at its start) and how many allocations above `limit` were
// refused.
struct Budget {
  explicit Budget(int64_t limit) {
    g_live = 0;
    g_peak = 0;
    g_refused = 0;
    g_limit = limit;
    g_counting = true;
  }
  ~Budget() { g_counting = false; }
  int64_t peak() const { return g_peak.load(); }
  int64_t refused() const { return g_refused.load(); }
};

}  // namespace

void* operator new(size_t n) { return counted_alloc(n); }
void* operator new[](size_t n) { return counted_alloc(n); }
void operator delete(void* p) noexcept { counted_free(p); }
void operator delete[](void* p) noexcept { counted_free(p); }
void operator delete(void* p, size_t) noexcept { counted_free(p); }
void operator delete[](void* p, size_t) noexcept { counted_free(p); }

namespace rlx {
namespace {

namespace fs = std::filesystem;

// A loader given `bytes` must throw rlx::Error, allocating no more than the
// file's size (twice, for a copy) plus a fixed allowance for parser state.
template <typename F>
void expect_fails_within_file_size(const std::string& what, const std::string& bytes, F load) {
  const int64_t budget = 2 * int64_t(bytes.size()) + (256 << 10);
  std::string message;
  int64_t peak = 0, refused = 0;
  {
    Budget b(budget);
    try {
      load(bytes);
    } catch (const Error& e) {
      message = e.what();
    } catch (const std::bad_alloc&) {
      message = "std::bad_alloc";
    }
    peak = b.peak();
    refused = b.refused();
  }
  EXPECT_EQ(refused, 0) << what << ": an allocation above " << budget
                        << " bytes was attempted; message: " << message;
  EXPECT_LE(peak, budget) << what;
  EXPECT_FALSE(message.empty() || message == "std::bad_alloc")
      << what << ": loaded, or failed without an rlx::Error: " << message;
}

std::string u32(uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); }
std::string u64(uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); }
std::string gguf_str(const std::string& s) { return u64(s.size()) + s; }
std::string gguf_header(uint64_t n_tensors, uint64_t n_kv) {
  return u32(0x46554747) + u32(3) + u64(n_tensors) + u64(n_kv);
}

// The harness itself: it counts and refuses.
TEST(LyingSizes, BudgetCountsAndRefuses) {
  Budget b(1024);
  EXPECT_THROW(std::vector<char>(4096), std::bad_alloc);
  EXPECT_EQ(b.refused(), 1);
  std::vector<char> v(512);
  EXPECT_GE(b.peak(), 512);
}

TEST(LyingSizes, Safetensors) {
  auto load = [](const std::string& b) { read_safetensors_bytes(b.data(), b.size(), "t"); };
  auto file = [](const std::string& header, size_t data) {
    return u64(header.size()) + header + std::string(data, '\0');
  };
  expect_fails_within_file_size(
      "huge shape",
      file(R"({"x": {"dtype": "F32", "shape": [1099511627776], "data_offsets": [0, 64]}})", 64),
      load);
  expect_fails_within_file_size("header length past the end", u64(uint64_t(1) << 40) + "{}", load);
}

// ONNX: protobuf fields by hand (tag, varint / length-delimited payload).
std::string pb_varint(uint64_t v) {
  std::string s;
  while (v >= 0x80) {
    s += char(v | 0x80);
    v >>= 7;
  }
  return s + char(v);
}
std::string pb_field(int field, const std::string& payload) {
  return pb_varint(uint64_t(field) << 3 | 2) + pb_varint(payload.size()) + payload;
}
std::string pb_int(int field, uint64_t v) { return pb_varint(uint64_t(field) << 3) + pb_varint(v); }

TEST(LyingSizes, Onnx) {
  auto tensor = [](uint64_t d0, uint64_t d1, size_t raw) {
    return pb_int(1, d0) + pb_int(1, d1) + pb_int(2, 1) + pb_field(8, "w") +
           pb_field(9, std::string(raw, '\0'));
  };
  auto load_tensor = [](const std::string& b) { onnx::parse_tensor(b.data(), b.size(), "t.pb"); };
  expect_fails_within_file_size("huge tensor dims", tensor(1ull << 20, 1ull << 20, 64),
                                load_tensor);
  auto model = [](const std::string& graph) {
    return pb_int(1, 8) + pb_field(7, graph) + pb_field(8, pb_int(2, 17));
  };
  auto load_model_bytes = [](const std::string& b) {
    onnx::parse_model(b.data(), b.size(), "m.onnx", "");
  };
  expect_fails_within_file_size("huge initializer dims",
                                model(pb_field(5, tensor(1ull << 30, 1ull << 30, 64))),
                                load_model_bytes);
  // A length-delimited field claiming 2^40 bytes in a small file.
  expect_fails_within_file_size(
      "lying field length",
      pb_int(1, 8) + pb_varint(7 << 3 | 2) + pb_varint(1ull << 40) + std::string(64, '\0'),
      load_model_bytes);
}

TEST(LyingSizes, Npy) {
  auto npy = [](const std::string& shape) {
    std::string h = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
    h += std::string((64 - (10 + h.size() + 1) % 64) % 64, ' ') + "\n";
    const uint16_t n = uint16_t(h.size());
    return std::string("\x93NUMPY\x01\x00", 8) + std::string(reinterpret_cast<const char*>(&n), 2) +
           h + std::string(16, '\0');
  };
  auto load = [](const std::string& b) { read_npy_bytes(b.data(), b.size(), "t.npy"); };
  expect_fails_within_file_size("huge shape", npy("(1099511627776,)"), load);
  expect_fails_within_file_size("huge 2-d shape", npy("(1048576, 1048576)"), load);
}

TEST(LyingSizes, Gguf) {
  auto load = [](const std::string& b) { gguf::read_bytes(b.data(), b.size(), "t.gguf"); };
  expect_fails_within_file_size("2^40 tensors", gguf_header(uint64_t(1) << 40, 0), load);
  expect_fails_within_file_size("2^40 metadata entries", gguf_header(0, uint64_t(1) << 40), load);
  expect_fails_within_file_size("key of 2^40 bytes", gguf_header(0, 1) + u64(uint64_t(1) << 40),
                                load);
  expect_fails_within_file_size("array of 2^40 u32",
                                gguf_header(0, 1) + gguf_str("k") + u32(9) + u32(4) +
                                    u64(uint64_t(1) << 40) + std::string(64, '\0'),
                                load);
  expect_fails_within_file_size("array of 2^40 strings",
                                gguf_header(0, 1) + gguf_str("k") + u32(9) + u32(8) +
                                    u64(uint64_t(1) << 40) + std::string(64, '\0'),
                                load);
  expect_fails_within_file_size("tensor of 2^40 x 2^20 elements",
                                gguf_header(1, 0) + gguf_str("t") + u32(2) +
                                    u64(uint64_t(1) << 40) + u64(uint64_t(1) << 20) + u32(0) +
                                    u64(0) + std::string(64, '\0'),
                                load);
}

TEST(LyingSizes, GraphJson) {
  auto load = [](const std::string& b) { from_json(b, "t.rlx.json"); };
  auto doc = [](const std::string& node) {
    return R"({"format": "rlx-graph", "version": 2, "nodes": [)" + node +
           R"(], "outputs": [{"name": "y", "node": 0}]})";
  };
  expect_fails_within_file_size(
      "constant of 2^40 elements",
      doc(R"({"op": "constant", "inputs": [], "shape": [1099511627776], "dtype": "f32",)"
          R"( "data": "AAAAAA=="})"),
      load);
  expect_fails_within_file_size(
      "full of 2^40 x 2^40",
      doc(R"({"op": "full", "inputs": [], "shape": [1099511627776, 1099511627776],)"
          R"( "dtype": "f32", "attrs": {"shape": [1099511627776, 1099511627776], "value": 1}})"),
      load);
}

TEST(LyingSizes, TorchIr) {
  auto load = [](const std::string& b) { torch_ir::parse(b, "torch-ir.json"); };
  expect_fails_within_file_size(
      "input of 2^40 x 2^40",
      R"({"format": "rlx-torch-ir", "version": 1, "inputs": [{"id": "x", "shape":)"
      R"( [1099511627776, 1099511627776], "dtype": "f32"}], "weights": [], "nodes": [],)"
      R"( "outputs": []})",
      load);
}

// An exported package whose const (a weight.bin blob) declares 2^30 elements.
TEST(LyingSizes, MlpackageConst) {
  Graph g;
  Builder b(g);
  const NodeId x = b.input("x", Shape(Dims{16}, DType::F32));
  g.add_output("y", b.add(x, b.param("w", Shape(Dims{16}, DType::F32))));
  TensorMap w{{"w", Tensor(Dims{16}, DType::F32)}};
  const fs::path dir = fs::temp_directory_path() / ("rlx_lying_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  coreml::export_package(g, w, (dir / "m.mlpackage").string());
  auto slurp = [](const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  };
  const fs::path data = dir / "m.mlpackage/Data/com.apple.CoreML";
  CoreML::Specification::Model m;
  ASSERT_TRUE(m.ParseFromString(slurp(data / "model.mlmodel")));
  const std::string weights = slurp(data / "weights/weight.bin");
  fs::remove_all(dir);
  auto& fn = (*m.mutable_mlprogram()->mutable_functions())["main"];
  int lied = 0;
  for (auto& op : *(*fn.mutable_block_specializations())[fn.opset()].mutable_operations()) {
    if (op.type() != "const" || !op.attributes().at("val").has_blobfilevalue()) continue;
    auto* dims = op.mutable_outputs(0)->mutable_type()->mutable_tensortype()->mutable_dimensions();
    dims->Mutable(0)->mutable_constant()->set_size(uint64_t(1) << 30);
    ++lied;
  }
  ASSERT_EQ(lied, 1);
  const std::string model = m.SerializeAsString();
  expect_fails_within_file_size("const of 2^30 elements", model + weights, [&](const std::string&) {
    const auto p = coreml::interp::package_from_bytes(model, &weights, "m.mlmodel");
    coreml::interp::run_program(p, {{"x", Tensor(Dims{16}, DType::F32)}}, {});
  });
}

}  // namespace
}  // namespace rlx
