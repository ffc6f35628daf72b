// SentencePiece (BPE-by-score) encoding: start from UTF-8 characters and
// repeatedly merge the adjacent pair whose concatenation is the vocab token
// with the highest score (ties: leftmost). Symbols form a linked list and
// candidate pairs a heap, so a word of n characters costs O(n log n).
// Characters that end up in no token are emitted as <0xXX> byte tokens.
#include <algorithm>
#include <queue>

#include "frontends/gguf/tokenizer_impl.h"
#include "frontends/gguf/unicode.h"

namespace rlx {

namespace {
struct SpmSym {
  int prev, next;
  size_t begin, len;  // bytes into the text
};
struct SpmCand {
  int left, right;
  float score;
  size_t len;  // combined length when pushed; a mismatch later means stale
};
struct CandLess {
  bool operator()(const SpmCand& a, const SpmCand& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};
}  // namespace

void Tokenizer::Impl::encode_spm_chunk(std::string_view text, std::vector<int32_t>& out) const {
  std::vector<SpmSym> syms;
  syms.reserve(text.size());
  for (size_t off = 0; off < text.size();) {
    const size_t len =
        std::min(tok::utf8_len(static_cast<unsigned char>(text[off])), text.size() - off);
    const int i = static_cast<int>(syms.size());
    syms.push_back({i - 1, off + len == text.size() ? -1 : i + 1, off, len});
    off += len;
  }
  std::priority_queue<SpmCand, std::vector<SpmCand>, CandLess> heap;
  auto try_pair = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    const size_t len = syms[l].len + syms[r].len;
    const int32_t id = find(text.substr(syms[l].begin, len));
    if (id < 0) return;
    heap.push({l, r, scores[id], len});
  };
  for (int i = 1; i < static_cast<int>(syms.size()); ++i) try_pair(i - 1, i);
  while (!heap.empty()) {
    const SpmCand c = heap.top();
    heap.pop();
    SpmSym& l = syms[c.left];
    SpmSym& r = syms[c.right];
    if (l.len == 0 || r.len == 0 || l.len + r.len != c.len || l.next != c.right) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = c.left;
    try_pair(l.prev, c.left);
    try_pair(c.left, l.next);
  }
  for (int i = syms.empty() ? -1 : 0; i != -1; i = syms[i].next) {
    const std::string_view s = text.substr(syms[i].begin, syms[i].len);
    const int32_t id = find(s);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    for (char ch : s) {
      const int32_t b = byte_tokens[static_cast<unsigned char>(ch)];
      if (b >= 0)
        out.push_back(b);
      else if (unk >= 0)
        out.push_back(unk);  // no byte token: the unknown token
    }
  }
}

uint32_t tok::spm_unit(std::string_view s, size_t pos, size_t len) {
  uint32_t u = 0;
  for (size_t k = 0; k < len; ++k) u = (u << 8) | static_cast<unsigned char>(s[pos + k]);
  return u;
}

// Merges only ever form vocab tokens, so no merge crosses a boundary between
// two characters that are adjacent in no token: the text splits there into
// pieces that evolve independently (same result, much smaller heaps).
void Tokenizer::Impl::encode_spm(std::string_view text, std::vector<int32_t>& out) const {
  size_t start = 0, pos = 0;
  uint32_t prev = 0;
  while (pos < text.size()) {
    const size_t len =
        std::min(tok::utf8_len(static_cast<unsigned char>(text[pos])), text.size() - pos);
    const uint32_t unit = tok::spm_unit(text, pos, len);
    if (pos > start && !spm_pairs.count((uint64_t(prev) << 32) | unit)) {
      encode_spm_chunk(text.substr(start, pos - start), out);
      start = pos;
    }
    prev = unit;
    pos += len;
  }
  if (pos > start) encode_spm_chunk(text.substr(start, pos - start), out);
}

}  // namespace rlx
