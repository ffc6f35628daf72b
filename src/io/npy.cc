// NumPy .npy files: "\x93NUMPY", a version, a header length, a Python dict
// literal {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } and the
// raw data. The header is parsed strictly (no eval), and the shape is checked
// against the file size before anything is allocated.
#include <algorithm>
#include <cstring>
#include <optional>

#include "io/io_util.h"
#include "rlx/error.h"
#include "rlx/io.h"

namespace rlx {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
// NumPy itself refuses headers over 10000 bytes by default; be a bit looser.
constexpr size_t kNpyMaxHeader = size_t(1) << 20;

struct NpyHeader {
  std::string descr;
  bool fortran = false;
  std::vector<uint64_t> shape;
};

// Recursive-descent parser for exactly the dict literal NumPy writes: string
// keys 'descr', 'fortran_order', 'shape' (each once), a string, a bool and a
// tuple of non-negative ints; trailing commas and whitespace as in Python.
class HeaderParser {
 public:
  explicit HeaderParser(std::string_view s) : s_(s) {}

  NpyHeader parse() {
    NpyHeader h;
    bool have_descr = false, have_fortran = false, have_shape = false;
    expect('{');
    for (;;) {
      if (peek() == '}') break;
      std::string key = string_lit();
      expect(':');
      if (key == "descr") {
        RLX_CHECK(!have_descr, "duplicate key 'descr'");
        RLX_CHECK(peek() == '\'' || peek() == '"',
                  "'descr' must be a string (structured dtypes are not supported)");
        h.descr = string_lit();
        have_descr = true;
      } else if (key == "fortran_order") {
        RLX_CHECK(!have_fortran, "duplicate key 'fortran_order'");
        h.fortran = bool_lit();
        have_fortran = true;
      } else if (key == "shape") {
        RLX_CHECK(!have_shape, "duplicate key 'shape'");
        h.shape = tuple_lit();
        have_shape = true;
      } else {
        throw make_error("unexpected key '", key, "'");
      }
      if (peek() == ',') {
        ++i_;
        continue;
      }
      RLX_CHECK(peek() == '}', "expected ',' or '}' at byte ", i_);
    }
    ++i_;
    skip_ws();
    RLX_CHECK(i_ == s_.size(), "trailing characters after the header dict at byte ", i_);
    RLX_CHECK(have_descr && have_fortran && have_shape,
              "header needs 'descr', 'fortran_order' and 'shape'");
    return h;
  }

 private:
  void skip_ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r'))
      ++i_;
  }
  char peek() {
    skip_ws();
    return i_ < s_.size() ? s_[i_] : '\0';
  }
  void expect(char c) {
    RLX_CHECK(peek() == c, "expected '", c, "' at byte ", i_);
    ++i_;
  }
  std::string string_lit() {
    char q = peek();
    RLX_CHECK(q == '\'' || q == '"', "expected a string at byte ", i_);
    size_t end = s_.find(q, i_ + 1);
    RLX_CHECK(end != std::string_view::npos, "unterminated string");
    std::string v(s_.substr(i_ + 1, end - i_ - 1));
    for (char c : v)  // plain printable ASCII: no escapes in any valid descr or key
      RLX_CHECK(c >= 0x20 && c < 0x7f && c != '\\', "unsupported character in header string");
    i_ = end + 1;
    return v;
  }
  bool bool_lit() {
    skip_ws();
    for (auto [word, value] : {std::pair{"True", true}, std::pair{"False", false}}) {
      size_t n = std::strlen(word);
      if (s_.substr(i_, n) == word) {
        i_ += n;
        return value;
      }
    }
    throw make_error("'fortran_order' must be True or False");
  }
  std::vector<uint64_t> tuple_lit() {
    expect('(');
    std::vector<uint64_t> dims;
    bool trailing_comma = false;
    while (peek() != ')') {
      RLX_CHECK(dims.size() < kMaxRank, "shape has more than ", kMaxRank, " dims");
      dims.push_back(int_lit());
      trailing_comma = false;
      if (peek() == ',') {
        ++i_;
        trailing_comma = true;
      } else {
        RLX_CHECK(peek() == ')', "expected ',' or ')' in shape at byte ", i_);
      }
    }
    ++i_;
    // "(3)" is the int 3 in Python, not a tuple: NumPy always writes "(3,)".
    RLX_CHECK(dims.size() != 1 || trailing_comma, "shape must be a tuple");
    return dims;
  }
  uint64_t int_lit() {
    skip_ws();
    size_t start = i_;
    uint64_t v = 0;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
      RLX_CHECK(v <= uint64_t(kMaxElements), "shape dim too large");
      v = v * 10 + uint64_t(s_[i_++] - '0');
    }
    RLX_CHECK(i_ > start, "shape entries must be non-negative integers (at byte ", start, ")");
    RLX_CHECK(s_[start] != '0' || i_ == start + 1, "shape entry with a leading zero");
    if (i_ < s_.size() && s_[i_] == 'L') ++i_;  // Python 2 long suffix, as NumPy accepts
    return v;
  }

  std::string_view s_;
  size_t i_ = 0;
};

struct Descr {
  DType dtype;
  bool big_endian;
};

Descr parse_descr(const std::string& d) {
  auto bad = [&] {
    return make_error("unsupported dtype descr '", d,
                      "' (supported: f2 f4 f8 i1 i2 i4 i8 u1 b1, any byte order)");
  };
  if (d.size() < 3) throw bad();
  char order = d[0];
  std::string code = d.substr(1);
  if (order != '<' && order != '>' && order != '|' && order != '=') throw bad();
  static const std::pair<const char*, DType> kCodes[] = {
      {"f2", DType::F16}, {"f4", DType::F32}, {"f8", DType::F64},
      {"i1", DType::I8},  {"i2", DType::I16}, {"i4", DType::I32},
      {"i8", DType::I64}, {"u1", DType::U8},  {"b1", DType::Bool}};
  for (const auto& [c, t] : kCodes)
    if (code == c) return {t, order == '>'};
  throw bad();
}

const char* descr_of(DType t) {
  switch (t) {
    case DType::F32:
      return "<f4";
    case DType::F16:
      return "<f2";
    case DType::F64:
      return "<f8";
    case DType::I8:
      return "|i1";
    case DType::I16:
      return "<i2";
    case DType::I32:
      return "<i4";
    case DType::I64:
      return "<i8";
    case DType::U8:
      return "|u1";
    case DType::Bool:
      return "|b1";
    case DType::BF16:
      break;
  }
  return nullptr;
}

uint64_t read_le(const unsigned char* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

Tensor parse_npy(const unsigned char* p, size_t size) {
  RLX_CHECK(size >= kMagicLen + 2 && std::memcmp(p, kMagic, kMagicLen) == 0,
            "not a .npy file (bad magic)");
  const int major = p[6], minor = p[7];
  RLX_CHECK(major >= 1 && major <= 3 && minor == 0, "unsupported .npy version ", major, ".", minor);
  const int len_bytes = major == 1 ? 2 : 4;
  const size_t prefix = kMagicLen + 2 + size_t(len_bytes);
  RLX_CHECK(size >= prefix, "truncated header length (file has ", size, " bytes)");
  const uint64_t header_len = read_le(p + 8, len_bytes);
  RLX_CHECK(header_len <= kNpyMaxHeader, "header length ", header_len, " exceeds the ",
            kNpyMaxHeader, "-byte limit");
  RLX_CHECK(header_len <= size - prefix, "header claims ", header_len, " bytes but the file has ",
            size - prefix, " after the length field");
  std::string_view text(reinterpret_cast<const char*>(p + prefix), size_t(header_len));
  NpyHeader h;
  try {
    h = HeaderParser(text).parse();
  } catch (const Error& e) {
    // The header ends in padding and '\n': quote it without them, on one line.
    std::string shown(text.substr(0, 200));
    while (!shown.empty() && (shown.back() == ' ' || shown.back() == '\n')) shown.pop_back();
    for (char& c : shown)
      if (c == '\n' || c == '\r') c = ' ';
    throw e.with_context("bad header " + shown);
  }
  const Descr d = parse_descr(h.descr);
  const size_t es = dtype_size(d.dtype);
  uint64_t n = 0;
  RLX_CHECK(io::checked_numel(h.shape, n), "shape in header is too large");
  const size_t data_start = prefix + size_t(header_len);
  const uint64_t have = size - data_start;
  RLX_CHECK(n <= have / es && n * es == have, "shape ",
            dims_str(Dims(h.shape.begin(), h.shape.end())), " ", h.descr, " needs ", n, " x ", es,
            " data bytes, the file has ", have);

  // Fortran order stores the reversed dims in C order; transpose back below.
  Dims dims(h.shape.begin(), h.shape.end());
  Dims stored = dims;
  if (h.fortran) std::reverse(stored.begin(), stored.end());
  Tensor t(stored, d.dtype);
  if (n > 0) std::memcpy(t.raw(), p + data_start, size_t(n) * es);
  auto* b = static_cast<unsigned char*>(t.raw());
  if (d.big_endian && es > 1)
    for (uint64_t i = 0; i < n; ++i) std::reverse(b + i * es, b + (i + 1) * es);
  if (d.dtype == DType::Bool)  // any non-zero byte is True; only 0/1 are valid C++ bools
    for (uint64_t i = 0; i < n; ++i) b[i] = b[i] != 0;
  if (h.fortran && t.rank() > 1) {
    std::vector<int> perm(size_t(t.rank()));
    for (int i = 0; i < t.rank(); ++i) perm[size_t(i)] = t.rank() - 1 - i;
    t = t.permute(perm).clone();
  }
  return t;
}

}  // namespace

Tensor read_npy_bytes(const void* data, size_t size, const std::string& source_name) {
  try {
    return parse_npy(static_cast<const unsigned char*>(data), size);
  } catch (const Error& e) {
    throw e.with_context(source_name);
  }
}

Tensor read_npy(const std::string& path) {
  std::shared_ptr<Buffer> buf = map_file(path);
  return read_npy_bytes(buf->data(), buf->size(), path);
}

void write_npy(const std::string& path, const Tensor& t) {
  RLX_CHECK(t.defined(), path, ": cannot write an undefined tensor");
  const char* descr = descr_of(t.dtype());
  RLX_CHECK(descr, path, ": NumPy has no ", dtype_name(t.dtype()),
            " dtype; cast the tensor (e.g. to f32) before writing .npy");
  std::string shape = "(";
  for (int i = 0; i < t.rank(); ++i) shape += std::to_string(t.dims()[size_t(i)]) + ", ";
  if (t.rank() > 1) shape.resize(shape.size() - 2);  // "(3, 4)"; a 1-tuple keeps "(3,"
  if (t.rank() == 1) shape.pop_back();
  shape += ")";
  std::string header =
      std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad with spaces and a final newline so the data starts 64-byte aligned.
  auto padded = [&](size_t prefix) {
    return header.size() + 1 + (64 - (prefix + header.size() + 1) % 64) % 64;
  };
  const size_t prefix = padded(10) <= 65535 ? 10 : 12;  // version 1.0, or 2.0 for huge ranks
  header.append(padded(prefix) - header.size() - 1, ' ');
  header += '\n';
  std::string head(kMagic, kMagicLen);
  head += char(prefix == 10 ? 1 : 2);
  head += char(0);
  for (size_t i = 0; i < prefix - 8; ++i) head += char((header.size() >> (8 * i)) & 0xff);
  Tensor c = t.contiguous();
  io::write_file_atomic(path, {head, header, io::bytes_of(c)});
}

}  // namespace rlx
