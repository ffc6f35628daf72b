// Pre-tokenizers: the regex word splitters of the BPE tokenizers, written as
// hand matchers over code points (no std::regex: no \p{..} support and far
// too slow). Each model applies a list of patterns in turn; every pattern
// splits each current segment into its matches and the gaps between them,
// leftmost-first like the regex engines llama.cpp uses. All run in linear time.
#include <functional>

#include "frontends/gguf/tokenizer_impl.h"
#include "frontends/gguf/unicode.h"

namespace rlx::tok {

namespace {

struct Seg {
  size_t a, b;  // code point range
};

struct Text {
  std::vector<uint32_t> cp;
  std::vector<uint16_t> fl;
  size_t n() const { return cp.size(); }
};

constexpr uint32_t kNone = 0xFFFFFFFF;

bool is_ws(uint16_t f) { return f & kWhitespace; }
bool is_l(uint16_t f) { return f & kLetter; }
bool is_n(uint16_t f) { return f & kNumber; }

// A matcher returns the end of the match starting at p (within [a, b)), or p
// when nothing matches there.
using Matcher = std::function<size_t(const Text&, size_t a, size_t b, size_t p)>;

std::vector<Seg> apply(const Text& t, const std::vector<Seg>& in, const Matcher& m) {
  std::vector<Seg> out;
  out.reserve(in.size() * 2);
  for (const Seg& s : in) {
    size_t gap = s.a;
    for (size_t p = s.a; p < s.b;) {
      const size_t e = m(t, s.a, s.b, p);
      if (e > p) {
        if (p > gap) out.push_back({gap, p});
        out.push_back({p, e});
        p = gap = e;
      } else {
        ++p;
      }
    }
    if (s.b > gap) out.push_back({gap, s.b});
  }
  return out;
}

// [class]+
Matcher run_of(std::function<bool(const Text&, size_t)> in) {
  return [in](const Text& t, size_t, size_t b, size_t p) {
    while (p < b && in(t, p)) ++p;
    return p;
  };
}
// \s?[class]+
Matcher ws_opt_run_of(std::function<bool(const Text&, size_t)> in) {
  return [in](const Text& t, size_t, size_t b, size_t p) {
    size_t q = p;
    if (is_ws(t.fl[q]) && q + 1 < b && in(t, q + 1)) ++q;
    size_t e = q;
    while (e < b && in(t, e)) ++e;
    return e > q ? e : p;
  };
}
// A single code point of a class.
Matcher one_of(std::function<bool(const Text&, size_t)> in) {
  return [in](const Text& t, size_t, size_t, size_t p) { return in(t, p) ? p + 1 : p; };
}

// Code points as std::wregex sees them in llama.cpp: non-ASCII white space is
// replaced by U+000B before matching explicit character ranges.
uint32_t wcp(const Text& t, size_t p) { return t.cp[p] > 0x7F && is_ws(t.fl[p]) ? 0x0B : t.cp[p]; }

bool in_ranges(uint32_t c, const std::vector<std::pair<uint32_t, uint32_t>>& r) {
  for (auto [lo, hi] : r)
    if (c >= lo && c <= hi) return true;
  return false;
}

// Parses a regex character class body like "A-Za-zµÀ-Ö" into ranges.
std::vector<std::pair<uint32_t, uint32_t>> parse_class(std::string_view s) {
  std::vector<uint32_t> c = to_cpts(s);
  std::vector<std::pair<uint32_t, uint32_t>> r;
  for (size_t i = 0; i < c.size(); ++i) {
    if (i + 2 < c.size() && c[i + 1] == '-') {
      r.push_back({c[i], c[i + 2]});
      i += 2;
    } else {
      r.push_back({c[i], c[i]});
    }
  }
  return r;
}

// 's|'t|'re|'ve|'m|'ll|'d at p (case-insensitive when `ci`); returns length.
size_t contraction(const Text& t, size_t b, size_t p, bool ci) {
  if (t.cp[p] != '\'' || p + 1 >= b) return 0;
  auto lower = [&](size_t i) {
    uint32_t c = t.cp[i];
    return ci && c >= 'A' && c <= 'Z' ? c + 32 : c;
  };
  const uint32_t c1 = lower(p + 1);
  if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
  if (p + 2 < b) {
    const uint32_t c2 = lower(p + 2);
    if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
  }
  return 0;
}

// GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
std::vector<Seg> split_gpt2(const Text& t, const std::vector<Seg>& in) {
  std::vector<Seg> out;
  for (const Seg& s : in) {
    auto fl = [&](size_t i) -> uint16_t { return i < s.b ? t.fl[i] : 0; };
    size_t p = s.a;
    auto emit = [&](size_t e) {
      out.push_back({p, e});
      p = e;
    };
    while (p < s.b) {
      if (size_t c = contraction(t, s.b, p, false)) {
        emit(p + c);
        continue;
      }
      const bool sp = t.cp[p] == ' ';
      const uint16_t f2 = sp ? fl(p + 1) : t.fl[p];
      size_t q = p + (sp ? 1 : 0);
      if (is_l(f2)) {
        while (is_l(fl(q))) ++q;
        emit(q);
        continue;
      }
      if (is_n(f2)) {
        while (is_n(fl(q))) ++q;
        emit(q);
        continue;
      }
      auto other = [](uint16_t f) { return f && !(f & (kWhitespace | kLetter | kNumber)); };
      if (other(f2)) {
        while (other(fl(q))) ++q;
        emit(q);
        continue;
      }
      size_t nws = 0;
      while (is_ws(fl(p + nws))) ++nws;
      if (nws > 1 && p + nws < s.b) {  // \s+(?!\S): leave the last space for the next word
        emit(p + nws - 1);
        continue;
      }
      emit(p + (nws > 0 ? nws : 1));
    }
  }
  return out;
}

// Llama 3 / Qwen2: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max_digits}|
//   ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// Qwen3.5 reads [\p{L}\p{M}] for \p{L} (letters = kLetter | kMark).
std::vector<Seg> split_llama3(const Text& t, const std::vector<Seg>& in, size_t max_digits,
                              uint16_t letters = kLetter) {
  auto is_l = [letters](uint16_t f) { return (f & letters) != 0; };
  std::vector<Seg> out;
  for (const Seg& s : in) {
    auto fl = [&](size_t i) -> uint16_t { return i < s.b ? t.fl[i] : 0; };
    auto cp = [&](size_t i) -> uint32_t { return i < s.b ? t.cp[i] : kNone; };
    size_t p = s.a;
    auto emit = [&](size_t e) {
      out.push_back({p, e});
      p = e;
    };
    while (p < s.b) {
      const uint32_t c = t.cp[p];
      const uint16_t f = t.fl[p];
      if (size_t k = contraction(t, s.b, p, true)) {
        emit(p + k);
        continue;
      }
      if (!(c == '\r' || c == '\n' || is_n(f)) && (is_l(f) || is_l(fl(p + 1)))) {
        size_t q = p + 1;
        while (is_l(fl(q))) ++q;
        emit(q);
        continue;
      }
      if (is_n(f)) {
        size_t q = p;
        while (q < s.b && is_n(t.fl[q]) && q - p < max_digits) ++q;
        emit(q);
        continue;
      }
      auto other = [letters](uint16_t x) { return x && !(x & (kWhitespace | letters | kNumber)); };
      const uint16_t f2 = c == ' ' ? fl(p + 1) : f;
      if (other(f2)) {
        size_t q = p + (c == ' ' ? 1 : 0);
        while (other(fl(q))) ++q;
        while (cp(q) == '\r' || cp(q) == '\n') ++q;
        emit(q);
        continue;
      }
      size_t nws = 0, last_nl = 0;
      while (is_ws(fl(p + nws))) {
        const uint32_t c2 = t.cp[p + nws];
        if (c2 == '\r' || c2 == '\n') last_nl = p + nws + 1;
        ++nws;
      }
      if (last_nl > 0) {  // \s*[\r\n]+
        emit(last_nl);
        continue;
      }
      if (nws > 1 && p + nws < s.b) {
        emit(p + nws - 1);
        continue;
      }
      emit(p + (nws > 0 ? nws : 1));
    }
  }
  return out;
}

bool is_cjk(uint32_t c) {  // [一-龥ࠀ-一가-퟿]
  return (c >= 0x4E00 && c <= 0x9FA5) || (c >= 0x0800 && c <= 0x4E00) ||
         (c >= 0xAC00 && c <= 0xD7FF);
}

// Leftmost-longest "[0-9][0-9][0-9]".
size_t three_digits(const Text& t, size_t, size_t b, size_t p) {
  auto d = [&](size_t i) { return i < b && t.cp[i] >= '0' && t.cp[i] <= '9'; };
  return d(p) && d(p + 1) && d(p + 2) ? p + 3 : p;
}

std::vector<Seg> split(Pre pre, const Text& t) {
  std::vector<Seg> s = {{0, t.n()}};
  if (t.n() == 0) return {};
  auto num = [](const Text& x, size_t i) { return is_n(x.fl[i]); };
  auto letter = [](const Text& x, size_t i) { return is_l(x.fl[i]); };
  auto punct = [](const Text& x, size_t i) { return (x.fl[i] & kPunctuation) != 0; };
  auto crlf = [](const Text& x, size_t i) { return x.cp[i] == '\r' || x.cp[i] == '\n'; };
  auto cjk = [](const Text& x, size_t i) { return is_cjk(wcp(x, i)); };
  switch (pre) {
    case Pre::Gpt2:
      return split_gpt2(t, s);
    case Pre::Llama3:
      return split_llama3(t, s, 3);
    case Pre::Qwen2:
      return split_llama3(t, s, 1);
    case Pre::Qwen35:
      return split_llama3(t, s, 1, kLetter | kMark);
    case Pre::Starcoder:
      s = apply(t, s, one_of(num));
      return split_gpt2(t, s);
    case Pre::Falcon:
    case Pre::Default: {
      const bool falcon = pre == Pre::Falcon;
      s = apply(t, s, run_of([falcon](const Text& x, size_t i) {
                  const uint32_t c = x.cp[i];
                  return (x.fl[i] & kPunctuation) || c == '$' || c == '+' || c == '<' || c == '=' ||
                         c == '>' || c == '^' || c == '~' || c == '|' || (falcon && c == '`');
                }));
      s = split_gpt2(t, s);
      if (!falcon) s = apply(t, s, run_of(num));
      return apply(t, s, three_digits);
    }
    case Pre::Bloom:
    case Pre::Viking: {
      //  ?[^(\s|.,!?…。，、।۔،)]+
      auto word = [](const Text& x, size_t i) {
        const uint32_t c = wcp(x, i);
        if (is_ws(x.fl[i])) return false;
        for (uint32_t e : {0x28u, 0x7Cu, 0x2Eu, 0x2Cu, 0x21u, 0x3Fu, 0x2026u, 0x3002u, 0xFF0Cu,
                           0x3001u, 0x0964u, 0x06D4u, 0x060Cu, 0x29u})
          if (c == e) return false;
        return true;
      };
      s = apply(t, s, [word](const Text& x, size_t, size_t b, size_t p) {
        size_t q = p;
        if (x.cp[q] == ' ' && q + 1 < b && word(x, q + 1)) ++q;
        size_t e = q;
        while (e < b && word(x, e)) ++e;
        return e > q ? e : p;
      });
      if (pre == Pre::Viking) s = apply(t, s, one_of(num));
      return s;
    }
    case Pre::DeepseekCoder:
      s = apply(t, s, one_of(crlf));
      s = apply(t, s, ws_opt_run_of(letter));
      s = apply(t, s, ws_opt_run_of(punct));
      s = apply(t, s, run_of(cjk));
      return apply(t, s, one_of(num));
    case Pre::DeepseekLlm: {
      static const auto latin = parse_class(
          "A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-"
          "ᏽᲐ-"
          "ᲺᲽ-"
          "Ჿᴀ-"
          "ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-"
          "ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-"
          "𐓓𐓘-"
          "𐓻𐲀-"
          "𐲲𐳀-"
          "𐳲𑢠-𑣟𞤀-𞥃");
      static const auto marks = parse_class("!-/:-~！-／：-～‘-‟　-。");
      s = apply(t, s, one_of(crlf));
      s = apply(t, s,
                ws_opt_run_of([](const Text& x, size_t i) { return in_ranges(wcp(x, i), latin); }));
      s = apply(t, s,
                ws_opt_run_of([](const Text& x, size_t i) { return in_ranges(wcp(x, i), marks); }));
      {  // \s+$ : the trailing white space of each segment (found from the end: linear)
        std::vector<Seg> o;
        for (const Seg& g : s) {
          size_t r = g.b;
          while (r > g.a && is_ws(t.fl[r - 1])) --r;
          if (r > g.a) o.push_back({g.a, r});
          if (r < g.b) o.push_back({r, g.b});
        }
        s.swap(o);
      }
      s = apply(t, s, run_of(cjk));
      return apply(t, s, run_of(num));
    }
  }
  return s;
}

}  // namespace

std::vector<std::string_view> pre_split(Pre pre, std::string_view text) {
  Text t;
  std::vector<size_t> off;
  off.reserve(text.size() + 1);
  t.cp.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    off.push_back(pos);
    t.cp.push_back(decode_utf8(text, pos));
  }
  off.push_back(text.size());
  t.fl.resize(t.cp.size());
  for (size_t i = 0; i < t.cp.size(); ++i) t.fl[i] = cpt_flags(t.cp[i]);
  std::vector<std::string_view> words;
  for (const Seg& s : split(pre, t)) words.push_back(text.substr(off[s.a], off[s.b] - off[s.a]));
  return words;
}

}  // namespace rlx::tok
