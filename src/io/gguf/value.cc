// gguf::Value accessors and lookups shared by the reader and the writer.
#include <cstdio>
#include <limits>

#include "rlx/error.h"
#include "rlx/gguf.h"

namespace rlx::gguf {

const char* value_type_name(ValueType t) {
  static const char* names[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                "bool", "string", "array", "u64", "i64", "f64"};
  return uint32_t(t) < 13 ? names[uint32_t(t)] : "invalid";
}

bool Value::is_integer() const {
  switch (type) {
    case ValueType::U8:
    case ValueType::I8:
    case ValueType::U16:
    case ValueType::I16:
    case ValueType::U32:
    case ValueType::I32:
    case ValueType::U64:
    case ValueType::I64:
      return true;
    default:
      return false;
  }
}

static bool is_signed(ValueType t) {
  return t == ValueType::I8 || t == ValueType::I16 || t == ValueType::I32 || t == ValueType::I64;
}

int64_t Value::as_int() const {
  RLX_CHECK(is_integer() || type == ValueType::BOOL, "expected an integer value, got ",
            value_type_name(type));
  if (is_signed(type)) return i;
  RLX_CHECK(u <= uint64_t(std::numeric_limits<int64_t>::max()), "integer value ", u,
            " is out of range");
  return int64_t(u);
}

double Value::as_float() const {
  if (type == ValueType::F32 || type == ValueType::F64) return f;
  if (is_signed(type)) return double(i);
  RLX_CHECK(is_integer(), "expected a number, got ", value_type_name(type));
  return double(u);
}

const std::string& Value::as_string() const {
  RLX_CHECK(type == ValueType::STRING, "expected a string value, got ", value_type_name(type));
  return s;
}

std::string Value::to_string(size_t max_elems) const {
  switch (type) {
    case ValueType::STRING: {
      std::string out = "\"";
      for (char c : s.size() > 200 ? s.substr(0, 200) + "..." : s) {
        if (c == '\n')
          out += "\\n";
        else if (c == '"')
          out += "\\\"";
        else
          out += c;
      }
      return out + "\"";
    }
    case ValueType::BOOL:
      return u ? "true" : "false";
    case ValueType::F32:
    case ValueType::F64: {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%g", f);
      return buf;
    }
    case ValueType::ARRAY: {
      std::string out = rlx::detail::concat(value_type_name(elem_type), "[", arr.size(), "] [");
      for (size_t k = 0; k < arr.size() && k < max_elems; ++k)
        out += (k ? ", " : "") + arr[k].to_string(max_elems);
      if (arr.size() > max_elems) out += ", ...";
      return out + "]";
    }
    default:
      return is_signed(type) ? std::to_string(i) : std::to_string(u);
  }
}

int64_t TensorInfo::numel() const { return rlx::numel(ne); }

const Value* File::find(std::string_view key) const {
  for (const auto& [k, v] : metadata)
    if (k == key) return &v;
  return nullptr;
}

const TensorInfo* File::find_tensor(std::string_view name) const {
  for (const TensorInfo& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

}  // namespace rlx::gguf
