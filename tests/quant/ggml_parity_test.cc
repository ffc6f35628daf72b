// Bit-exactness against ggml itself: dlopen()s libggml-base.so (from
// node-llama-cpp, installed by scripts/install-peers.sh) and compares our
// dequantize (random blocks, every type) and quantize (random rows) with
// ggml's to_float / from_float_ref. The library path comes from RLX_GGML_LIB,
// else the default install-peers.sh location. Without the library the tests
// skip, unless RLX_REQUIRE_GGML=1 (CI), where they fail.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <vector>

#include "rlx/quant.h"

namespace rlx::quant {
namespace {

// ggml's struct ggml_type_traits (ggml.h, node-llama-cpp 3.21.1).
struct GgmlTraits {
  const char* type_name;
  int64_t blck_size;
  int64_t blck_size_interleave;
  size_t type_size;
  bool is_quantized;
  void (*to_float)(const void*, float*, int64_t);
  void (*from_float_ref)(const float*, void*, int64_t);
};
using GetTraits = const GgmlTraits* (*)(int);

std::string lib_path() {
  if (const char* p = std::getenv("RLX_GGML_LIB")) return p;
  const char* peers = std::getenv("RLX_PEERS_DIR");
  const char* home = std::getenv("HOME");
  std::string dir = peers ? peers : std::string(home ? home : "") + "/.cache/rlx-peers";
  return dir + "/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-base.so";
}

void* handle() {
  static void* h = [] {
    const std::string path = lib_path();
    return std::filesystem::exists(path) ? dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL) : nullptr;
  }();
  return h;
}

GetTraits ggml() {
  static GetTraits fn =
      handle() ? reinterpret_cast<GetTraits>(dlsym(handle(), "ggml_get_type_traits")) : nullptr;
  return fn;
}

// The traits table lacks some entries (q8_K's from_float_ref); ggml exports
// the row functions by name too.
using ToFloat = void (*)(const void*, float*, int64_t);
using FromFloat = void (*)(const float*, void*, int64_t);
ToFloat to_float(const GgmlTraits* g, const char* name) {
  if (g && g->to_float) return g->to_float;
  return reinterpret_cast<ToFloat>(
      dlsym(handle(), (std::string("dequantize_row_") + name).c_str()));
}
FromFloat from_float(const GgmlTraits* g, const char* name) {
  if (g && g->from_float_ref) return g->from_float_ref;
  return reinterpret_cast<FromFloat>(
      dlsym(handle(), (std::string("quantize_row_") + name + "_ref").c_str()));
}

bool require() {
  const char* r = std::getenv("RLX_REQUIRE_GGML");
  return r && std::string(r) == "1";
}

#define NEED_GGML()                                                                           \
  do {                                                                                        \
    if (!ggml()) {                                                                            \
      if (require())                                                                          \
        FAIL() << "RLX_REQUIRE_GGML=1 but libggml-base.so not loadable: " << lib_path()       \
               << " (run scripts/install-peers.sh)";                                          \
      GTEST_SKIP() << "ggml not found at " << lib_path() << "; run scripts/install-peers.sh"; \
    }                                                                                         \
  } while (0)

// Random block bytes with plausible (finite, not huge) fp16/f32 scales where a
// type has them, so both sides compute real numbers rather than inf/NaN.
std::vector<uint8_t> random_blocks(const TypeTraits& t, int nblocks, std::mt19937& rng) {
  std::vector<uint8_t> b(t.type_size * size_t(nblocks));
  for (auto& x : b) x = uint8_t(rng());
  return b;
}

bool same_bits(float a, float b) {
  uint32_t x, y;
  std::memcpy(&x, &a, 4);
  std::memcpy(&y, &b, 4);
  return x == y || (std::isnan(a) && std::isnan(b));
}

TEST(GgmlParity, DequantizeEveryTypeBitExact) {
  NEED_GGML();
  std::mt19937 rng(1234);
  int checked = 0;
  for (uint32_t id = 0; id < 64; ++id) {
    const TypeTraits* t = find_traits(id);
    if (!t || !t->dequantize_row) continue;
    if (id == 0 || (id >= 24 && id <= 28)) continue;  // f32, ints, f64: ggml has no to_float
    const GgmlTraits* g = ggml()(int(id));
    ASSERT_TRUE(g) << t->name;
    const ToFloat theirs_fn = to_float(g, t->name);
    if (!theirs_fn) {  // q8_1: an activation format ggml never dequantizes
      std::printf("ggml has no dequantize for %s: not compared\n", t->name);
      continue;
    }
    ASSERT_EQ(g->blck_size, t->block_size) << t->name;
    ASSERT_EQ(g->type_size, t->type_size) << t->name;
    const int nb = t->block_size == 1 ? 4096 : 64;
    for (int rep = 0; rep < 8; ++rep) {
      std::vector<uint8_t> b = random_blocks(*t, nb, rng);
      const int64_t n = t->block_size * nb;
      std::vector<float> ours(n), theirs(n);
      t->dequantize_row(b.data(), ours.data(), n);
      theirs_fn(b.data(), theirs.data(), n);
      int64_t bad = -1;
      for (int64_t j = 0; j < n && bad < 0; ++j)
        if (!same_bits(ours[j], theirs[j])) bad = j;
      if (bad >= 0) {
        ADD_FAILURE() << t->name << " element " << bad << ": ours " << ours[bad] << " ggml "
                      << theirs[bad];
        break;
      }
    }
    ++checked;
  }
  EXPECT_GE(checked, 28);
}

TEST(GgmlParity, QuantizeBitExact) {
  NEED_GGML();
  std::mt19937 rng(99);
  for (uint32_t id = 0; id < 64; ++id) {
    const TypeTraits* t = find_traits(id);
    if (!t || !t->quantize_row || id == 0 || id == uint32_t(GgmlType::F64)) continue;
    const GgmlTraits* g = ggml()(int(id));
    const FromFloat theirs_fn = from_float(g, t->name);
    ASSERT_TRUE(theirs_fn) << t->name;
    const int64_t n = 256 * 16;
    for (int rep = 0; rep < 6; ++rep) {
      std::vector<float> x(n);
      std::normal_distribution<float> dist(0.f, rep < 3 ? 1.0f : 1e-3f);
      for (auto& v : x) v = dist(rng);
      if (rep == 5)  // some blocks all zero, some with a single outlier
        for (int64_t j = 0; j < 512; ++j) x[j] = j == 300 ? 5.f : 0.f;
      const size_t bytes = size_t(n / t->block_size) * t->type_size;
      // ggml leaves an all-zero Q8_K block's bsums unwritten (we write zeros):
      // start from zeros there so only written bytes are compared.
      const uint8_t fill = t->type == GgmlType::Q8_K ? 0 : 0xAB;
      std::vector<uint8_t> ours(bytes, fill), theirs(bytes, fill);
      t->quantize_row(x.data(), ours.data(), n);
      theirs_fn(x.data(), theirs.data(), n);
      size_t first = bytes;
      for (size_t k = 0; k < bytes && first == bytes; ++k)
        if (ours[k] != theirs[k]) first = k;
      EXPECT_EQ(first, bytes) << t->name << " rep " << rep << ": first differing byte " << first
                              << " (block " << first / t->type_size << ", byte "
                              << first % t->type_size << ")";
      if (first != bytes) break;
    }
  }
}

}  // namespace
}  // namespace rlx::quant

// llama.cpp reads what our writer writes: ggml's own gguf parser on our file.
#include "rlx/gguf.h"

namespace rlx::quant {
namespace {
struct GgufInitParams {
  bool no_alloc;
  void** ctx;
};
TEST(GgmlParity, GgmlReadsOurGguf) {
  NEED_GGML();
  using Init = void* (*)(const char*, GgufInitParams);
  using Count = int64_t (*)(const void*);
  using Find = int64_t (*)(const void*, const char*);
  using Free = void (*)(void*);
  auto init = reinterpret_cast<Init>(dlsym(handle(), "gguf_init_from_file"));
  auto n_tensors = reinterpret_cast<Count>(dlsym(handle(), "gguf_get_n_tensors"));
  auto n_kv = reinterpret_cast<Count>(dlsym(handle(), "gguf_get_n_kv"));
  auto find_tensor = reinterpret_cast<Find>(dlsym(handle(), "gguf_find_tensor"));
  auto data_offset = reinterpret_cast<Count>(dlsym(handle(), "gguf_get_data_offset"));
  auto gfree = reinterpret_cast<Free>(dlsym(handle(), "gguf_free"));
  ASSERT_TRUE(init && n_tensors && n_kv && find_tensor && data_offset && gfree);
  std::vector<float> x(512);
  for (int i = 0; i < 512; ++i) x[i] = std::sin(float(i));
  std::vector<uint8_t> q6(row_size(GgmlType::Q6_K, 512)), q8(row_size(GgmlType::Q8_0, 64));
  quantize(GgmlType::Q6_K, x.data(), q6.data(), 512);
  quantize(GgmlType::Q8_0, x.data(), q8.data(), 64);
  using gguf::Value;
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("rlx_ggml_reads." + std::to_string(::getpid()) + ".gguf"))
                               .string();
  gguf::write(
      path,
      {{"general.architecture", Value::of_string("llama")},
       {"general.alignment", Value::of_u32(64)},
       {"tokenizer.ggml.tokens",
        Value::of_array(gguf::ValueType::STRING, {Value::of_string("a"), Value::of_string("bc")})}},
      {{"w6", GgmlType::Q6_K, {256, 2}, {reinterpret_cast<const char*>(q6.data()), q6.size()}},
       {"w8", GgmlType::Q8_0, {64}, {reinterpret_cast<const char*>(q8.data()), q8.size()}},
       {"f", GgmlType::F32, {3}, {reinterpret_cast<const char*>(x.data()), 12}}});
  void* ctx = init(path.c_str(), GgufInitParams{true, nullptr});
  ASSERT_NE(ctx, nullptr) << "ggml rejected our GGUF file";
  EXPECT_EQ(n_tensors(ctx), 3);
  EXPECT_EQ(n_kv(ctx), 3);
  EXPECT_EQ(find_tensor(ctx, "w8"), 1);
  EXPECT_EQ(data_offset(ctx), int64_t(gguf::read(path).data_offset));
  gfree(ctx);
  std::filesystem::remove(path);
}
}  // namespace
}  // namespace rlx::quant
