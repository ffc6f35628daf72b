// GGUF reader: every count, length and offset is validated against the bytes
// that are actually there before anything is allocated or dereferenced.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include "core/file_pages.h"
#include "rlx/checked.h"
#include "rlx/error.h"
#include "rlx/gguf.h"

namespace rlx::gguf {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr size_t kMaxNameLen = 63;       // ggml's GGML_MAX_NAME - 1
constexpr int kMaxDims = 4;

// Smallest encoding of one value of each type (strings: the u64 length;
// arrays: element type + count), used to bound counts before allocating.
uint64_t min_size(ValueType t) {
  switch (t) {
    case ValueType::U8:
    case ValueType::I8:
    case ValueType::BOOL:
      return 1;
    case ValueType::U16:
    case ValueType::I16:
      return 2;
    case ValueType::U32:
    case ValueType::I32:
    case ValueType::F32:
      return 4;
    case ValueType::U64:
    case ValueType::I64:
    case ValueType::F64:
    case ValueType::STRING:
      return 8;
    case ValueType::ARRAY:
      return 12;
  }
  return 1;
}

class Cursor {
 public:
  Cursor(const uint8_t* data, uint64_t size) : p_(data), size_(size) {}
  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }
  void need(uint64_t n, const char* what) {
    RLX_CHECK(n <= left(), "truncated file: ", what, " needs ", n, " bytes at offset ", pos_,
              " but only ", left(), " remain");
  }
  template <typename T>
  T get(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string str(const char* what) {
    const uint64_t n = get<uint64_t>(what);
    need(n, what);
    std::string s(reinterpret_cast<const char*>(p_ + pos_), size_t(n));
    pos_ += n;
    return s;
  }

 private:
  const uint8_t* p_;
  uint64_t size_, pos_ = 0;
};

ValueType checked_type(uint32_t t, const std::string& key) {
  RLX_CHECK(t <= 12, "metadata '", key, "': invalid value type ", t);
  return ValueType(t);
}

Value read_value(Cursor& c, ValueType t, const std::string& key) {
  Value v;
  v.type = t;
  switch (t) {
    case ValueType::U8:
      v.u = c.get<uint8_t>("u8");
      break;
    case ValueType::I8:
      v.i = c.get<int8_t>("i8");
      break;
    case ValueType::U16:
      v.u = c.get<uint16_t>("u16");
      break;
    case ValueType::I16:
      v.i = c.get<int16_t>("i16");
      break;
    case ValueType::U32:
      v.u = c.get<uint32_t>("u32");
      break;
    case ValueType::I32:
      v.i = c.get<int32_t>("i32");
      break;
    case ValueType::U64:
      v.u = c.get<uint64_t>("u64");
      break;
    case ValueType::I64:
      v.i = c.get<int64_t>("i64");
      break;
    case ValueType::F32:
      v.f = c.get<float>("f32");
      break;
    case ValueType::F64:
      v.f = c.get<double>("f64");
      break;
    case ValueType::BOOL: {
      const uint8_t b = c.get<uint8_t>("bool");
      RLX_CHECK(b <= 1, "metadata '", key, "': bool byte is ", int(b));
      v.u = b;
      break;
    }
    case ValueType::STRING:
      v.s = c.str("string");
      break;
    case ValueType::ARRAY: {
      v.elem_type = checked_type(c.get<uint32_t>("array type"), key);
      // ggml rejects arrays of arrays; so do we, so a file either loads in
      // both or in neither (and nesting cannot recurse).
      RLX_CHECK(v.elem_type != ValueType::ARRAY, "metadata '", key,
                "': arrays of arrays are not supported (ggml rejects them)");
      const uint64_t n = c.get<uint64_t>("array count");
      RLX_CHECK(n <= c.left() / min_size(v.elem_type), "metadata '", key, "': array count ", n,
                " exceeds the remaining file");
      v.arr.reserve(size_t(n));
      for (uint64_t k = 0; k < n; ++k) v.arr.push_back(read_value(c, v.elem_type, key));
      break;
    }
  }
  return v;
}

File parse(const uint8_t* data, uint64_t size, const std::string& source) {
  Cursor c(data, size);
  File f;
  f.source = source;
  RLX_CHECK(c.get<uint32_t>("magic") == kMagic, "not a GGUF file (bad magic)");
  f.version = c.get<uint32_t>("version");
  RLX_CHECK((f.version & 0xFFFF) != 0, "big-endian GGUF files are not supported");
  RLX_CHECK(f.version == 2 || f.version == 3, "unsupported GGUF version ", f.version);
  const uint64_t n_tensors = c.get<uint64_t>("tensor count");
  const uint64_t n_kv = c.get<uint64_t>("metadata count");
  // A kv pair takes at least 8 (key length) + 1 (key) + 4 (type) + 1 bytes;
  // a tensor info at least 8 + 1 + 4 + 8 + 4 + 8.
  RLX_CHECK(n_kv <= c.left() / 14, "metadata count ", n_kv, " exceeds the file");
  RLX_CHECK(n_tensors <= c.left() / 33, "tensor count ", n_tensors, " exceeds the file");

  std::set<std::string> keys;
  f.metadata.reserve(size_t(n_kv));
  for (uint64_t k = 0; k < n_kv; ++k) {
    std::string key = c.str("metadata key");
    RLX_CHECK(!key.empty(), "empty metadata key");
    RLX_CHECK(keys.insert(key).second, "duplicate metadata key '", key, "'");
    const ValueType t = checked_type(c.get<uint32_t>("value type"), key);
    Value v = read_value(c, t, key);
    f.metadata.emplace_back(std::move(key), std::move(v));
  }
  if (const Value* a = f.find("general.alignment")) {
    RLX_CHECK(a->type == ValueType::U32, "general.alignment must be u32, got ",
              value_type_name(a->type));
    RLX_CHECK(a->u != 0 && (a->u & (a->u - 1)) == 0, "general.alignment ", a->u,
              " is not a power of two");
    f.alignment = a->u;
  }

  std::set<std::string> names;
  f.tensors.reserve(size_t(n_tensors));
  for (uint64_t k = 0; k < n_tensors; ++k) {
    TensorInfo t;
    t.name = c.str("tensor name");
    RLX_CHECK(t.name.size() <= kMaxNameLen, "tensor name '", t.name.substr(0, 80),
              "' is longer than ", kMaxNameLen, " bytes");
    RLX_CHECK(names.insert(t.name).second, "duplicate tensor '", t.name, "'");
    const uint32_t n_dims = c.get<uint32_t>("tensor n_dims");
    RLX_CHECK(n_dims <= kMaxDims, "tensor '", t.name, "': ", n_dims, " dims (max ", kMaxDims, ")");
    uint64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t ne = c.get<uint64_t>("tensor dim");
      // The limits of rlx/checked.h, so numel() and byte sizes never overflow.
      constexpr uint64_t kMax = uint64_t(kMaxElements);
      RLX_CHECK(ne <= kMax, "tensor '", t.name, "': dim ", ne, " is too large");
      RLX_CHECK(ne == 0 || numel <= kMax / ne, "tensor '", t.name, "': element count overflows");
      numel *= ne;
      t.ne.push_back(int64_t(ne));
    }
    const uint32_t type = c.get<uint32_t>("tensor type");
    const quant::TypeTraits* tr;
    try {
      tr = &quant::traits(type);
    } catch (const Error& e) {
      throw e.with_context("tensor '" + t.name + "'");
    }
    t.type = tr->type;
    const int64_t ne0 = t.ne.empty() ? 1 : t.ne[0];
    RLX_CHECK(ne0 % tr->block_size == 0, "tensor '", t.name, "': ne[0] = ", ne0,
              " is not a multiple of ", tr->name, "'s block size ", tr->block_size);
    t.nbytes = numel / uint64_t(tr->block_size) * tr->type_size;  // < 2^60 * 292 / 256 fits
    t.offset = c.get<uint64_t>("tensor offset");
    RLX_CHECK(t.offset % f.alignment == 0, "tensor '", t.name, "': offset ", t.offset,
              " is not a multiple of the alignment ", f.alignment);
    f.tensors.push_back(std::move(t));
  }

  const uint64_t pad = (f.alignment - c.pos() % f.alignment) % f.alignment;
  f.data_offset = c.pos() + pad;
  RLX_CHECK(f.data_offset <= size || n_tensors == 0, "truncated file: data section starts at ",
            f.data_offset, " beyond the end (", size, " bytes)");
  const uint64_t data_size = f.data_offset <= size ? size - f.data_offset : 0;
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  for (TensorInfo& t : f.tensors) {
    RLX_CHECK(t.offset <= data_size && t.nbytes <= data_size - t.offset, "tensor '", t.name,
              "': bytes [", t.offset, ", ", t.offset, " + ", t.nbytes,
              ") lie outside the data section of ", data_size, " bytes");
    t.data = data + f.data_offset + t.offset;
    if (t.nbytes) spans.push_back({t.offset, t.nbytes});
  }
  std::sort(spans.begin(), spans.end());
  for (size_t k = 1; k < spans.size(); ++k)
    RLX_CHECK(spans[k - 1].first + spans[k - 1].second <= spans[k].first,
              "tensors overlap at data offset ", spans[k].first);
  return f;
}

}  // namespace

File read_bytes(const void* data, size_t size, const std::string& source_name) {
  try {
    return parse(static_cast<const uint8_t*>(data), size, source_name);
  } catch (const Error& e) {
    throw e.with_context(source_name);
  }
}

File read(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  RLX_CHECK(fd >= 0, path, ": cannot open: ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw make_error(path, ": cannot stat: ", std::strerror(errno));
  }
  const size_t size = size_t(st.st_size);
  void* p = nullptr;
  if (size > 0) {
    p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      throw make_error(path, ": mmap failed: ", std::strerror(errno));
    }
  }
  ::close(fd);
  register_file_mapping(p, size);
  std::shared_ptr<const void> mapping(p, [size](const void* q) {
    if (!q) return;
    unregister_file_mapping(q);
    ::munmap(const_cast<void*>(q), size);
  });
  static const uint8_t kEmpty = 0;
  File f = read_bytes(p ? p : &kEmpty, size, path);
  f.mapping = std::move(mapping);
  return f;
}

}  // namespace rlx::gguf
