// safetensors: u64 little-endian header length, a JSON header, then the data.
// Every size in the header is checked against the file before it is trusted,
// following the format's rules: the header is one JSON object starting with
// '{' and without duplicate keys; each entry is {dtype, shape, data_offsets};
// "__metadata__" maps strings to strings; the tensors tile the data section
// exactly (no overlaps, no holes, no trailing bytes).
#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "core/json_depth.h"
#include "io/io_util.h"
#include "rlx/error.h"
#include "rlx/io.h"

namespace rlx {
namespace {
using json = nlohmann::json;

// safetensors' own dtype spellings.
const char* st_dtype(DType t) {
  switch (t) {
    case DType::F32:
      return "F32";
    case DType::F16:
      return "F16";
    case DType::BF16:
      return "BF16";
    case DType::F64:
      return "F64";
    case DType::I8:
      return "I8";
    case DType::I16:
      return "I16";
    case DType::I32:
      return "I32";
    case DType::I64:
      return "I64";
    case DType::U8:
      return "U8";
    case DType::Bool:
      return "BOOL";
  }
  return "?";
}

DType parse_st_dtype(const std::string& s) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (s == st_dtype(DType(i))) return DType(i);
  throw make_error("unsupported dtype '", s, "'");
}

// Largest header we accept; the format itself caps it at 100 MB.
constexpr uint64_t kSafetensorsMaxHeader = 100ull << 20;

// Parses the header, rejecting duplicate keys at any depth (nlohmann keeps the
// last one silently, which would let two readers see different tensors).
json parse_header(const char* p, size_t n) {
  std::vector<std::set<std::string>> keys;
  std::string dup;
  auto cb = [&](int, json::parse_event_t ev, json& parsed) {
    if (ev == json::parse_event_t::object_start) keys.emplace_back();
    if (ev == json::parse_event_t::object_end && !keys.empty()) keys.pop_back();
    if (ev == json::parse_event_t::key && !keys.empty() && dup.empty() &&
        !keys.back().insert(parsed.get<std::string>()).second)
      dup = parsed.get<std::string>();
    return true;
  };
  check_json_depth(std::string_view(p, n), "header");
  json h;
  try {
    h = json::parse(p, p + n, cb);
  } catch (const json::exception& e) {
    throw make_error("header is not valid JSON: ", e.what());
  }
  RLX_CHECK(dup.empty(), "duplicate key '", dup, "' in header");
  return h;
}

struct Entry {
  std::string name;
  DType dtype;
  Dims dims;
  uint64_t begin, end;
};

Entry parse_entry(const std::string& name, const json& e, uint64_t data_len) {
  auto fail = [&](const std::string& why) { return make_error("tensor '", name, "': ", why); };
  if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets"))
    throw fail("entry must be an object with dtype, shape and data_offsets");
  const json &dt = e["dtype"], &sh = e["shape"], &off = e["data_offsets"];
  if (!dt.is_string()) throw fail("dtype must be a string");
  Entry out{name, DType::F32, {}, 0, 0};
  try {
    out.dtype = parse_st_dtype(dt.get<std::string>());
  } catch (const Error& ex) {
    throw fail(ex.what());
  }
  if (!sh.is_array()) throw fail("shape must be an array");
  std::vector<uint64_t> dims;
  for (const auto& d : sh) {
    if (!d.is_number_unsigned()) throw fail("shape entries must be non-negative integers");
    dims.push_back(d.get<uint64_t>());
  }
  uint64_t n = 0;
  if (!io::checked_numel(dims, n)) throw fail("shape " + sh.dump() + " is too large");
  const uint64_t es = dtype_size(out.dtype);
  if (n > data_len / es)
    throw fail("shape " + sh.dump() + " needs " + std::to_string(n) + " x " + std::to_string(es) +
               " bytes but the data section has " + std::to_string(data_len));
  if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
      !off[1].is_number_unsigned())
    throw fail("data_offsets must be two non-negative integers");
  out.begin = off[0].get<uint64_t>();
  out.end = off[1].get<uint64_t>();
  if (out.begin > out.end || out.end > data_len)
    throw fail("data_offsets [" + std::to_string(out.begin) + ", " + std::to_string(out.end) +
               "] outside the " + std::to_string(data_len) + "-byte data section");
  if (out.end - out.begin != n * es)
    throw fail("shape " + sh.dump() + " " + st_dtype(out.dtype) + " needs " +
               std::to_string(n * es) + " bytes, data_offsets span " +
               std::to_string(out.end - out.begin));
  out.dims.assign(dims.begin(), dims.end());
  return out;
}

TensorMap parse_safetensors(const std::shared_ptr<Buffer>& buf) {
  const size_t size = buf->size();
  RLX_CHECK(size >= 8, "not a safetensors file (", size, " bytes, need at least 8)");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = header_len << 8 | uint8_t(buf->data()[i]);
  RLX_CHECK(header_len <= kSafetensorsMaxHeader && header_len <= size - 8, "header claims ",
            header_len, " bytes but the file has ", size - 8, " after the length field");
  const char* hdr = reinterpret_cast<const char*>(buf->data() + 8);
  RLX_CHECK(header_len > 0 && hdr[0] == '{', "header must start with '{'");
  json h = parse_header(hdr, size_t(header_len));
  RLX_CHECK(h.is_object(), "header must be a JSON object");
  const size_t data_start = 8 + size_t(header_len);
  const uint64_t data_len = size - data_start;

  std::vector<Entry> entries;
  for (const auto& [name, e] : h.items()) {
    if (name == "__metadata__") {
      RLX_CHECK(e.is_object(), "__metadata__ must be an object of strings");
      for (const auto& [k, v] : e.items())
        RLX_CHECK(v.is_string(), "__metadata__ value of '", k, "' must be a string, got ",
                  v.type_name());
      continue;
    }
    entries.push_back(parse_entry(name, e, data_len));
  }
  // The tensors must tile the data section: sorted by offsets, each starts
  // where the previous ended (overlaps would alias, holes hide data).
  std::vector<const Entry*> order;
  for (const Entry& e : entries) order.push_back(&e);
  std::sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
    return std::tie(a->begin, a->end) < std::tie(b->begin, b->end);
  });
  uint64_t at = 0;
  const Entry* prev = nullptr;
  for (const Entry* e : order) {
    if (e->begin < at)
      throw make_error("tensors '", prev->name, "' and '", e->name, "' overlap (bytes [", e->begin,
                       ", ", std::min(at, e->end), ") of the data section)");
    RLX_CHECK(e->begin == at, "data section has a hole: bytes [", at, ", ", e->begin,
              ") belong to no tensor (before '", e->name, "')");
    at = e->end;
    prev = e;
  }
  RLX_CHECK(at == data_len, "data section has ", data_len - at,
            " trailing bytes that belong to no tensor");

  TensorMap out;
  for (const Entry& e : entries) {
    Tensor t(buf, data_start + size_t(e.begin), e.dims, e.dtype);
    const size_t es = dtype_size(e.dtype);
    // Views stay zero-copy unless the element alignment is off (a header
    // length not padded to 8) or bool bytes are not 0/1 (invalid C++ bools).
    bool copy = reinterpret_cast<uintptr_t>(t.raw()) % es != 0;
    if (e.dtype == DType::Bool) {
      const auto* b = static_cast<const uint8_t*>(t.raw());
      copy = copy || std::any_of(b, b + t.numel(), [](uint8_t v) { return v > 1; });
    }
    if (copy) {
      Tensor owned(e.dims, e.dtype);
      if (t.nbytes()) std::memcpy(owned.raw(), t.raw(), t.nbytes());
      if (e.dtype == DType::Bool) {
        auto* b = static_cast<uint8_t*>(owned.raw());
        for (int64_t i = 0; i < owned.numel(); ++i) b[i] = b[i] != 0;
      }
      t = owned;
    }
    out.emplace(e.name, std::move(t));
  }
  return out;
}

}  // namespace

TensorMap read_safetensors_bytes(const void* data, size_t size, const std::string& source) {
  try {
    return parse_safetensors(make_borrowed_buffer(const_cast<void*>(data), size));
  } catch (const Error& e) {
    throw e.with_context(source);
  }
}

TensorMap read_safetensors(const std::string& path) {
  std::shared_ptr<Buffer> buf = map_file(path);
  try {
    return parse_safetensors(buf);
  } catch (const Error& e) {
    throw e.with_context(path);
  }
}

void write_safetensors(const std::string& path, const TensorMap& tensors,
                       const std::map<std::string, std::string>& metadata) {
  json h = json::object();
  if (!metadata.empty()) h["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    RLX_CHECK(name != "__metadata__", path, ": '__metadata__' is reserved, not a tensor name");
    RLX_CHECK(t.defined(), path, ": tensor '", name, "' is undefined");
    h[name] = {{"dtype", st_dtype(t.dtype())},
               {"shape", t.dims()},
               {"data_offsets", {offset, offset + t.nbytes()}}};
    offset += t.nbytes();
  }
  std::string header;
  try {
    header = h.dump();
  } catch (const json::exception& e) {  // e.g. a name that is not valid UTF-8
    throw make_error(path, ": cannot encode the header: ", e.what());
  }
  header.append((8 - header.size() % 8) % 8, ' ');  // keeps the data 8-byte aligned
  std::string len(8, '\0');
  for (int i = 0; i < 8; ++i) len[size_t(i)] = char(uint64_t(header.size()) >> (8 * i));
  std::vector<Tensor> packed;  // keeps contiguous copies alive while writing
  std::vector<std::string_view> pieces{len, header};
  for (const auto& [name, t] : tensors) {
    packed.push_back(t.contiguous());
    pieces.push_back(io::bytes_of(packed.back()));
  }
  io::write_file_atomic(path, pieces);
}

}  // namespace rlx
