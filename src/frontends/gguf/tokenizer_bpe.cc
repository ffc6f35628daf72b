// Byte-level BPE: pre-tokenize, map each word's bytes to GPT-2's printable
// code points, then repeatedly merge the adjacent pair with the lowest merge
// rank (ties: leftmost). Symbols are a linked list over interned string ids
// and candidates a heap, so a word of n characters costs O(n log n), which
// keeps pathological inputs (one huge "word") fast.
#include <algorithm>
#include <queue>

#include "frontends/gguf/tokenizer_impl.h"
#include "frontends/gguf/unicode.h"

namespace rlx {

namespace {
struct BpeSym {
  int prev, next;
  int32_t id;  // interned string id, -1 if the character is in no merge or token
  size_t begin, len;
};
struct BpeCand {
  int left, right;
  int32_t rank, lid, rid, result;
};
struct CandGreater {
  bool operator()(const BpeCand& a, const BpeCand& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};
}  // namespace

void Tokenizer::Impl::encode_bpe(std::string_view text, std::vector<int32_t>& out) const {
  std::string word;
  std::vector<BpeSym> syms;
  std::priority_queue<BpeCand, std::vector<BpeCand>, CandGreater> heap;
  for (std::string_view raw : tok::pre_split(pre, text)) {
    // Invalid UTF-8 becomes U+FFFD first, as in llama.cpp, then bytes map.
    word.clear();
    std::string utf8;
    for (size_t pos = 0; pos < raw.size();) {
      utf8.clear();
      tok::append_utf8(utf8, tok::decode_utf8(raw, pos));
      for (char c : utf8) word += tok::byte_to_unicode(static_cast<uint8_t>(c));
    }
    if (ignore_merges) {
      const int32_t id = find(word);
      if (id >= 0) {
        out.push_back(id);
        continue;
      }
    }
    syms.clear();
    for (size_t off = 0; off < word.size();) {
      const size_t len =
          std::min(tok::utf8_len(static_cast<unsigned char>(word[off])), word.size() - off);
      const int i = static_cast<int>(syms.size());
      syms.push_back({i - 1, off + len == word.size() ? -1 : i + 1,
                      find_sym(std::string_view(word).substr(off, len)), off, len});
      off += len;
    }
    auto try_pair = [&](int l, int r) {
      if (l < 0 || r < 0 || syms[l].id < 0 || syms[r].id < 0) return;
      const uint64_t key = (uint64_t(uint32_t(syms[l].id)) << 32) | uint32_t(syms[r].id);
      auto it = merges.find(key);
      if (it == merges.end()) return;
      heap.push({l, r, it->second.rank, syms[l].id, syms[r].id, it->second.result});
    };
    for (int i = 1; i < static_cast<int>(syms.size()); ++i) try_pair(i - 1, i);
    while (!heap.empty()) {
      const BpeCand c = heap.top();
      heap.pop();
      BpeSym& l = syms[c.left];
      BpeSym& r = syms[c.right];
      // Stale when either side changed since the candidate was pushed.
      if (l.len == 0 || r.len == 0 || l.next != c.right || l.id != c.lid || r.id != c.rid) continue;
      l.len += r.len;
      l.id = c.result;
      r.len = 0;
      l.next = r.next;
      if (r.next >= 0) syms[r.next].prev = c.left;
      try_pair(l.prev, c.left);
      try_pair(c.left, l.next);
    }
    for (int i = syms.empty() ? -1 : 0; i != -1; i = syms[i].next) {
      const BpeSym& s = syms[i];
      if (s.id >= 0 && s.id < n_vocab()) {
        out.push_back(s.id);
        continue;
      }
      // Not a token: fall back to single-byte pieces of the mapped text
      // (only ASCII-mapped bytes can match), as llama.cpp does.
      for (size_t k = 0; k < s.len; ++k) {
        const int32_t id = find(std::string_view(word).substr(s.begin + k, 1));
        if (id >= 0) out.push_back(id);
      }
    }
  }
}

}  // namespace rlx
