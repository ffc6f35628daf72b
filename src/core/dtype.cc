#include "rlx/dtype.h"

#include <algorithm>
#include <cctype>

#include "rlx/error.h"

namespace rlx {

size_t dtype_size(DType t) {
  switch (t) {
#define X(e, n, ty, b) \
  case DType::e:       \
    return b;
    RLX_DTYPES(X)
#undef X
  }
  return 0;
}

std::string_view dtype_name(DType t) {
  switch (t) {
#define X(e, n, ty, b) \
  case DType::e:       \
    return n;
    RLX_DTYPES(X)
#undef X
  }
  return "?";
}

DType parse_dtype(std::string_view s) {
  std::string l(s);
  std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return std::tolower(c); });
#define X(e, n, ty, b) \
  if (l == n) return DType::e;
  RLX_DTYPES(X)
#undef X
  struct Alias {
    const char* name;
    DType t;
  };
  static const Alias aliases[] = {
      {"float32", DType::F32}, {"float", DType::F32},     {"float16", DType::F16},
      {"half", DType::F16},    {"bfloat16", DType::BF16}, {"float64", DType::F64},
      {"double", DType::F64},  {"int8", DType::I8},       {"int16", DType::I16},
      {"int32", DType::I32},   {"int", DType::I32},       {"int64", DType::I64},
      {"long", DType::I64},    {"uint8", DType::U8},      {"boolean", DType::Bool}};
  for (const auto& a : aliases)
    if (l == a.name) return a.t;
  throw make_error("unknown dtype '", s, "'");
}

bool is_float(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::F64;
}

bool is_integer(DType t) {
  return t == DType::I8 || t == DType::I16 || t == DType::I32 || t == DType::I64 || t == DType::U8;
}

}  // namespace rlx
