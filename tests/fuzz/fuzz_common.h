// Shared by the libFuzzer targets: an input may make a reader throw
// rlx::Error (the expected outcome for a malformed file); anything else
// (another exception, a crash, a sanitizer report) is a finding.
#pragma once
#include <cstdint>

#include "rlx/error.h"

namespace rlx::fuzz {

template <typename F>
void expect_clean(F&& f) {
  try {
    f();
  } catch (const rlx::Error&) {
  }
}

// Largest tensor (elements) a target materializes from declared shapes.
inline constexpr int64_t kMaxFuzzElements = int64_t(1) << 16;

}  // namespace rlx::fuzz
