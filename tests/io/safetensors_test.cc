// safetensors reader/writer: round trips, zero-copy views, files written by a
// Python writer (numpy) at test time, and malformed files
// (each an rlx::Error naming the file, never a crash).
#include <gtest/gtest.h>

#include <cstring>

#include "io/io_testing.h"
#include "support/testing.h"

namespace rlx {
namespace {
using testing::error_of;

using namespace rlx::testing;

std::string st_bytes(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[size_t(i)] = char((uint64_t(header.size()) >> (8 * i)) & 0xff);
  return out + header + data;
}

TensorMap every_dtype_and_shape() {
  TensorMap m;
  const std::vector<Dims> shapes = {{}, {0}, {3}, {2, 3}, {2, 0, 4}, {1, 2, 3, 1}};
  for (DType t : kAllDTypes)
    for (size_t s = 0; s < shapes.size(); ++s)
      m[std::string(dtype_name(t)) + "_" + std::to_string(s)] = reference_tensor(shapes[s], t);
  return m;
}

void expect_same(const TensorMap& got, const TensorMap& want) {
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, t] : want) {
    auto it = got.find(name);
    ASSERT_NE(it, got.end()) << name;
    EXPECT_TRUE(all_equal(it->second, t)) << name;
  }
}

TEST(Safetensors, RoundTripsEveryDtypeShapeAndMetadata) {
  ScratchDir dir("st_rt");
  TensorMap want = every_dtype_and_shape();
  const std::string path = dir.path("all.safetensors");
  write_safetensors(path, want, {{"format", "pt"}, {"note", "ünïcode"}});
  TensorMap got = read_safetensors(path);
  expect_same(got, want);
  // Zero-copy: every tensor is a view of one mapping, 8-byte aligned data.
  const auto& buf = got.begin()->second.buffer();
  for (const auto& [name, t] : got) {
    EXPECT_EQ(t.buffer(), buf) << name;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw()) % dtype_size(t.dtype()), 0u) << name;
  }
  // The mapping outlives the map it came from.
  Tensor keep = got.at("f32_3");
  got.clear();
  EXPECT_TRUE(all_equal(keep, want.at("f32_3")));
  // From memory too.
  std::string bytes = read_file_bytes(path);
  expect_same(read_safetensors_bytes(bytes.data(), bytes.size(), "mem"), want);
  EXPECT_EQ(std::filesystem::directory_iterator(dir.dir())->path().filename(), "all.safetensors");
}

TEST(Safetensors, EmptyMapAndNonContiguousViews) {
  ScratchDir dir("st_views");
  write_safetensors(dir.path("empty.safetensors"), {});
  EXPECT_TRUE(read_safetensors(dir.path("empty.safetensors")).empty());
  Tensor base = reference_tensor({4, 6}, DType::F32);
  TensorMap m = {{"t", base.permute({1, 0})}, {"s", base.strided_view({2, 3}, {12, 2}, 1)}};
  ASSERT_FALSE(m["t"].is_contiguous());
  ASSERT_FALSE(m["s"].is_contiguous());
  write_safetensors(dir.path("v.safetensors"), m);
  TensorMap got = read_safetensors(dir.path("v.safetensors"));
  EXPECT_TRUE(all_equal(got.at("t"), base.permute({1, 0}).contiguous()));
  // s[i][j] = base[2i][2j+1]
  EXPECT_EQ(got.at("s").item_as_double(1 * 3 + 2), base.item_as_double(2 * 6 + 5));
}

TEST(Safetensors, WriteErrors) {
  ScratchDir dir("st_werr");
  std::string path = dir.path("x.safetensors");
  std::string msg = error_of([&] {
    write_safetensors(path, {{"__metadata__", Tensor({1}, DType::F32)}});
  });
  EXPECT_NE(msg.find("reserved"), std::string::npos) << msg;
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(error_of([&] { write_safetensors(path, {{"a", Tensor()}}); }), "");
  EXPECT_NE(error_of([&] {
              write_safetensors(path, {{"\xff\xfe", Tensor({1}, DType::F32)}});
            }),
            "");
  EXPECT_NE(error_of([&] {
              write_safetensors(dir.path("no/dir/x.safetensors"), {{"a", Tensor({1}, DType::F32)}});
            }),
            "");
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_TRUE(std::filesystem::is_empty(dir.dir()));  // no temp files left behind
}

// A file from a small Python writer (numpy bytes), and our
// file read by that Python reader and checked there.
TEST(Safetensors, InteroperatesWithPythonWriterAndReader) {
  ScratchDir dir("st_py");
  TensorMap ours;
  for (DType t : kAllDTypes) ours[std::string(dtype_name(t))] = reference_tensor({2, 3, 4}, t);
  write_safetensors(dir.path("ours.safetensors"), ours, {{"k", "v"}});
  std::string py =
      "import json, struct\nimport numpy as np\n"
      "NP = {'F32': np.float32, 'F64': np.float64, 'F16': np.float16, 'I8': np.int8,\n"
      "      'I16': np.int16, 'I32': np.int32, 'I64': np.int64, 'U8': np.uint8, 'BOOL': np.bool_}\n"
      "REFS = {}\n";
  for (DType t : kAllDTypes) {
    std::string st = t == DType::Bool ? "BOOL" : std::string(dtype_name(t));
    for (auto& c : st) c = char(std::toupper(c));
    py += "REFS['" + st + "'] = lambda i: " + python_reference(t) + "\n";
  }
  py +=
      "def ref(dt):\n"
      "    i = np.arange(24, dtype=np.int64)\n"
      "    v = REFS[dt](i)\n"
      "    if dt == 'BF16':  # the values are exact in bf16: its bits are the top half of f32's\n"
      "        f = np.asarray(v, dtype=np.float32)\n"
      "        return (f.view(np.uint32) >> 16).astype(np.uint16).reshape(2, 3, 4)\n"
      "    return np.asarray(v).astype(NP[dt]).reshape(2, 3, 4)\n"
      "header, blobs, off = {'__metadata__': {'src': 'python'}}, [], 0\n"
      "for dt in sorted(REFS, reverse=True):\n"  // a different order than ours
      "    b = ref(dt).tobytes()\n"
      "    header[dt.lower()] = {'dtype': dt, 'shape': [2, 3, 4], 'data_offsets': [off, off + "
      "len(b)]}\n"
      "    blobs.append(b); off += len(b)\n"
      "h = json.dumps(header).encode()\n"
      "h += b' ' * ((8 - len(h) % 8) % 8)\n"
      "open('py.safetensors', 'wb').write(struct.pack('<Q', len(h)) + h + b''.join(blobs))\n"
      "raw = open('ours.safetensors', 'rb').read()\n"
      "(n,) = struct.unpack('<Q', raw[:8])\n"
      "hd = json.loads(raw[8:8 + n])\n"
      "assert hd['__metadata__'] == {'k': 'v'}, hd['__metadata__']\n"
      "assert len(hd) == 11, len(hd)\n"
      "for name, e in hd.items():\n"
      "    if name == '__metadata__': continue\n"
      "    dt = e['dtype']\n"
      "    b, en = e['data_offsets']\n"
      "    got = np.frombuffer(raw[8 + n + b:8 + n + en], dtype=np.uint16 if dt == 'BF16' else "
      "NP[dt])\n"
      "    assert e['shape'] == [2, 3, 4], (name, e)\n"
      "    assert np.array_equal(got.reshape(2, 3, 4), ref(dt)), name\n";
  run_python(py, dir.dir());
  TensorMap got = read_safetensors(dir.path("py.safetensors"));
  expect_same(got, ours);
}

TEST(SafetensorsMalformed, TruncatedAtEveryLength) {
  ScratchDir dir("st_trunc");
  const std::string good_path = dir.path("good.safetensors");
  write_safetensors(good_path, {{"a", reference_tensor({2, 2}, DType::F32)},
                                {"b", reference_tensor({3}, DType::I64)}});
  const std::string good = read_file_bytes(good_path);
  ASSERT_EQ(read_safetensors(good_path).size(), 2u);
  const std::string path = dir.path("cut.safetensors");
  for (size_t n = 0; n < good.size(); ++n) {
    write_file_bytes(path, good.substr(0, n));
    std::string msg = error_of([&] { read_safetensors(path); });
    ASSERT_NE(msg.find(path), std::string::npos) << "length " << n << ": '" << msg << "'";
  }
  write_file_bytes(path, good + "xyz");
  EXPECT_NE(error_of([&] { read_safetensors(path); }).find("trailing"), std::string::npos);
}

TEST(SafetensorsMalformed, BadHeadersAreErrorsNamingTheFile) {
  ScratchDir dir("st_bad");
  const std::string d16(16, '\0');
  auto one = [](const std::string& dtype, const std::string& shape, const std::string& offs) {
    return "{\"t\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":" + offs +
           "}}";
  };
  ASSERT_EQ(read_safetensors_bytes(st_bytes(one("F32", "[4]", "[0,16]"), d16).data(),
                                   st_bytes(one("F32", "[4]", "[0,16]"), d16).size(), "ok")
                .size(),
            1u);
  std::string huge_len(8, '\xff');
  std::string over_len = st_bytes("{}", "");
  over_len[0] = char(200);
  struct Case {
    const char* what;
    std::string bytes;
    const char* expect;
  };
  const std::vector<Case> cases = {
      {"7 bytes", std::string(7, '\0'), "at least 8"},
      {"header length 2^64-1", huge_len + "{}", "header claims"},
      {"header length beyond file", over_len, "header claims"},
      {"empty header", st_bytes("", ""), "start with '{'"},
      {"leading space", st_bytes(" {}", ""), "start with '{'"},
      {"bad JSON", st_bytes("{\"t\":", d16), "not valid JSON"},
      {"JSON array", st_bytes("[1]", ""), "start with '{'"},
      {"JSON after object", st_bytes("{} {}", ""), "not valid JSON"},
      {"bad dtype", st_bytes(one("F128", "[4]", "[0,16]"), d16), "unsupported dtype 'F128'"},
      {"dtype not a string",
       st_bytes("{\"t\":{\"dtype\":32,\"shape\":[4],\"data_offsets\":[0,16]}}", d16),
       "dtype must be a string"},
      {"2^60 elements", st_bytes(one("F32", "[1152921504606846976]", "[0,16]"), d16), "needs"},
      {"2^62 x 4 elements", st_bytes(one("U8", "[4611686018427387904,4]", "[0,16]"), d16),
       "too large"},
      {"huge dims around zero",
       st_bytes(one("U8", "[4611686018427387904,0,4611686018427387904]", "[0,0]"), ""),
       "too large"},
      {"shape beyond u64", st_bytes(one("F32", "[18446744073709551616]", "[0,16]"), d16),
       "non-negative integers"},
      {"negative dim", st_bytes(one("F32", "[-4]", "[0,16]"), d16), "non-negative integers"},
      {"float dim", st_bytes(one("F32", "[4.0]", "[0,16]"), d16), "non-negative integers"},
      {"shape not array", st_bytes(one("F32", "4", "[0,16]"), d16), "shape must be an array"},
      {"offsets past end", st_bytes(one("F32", "[4]", "[16,32]"), d16), "outside"},
      {"offsets reversed", st_bytes(one("F32", "[0]", "[16,0]"), d16), "outside"},
      {"offsets wrong span", st_bytes(one("F32", "[3]", "[0,16]"), d16), "data_offsets span"},
      {"offsets three", st_bytes(one("F32", "[4]", "[0,16,16]"), d16), "two non-negative"},
      {"offsets negative", st_bytes(one("F32", "[4]", "[-1,15]"), d16), "two non-negative"},
      {"entry not object", st_bytes("{\"t\":[1,2]}", ""), "must be an object"},
      {"entry missing key", st_bytes("{\"t\":{\"dtype\":\"F32\",\"shape\":[0]}}", ""),
       "must be an object"},
      {"overlap",
       st_bytes("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
                d16),
       "overlap"},
      {"identical ranges",
       st_bytes("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                "\"b\":{\"dtype\":\"I32\",\"shape\":[4],\"data_offsets\":[0,16]}}",
                d16),
       "overlap"},
      {"hole",
       st_bytes("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
                d16),
       "hole"},
      {"trailing data", st_bytes(one("F32", "[2]", "[0,8]"), d16), "trailing"},
      {"duplicate tensor",
       st_bytes("{\"t\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                "\"t\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}",
                d16),
       "duplicate key 't'"},
      {"duplicate field",
       st_bytes(
           "{\"t\":{\"dtype\":\"F32\",\"dtype\":\"I32\",\"shape\":[4],\"data_offsets\":[0,16]}}",
           d16),
       "duplicate key 'dtype'"},
      {"metadata not object", st_bytes("{\"__metadata__\":[\"a\"]}", ""), "__metadata__"},
      {"metadata value int", st_bytes("{\"__metadata__\":{\"a\":1}}", ""), "must be a string"},
      {"metadata value object", st_bytes("{\"__metadata__\":{\"a\":{}}}", ""), "must be a string"},
  };
  for (const Case& c : cases) {
    std::string path = dir.path("bad.safetensors");
    write_file_bytes(path, c.bytes);
    std::string msg = error_of([&] { read_safetensors(path); });
    EXPECT_NE(msg.find(path), std::string::npos) << c.what << ": '" << msg << "'";
    EXPECT_NE(msg.find(c.expect), std::string::npos) << c.what << ": '" << msg << "'";
    std::string mem =
        error_of([&] { read_safetensors_bytes(c.bytes.data(), c.bytes.size(), "M"); });
    EXPECT_EQ(mem.rfind("M: ", 0), 0u) << c.what << ": '" << mem << "'";
  }
  EXPECT_NE(error_of([&] { read_safetensors(dir.path("missing")); }).find("missing"),
            std::string::npos);
  EXPECT_NE(error_of([&] { read_safetensors(dir.dir().string()); }), "");  // a directory
}

TEST(SafetensorsMalformed, ValidCornerCases) {
  // Empty tensors at the same offset, padding spaces, metadata, header length
  // not a multiple of 8 (misaligned data is copied to aligned memory).
  std::string f64(16, '\0');
  double v[2] = {1.5, -2.25};
  std::memcpy(f64.data(), v, 16);
  std::string h =
      "{\"__metadata__\":{\"a\":\"b\"},\"e1\":{\"dtype\":\"F32\",\"shape\":[0,3],"
      "\"data_offsets\":[0,0]},\"e2\":{\"dtype\":\"I64\",\"shape\":[2,0],\"data_offsets\":[0,0]},"
      "\"x\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]}}";
  for (int pad : {0, 1, 3, 8}) {
    std::string bytes = st_bytes(h + std::string(size_t(pad), ' '), f64);
    std::vector<char> heap(bytes.begin(), bytes.end());
    TensorMap m = read_safetensors_bytes(heap.data(), heap.size(), "corner");
    ASSERT_EQ(m.size(), 3u);
    EXPECT_EQ(m.at("e1").dims(), (Dims{0, 3}));
    EXPECT_EQ(m.at("e2").dtype(), DType::I64);
    const Tensor& x = m.at("x");
    EXPECT_EQ(reinterpret_cast<uintptr_t>(x.raw()) % 8, 0u) << pad;
    EXPECT_EQ(x.item_as_double(0), 1.5);
    EXPECT_EQ(x.item_as_double(1), -2.25);
  }
  // Bool bytes other than 0/1 read as true (normalized, not UB).
  std::string b = st_bytes("{\"m\":{\"dtype\":\"BOOL\",\"shape\":[4],\"data_offsets\":[0,4]}}",
                           std::string("\x00\x01\x07\xff", 4));
  Tensor m = read_safetensors_bytes(b.data(), b.size(), "bools").at("m");
  const auto* p = static_cast<const uint8_t*>(m.raw());
  EXPECT_EQ(std::vector<int>(p, p + 4), (std::vector<int>{0, 1, 1, 1}));
}

// Deterministic mini-fuzz: mutations of the whole file, and of the header text
// alone with a consistent length field (to get past the JSON parse), must
// give tensors or rlx::Error and never read outside the buffer.
TEST(SafetensorsFuzz, MutationsGiveTensorsOrErrors) {
  ScratchDir dir("st_fuzz");
  write_safetensors(dir.path("seed.safetensors"),
                    {{"a", reference_tensor({2, 3}, DType::F32)},
                     {"b", reference_tensor({4}, DType::I64)},
                     {"c", reference_tensor({0, 2}, DType::F16)},
                     {"d", reference_tensor({5}, DType::Bool)}},
                    {{"k", "v"}});
  const std::string seed = read_file_bytes(dir.path("seed.safetensors"));
  size_t hlen = 0;
  for (int i = 7; i >= 0; --i) hlen = hlen << 8 | uint8_t(seed[size_t(i)]);
  const std::string header = seed.substr(8, hlen), data = seed.substr(8 + hlen);
  std::mt19937_64 rng(777);
  int parsed = 0, errors = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string bytes;
    if (iter % 2) {
      bytes = seed;
      for (int k = 1 + int(rng() % 3); k > 0; --k) mutate(bytes, rng, 8 + hlen);
    } else {
      std::string h = header, d = data;
      for (int k = 1 + int(rng() % 3); k > 0; --k) mutate(h, rng, h.size());
      if (rng() % 4 == 0) mutate(d, rng, 0);
      bytes = st_bytes(h, d);
    }
    std::vector<char> exact(bytes.begin(), bytes.end());
    try {
      TensorMap m = read_safetensors_bytes(exact.data(), exact.size(), "fuzz.st");
      for (const auto& [name, t] : m)
        for (int64_t i = 0; i < t.numel(); ++i) g_sink = g_sink + t.item_as_double(i);
      ++parsed;
    } catch (const Error& e) {
      ASSERT_EQ(std::string(e.what()).rfind("fuzz.st: ", 0), 0u) << e.what();
      ++errors;
    }
  }
  EXPECT_GT(parsed, 100);
  EXPECT_GT(errors, 1000);
}

}  // namespace
}  // namespace rlx
