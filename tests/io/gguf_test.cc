// GGUF writer -> reader round trips and malformed files (truncations, huge
// counts, lying offsets): all must give rlx::Error, never a crash.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <random>

#include "rlx/error.h"
#include "rlx/gguf.h"
#include "support/testing.h"

namespace rlx::gguf {
namespace {
using quant::GgmlType;

std::vector<std::pair<std::string, Value>> sample_metadata() {
  std::vector<Value> toks = {Value::of_string("<s>"), Value::of_string("a b"),
                             Value::of_string("")};
  Value u8;
  u8.type = ValueType::U8;
  u8.u = 200;
  Value i64;
  i64.type = ValueType::I64;
  i64.i = -(int64_t(1) << 40);
  Value f64;
  f64.type = ValueType::F64;
  f64.f = 0.125;
  return {{"general.architecture", Value::of_string("llama")},
          {"general.alignment", Value::of_u32(64)},
          {"llama.block_count", Value::of_u32(2)},
          {"llama.rope.freq_base", Value::of_f32(10000.0f)},
          {"x.u8", u8},
          {"x.i64", i64},
          {"x.f64", f64},
          {"x.u64", Value::of_u64(uint64_t(1) << 50)},
          {"x.bool", Value::of_bool(true)},
          {"tokenizer.ggml.tokens", Value::of_array(ValueType::STRING, toks)},
          {"x.ints", Value::of_array(ValueType::I32, {Value::of_i32(-1), Value::of_i32(2)})}};
}

struct GgufSample {
  std::vector<float> a;
  std::vector<uint8_t> b;
  std::string bytes;
};

GgufSample make_sample() {
  GgufSample s;
  s.a = {1, 2, 3, 4, 5, 6};
  s.b.resize(quant::row_size(GgmlType::Q8_0, 64) * 2);
  std::vector<float> x(128);
  for (int i = 0; i < 128; ++i) x[i] = float(i % 17) - 8.0f;
  quant::quantize(GgmlType::Q8_0, x.data(), s.b.data(), 128);
  std::vector<WriteTensor> ts = {
      {"a", GgmlType::F32, {3, 2}, {reinterpret_cast<const char*>(s.a.data()), 24}},
      {"blk.0.w",
       GgmlType::Q8_0,
       {64, 2},
       {reinterpret_cast<const char*>(s.b.data()), s.b.size()}}};
  s.bytes = serialize(sample_metadata(), ts);
  return s;
}

TEST(Gguf, RoundTripInMemory) {
  GgufSample s = make_sample();
  File f = read_bytes(s.bytes.data(), s.bytes.size(), "mem");
  EXPECT_EQ(f.version, 3u);
  EXPECT_EQ(f.alignment, 64u);
  EXPECT_EQ(f.data_offset % 64, 0u);
  ASSERT_EQ(f.metadata.size(), sample_metadata().size());
  EXPECT_EQ(f.find("general.architecture")->as_string(), "llama");
  EXPECT_EQ(f.find("llama.block_count")->as_int(), 2);
  EXPECT_EQ(f.find("x.u8")->as_int(), 200);
  EXPECT_EQ(f.find("x.i64")->as_int(), -(int64_t(1) << 40));
  EXPECT_EQ(f.find("x.u64")->as_int(), int64_t(1) << 50);
  EXPECT_EQ(f.find("x.f64")->as_float(), 0.125);
  EXPECT_FLOAT_EQ(float(f.find("llama.rope.freq_base")->as_float()), 10000.0f);
  EXPECT_EQ(f.find("x.bool")->u, 1u);
  const Value* toks = f.find("tokenizer.ggml.tokens");
  ASSERT_EQ(toks->arr.size(), 3u);
  EXPECT_EQ(toks->arr[1].as_string(), "a b");
  const Value* ints = f.find("x.ints");
  ASSERT_EQ(ints->arr.size(), 2u);
  EXPECT_EQ(ints->arr[0].as_int(), -1);
  EXPECT_EQ(ints->to_string(), "i32[2] [-1, 2]");
  EXPECT_THROW(f.find("general.architecture")->as_int(), Error);
  ASSERT_EQ(f.tensors.size(), 2u);
  const TensorInfo* a = f.find_tensor("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->ne, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(a->nbytes, 24u);
  EXPECT_EQ(std::memcmp(a->data, s.a.data(), 24), 0);
  const TensorInfo* w = f.find_tensor("blk.0.w");
  EXPECT_EQ(w->type, GgmlType::Q8_0);
  EXPECT_EQ(w->offset % 64, 0u);
  EXPECT_EQ(std::memcmp(w->data, s.b.data(), s.b.size()), 0);
  EXPECT_EQ(
      (reinterpret_cast<uintptr_t>(w->data) - reinterpret_cast<uintptr_t>(s.bytes.data())) % 64,
      0u);
}

// general.alignment 1 may put f32 data at an odd address (found by
// fuzz_gguf): to_f32 copies it instead of returning a misaligned view.
TEST(Gguf, F32AtAnOddAddressIsCopied) {
  const std::vector<float> v{1.5f, -2.0f, 0.25f};
  for (const std::string key : {"k", "kk", "kkk", "kkkk"}) {
    const std::string bytes =
        serialize({{"general.alignment", Value::of_u32(1)}, {key, Value::of_u32(7)}},
                  {{"t", GgmlType::F32, {3}, {reinterpret_cast<const char*>(v.data()), 12}}});
    const File f = read_bytes(bytes.data(), bytes.size(), "mem");
    const Tensor t = to_f32(f, f.tensors.at(0));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw()) % alignof(float), 0u) << key;
    for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(t.item_as_double(i), v[size_t(i)]) << key;
  }
}

TEST(Gguf, RoundTripFileMmap) {
  GgufSample s = make_sample();
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("rlx_gguf_rt." + std::to_string(::getpid()) + ".gguf"))
                               .string();
  std::vector<WriteTensor> ts = {
      {"a", GgmlType::F32, {6}, {reinterpret_cast<const char*>(s.a.data()), 24}}};
  write(path, sample_metadata(), ts);
  File f = read(path);
  std::filesystem::remove(path);  // the mapping stays valid
  ASSERT_EQ(f.tensors.size(), 1u);
  EXPECT_EQ(std::memcmp(f.tensors[0].data, s.a.data(), 24), 0);
  EXPECT_THROW(read(path), Error);
}

TEST(Gguf, EveryTruncationIsAnError) {
  GgufSample s = make_sample();
  // Every cut that loses a byte of a header or tensor; the trailing padding
  // after the last tensor is optional.
  const File full = read_bytes(s.bytes.data(), s.bytes.size(), "full");
  size_t end = 0;
  for (const TensorInfo& t : full.tensors)
    end = std::max<size_t>(end, full.data_offset + t.offset + t.nbytes);
  ASSERT_GT(end, 700u);
  for (size_t len = 0; len < end; ++len) {
    std::vector<char> buf(s.bytes.begin(),
                          s.bytes.begin() + long(len));  // exact-size heap copy for ASan
    EXPECT_THROW(read_bytes(buf.data(), len, "trunc"), Error) << "length " << len;
  }
}

// Patches a little-endian integer at `pos`.
template <typename T>
std::string patched(std::string s, size_t pos, T v) {
  std::memcpy(&s[pos], &v, sizeof(T));
  return s;
}

size_t find(const std::string& s, const std::string& needle) {
  const size_t p = s.find(needle);
  EXPECT_NE(p, std::string::npos);
  return p;
}

TEST(Gguf, MalformedHeadersAreErrors) {
  const std::string ok = make_sample().bytes;
  auto bad = [](const std::string& b) {
    EXPECT_THROW(read_bytes(b.data(), b.size(), "bad"), Error);
  };
  bad(patched<uint32_t>(ok, 0, 0x46554746));          // magic
  bad(patched<uint32_t>(ok, 4, 1));                   // version 1
  bad(patched<uint32_t>(ok, 4, 0x03000000));          // big-endian
  bad(patched<uint64_t>(ok, 8, uint64_t(1) << 62));   // huge tensor count
  bad(patched<uint64_t>(ok, 16, ~uint64_t(0)));       // huge kv count
  bad(patched<uint64_t>(ok, 24, uint64_t(1) << 60));  // huge key length
  // general.alignment value (u32 after key + type): 63 is not a power of two.
  const size_t al = find(ok, "general.alignment") + 17 + 4;
  bad(patched<uint32_t>(ok, al, 63));
  bad(patched<uint32_t>(ok, al, 0));
  // The tokens array count: absurdly large.
  const size_t toks = find(ok, "tokenizer.ggml.tokens") + 21 + 4 + 4;
  bad(patched<uint64_t>(ok, toks, uint64_t(1) << 61));
  // Tensor "a": name, n_dims, ne0, ne1, type, offset.
  const size_t ta = find(ok, std::string("\x01\0\0\0\0\0\0\0a", 9)) + 9;
  bad(patched<uint32_t>(ok, ta, 5));                       // 5 dims
  bad(patched<uint64_t>(ok, ta + 4, uint64_t(1) << 40));   // lying dim: bytes past the end
  bad(patched<uint32_t>(ok, ta + 20, 4));                  // retired type Q4_2
  bad(patched<uint32_t>(ok, ta + 20, 99));                 // unknown type
  bad(patched<uint64_t>(ok, ta + 24, 64));                 // overlaps blk.0.w
  bad(patched<uint64_t>(ok, ta + 24, 8));                  // misaligned offset
  bad(patched<uint64_t>(ok, ta + 24, uint64_t(1) << 40));  // past the end
  bad(patched<uint64_t>(ok, ta + 24, ~uint64_t(0) - 63));  // overflowing offset
  // blk.0.w ne0 = 48: not a multiple of Q8_0's block.
  const size_t tb = find(ok, "blk.0.w") + 7;
  bad(patched<uint64_t>(ok, tb + 4, 48));
  // Invalid metadata value type and bool byte.
  const size_t arch = find(ok, "general.architecture") + 20;
  bad(patched<uint32_t>(ok, arch, 13));
  const size_t bl = find(ok, "x.bool") + 6 + 4;
  bad(patched<uint8_t>(ok, bl, 2));
}

TEST(Gguf, RandomCorruptionNeverCrashes) {
  const std::string ok = make_sample().bytes;
  std::mt19937 rng(7);
  for (int it = 0; it < 3000; ++it) {
    std::string b = ok;
    const int flips = 1 + int(rng() % 4);
    for (int k = 0; k < flips; ++k) b[rng() % 200] = char(rng());
    try {
      File f = read_bytes(b.data(), b.size(), "fuzz");
      for (const TensorInfo& t : f.tensors)
        ASSERT_LE(t.data + t.nbytes, reinterpret_cast<const uint8_t*>(b.data()) + b.size());
    } catch (const Error&) {
    }
  }
}

// ggml rejects a metadata array whose elements are arrays; a file must load in
// both or in neither, so rlx rejects it too, and never writes one.
TEST(Gguf, ArraysOfArraysAreErrors) {
  std::string b;
  auto put = [&b](auto v) { b.append(reinterpret_cast<const char*>(&v), sizeof v); };
  put(uint32_t(0x46554747));  // magic
  put(uint32_t(3));           // version
  put(uint64_t(0));           // tensors
  put(uint64_t(1));           // metadata entries
  put(uint64_t(8));
  b += "x.nested";
  put(uint32_t(ValueType::ARRAY));
  put(uint32_t(ValueType::ARRAY));  // element type
  put(uint64_t(1));
  put(uint32_t(ValueType::I32));  // the inner array
  put(uint64_t(2));
  put(int32_t(-1));
  put(int32_t(2));
  const std::string msg = rlx::testing::error_of([&] { read_bytes(b.data(), b.size(), "n.gguf"); });
  EXPECT_NE(msg.find("n.gguf: metadata 'x.nested': arrays of arrays are not supported"),
            std::string::npos)
      << msg;
  std::vector<Value> inner = {Value::of_array(ValueType::I32, {Value::of_i32(1)})};
  EXPECT_THROW(serialize({{"x.nested", Value::of_array(ValueType::ARRAY, inner)}}, {}), Error);
}

TEST(Gguf, WriterRejectsBadTensors) {
  std::vector<float> a(4);
  std::string_view v(reinterpret_cast<const char*>(a.data()), 16);
  EXPECT_THROW(serialize({}, {{"a", GgmlType::F32, {5}, v}}), Error);   // size mismatch
  EXPECT_THROW(serialize({}, {{"a", GgmlType::Q4_0, {4}, v}}), Error);  // not a block multiple
  EXPECT_THROW(serialize({}, {{std::string(64, 'x'), GgmlType::F32, {4}, v}}), Error);
  EXPECT_NO_THROW(serialize({}, {{"a", GgmlType::F32, {4}, v}}));
}

}  // namespace
}  // namespace rlx::gguf

namespace rlx::gguf {
namespace {

std::string cli_output(const std::string& args) { return rlx::testing::run_cli(args).output; }

TEST(GgufInspect, PrintsMetadataTensorsAndHistogram) {
  std::vector<Value> many;
  for (int k = 0; k < 1000; ++k) many.push_back(Value::of_i32(k));
  std::vector<uint8_t> q(quant::row_size(quant::GgmlType::Q4_K, 512));
  std::vector<float> x(512, 0.5f);
  quant::quantize(quant::GgmlType::Q4_K, x.data(), q.data(), 512);
  std::vector<uint16_t> h(8, 0);
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("rlx_inspect_test." + std::to_string(::getpid()) + ".gguf"))
                               .string();
  write(path,
        {{"general.architecture", Value::of_string("llama")},
         {"tokenizer.ggml.token_type", Value::of_array(ValueType::I32, many)}},
        {{"blk.0.ffn_up.weight",
          quant::GgmlType::Q4_K,
          {256, 2},
          {reinterpret_cast<const char*>(q.data()), q.size()}},
         {"output_norm.weight",
          quant::GgmlType::F16,
          {8},
          {reinterpret_cast<const char*>(h.data()), 16}}});
  const std::string out = cli_output("inspect " + path);
  std::filesystem::remove(path);
  EXPECT_NE(out.find("general.architecture"), std::string::npos) << out;
  EXPECT_NE(out.find("\"llama\""), std::string::npos) << out;
  EXPECT_NE(out.find("i32[1000] [0, 1, 2, 3, 4, 5, 6, 7, ...]"), std::string::npos) << out;
  EXPECT_NE(out.find("blk.0.ffn_up.weight"), std::string::npos) << out;
  EXPECT_NE(out.find("[256, 2]"), std::string::npos) << out;
  EXPECT_NE(out.find("q4_K"), std::string::npos) << out;
  EXPECT_NE(out.find("type histogram"), std::string::npos) << out;
  EXPECT_EQ(out.find("999"), std::string::npos) << "long arrays must be abbreviated";
}

}  // namespace
}  // namespace rlx::gguf
