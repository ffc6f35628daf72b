// .npy reader/writer: round trips, files written by NumPy at test time, and
// malformed files (each must be an rlx::Error naming the file, never a crash).
#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "io/io_testing.h"
#include "support/testing.h"

namespace rlx {
namespace {
using testing::error_of;

using namespace rlx::testing;

const std::vector<Dims> kNpyShapes = {{},     {0},       {1},       {5},
                                      {2, 3}, {2, 0, 3}, {2, 3, 4}, {1, 1, 2, 1}};

// The exception message of f(), or "" when it does not throw rlx::Error.

// A .npy file with a hand-written header (version 1.0), for malformed inputs.
std::string npy_bytes(const std::string& header, const std::string& data, int major = 1) {
  std::string h = header + "\n";
  std::string out = std::string("\x93NUMPY", 6) + char(major) + char(0);
  const int len_bytes = major == 1 ? 2 : 4;
  for (int i = 0; i < len_bytes; ++i) out += char((h.size() >> (8 * i)) & 0xff);
  return out + h + data;
}

TEST(Npy, RoundTripsEveryDtypeAndShape) {
  ScratchDir dir("npy_rt");
  for (DType t : kNumpyDTypes)
    for (const Dims& d : kNpyShapes) {
      Tensor want = reference_tensor(d, t);
      std::string path = dir.path("a.npy");
      write_npy(path, want);
      Tensor got = read_npy(path);
      EXPECT_TRUE(all_equal(got, want)) << dtype_name(t) << " " << dims_str(d);
      EXPECT_EQ(got.dims(), d);
      EXPECT_TRUE(got.is_contiguous());
    }
}

TEST(Npy, WritesHeaderNumpyStyleAndAligned) {
  ScratchDir dir("npy_hdr");
  write_npy(dir.path("a.npy"), reference_tensor({2, 3}, DType::F32));
  std::string b = read_file_bytes(dir.path("a.npy"));
  ASSERT_GE(b.size(), 10u);
  EXPECT_EQ(b.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  size_t hlen = uint8_t(b[8]) | size_t(uint8_t(b[9])) << 8;
  EXPECT_EQ((10 + hlen) % 64, 0u);
  EXPECT_EQ(b.size(), 10 + hlen + 6 * 4);
  EXPECT_EQ(b.substr(10, hlen).find("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"),
            0u);
  EXPECT_EQ(b[10 + hlen - 1], '\n');
  write_npy(dir.path("b.npy"), reference_tensor({7}, DType::Bool));
  EXPECT_NE(read_file_bytes(dir.path("b.npy")).find("'descr': '|b1'"), std::string::npos);
  EXPECT_NE(read_file_bytes(dir.path("b.npy")).find("'shape': (7,)"), std::string::npos);
  write_npy(dir.path("c.npy"), Tensor::scalar_f32(2.5f));
  EXPECT_NE(read_file_bytes(dir.path("c.npy")).find("'shape': ()"), std::string::npos);
}

TEST(Npy, WritesNonContiguousViewsPacked) {
  ScratchDir dir("npy_view");
  Tensor base = reference_tensor({3, 4, 5}, DType::I32);
  Tensor view = base.permute({2, 0, 1});
  ASSERT_FALSE(view.is_contiguous());
  write_npy(dir.path("v.npy"), view);
  EXPECT_TRUE(all_equal(read_npy(dir.path("v.npy")), view.contiguous()));
  // A strided slice (every other row).
  Tensor rows = base.strided_view({3, 2, 5}, {20, 10, 1}, 5);
  write_npy(dir.path("s.npy"), rows);
  Tensor got = read_npy(dir.path("s.npy"));
  ASSERT_EQ(got.dims(), (Dims{3, 2, 5}));
  EXPECT_EQ(got.item_as_double(5), base.item_as_double(15));  // [0][1][0] = base[0][3][0]
}

TEST(Npy, Bf16IsAnErrorNamingFileAndDtype) {
  ScratchDir dir("npy_bf16");
  std::string path = dir.path("x.npy");
  std::string msg = error_of([&] { write_npy(path, Tensor({2}, DType::BF16)); });
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("bf16"), std::string::npos) << msg;
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_NE(error_of([&] { write_npy(path, Tensor()); }), "");
  // Unwritable location: an error, not a crash, and no stray temp file.
  EXPECT_NE(error_of([&] { write_npy(dir.path("no/such/dir/x.npy"), Tensor({1}, DType::F32)); }),
            "");
}

// Files written by NumPy itself: every dtype, C and Fortran order, both byte
// orders, format versions 1.0/2.0/3.0, 0-d and empty; and our files loaded by
// NumPy and saved back.
class NpyFromNumpy : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir("npy_numpy");
    // Our files for NumPy to read back.
    for (DType t : kNumpyDTypes)
      write_npy(dir_->path(std::string("ours_") + numpy_name(t) + ".npy"),
                reference_tensor({2, 3, 4}, t));
    std::string py =
        "import numpy as np\n"
        "from numpy.lib import format as fmt\n"
        "def ref(dt, shape):\n"
        "    n = int(np.prod(shape))\n"
        "    i = np.arange(n, dtype=np.int64)\n"
        "    return (REFS[dt](i)).astype(dt).reshape(shape)\n"
        "REFS = {}\n";
    for (DType t : kNumpyDTypes)
      py += std::string("REFS['") + numpy_name(t) + "'] = lambda i: " + python_reference(t) + "\n";
    py +=
        "for dt in REFS:\n"
        "    a = ref(dt, (2, 3, 4))\n"
        "    np.save(f'c_{dt}.npy', a)\n"
        "    np.save(f'f_{dt}.npy', np.asfortranarray(a))\n"
        "    assert fmt.read_magic(open(f'f_{dt}.npy', 'rb')) == (1, 0)\n"
        "    np.save(f'be_{dt}.npy', a.astype(a.dtype.newbyteorder('>')))\n"
        "    np.save(f'fbe_{dt}.npy', np.asfortranarray(a.astype(a.dtype.newbyteorder('>'))))\n"
        "    np.save(f'scalar_{dt}.npy', ref(dt, (1,)).reshape(()))\n"
        "    np.save(f'empty_{dt}.npy', ref(dt, (2, 0, 3)))\n"
        "    for v in [(2, 0), (3, 0)]:\n"
        "        with open(f'v{v[0]}_{dt}.npy', 'wb') as f:\n"
        "            fmt.write_array(f, a, version=v)\n"
        "    back = np.load(f'ours_{dt}.npy')\n"
        "    assert back.dtype == np.dtype(dt) and back.shape == (2, 3, 4), (dt, back.dtype)\n"
        "    assert np.array_equal(back, a), dt\n"
        "np.save('f2d.npy', np.asfortranarray(np.arange(12, dtype=np.float32).reshape(3, 4)))\n"
        "np.save('fvec.npy', np.asfortranarray(np.arange(5, dtype=np.int16)))\n";
    run_python(py, dir_->dir());
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static ScratchDir* dir_;
};
ScratchDir* NpyFromNumpy::dir_ = nullptr;

TEST_F(NpyFromNumpy, ReadsEveryLayoutAndVersion) {
  for (DType t : kNumpyDTypes) {
    const std::string n = numpy_name(t);
    Tensor want = reference_tensor({2, 3, 4}, t);
    for (const char* kind : {"c_", "f_", "be_", "fbe_", "v2_", "v3_"}) {
      Tensor got = read_npy(dir_->path(kind + n + ".npy"));
      EXPECT_TRUE(all_equal(got, want)) << kind << n;
      EXPECT_TRUE(got.is_contiguous()) << kind << n;
    }
    EXPECT_TRUE(all_equal(read_npy(dir_->path("scalar_" + n + ".npy")), reference_tensor({}, t)))
        << n;
    Tensor empty = read_npy(dir_->path("empty_" + n + ".npy"));
    EXPECT_EQ(empty.dims(), (Dims{2, 0, 3})) << n;
    EXPECT_EQ(empty.dtype(), t);
  }
  // Fortran order is really transposed back: row-major [1][2] of arange(12).reshape(3,4) is 6.
  Tensor f = read_npy(dir_->path("f2d.npy"));
  ASSERT_EQ(f.dims(), (Dims{3, 4}));
  EXPECT_EQ(f.item_as_double(1 * 4 + 2), 6.0);
  Tensor v = read_npy(dir_->path("fvec.npy"));
  EXPECT_TRUE(all_equal(v, Tensor::from_vector<int32_t>({5}, {0, 1, 2, 3, 4}, DType::I16)));
}

TEST(NpyMalformed, TruncatedAtEveryLength) {
  ScratchDir dir("npy_trunc");
  const std::string good_path = dir.path("good.npy");
  write_npy(good_path, reference_tensor({2, 3}, DType::F64));
  const std::string good = read_file_bytes(good_path);
  ASSERT_TRUE(all_equal(read_npy(good_path), reference_tensor({2, 3}, DType::F64)));
  const std::string path = dir.path("cut.npy");
  for (size_t n = 0; n < good.size(); ++n) {
    write_file_bytes(path, good.substr(0, n));
    std::string msg = error_of([&] { read_npy(path); });
    ASSERT_NE(msg.find(path), std::string::npos) << "length " << n << ": '" << msg << "'";
  }
  // One extra byte is a lie too: the data must be exactly the shape's size.
  write_file_bytes(path, good + "x");
  EXPECT_NE(error_of([&] { read_npy(path); }).find("needs"), std::string::npos);
}

TEST(NpyMalformed, BadHeadersAreErrorsNamingTheFile) {
  ScratchDir dir("npy_bad");
  const std::string f4x12(48, '\0');
  const std::string ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }";
  ASSERT_EQ(read_npy_bytes(npy_bytes(ok, f4x12).data(), npy_bytes(ok, f4x12).size(), "m").dims(),
            (Dims{3, 4}));
  struct Case {
    const char* what;
    std::string bytes;
    const char* expect;  // substring of the message
  };
  auto hdr = [](const std::string& shape, const std::string& descr = "<f4",
                const std::string& fortran = "False") {
    return "{'descr': '" + descr + "', 'fortran_order': " + fortran + ", 'shape': " + shape + ", }";
  };
  std::string big_len = std::string("\x93NUMPY\x01\x00", 8) + "\xff\xff" + "{}";
  std::string v2_huge = std::string("\x93NUMPY\x02\x00", 8) + std::string("\xff\xff\xff\x7f", 4);
  const std::vector<Case> cases = {
      {"bad magic", "\x93NUMPX\x01\x00" + std::string(60, ' '), "magic"},
      {"version 4.0", npy_bytes(ok, f4x12, 4), "version"},
      {"header longer than file", big_len, "header claims"},
      {"v2 header length 2^31", v2_huge, "header length"},
      {"shape lies (too few bytes)", npy_bytes(hdr("(3, 5)"), f4x12), "needs"},
      {"shape lies (too many bytes)", npy_bytes(hdr("(2, 4)"), f4x12), "needs"},
      {"2^60 elements", npy_bytes(hdr("(1073741824, 1073741824)"), f4x12), "needs"},
      {"2^93 elements", npy_bytes(hdr("(2147483648, 2147483648, 2147483648)"), f4x12), "too large"},
      {"huge dims around a zero",
       npy_bytes(hdr("(4611686018427387904, 0, 4611686018427387904)"), ""), "too large"},
      {"dim beyond int64", npy_bytes(hdr("(99999999999999999999999,)"), f4x12), "too large"},
      {"negative dim", npy_bytes(hdr("(-1, 12)"), f4x12), "non-negative"},
      {"float dim", npy_bytes(hdr("(3.0, 4)"), f4x12), "expected ','"},
      {"1-tuple without comma", npy_bytes(hdr("(12)"), f4x12), "tuple"},
      {"complex dtype", npy_bytes(hdr("(3, 4)", "<c8"), f4x12), "unsupported dtype"},
      {"uint32 dtype", npy_bytes(hdr("(3, 4)", "<u4"), f4x12), "unsupported dtype"},
      {"object dtype", npy_bytes(hdr("(3, 4)", "|O"), f4x12), "unsupported dtype"},
      {"bad byte order", npy_bytes(hdr("(3, 4)", "!f4"), f4x12), "unsupported dtype"},
      {"structured dtype",
       npy_bytes("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (3, 4), }", f4x12),
       "structured"},
      {"fortran_order 1", npy_bytes(hdr("(3, 4)", "<f4", "1"), f4x12), "True or False"},
      {"missing shape", npy_bytes("{'descr': '<f4', 'fortran_order': False, }", f4x12),
       "needs 'descr'"},
      {"unknown key", npy_bytes(ok.substr(0, ok.size() - 1) + "'x': 1, }", f4x12),
       "unexpected key"},
      {"duplicate key",
       npy_bytes("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (3, 4)}",
                 f4x12),
       "duplicate"},
      {"trailing garbage", npy_bytes(ok + " x", f4x12), "trailing"},
      {"not a dict", npy_bytes("[1, 2]", f4x12), "expected '{'"},
      {"unterminated string", npy_bytes("{'descr", f4x12), "unterminated"},
      {"empty header", npy_bytes("", f4x12), "expected '{'"},
  };
  for (const Case& c : cases) {
    std::string path = dir.path("bad.npy");
    write_file_bytes(path, c.bytes);
    std::string msg = error_of([&] { read_npy(path); });
    EXPECT_NE(msg.find(path), std::string::npos) << c.what << ": '" << msg << "'";
    EXPECT_NE(msg.find(c.expect), std::string::npos) << c.what << ": '" << msg << "'";
  }
  EXPECT_NE(error_of([&] { read_npy(dir.path("missing.npy")); }).find("missing.npy"),
            std::string::npos);
}

TEST(NpyMalformed, NonCanonicalBoolBytesReadAsTrue) {
  std::string data("\x00\x01\x02\xff", 4);
  std::string b = npy_bytes("{'descr': '|b1', 'fortran_order': False, 'shape': (4,), }", data);
  Tensor t = read_npy_bytes(b.data(), b.size(), "bools");
  const auto* p = static_cast<const uint8_t*>(t.raw());
  EXPECT_EQ(std::vector<int>(p, p + 4), (std::vector<int>{0, 1, 1, 1}));
}

TEST(NpyMalformed, AcceptsPythonSpellingVariants) {
  // Double quotes, no trailing comma, Python 2 long suffix, '=' / '|' byte orders.
  std::string b = npy_bytes("{\"descr\":\"=i2\",\"fortran_order\":True,\"shape\":(2L,3L)}",
                            std::string(12, '\x01'));
  Tensor t = read_npy_bytes(b.data(), b.size(), "variant");
  EXPECT_EQ(t.dims(), (Dims{2, 3}));
  EXPECT_EQ(t.item_as_double(0), 257.0);
}

// Deterministic mini-fuzz: random mutations of a valid file (whole-file, and
// header-only with the length field kept consistent) must give a tensor or an
// rlx::Error, nothing else. Under ASan this also checks every read stays in bounds.
TEST(NpyFuzz, MutationsGiveTensorsOrErrors) {
  std::string h = "{'descr': '<i2', 'fortran_order': True, 'shape': (3, 2), }";
  const std::string data(12, '\x05');
  std::mt19937_64 rng(12345);
  int parsed = 0, errors = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string bytes;
    if (iter % 2) {
      bytes = npy_bytes(h, data);
      for (int k = 1 + int(rng() % 3); k > 0; --k) mutate(bytes, rng, 10 + h.size());
    } else {
      std::string hh = h;
      for (int k = 1 + int(rng() % 3); k > 0; --k) mutate(hh, rng, hh.size());
      bytes = npy_bytes(hh, data);
    }
    std::vector<char> exact(bytes.begin(), bytes.end());  // heap block of exact size for ASan
    try {
      Tensor t = read_npy_bytes(exact.data(), exact.size(), "fuzz.npy");
      for (int64_t i = 0; i < t.numel(); ++i) g_sink = g_sink + t.item_as_double(i);
      ++parsed;
    } catch (const Error& e) {
      ASSERT_NE(std::string(e.what()).find("fuzz.npy"), std::string::npos) << e.what();
      ++errors;
    }
  }
  // Both outcomes must occur, or the mutator is not exercising the parser.
  EXPECT_GT(parsed, 100);
  EXPECT_GT(errors, 1000);
}

}  // namespace
}  // namespace rlx
