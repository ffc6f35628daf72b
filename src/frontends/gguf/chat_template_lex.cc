// Chat template lexer: template text -> tokens. Text between tags is one
// token, trimmed as whitespace control ({%- -%} {{- -}} {#- -#}),
// trim_blocks and lstrip_blocks (on, as transformers renders) say.
#include <algorithm>
#include <cctype>
#include <cstring>

#include "frontends/gguf/chat_template_impl.h"

namespace rlx::llm::chat_detail {
namespace {

bool blank(char c) { return c == ' ' || c == '\t'; }
bool space(char c) { return blank(c) || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool name_char(char c) { return name_start(c) || std::isdigit(static_cast<unsigned char>(c)); }

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

class Lexer {
 public:
  explicit Lexer(std::string_view src) : src_(src) {
    for (size_t i = 0; i < src.size(); ++i)
      if (src[i] == '\n') line_starts_.push_back(i + 1);
  }

  std::vector<Token> run() {
    size_t pos = 0;
    while (pos < src_.size()) {
      size_t open = find_open(pos);
      size_t end = open == std::string_view::npos ? src_.size() : open;
      emit_text(pos, end);
      if (open == std::string_view::npos) break;
      pos = tag(open);
    }
    emit_text(src_.size(), src_.size());
    out_.push_back({Tok::End, "", loc(src_.size()).first, loc(src_.size()).second});
    return std::move(out_);
  }

 private:
  std::pair<int, int> loc(size_t off) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), off);
    size_t start = *(it - 1);
    return {int(it - line_starts_.begin()), int(off - start + 1)};
  }
  [[noreturn]] void fail(size_t off, const std::string& msg) const {
    auto [l, c] = loc(off);
    fail_at(l, c, msg);
  }
  void push(Tok k, std::string text, size_t off) {
    auto [l, c] = loc(off);
    out_.push_back({k, std::move(text), l, c});
  }

  size_t find_open(size_t pos) const {
    for (size_t i = src_.find('{', pos); i != std::string_view::npos; i = src_.find('{', i + 1))
      if (i + 1 < src_.size() && std::strchr("{%#", src_[i + 1])) return i;
    return std::string_view::npos;
  }

  void emit_text(size_t b, size_t e) {
    std::string_view t = src_.substr(b, e - b);
    if (strip_next_) {
      while (!t.empty() && space(t.front())) t.remove_prefix(1);
    } else if (trim_newline_) {
      if (t.substr(0, 2) == "\r\n")
        t.remove_prefix(2);
      else if (!t.empty() && t.front() == '\n')
        t.remove_prefix(1);
    }
    strip_next_ = trim_newline_ = false;
    last_text_ = -1;
    if (t.empty()) return;
    push(Tok::Text, std::string(t), size_t(t.data() - src_.data()));
    last_text_ = int(out_.size()) - 1;
  }

  // Trims the text just before a tag: all whitespace ('-'), or the blanks that
  // open the tag's line (lstrip_blocks).
  void trim_before(size_t open, bool all) {
    if (last_text_ < 0) return;
    std::string& t = out_[last_text_].text;
    if (all) {
      while (!t.empty() && space(t.back())) t.pop_back();
    } else {
      size_t i = open;
      while (i > 0 && blank(src_[i - 1])) --i;
      if (i != 0 && src_[i - 1] != '\n') return;
      while (!t.empty() && blank(t.back())) t.pop_back();
    }
  }

  size_t tag(size_t open) {
    const char kind = src_[open + 1];
    size_t p = open + 2;
    if (p < src_.size() && src_[p] == '-') {
      trim_before(open, true);
      ++p;
    } else if (p < src_.size() && src_[p] == '+') {
      ++p;
    } else if (kind != '{') {
      trim_before(open, false);
    }
    if (kind == '#') {
      size_t close = src_.find("#}", p);
      if (close == std::string_view::npos) fail(open, "unclosed comment");
      end_tag(close > p && src_[close - 1] == '-', close > p && src_[close - 1] == '+');
      return close + 2;
    }
    push(kind == '{' ? Tok::VarBegin : Tok::BlockBegin, "", open);
    const char* closer = kind == '{' ? "}}" : "%}";
    int depth = 0;
    for (;;) {
      while (p < src_.size() && space(src_[p])) ++p;
      if (p >= src_.size()) fail(open, std::string("unclosed tag, expected '") + closer + "'");
      std::string_view rest = src_.substr(p);
      if (depth == 0) {
        bool minus = rest.size() >= 3 && rest[0] == '-' && rest.substr(1, 2) == closer;
        bool plus = rest.size() >= 3 && rest[0] == '+' && rest.substr(1, 2) == closer;
        if (minus || plus || rest.substr(0, 2) == closer) {
          push(kind == '{' ? Tok::VarEnd : Tok::BlockEnd, "", p);
          if (kind == '{')
            strip_next_ = minus;
          else
            end_tag(minus, plus);
          return p + (minus || plus ? 3 : 2);
        }
      }
      p = token(p, depth);
    }
  }

  void end_tag(bool minus, bool plus) {
    strip_next_ = minus;
    trim_newline_ = !minus && !plus;
  }

  size_t token(size_t p, int& depth) {
    const char c = src_[p];
    if (name_start(c)) {
      size_t e = p;
      while (e < src_.size() && name_char(src_[e])) ++e;
      push(Tok::Name, std::string(src_.substr(p, e - p)), p);
      return e;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) return number(p);
    if (c == '\'' || c == '"') return string(p);
    static const char* two[] = {"//", "**", "==", "!=", "<=", ">="};
    for (const char* op : two)
      if (src_.substr(p, 2) == op) {
        push(Tok::Op, op, p);
        return p + 2;
      }
    if (!std::strchr("+-*/%~<>()[]{},.:|=", c) || c == 0)
      fail(p, std::string("unexpected character '") + c + "'");
    if (c == '(' || c == '[' || c == '{') ++depth;
    if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
    push(Tok::Op, std::string(1, c), p);
    return p + 1;
  }

  size_t number(size_t p) {
    size_t e = p;
    auto digits = [&] {
      while (e < src_.size() &&
             (std::isdigit(static_cast<unsigned char>(src_[e])) || src_[e] == '_'))
        ++e;
    };
    digits();
    bool is_float = false;
    if (e + 1 < src_.size() && src_[e] == '.' &&
        std::isdigit(static_cast<unsigned char>(src_[e + 1]))) {
      is_float = true;
      ++e;
      digits();
    }
    if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t x = e + 1;
      if (x < src_.size() && (src_[x] == '+' || src_[x] == '-')) ++x;
      if (x < src_.size() && std::isdigit(static_cast<unsigned char>(src_[x]))) {
        is_float = true;
        e = x;
        digits();
      }
    }
    std::string text(src_.substr(p, e - p));
    text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
    push(is_float ? Tok::Float : Tok::Int, text, p);
    return e;
  }

  size_t string(size_t p) {
    const char q = src_[p];
    std::string out;
    size_t i = p + 1;
    for (;;) {
      if (i >= src_.size()) fail(p, "unterminated string");
      char c = src_[i++];
      if (c == q) break;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i >= src_.size()) fail(p, "unterminated string");
      char e = src_[i++];
      switch (e) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'v':
          out += '\v';
          break;
        case '0':
          out += '\0';
          break;
        case '\\':
        case '\'':
        case '"':
          out += e;
          break;
        case '\n':
          break;
        case 'x':
        case 'u':
        case 'U': {
          size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (i + n > src_.size()) fail(i - 2, "truncated escape");
          uint32_t cp = 0;
          for (size_t k = 0; k < n; ++k) {
            char h = src_[i + k];
            if (!std::isxdigit(static_cast<unsigned char>(h))) fail(i - 2, "bad escape");
            cp = cp * 16 + uint32_t(std::isdigit(static_cast<unsigned char>(h))
                                        ? h - '0'
                                        : (h | 0x20) - 'a' + 10);
          }
          if (cp > 0x10FFFF) fail(i - 2, "escape out of range");
          append_utf8(out, cp);
          i += n;
          break;
        }
        default:
          out += '\\';
          out += e;  // Python keeps unknown escapes
      }
    }
    push(Tok::Str, std::move(out), p);
    return i;
  }

  std::string_view src_;
  std::vector<size_t> line_starts_{0};
  std::vector<Token> out_;
  bool strip_next_ = false, trim_newline_ = false;
  int last_text_ = -1;
};

}  // namespace

std::vector<Token> lex(std::string_view source) { return Lexer(source).run(); }

}  // namespace rlx::llm::chat_detail
