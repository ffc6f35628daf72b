// UTF-8 and Unicode category helpers for the tokenizers (internal).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rlx::tok {

// Flag bits; scripts/gen_unicode_tables.py writes the same values.
enum : uint16_t {
  kUndefined = 0x1,
  kNumber = 0x2,  // \p{N}
  kLetter = 0x4,  // \p{L}
  kSeparator = 0x8,
  kMark = 0x10,         // \p{M}
  kPunctuation = 0x20,  // \p{P}
  kSymbol = 0x40,       // \p{S}
  kControl = 0x80,
  kWhitespace = 0x100,  // \s (Unicode White_Space)
};

struct UnicodeRange {
  uint32_t first;
  uint16_t flags;
};
extern const UnicodeRange kUnicodeRanges[];
extern const size_t kUnicodeRangesCount;

uint16_t cpt_flags(uint32_t cp);  // kUndefined for values past U+10FFFF

// Decodes one code point at text[pos]; invalid or truncated sequences yield
// U+FFFD and consume one byte (as llama.cpp does).
uint32_t decode_utf8(std::string_view text, size_t& pos);
std::vector<uint32_t> to_cpts(std::string_view text);
void append_utf8(std::string& out, uint32_t cp);
// Byte length of a UTF-8 sequence from its lead byte (1 for stray bytes).
inline size_t utf8_len(unsigned char c) {
  static const uint8_t lookup[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return lookup[c >> 4];
}

// GPT-2 byte-level mapping: each byte to a printable code point and back.
const std::string& byte_to_unicode(uint8_t b);  // UTF-8 of the mapped code point
int byte_from_unicode(uint32_t cp);             // -1 if cp is not a mapped code point

}  // namespace rlx::tok
