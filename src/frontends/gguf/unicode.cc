#include "frontends/gguf/unicode.h"

#include <algorithm>
#include <array>

namespace rlx::tok {

namespace {
std::array<uint16_t, 128> make_ascii() {
  std::array<uint16_t, 128> a{};
  for (uint32_t c = 0; c < 128; ++c) {
    const UnicodeRange* end = kUnicodeRanges + kUnicodeRangesCount;
    auto it = std::upper_bound(kUnicodeRanges, end, c,
                               [](uint32_t v, const UnicodeRange& r) { return v < r.first; });
    a[c] = (it - 1)->flags;
  }
  return a;
}
}  // namespace

uint16_t cpt_flags(uint32_t cp) {
  static const std::array<uint16_t, 128> ascii = make_ascii();
  if (cp < 128) return ascii[cp];
  if (cp > 0x10FFFF) return kUndefined;
  const UnicodeRange* end = kUnicodeRanges + kUnicodeRangesCount;
  auto it = std::upper_bound(kUnicodeRanges, end, cp,
                             [](uint32_t v, const UnicodeRange& r) { return v < r.first; });
  return (it - 1)->flags;
}

uint32_t decode_utf8(std::string_view s, size_t& pos) {
  const auto b = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char c = b(pos);
  if (c < 0x80) {
    ++pos;
    return c;
  }
  const auto cont = [&](size_t i) { return i < s.size() && (b(i) & 0xC0) == 0x80; };
  // Only the lead-byte structure and continuation bytes are checked, like
  // llama.cpp (overlong forms decode as they are), so ids agree with it.
  if ((c & 0xE0) == 0xC0 && cont(pos + 1)) {
    uint32_t cp = ((c & 0x1Fu) << 6) | (b(pos + 1) & 0x3Fu);
    pos += 2;
    return cp;
  }
  if ((c & 0xF0) == 0xE0 && cont(pos + 1) && cont(pos + 2)) {
    uint32_t cp = ((c & 0x0Fu) << 12) | ((b(pos + 1) & 0x3Fu) << 6) | (b(pos + 2) & 0x3Fu);
    pos += 3;
    return cp;
  }
  if ((c & 0xF8) == 0xF0 && cont(pos + 1) && cont(pos + 2) && cont(pos + 3)) {
    uint32_t cp = ((c & 0x07u) << 18) | ((b(pos + 1) & 0x3Fu) << 12) | ((b(pos + 2) & 0x3Fu) << 6) |
                  (b(pos + 3) & 0x3Fu);
    pos += 4;
    return cp;
  }
  ++pos;
  return 0xFFFD;
}

std::vector<uint32_t> to_cpts(std::string_view text) {
  std::vector<uint32_t> out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) out.push_back(decode_utf8(text, pos));
  return out;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

namespace {
// GPT-2: printable Latin-1 bytes map to themselves, the rest to 256, 257, ...
struct ByteMap {
  std::array<std::string, 256> to;
  std::array<uint32_t, 256> cp{};
  std::array<int16_t, 324> from;  // code points 0..323 back to bytes, -1 if unmapped
  ByteMap() {
    from.fill(-1);
    uint32_t n = 0;
    for (uint32_t b = 0; b < 256; ++b) {
      bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      cp[b] = printable ? b : 256 + n++;
      append_utf8(to[b], cp[b]);
      from[cp[b]] = static_cast<int16_t>(b);
    }
  }
};
const ByteMap& byte_map() {
  static const ByteMap m;
  return m;
}
}  // namespace

const std::string& byte_to_unicode(uint8_t b) { return byte_map().to[b]; }

int byte_from_unicode(uint32_t cp) {
  const auto& m = byte_map();
  return cp < m.from.size() ? m.from[cp] : -1;
}

}  // namespace rlx::tok
