#include "rlx/cpu_isa.h"

#include <cpuid.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "rlx/error.h"

namespace rlx {
namespace {

// cpuid leaf 1 rather than __builtin_cpu_supports("f16c"), which clang 14
// (the fuzz build) does not know.
bool has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
}

Isa detect() {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma") || !has_f16c())
    return Isa::portable;
  // F + BW + VL + DQ: the set every AVX-512 CPU since Skylake-X has.
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
    return Isa::avx512;
  return Isa::avx2;
}

Isa limit_from_env() {
  const char* v = std::getenv("RLX_ISA");
  if (!v || !*v) return Isa::avx512;
  for (Isa isa : {Isa::portable, Isa::avx2, Isa::avx512})
    if (std::strcmp(v, isa_name(isa)) == 0) return isa;
  throw make_error("RLX_ISA=", v, " is not one of portable, avx2, avx512");
}

std::atomic<int>& limit() {
  static std::atomic<int> value{int(limit_from_env())};
  return value;
}

}  // namespace

bool has_avx512_bf16() {
  // cpuid leaf 7 subleaf 1, EAX bit 5.
  static const bool has = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5)) != 0;
  }();
  return has;
}

Isa detected_isa() {
  static const Isa isa = detect();
  return isa;
}

Isa cpu_isa() {
  return Isa(std::min(int(detected_isa()), limit().load(std::memory_order_relaxed)));
}

void set_isa_limit(Isa l) { limit().store(int(l), std::memory_order_relaxed); }

Isa isa_limit() { return Isa(limit().load(std::memory_order_relaxed)); }

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::portable:
      return "portable";
    case Isa::avx2:
      return "avx2";
    case Isa::avx512:
      return "avx512";
  }
  return "?";
}

}  // namespace rlx
