// Tokenizer: vocab loading from GGUF metadata, special-token splitting, and
// the public API. The encoders live in tokenizer_spm.cc / tokenizer_bpe.cc.
#include <algorithm>
#include <cstring>

#include "frontends/gguf/tokenizer_impl.h"
#include "frontends/gguf/unicode.h"
#include "rlx/error.h"

namespace rlx {

using tok::Pre;

namespace {

const gguf::Value* find_typed(const gguf::File& f, const char* key, gguf::ValueType type,
                              bool required) {
  const gguf::Value* v = f.find(key);
  if (!v) {
    RLX_CHECK(!required, f.source, ": tokenizer: missing metadata key ", key);
    return nullptr;
  }
  RLX_CHECK(v->type == type || (type == gguf::ValueType::U32 && v->is_integer()), f.source,
            ": tokenizer: ", key, " has type ", gguf::value_type_name(v->type), ", expected ",
            gguf::value_type_name(type));
  return v;
}

const gguf::Value* find_array(const gguf::File& f, const char* key, bool required,
                              std::initializer_list<gguf::ValueType> elems) {
  const gguf::Value* v = find_typed(f, key, gguf::ValueType::ARRAY, required);
  if (!v) return nullptr;
  bool ok = false;
  for (auto e : elems) ok |= v->elem_type == e;
  RLX_CHECK(ok, f.source, ": tokenizer: ", key, " is an array of ",
            gguf::value_type_name(v->elem_type), " (unexpected element type)");
  return v;
}

bool get_bool(const gguf::File& f, const char* key, bool def) {
  const gguf::Value* v = find_typed(f, key, gguf::ValueType::BOOL, false);
  return v ? v->u != 0 : def;
}

// Special token id key: absent keeps the default; out of range is an error.
void get_id(const gguf::File& f, const char* key, int32_t n_vocab, int32_t& id) {
  const gguf::Value* v = find_typed(f, key, gguf::ValueType::U32, false);
  if (!v) {
    if (id >= n_vocab) id = -1;  // a model default that this vocab lacks
    return;
  }
  int64_t x = v->as_int();
  RLX_CHECK(x >= 0 && x < n_vocab, f.source, ": tokenizer: ", key, " = ", x,
            " is out of range for a vocab of ", n_vocab, " tokens");
  id = static_cast<int32_t>(x);
}

bool one_of(const std::string& p, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (p == n) return true;
  return false;
}

// tokenizer.ggml.pre -> splitter. The Llama 3 family proper also skips merges
// for words that are whole tokens and adds BOS by default.
Pre pre_from_name(const std::string& source, const std::string& p, bool& llama3_family) {
  llama3_family = one_of(p, {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral",
                             "midm-2.0", "lfm2", "jina-v5-nano"});
  if (llama3_family || one_of(p, {"dbrx", "smaug-bpe", "chatglm-bpe"})) return Pre::Llama3;
  if (p.empty() || p == "default") return Pre::Default;
  if (one_of(p, {"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "stablelm2", "hunyuan",
                 "solar-open", "grok-2"}))
    return Pre::Qwen2;
  if (one_of(p, {"gpt-2", "phi-2", "mpt", "olmo", "jais", "jina-es", "jina-de", "jina-v2-es",
                 "jina-v2-de", "roberta-bpe", "jina-v1-en", "jina-v2-code", "trillion", "gigachat",
                 "a.x-4.0", "mellum", "modern-bert", "granite-docling"}))
    return Pre::Gpt2;
  if (p == "qwen35") return Pre::Qwen35;
  if (p == "deepseek-llm") return Pre::DeepseekLlm;
  if (p == "deepseek-coder") return Pre::DeepseekCoder;
  if (p == "falcon") return Pre::Falcon;
  if (one_of(p, {"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b",
                 "mellum2"}))
    return Pre::Starcoder;
  if (one_of(p, {"poro-chat", "bloom", "gpt3-finnish"})) return Pre::Bloom;
  if (p == "viking") return Pre::Viking;
  throw make_error(source, ": tokenizer: tokenizer.ggml.pre = '", p, "' is not supported");
}

// Texts llama.cpp treats as end-of-generation / FIM control tokens even when
// the file marks them otherwise.
const char* const kEogTexts[] = {"<|eot_id|>",      "<|im_end|>",        "<|end|>", "<end_of_turn>",
                                 "<|endoftext|>",   "<|eom_id|>",        "<EOT>",   "_<EOT>",
                                 "<|end_of_text|>", "<end_of_utterance>"};
const char* const kFimTexts[] = {
    "<|fim_prefix|>",  "<fim-prefix>",   "<fim_prefix>",  "<PRE>",      "▁<PRE>",
    "<|fim_suffix|>",  "<fim-suffix>",   "<fim_suffix>",  "<SUF>",      "▁<SUF>",
    "<|fim_middle|>",  "<fim-middle>",   "<fim_middle>",  "<MID>",      "▁<MID>",
    "<|fim_pad|>",     "<fim-pad>",      "<fim_pad>",     "<PAD>",      "<|fim_repo|>",
    "<fim-repo>",      "<REPO>",         "<|repo_name|>", "<reponame>", "<|file_sep|>",
    "<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>"};

}  // namespace

int32_t Tokenizer::Impl::find_sym(std::string_view s) const {
  int32_t id = find(s);
  if (id >= 0) return id;
  auto it = extra_ids.find(std::string(s));
  return it == extra_ids.end() ? -1 : it->second;
}

Tokenizer::Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::from_gguf(const gguf::File& f) {
  auto t = std::make_shared<Impl>();
  t->model = find_typed(f, "tokenizer.ggml.model", gguf::ValueType::STRING, true)->s;
  if (const auto* p = find_typed(f, "tokenizer.ggml.pre", gguf::ValueType::STRING, false))
    t->pre_name = p->s;
  RLX_CHECK(t->model == "llama" || t->model == "gpt2", f.source,
            ": tokenizer: tokenizer.ggml.model = '", t->model, "' is not supported (llama, gpt2)");
  t->spm = t->model == "llama";

  const auto* toks = find_array(f, "tokenizer.ggml.tokens", true, {gguf::ValueType::STRING});
  const size_t n = toks->arr.size();
  RLX_CHECK(n > 0 && n < (size_t(1) << 31), f.source, ": tokenizer: tokenizer.ggml.tokens has ", n,
            " entries");
  t->tokens.resize(n);
  for (size_t i = 0; i < n; ++i) {
    t->tokens[i] = toks->arr[i].s;
    if (t->tokens[i].empty()) t->tokens[i] = "[EMPTY_" + std::to_string(i) + "]";
  }
  t->scores.assign(n, 0.0f);
  if (const auto* s = find_array(f, "tokenizer.ggml.scores", false,
                                 {gguf::ValueType::F32, gguf::ValueType::I32})) {
    RLX_CHECK(s->arr.size() >= n, f.source, ": tokenizer: tokenizer.ggml.scores has ",
              s->arr.size(), " entries for ", n, " tokens");
    for (size_t i = 0; i < n; ++i) t->scores[i] = static_cast<float>(s->arr[i].as_float());
  }
  t->types.assign(n, tok::kTypeNormal);
  if (const auto* s = find_array(f, "tokenizer.ggml.token_type", false, {gguf::ValueType::I32})) {
    RLX_CHECK(s->arr.size() >= n, f.source, ": tokenizer: tokenizer.ggml.token_type has ",
              s->arr.size(), " entries for ", n, " tokens");
    for (size_t i = 0; i < n; ++i) t->types[i] = static_cast<int32_t>(s->arr[i].i);
  }
  t->token_ids.reserve(n);
  for (size_t i = 0; i < n; ++i) t->token_ids[t->tokens[i]] = static_cast<int32_t>(i);
  const int32_t nv = t->n_vocab();

  if (t->spm) {
    t->bos = 1, t->eos = 2, t->unk = 0;
    t->add_bos = true;
    t->add_space_prefix = true;
  } else {
    bool llama3_family = false;
    t->pre = pre_from_name(f.source, t->pre_name, llama3_family);
    t->bos = 11, t->eos = 11;
    t->ignore_merges = llama3_family;
    t->add_bos = llama3_family;
    const auto* m = find_array(f, "tokenizer.ggml.merges", true, {gguf::ValueType::STRING});
    t->merges.reserve(m->arr.size());
    auto intern = [&](const std::string& s) -> int32_t {
      int32_t id = t->find_sym(s);
      if (id >= 0) return id;
      id = nv + static_cast<int32_t>(t->extra_syms.size());
      t->extra_syms.push_back(s);
      t->extra_ids.emplace(s, id);
      return id;
    };
    for (size_t r = 0; r < m->arr.size(); ++r) {
      const std::string& w = m->arr[r].s;
      const size_t sp = w.find(' ', 1);
      RLX_CHECK(sp != std::string::npos, f.source, ": tokenizer: tokenizer.ggml.merges[", r,
                "] = '", w, "' has no separating space");
      std::string a = w.substr(0, sp), b = w.substr(sp + 1);
      const int32_t ia = intern(a), ib = intern(b), ir = intern(a + b);
      const uint64_t key = (uint64_t(uint32_t(ia)) << 32) | uint32_t(ib);
      t->merges.emplace(key, Impl::Merge{static_cast<int32_t>(r), ir});  // first rank wins
    }
  }
  t->add_space_prefix = get_bool(f, "tokenizer.ggml.add_space_prefix", t->add_space_prefix);
  get_id(f, "tokenizer.ggml.bos_token_id", nv, t->bos);
  get_id(f, "tokenizer.ggml.eos_token_id", nv, t->eos);
  get_id(f, "tokenizer.ggml.unknown_token_id", nv, t->unk);
  get_id(f, "tokenizer.ggml.eot_token_id", nv, t->eot);
  get_id(f, "tokenizer.ggml.eom_token_id", nv, t->eom);
  t->add_bos = get_bool(f, "tokenizer.ggml.add_bos_token", t->add_bos);
  t->add_eos = get_bool(f, "tokenizer.ggml.add_eos_token", t->add_eos);
  RLX_CHECK(!t->add_bos || t->bos >= 0, f.source,
            ": tokenizer: tokenizer.ggml.add_bos_token is set but there is no BOS token");
  RLX_CHECK(!t->add_eos || t->eos >= 0, f.source,
            ": tokenizer: tokenizer.ggml.add_eos_token is set but there is no EOS token");

  for (const char* s : kEogTexts) {
    const int32_t id = t->find(s);
    if (id < 0) continue;
    t->eog.insert(id);
    t->types[id] = tok::kTypeControl;
  }
  for (const char* s : kFimTexts)
    if (const int32_t id = t->find(s); id >= 0) t->types[id] = tok::kTypeControl;
  for (int32_t id : {t->eos, t->eot, t->eom})
    if (id >= 0) t->eog.insert(id);

  for (int32_t i = 0; i < nv; ++i) {
    const int32_t ty = t->types[i];
    if (ty == tok::kTypeControl || ty == tok::kTypeUserDefined || ty == tok::kTypeUnknown)
      t->special_cache.push_back(i);
  }
  std::stable_sort(t->special_cache.begin(), t->special_cache.end(),
                   [&](int32_t a, int32_t b) { return t->tokens[a].size() > t->tokens[b].size(); });

  if (t->spm) {
    for (const std::string& s : t->tokens) {
      uint32_t prev = 0;
      for (size_t pos = 0; pos < s.size();) {
        const size_t len =
            std::min(tok::utf8_len(static_cast<unsigned char>(s[pos])), s.size() - pos);
        const uint32_t unit = tok::spm_unit(s, pos, len);
        if (pos > 0) t->spm_pairs.insert((uint64_t(prev) << 32) | unit);
        prev = unit;
        pos += len;
      }
    }
  }
  for (int b = 0; b < 256; ++b) {
    if (t->spm) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "<0x%02X>", b);
      int32_t id = t->find(buf);
      if (id < 0) id = t->find(std::string(1, static_cast<char>(b)));
      t->byte_tokens[b] = id;
    } else {
      t->byte_tokens[b] = t->find(tok::byte_to_unicode(static_cast<uint8_t>(b)));
    }
  }
  return Tokenizer(std::move(t));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  const Impl& t = *impl_;
  // Fragments: raw text ranges or special token ids (text == nullptr).
  struct Frag {
    size_t begin, end;
    int32_t id;  // -1 for text
  };
  std::vector<Frag> frags;
  if (!text.empty()) frags.push_back({0, text.size(), -1});
  for (int32_t sid : t.special_cache) {
    if (!parse_special && t.types[sid] != tok::kTypeUserDefined) continue;
    const std::string& st = t.tokens[sid];
    std::vector<Frag> next;
    next.reserve(frags.size());
    for (const Frag& fr : frags) {
      if (fr.id >= 0) {
        next.push_back(fr);
        continue;
      }
      size_t pos = fr.begin;
      while (pos < fr.end) {
        size_t m = text.substr(0, fr.end).find(st, pos);
        if (m == std::string_view::npos) break;
        if (m > pos) next.push_back({pos, m, -1});
        next.push_back({0, 0, sid});
        pos = m + st.size();
      }
      if (pos < fr.end) next.push_back({pos, fr.end, -1});
    }
    frags.swap(next);
  }

  std::vector<int32_t> out;
  if (add_special && t.add_bos) out.push_back(t.bos);
  bool prev_special = true;  // SentencePiece adds its prefix space at the start and after specials
  for (const Frag& fr : frags) {
    if (fr.id >= 0) {
      out.push_back(fr.id);
      prev_special = true;
      continue;
    }
    std::string_view piece = text.substr(fr.begin, fr.end - fr.begin);
    if (t.spm) {
      std::string s;
      s.reserve(piece.size() * 3 + 3);
      if (t.add_space_prefix && prev_special) s += "\xE2\x96\x81";
      for (char c : piece) {
        if (c == ' ')
          s += "\xE2\x96\x81";
        else
          s += c;
      }
      t.encode_spm(s, out);
    } else {
      t.encode_bpe(piece, out);
    }
    prev_special = false;
  }
  if (add_special && t.add_eos) out.push_back(t.eos);
  return out;
}

std::string Tokenizer::token_to_piece(int32_t id, bool special) const {
  const Impl& t = *impl_;
  RLX_CHECK(id >= 0 && id < t.n_vocab(), "tokenizer: token id ", id, " is out of range [0, ",
            t.n_vocab(), ")");
  const std::string& s = t.tokens[id];
  const int32_t ty = t.types[id];
  if (ty == tok::kTypeControl || ty == tok::kTypeUnknown) return special ? s : std::string();
  if (ty == tok::kTypeUserDefined) return s;
  if (ty == tok::kTypeByte) {
    if (t.spm) {
      // "<0xXX>"
      if (s.size() == 6 && s.compare(0, 3, "<0x") == 0) {
        return std::string(1, static_cast<char>(std::stoi(s.substr(3, 2), nullptr, 16)));
      }
      return s;
    }
  }
  if (ty != tok::kTypeNormal && ty != tok::kTypeByte) return std::string();  // unused / undefined
  std::string r;
  if (t.spm) {
    for (size_t i = 0; i < s.size();) {
      if (s.compare(i, 3, "\xE2\x96\x81") == 0) {
        r += ' ';
        i += 3;
      } else {
        r += s[i++];
      }
    }
    return r;
  }
  // Byte-level BPE: every code point stands for one byte.
  size_t pos = 0;
  while (pos < s.size()) {
    size_t start = pos;
    const uint32_t cp = tok::decode_utf8(s, pos);
    const int b = tok::byte_from_unicode(cp);
    if (b >= 0)
      r += static_cast<char>(b);
    else
      r.append(s, start, pos - start);  // not a mapped code point: keep as is
  }
  return r;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool render_special) const {
  const Impl& t = *impl_;
  std::string out;
  bool strip = t.spm && t.add_space_prefix;  // the space encode() put in front
  for (int32_t id : ids) {
    std::string p = token_to_piece(id, render_special);
    const int32_t ty = t.types[id];
    if (ty == tok::kTypeControl || ty == tok::kTypeUserDefined || ty == tok::kTypeUnknown) {
      out += p;
      strip = t.spm && t.add_space_prefix;
      continue;
    }
    if (strip && !p.empty() && p[0] == ' ') p.erase(0, 1);
    strip = false;
    out += p;
  }
  return out;
}

int32_t Tokenizer::bos() const { return impl_->bos; }
int32_t Tokenizer::eos() const { return impl_->eos; }
bool Tokenizer::is_eog(int32_t id) const { return impl_->eog.count(id) != 0; }
bool Tokenizer::is_control(int32_t id) const {
  return id >= 0 && id < impl_->n_vocab() && impl_->is_control(id);
}
int32_t Tokenizer::n_vocab() const { return impl_->n_vocab(); }
std::string Tokenizer::model() const { return impl_->model; }
std::string Tokenizer::pre() const { return impl_->pre_name; }
bool Tokenizer::add_bos() const { return impl_->add_bos; }
const std::string& Tokenizer::token_text(int32_t id) const {
  RLX_CHECK(id >= 0 && id < impl_->n_vocab(), "tokenizer: token id ", id, " is out of range [0, ",
            impl_->n_vocab(), ")");
  return impl_->tokens[id];
}

}  // namespace rlx
