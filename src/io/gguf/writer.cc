// GGUF writer (version 3): metadata, tensor infos, then tensors back to back,
// each padded to the alignment, as llama.cpp's gguf writer lays them out.
#include "io/io_util.h"
#include "rlx/checked.h"
#include "rlx/error.h"
#include "rlx/gguf.h"

namespace rlx::gguf {
namespace {

template <typename T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(T));
}
void put_str(std::string& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out += s;
}

void put_value(std::string& out, const Value& v, const std::string& key) {
  switch (v.type) {
    case ValueType::U8:
      put<uint8_t>(out, uint8_t(v.u));
      break;
    case ValueType::I8:
      put<int8_t>(out, int8_t(v.i));
      break;
    case ValueType::U16:
      put<uint16_t>(out, uint16_t(v.u));
      break;
    case ValueType::I16:
      put<int16_t>(out, int16_t(v.i));
      break;
    case ValueType::U32:
      put<uint32_t>(out, uint32_t(v.u));
      break;
    case ValueType::I32:
      put<int32_t>(out, int32_t(v.i));
      break;
    case ValueType::U64:
      put<uint64_t>(out, v.u);
      break;
    case ValueType::I64:
      put<int64_t>(out, v.i);
      break;
    case ValueType::F32:
      put<float>(out, float(v.f));
      break;
    case ValueType::F64:
      put<double>(out, v.f);
      break;
    case ValueType::BOOL:
      put<uint8_t>(out, v.u ? 1 : 0);
      break;
    case ValueType::STRING:
      put_str(out, v.s);
      break;
    case ValueType::ARRAY:
      RLX_CHECK(v.elem_type != ValueType::ARRAY, "metadata '", key,
                "': arrays of arrays are not supported (ggml rejects them)");
      put<uint32_t>(out, uint32_t(v.elem_type));
      put<uint64_t>(out, v.arr.size());
      for (const Value& e : v.arr) {
        RLX_CHECK(e.type == v.elem_type, "metadata '", key, "': array of ",
                  value_type_name(v.elem_type), " holds a ", value_type_name(e.type));
        put_value(out, e, key);
      }
      break;
    default:
      throw make_error("metadata '", key, "': invalid value type ", uint32_t(v.type));
  }
}

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

}  // namespace

std::string serialize(const std::vector<std::pair<std::string, Value>>& metadata,
                      const std::vector<WriteTensor>& tensors) {
  uint64_t alignment = 32;
  for (const auto& [k, v] : metadata)
    if (k == "general.alignment") {
      RLX_CHECK(v.type == ValueType::U32 && v.u && !(v.u & (v.u - 1)),
                "general.alignment must be a u32 power of two");
      alignment = v.u;
    }
  std::string out;
  put<uint32_t>(out, 0x46554747);
  put<uint32_t>(out, 3);
  put<uint64_t>(out, tensors.size());
  put<uint64_t>(out, metadata.size());
  for (const auto& [k, v] : metadata) {
    RLX_CHECK(!k.empty(), "empty metadata key");
    put_str(out, k);
    put<uint32_t>(out, uint32_t(v.type));
    put_value(out, v, k);
  }
  uint64_t offset = 0;
  std::vector<uint64_t> offsets;
  for (const WriteTensor& t : tensors) {
    RLX_CHECK(!t.name.empty() && t.name.size() < 64, "tensor name '", t.name,
              "' must have 1..63 bytes");
    RLX_CHECK(t.ne.size() <= 4, "tensor '", t.name, "': more than 4 dims");
    const int64_t numel = checked_numel(t.ne, "tensor '" + t.name + "'");
    const size_t want = quant::row_size(t.type, t.ne.empty() ? 1 : t.ne[0]) *
                        size_t(t.ne.empty() || t.ne[0] == 0 ? 0 : numel / t.ne[0]);
    const size_t expect = t.ne.empty() ? quant::row_size(t.type, 1) : want;
    RLX_CHECK(t.data.size() == expect, "tensor '", t.name, "': ", t.data.size(), " bytes given, ",
              quant::traits(t.type).name, " needs ", expect);
    put_str(out, t.name);
    put<uint32_t>(out, uint32_t(t.ne.size()));
    for (int64_t d : t.ne) put<uint64_t>(out, uint64_t(d));
    put<uint32_t>(out, uint32_t(t.type));
    put<uint64_t>(out, offset);
    offsets.push_back(offset);
    offset = align_up(offset + t.data.size(), alignment);
  }
  out.resize(align_up(out.size(), alignment), '\0');
  const size_t data_start = out.size();
  for (size_t k = 0; k < tensors.size(); ++k) {
    out.resize(data_start + offsets[k], '\0');
    out.append(tensors[k].data);
  }
  out.resize(data_start + offset, '\0');
  return out;
}

void write(const std::string& path, const std::vector<std::pair<std::string, Value>>& metadata,
           const std::vector<WriteTensor>& tensors) {
  const std::string bytes = serialize(metadata, tensors);
  io::write_file_atomic(path, {bytes});
}

}  // namespace rlx::gguf
