// ggml tensor types: one traits table (block size, bytes per block, row
// dequantize / quantize) for every type a GGUF file may hold. Implementations
// live in src/quant/ and are bit-exact with ggml's reference code.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace rlx::quant {

// ggml_type numbers as stored in GGUF files.
enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
  NVFP4 = 40,
  Q1_0 = 41,
  Q2_0 = 42,
};

using DequantizeRowFn = void (*)(const void* src, float* dst, int64_t n);
using QuantizeRowFn = void (*)(const float* src, void* dst, int64_t n);
// Direct dot product of one weight row against an activation row already in
// vec_dot_type (see quantize_activations): sum_i w[i] * a[i] over n elements
// (n % block_size == 0). Null for types that have no direct kernel; those are
// multiplied by dequantizing row tiles. Float weights (f32/f16/bf16) take f32
// activations (vec_dot_type F32) so they lose no precision.
using VecDotFn = float (*)(const void* w, const void* a, int64_t n);

struct TypeTraits {
  GgmlType type;
  const char* name;    // ggml's name: "q4_K", "f16", ...
  int64_t block_size;  // elements per block
  size_t type_size;    // bytes per block
  bool is_quantized;
  DequantizeRowFn dequantize_row;  // n must be a multiple of block_size
  QuantizeRowFn quantize_row;      // round-to-nearest reference; null if none
  GgmlType vec_dot_type;           // activation format for vec_dot
  VecDotFn vec_dot;                // null: not implemented yet
};

// Traits of a type number; nullptr for unknown or retired numbers.
const TypeTraits* find_traits(uint32_t type);
// Same, but throws rlx::Error naming the number (and saying when it is a
// retired ggml type such as the old Q4_2 / Q4_3 / Q4_0_4_4 ...).
const TypeTraits& traits(uint32_t type);
inline const TypeTraits& traits(GgmlType t) { return traits(uint32_t(t)); }
std::string type_name(uint32_t type);  // "q4_K", or "type 31 (retired)" etc.
// ggml's name ("q4_K", "f16") back to the type; throws listing the known names.
GgmlType parse_type_name(std::string_view name);

// Bytes of a row of n elements (throws if n is not a multiple of the block).
size_t row_size(GgmlType t, int64_t n);
// Checked whole-buffer conversions (n elements; n % block_size == 0).
void dequantize(GgmlType t, const void* src, float* dst, int64_t n);
void quantize(GgmlType t, const float* src, void* dst, int64_t n);

// Converts n activations to `vec_dot_type` for vec_dot: Q8_0 / Q8_1 round as
// ggml's CPU backend does (127 / amax, round half to even: bit-exact with
// ggml-cpu's AVX2 quantize_row_q8_0 / q8_1), Q8_K as quantize_row_q8_K_ref,
// F32 copies. Throws for any other target type.
void quantize_activations(GgmlType vec_dot_type, const float* src, void* dst, int64_t n);

}  // namespace rlx::quant
