// Reading an integer field of a JSON document rlx loads (graph JSON,
// torch-ir.json): nlohmann's get<int64_t> silently truncates 2.5 to 2, wraps
// 2^63 + 3 to a negative number and is undefined behavior for 1e300 (found by
// the fuzzers), so only JSON integers that fit in int64 are accepted.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>

#include "rlx/error.h"

namespace rlx {

inline int64_t json_int(const nlohmann::json& v, const char* what) {
  RLX_CHECK(v.is_number_integer(), what, " must be an integer, got ", v.dump());
  RLX_CHECK(!v.is_number_unsigned() || v.get<uint64_t>() <= uint64_t(INT64_MAX), what, " ",
            v.dump(), " does not fit in int64");
  return v.get<int64_t>();
}

}  // namespace rlx
