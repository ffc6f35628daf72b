// safetensors: u64 little-endian header length, a JSON header, then the data.
// Every size in the header is checked against the file before it is trusted.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "rlx/error.h"
#include "rlx/io.h"

namespace rlx {
namespace {
using json = nlohmann::json;

// safetensors' own dtype spellings.
const char* st_dtype(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::F64: return "F64";
    case DType::I8: return "I8";
    case DType::I16: return "I16";
    case DType::I32: return "I32";
    case DType::I64: return "I64";
    case DType::U8: return "U8";
    case DType::Bool: return "BOOL";
  }
  return "?";
}

DType parse_st_dtype(const std::string& s) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (s == st_dtype(DType(i))) return DType(i);
  throw make_error("unsupported dtype '", s, "'");
}

// Largest header we accept; the format itself caps it at 100 MB.
constexpr uint64_t kMaxHeader = 100ull << 20;

TensorMap parse_safetensors(std::shared_ptr<Buffer> buf, const std::string& source) {
  const size_t size = buf->size();
  RLX_CHECK(size >= 8, source, ": not a safetensors file (", size, " bytes, need at least 8)");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = header_len << 8 | uint8_t(buf->data()[i]);
  RLX_CHECK(header_len <= kMaxHeader && header_len <= size - 8, source,
            ": header claims ", header_len, " bytes but the file has ", size - 8,
            " after the length field");
  const char* hdr = reinterpret_cast<const char*>(buf->data() + 8);
  json h;
  try {
    h = json::parse(hdr, hdr + header_len);
  } catch (const json::exception& e) {
    throw make_error(source, ": header is not valid JSON: ", e.what());
  }
  RLX_CHECK(h.is_object(), source, ": header must be a JSON object");
  const size_t data_start = 8 + size_t(header_len);
  const uint64_t data_len = size - data_start;
  TensorMap out;
  for (const auto& [name, e] : h.items()) {
    if (name == "__metadata__") continue;
    auto fail = [&](const std::string& why) {
      return make_error(source, ": tensor '", name, "': ", why);
    };
    if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") ||
        !e.contains("data_offsets"))
      throw fail("entry needs dtype, shape and data_offsets");
    DType dt;
    try {
      dt = parse_st_dtype(e["dtype"].get<std::string>());
    } catch (const std::exception& ex) {
      throw fail(ex.what());
    }
    const auto& sh = e["shape"];
    const auto& off = e["data_offsets"];
    if (!sh.is_array() || !off.is_array() || off.size() != 2) throw fail("malformed shape or data_offsets");
    Dims dims;
    uint64_t n = 1;
    for (const auto& d : sh) {
      if (!d.is_number_unsigned()) throw fail("shape entries must be non-negative integers");
      uint64_t v = d.get<uint64_t>();
      // Overflow-safe: a non-empty tensor can never have more elements than the data has bytes.
      if (v > (uint64_t(1) << 48) || (v != 0 && n > data_len / v))
        throw fail("shape " + sh.dump() + " is larger than the file");
      n *= v;
      dims.push_back(int64_t(v));
    }
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned()) throw fail("bad data_offsets");
    uint64_t b = off[0].get<uint64_t>(), en = off[1].get<uint64_t>();
    if (b > en || en > data_len)
      throw fail("data_offsets [" + std::to_string(b) + ", " + std::to_string(en) +
                 "] outside the " + std::to_string(data_len) + "-byte data section");
    if (en - b != n * dtype_size(dt))
      throw fail("shape " + sh.dump() + " " + st_dtype(dt) + " needs " +
                 std::to_string(n * dtype_size(dt)) + " bytes, data_offsets span " +
                 std::to_string(en - b));
    out.emplace(name, Tensor(buf, data_start + size_t(b), dims, dt));
  }
  return out;
}

}  // namespace

TensorMap read_safetensors_bytes(const void* data, size_t size, const std::string& source) {
  return parse_safetensors(make_borrowed_buffer(const_cast<void*>(data), size), source);
}

TensorMap read_safetensors(const std::string& path) {
  return parse_safetensors(map_file(path), path);
}

void write_safetensors(const std::string& path, const TensorMap& tensors,
                       const std::map<std::string, std::string>& metadata) {
  json h = json::object();
  if (!metadata.empty()) h["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    h[name] = {{"dtype", st_dtype(t.dtype())}, {"shape", t.dims()},
               {"data_offsets", {offset, offset + t.nbytes()}}};
    offset += t.nbytes();
  }
  std::string header = h.dump();
  header.append((8 - header.size() % 8) % 8, ' ');  // keeps the data 8-byte aligned
  std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  RLX_CHECK(f, path, ": cannot open for writing: ", std::strerror(errno));
  bool ok = true;
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = uint8_t(uint64_t(header.size()) >> (8 * i));
  ok = ok && std::fwrite(len, 1, 8, f) == 8;
  ok = ok && std::fwrite(header.data(), 1, header.size(), f) == header.size();
  for (const auto& [name, t] : tensors) {
    Tensor c = t.contiguous();
    ok = ok && std::fwrite(c.raw(), 1, c.nbytes(), f) == c.nbytes();
  }
  ok = std::fclose(f) == 0 && ok;
  if (!ok) {
    std::remove(tmp.c_str());
    throw make_error(path, ": write failed");
  }
  std::filesystem::rename(tmp, path);
}

}  // namespace rlx
