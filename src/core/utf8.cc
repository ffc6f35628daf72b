// Utf8Stream: the decoding rules of Unicode's table 3-7 (no overlongs, no
// surrogates, nothing above U+10FFFF); a lead byte whose sequence breaks off
// is replaced once and decoding resumes at the byte that broke it.
#include "rlx/utf8.h"

#include <cstdint>

namespace rlx {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// The sequence length a lead byte starts (0: not a lead byte) and the range
// its second byte must lie in.
struct Lead {
  int len;
  uint8_t lo, hi;
};

Lead lead_of(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b >= 0xE1 && b <= 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

}  // namespace

std::string Utf8Stream::push(std::string_view bytes) {
  pending_.append(bytes);
  std::string out;
  size_t i = 0;
  const size_t n = pending_.size();
  while (i < n) {
    const uint8_t b = uint8_t(pending_[i]);
    const Lead l = lead_of(b);
    if (l.len == 1) {
      out += char(b);
      ++i;
      continue;
    }
    if (l.len == 0) {
      out += kReplacement;
      ++i;
      continue;
    }
    // How many bytes after the lead continue it validly.
    int ok = 0;
    for (int k = 1; k < l.len && i + size_t(k) < n; ++k) {
      const uint8_t c = uint8_t(pending_[i + size_t(k)]);
      const bool valid = k == 1 ? c >= l.lo && c <= l.hi : c >= 0x80 && c <= 0xBF;
      if (!valid) break;
      ++ok;
    }
    if (ok == l.len - 1) {
      out.append(pending_, i, size_t(l.len));
      i += size_t(l.len);
    } else if (i + size_t(ok) + 1 >= n) {
      break;  // a valid prefix that the next bytes may complete: hold it
    } else {
      out += kReplacement;  // the maximal subpart, replaced once
      i += size_t(ok) + 1;
    }
  }
  pending_.erase(0, i);
  return out;
}

std::string Utf8Stream::finish() {
  std::string out = pending_.empty() ? "" : std::string(kReplacement);
  pending_.clear();
  return out;
}

}  // namespace rlx
