// The one traits table of ggml types, and checked whole-buffer helpers.
#include <algorithm>
#include <array>
#include <cctype>
#include <cstring>

#include "quant/quant_impl.h"
#include "rlx/error.h"
#include "rlx/quant.h"

namespace rlx::quant {
namespace {

// Quantizers exist for these types (round-to-nearest reference, as ggml's
// quantize_row_*_ref); the rest have dequantization only.
#define Q(t, name, blk, size, q, quant, vdt)                                                       \
  TypeTraits {                                                                                     \
    GgmlType::t, #name, blk, size, q, detail::dequantize_row_##name, quant, GgmlType::vdt, nullptr \
  }
// QD: the type also has a direct vec_dot (src/quant/vec_dot*.cc).
#define QD(t, name, blk, size, q, quant, vdt)                                              \
  TypeTraits {                                                                             \
    GgmlType::t, #name, blk, size, q, detail::dequantize_row_##name, quant, GgmlType::vdt, \
        detail::vec_dot_##name                                                             \
  }
#define WITH_Q(name) detail::quantize_row_##name
const TypeTraits kTable[] = {
    QD(F32, f32, 1, 4, false, WITH_Q(f32), F32),
    QD(F16, f16, 1, 2, false, WITH_Q(f16), F32),
    QD(BF16, bf16, 1, 2, false, WITH_Q(bf16), F32),
    Q(F64, f64, 1, 8, false, WITH_Q(f64), F64),
    Q(I8, i8, 1, 1, false, nullptr, I8),
    Q(I16, i16, 1, 2, false, nullptr, I16),
    Q(I32, i32, 1, 4, false, nullptr, I32),
    Q(I64, i64, 1, 8, false, nullptr, I64),
    QD(Q4_0, q4_0, 32, 18, true, WITH_Q(q4_0), Q8_0),
    QD(Q4_1, q4_1, 32, 20, true, WITH_Q(q4_1), Q8_1),
    QD(Q5_0, q5_0, 32, 22, true, WITH_Q(q5_0), Q8_0),
    QD(Q5_1, q5_1, 32, 24, true, WITH_Q(q5_1), Q8_1),
    QD(Q8_0, q8_0, 32, 34, true, WITH_Q(q8_0), Q8_0),
    Q(Q8_1, q8_1, 32, 36, true, WITH_Q(q8_1), Q8_1),
    QD(Q2_K, q2_K, 256, 84, true, WITH_Q(q2_K), Q8_K),
    QD(Q3_K, q3_K, 256, 110, true, WITH_Q(q3_K), Q8_K),
    QD(Q4_K, q4_K, 256, 144, true, WITH_Q(q4_K), Q8_K),
    QD(Q5_K, q5_K, 256, 176, true, WITH_Q(q5_K), Q8_K),
    QD(Q6_K, q6_K, 256, 210, true, WITH_Q(q6_K), Q8_K),
    Q(Q8_K, q8_K, 256, 292, true, WITH_Q(q8_K), Q8_K),
    Q(IQ2_XXS, iq2_xxs, 256, 66, true, nullptr, Q8_K),
    Q(IQ2_XS, iq2_xs, 256, 74, true, nullptr, Q8_K),
    Q(IQ3_XXS, iq3_xxs, 256, 98, true, nullptr, Q8_K),
    Q(IQ1_S, iq1_s, 256, 50, true, nullptr, Q8_K),
    Q(IQ4_NL, iq4_nl, 32, 18, true, nullptr, Q8_0),
    Q(IQ3_S, iq3_s, 256, 110, true, nullptr, Q8_K),
    Q(IQ2_S, iq2_s, 256, 82, true, nullptr, Q8_K),
    Q(IQ4_XS, iq4_xs, 256, 136, true, nullptr, Q8_K),
    Q(IQ1_M, iq1_m, 256, 56, true, nullptr, Q8_K),
    Q(TQ1_0, tq1_0, 256, 54, true, nullptr, Q8_K),
    Q(TQ2_0, tq2_0, 256, 66, true, nullptr, Q8_K),
    Q(MXFP4, mxfp4, 32, 17, true, nullptr, Q8_0),
    Q(NVFP4, nvfp4, 64, 36, true, nullptr, Q8_0),
    Q(Q1_0, q1_0, 128, 18, true, nullptr, Q8_0),
    Q(Q2_0, q2_0, 64, 18, true, nullptr, Q8_0),
};
#undef Q
#undef QD
#undef WITH_Q

constexpr uint32_t kMaxType = 64;

const std::array<const TypeTraits*, kMaxType>& by_id() {
  static const auto table = [] {
    std::array<const TypeTraits*, kMaxType> t{};
    for (const TypeTraits& tr : kTable) t[uint32_t(tr.type)] = &tr;
    return t;
  }();
  return table;
}

const char* retired_name(uint32_t type) {
  switch (type) {
    case 4:
      return "Q4_2";
    case 5:
      return "Q4_3";
    case 31:
      return "Q4_0_4_4";
    case 32:
      return "Q4_0_4_8";
    case 33:
      return "Q4_0_8_8";
    case 36:
      return "IQ4_NL_4_4";
    case 37:
      return "IQ4_NL_4_8";
    case 38:
      return "IQ4_NL_8_8";
    default:
      return nullptr;
  }
}
}  // namespace

const TypeTraits* find_traits(uint32_t type) { return type < kMaxType ? by_id()[type] : nullptr; }

const TypeTraits& traits(uint32_t type) {
  if (const TypeTraits* t = find_traits(type)) return *t;
  if (const char* r = retired_name(type))
    throw make_error("ggml type ", type, " (", r,
                     ") is retired and no longer supported; re-convert the model");
  throw make_error("unknown ggml type ", type);
}

std::string type_name(uint32_t type) {
  if (const TypeTraits* t = find_traits(type)) return t->name;
  if (const char* r = retired_name(type))
    return rlx::detail::concat("type ", type, " (retired ", r, ")");
  return rlx::detail::concat("type ", type, " (unknown)");
}

GgmlType parse_type_name(std::string_view name) {
  std::string known;
  for (uint32_t i = 0; i < kMaxType; ++i)
    if (const TypeTraits* t = by_id()[i]) {
      if (std::equal(name.begin(), name.end(), t->name, t->name + std::strlen(t->name),
                     [](char a, char b) { return std::tolower(a) == std::tolower(b); }))
        return t->type;
      known += std::string(known.empty() ? "" : " ") + t->name;
    }
  throw make_error("unknown ggml type name '", name, "' (known: ", known, ")");
}

size_t row_size(GgmlType t, int64_t n) {
  const TypeTraits& tr = traits(t);
  RLX_CHECK(n >= 0 && n % tr.block_size == 0, tr.name, ": row of ", n,
            " elements is not a multiple of the block size ", tr.block_size);
  return size_t(n / tr.block_size) * tr.type_size;
}

void dequantize(GgmlType t, const void* src, float* dst, int64_t n) {
  row_size(t, n);
  traits(t).dequantize_row(src, dst, n);
}

void quantize(GgmlType t, const float* src, void* dst, int64_t n) {
  const TypeTraits& tr = traits(t);
  RLX_CHECK(tr.quantize_row, "quantizing to ", tr.name, " is not supported");
  row_size(t, n);
  tr.quantize_row(src, dst, n);
}

}  // namespace rlx::quant
