// The generation loop and chat-model loading behind `rlx generate`, `rlx chat`
// and `rlx serve` (llm_generate.h).
#include "rlx/llm_generate.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "rlx/error.h"

namespace rlx::llm {
namespace {

// llama.cpp's fallback for files without tokenizer.chat_template.
constexpr const char* kChatMl =
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

std::string token_text_or_empty(const Tokenizer& tok, int32_t id) {
  return id >= 0 ? tok.token_text(id) : std::string();
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

ChatModel ChatModel::load(const std::string& path, Weights w, const std::string& template_source,
                          bool batched, DType kv_dtype, int64_t n_ctx) {
  gguf::File f = gguf::read(path);
  Config c = Config::from_gguf(f);
  Tokenizer tok = Tokenizer::from_gguf(f);
  std::string origin = "file", source = template_source;
  if (source.empty()) {
    const gguf::Value* v = f.find("tokenizer.chat_template");
    RLX_CHECK(!v || v->type == gguf::ValueType::STRING, path,
              ": tokenizer.chat_template is not a string");
    origin = v ? "gguf" : "chatml";
    source = v ? v->as_string() : kChatMl;
  }
  auto parsed = [&] {
    try {
      return ChatTemplate(source);
    } catch (const Error& e) {
      throw Error(path + ": chat template (" + origin + "): " + e.what());
    }
  };
  ChatTemplate tmpl = parsed();
  Model m = build_model(f, c, {.kv_dtype = kv_dtype, .n_ctx = n_ctx}, w);
  auto exe = Executable::compile(std::move(m.graph), m.weights);
  std::shared_ptr<const Executable> batch_exe;
  if (batched) {
    Model b = build_model(f, c, {.batch = true, .kv_dtype = kv_dtype, .n_ctx = n_ctx}, w);
    batch_exe = Executable::compile(std::move(b.graph), b.weights);
  }
  return ChatModel{path,           std::move(c),         std::move(tok),
                   std::move(exe), std::move(batch_exe), std::move(tmpl),
                   origin};
}

std::vector<int32_t> ChatModel::text_prompt(const std::string& text) const {
  return tokenizer.encode(text, true, true);
}

std::vector<int32_t> ChatModel::chat_prompt(const std::vector<ChatMessage>& messages,
                                            const std::string& tools,
                                            const std::string& reply_start) const {
  ChatTemplateOptions o;
  o.tools = tools;
  o.bos_token = token_text_or_empty(tokenizer, tokenizer.bos());
  o.eos_token = token_text_or_empty(tokenizer, tokenizer.eos());
  std::string text = chat_template.render(messages, o) + reply_start;
  // Templates write BOS themselves; encode adds it too when the model wants
  // one, so the written one goes (as llama.cpp's chat code does).
  if (tokenizer.add_bos() && !o.bos_token.empty() && text.starts_with(o.bos_token))
    text.erase(0, o.bos_token.size());
  std::vector<int32_t> ids = tokenizer.encode(text, true, true);
  // A model that appends EOS to encoded text must not see one before its reply.
  if (ids.size() > 1 && ids.back() == tokenizer.eos() && tokenizer.eos() != tokenizer.bos())
    ids.pop_back();
  return ids;
}

StopStrings::StopStrings(std::vector<std::string> stops) {
  for (auto& s : stops)
    if (!s.empty()) stops_.push_back(std::move(s));
}

std::string StopStrings::push(std::string_view text) {
  if (matched_) return {};
  held_ += text;
  size_t cut = std::string::npos;
  for (const auto& s : stops_) cut = std::min(cut, held_.find(s));
  if (cut != std::string::npos) {
    matched_ = true;
    std::string out = held_.substr(0, cut);
    held_.clear();
    return out;
  }
  // Hold the longest tail that begins some stop string. Stop strings are
  // valid UTF-8, so the tail starts on a character boundary.
  size_t keep = 0;
  for (const auto& s : stops_)
    for (size_t n = std::min(s.size() - 1, held_.size()); n > keep; --n)
      if (held_.compare(held_.size() - n, n, s, 0, n) == 0) {
        keep = n;
        break;
      }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopStrings::finish() { return std::exchange(held_, {}); }

const char* finish_name(Finish f) {
  switch (f) {
    case Finish::Stop:
      return "stop";
    case Finish::Length:
      return "length";
    case Finish::Cancelled:
      return "cancelled";
  }
  return "?";
}

Generation::Generation(Session& session, const Tokenizer& tok, GenerateRequest r)
    : session_(session), tok_(tok), r_(std::move(r)), sampler_(r_.sampling), stops_(r_.stop) {
  const std::vector<int32_t>& prompt = r_.prompt;
  RLX_CHECK(!prompt.empty(), "generate: the prompt has no tokens");
  RLX_CHECK(r_.n_ctx <= 0 || int64_t(prompt.size()) < r_.n_ctx, "generate: the prompt has ",
            prompt.size(), " tokens and the context holds ", r_.n_ctx);
  res_.prompt_tokens = int64_t(prompt.size());
  // The last prompt token always runs, for its logits.
  const std::vector<int32_t>& held = session.tokens();
  const size_t common = std::min(shared_prefix(held, prompt), prompt.size() - 1);
  session.truncate(int64_t(common));
  res_.cached_tokens = int64_t(common);
  auto t0 = std::chrono::steady_clock::now();
  logits_ = session.feed(std::span(prompt).subspan(common));
  res_.prefill_s = seconds_since(t0);
  history_ = prompt;
  if (r_.grammar) {
    grammar_.emplace(r_.grammar);
    grammar_waits_ = !r_.grammar_trigger.empty();
    RLX_CHECK(grammar_waits_ || grammar_->accept(r_.grammar_prefix),
              "generate: the grammar rejects the reply's start '", r_.grammar_prefix, "'");
    pieces_.resize(size_t(tok.n_vocab()));
    first_byte_.assign(size_t(tok.n_vocab()), -1);
    for (int32_t t = 0; t < tok.n_vocab(); ++t) {
      if (tok.is_control(t)) continue;
      pieces_[size_t(t)] = tok.token_to_piece(t);
      if (!pieces_[size_t(t)].empty()) first_byte_[size_t(t)] = uint8_t(pieces_[size_t(t)][0]);
    }
  }
  decode_start_ = std::chrono::steady_clock::now();
}

int32_t Generation::constrained_sample() {
  // Tokens whose first byte the grammar cannot take next are out before sorting.
  std::vector<float> l = logits_;
  const std::bitset<256>& next = grammar_->next_bytes();
  // Logits past the tokenizer's vocabulary (padded output rows) are never tokens.
  for (size_t t = 0; t < l.size(); ++t)
    if (t >= first_byte_.size() ||
        (first_byte_[t] < 0 ? !tok_.is_eog(int32_t(t)) : !next.test(size_t(first_byte_[t]))))
      l[t] = -INFINITY;
  return sampler_.sample(l, history_, [&](int32_t t) { return grammar_allows(t); });
}

bool Generation::grammar_allows(int32_t token) const {
  if (tok_.is_eog(token)) return !r_.ignore_eos && grammar_->complete();
  const std::string& piece = pieces_[size_t(token)];
  return !piece.empty() && grammar_->accepts(piece);
}

void Generation::follow_grammar(const std::string& piece) {
  if (!grammar_waits_) {
    RLX_CHECK(grammar_->accept(piece), "generate: a sampled token left the grammar");
    return;
  }
  before_trigger_ += piece;
  const size_t at = before_trigger_.find(r_.grammar_trigger);
  if (at == std::string::npos) {
    // Keep only what may still begin the trigger.
    const size_t keep = std::min(before_trigger_.size(), r_.grammar_trigger.size() - 1);
    before_trigger_.erase(0, before_trigger_.size() - keep);
    return;
  }
  grammar_waits_ = false;
  // The token that completed the trigger may run past it; text the grammar rejects there
  // (written before the grammar held) ends the constraint rather than the reply.
  if (!grammar_->accept(std::string_view(before_trigger_).substr(at))) grammar_.reset();
}

void Generation::emit(const std::string& text, const TextSink& sink) {
  if (text.empty() || !open_) return;
  res_.text += text;
  if (sink && !sink(text)) open_ = false;
}

void Generation::finish(Finish f, const TextSink& sink) {
  emit(stops_.push(utf8_.finish()), sink);
  emit(stops_.finish(), sink);
  res_.finish = open_ ? f : Finish::Cancelled;
  res_.decode_s = seconds_since(decode_start_);
  finished_ = true;
}

bool Generation::at_length() const {
  const int64_t next_position = session_.n_past() + (unfed_ >= 0);
  return int64_t(res_.tokens.size()) >= r_.max_tokens ||
         (r_.n_ctx > 0 && next_position >= r_.n_ctx);
}

int32_t Generation::pending_feed() const { return finished_ || at_length() ? -1 : unfed_; }

bool Generation::step(const TextSink& sink, std::vector<float> fed_logits) {
  RLX_CHECK(pending_feed() >= 0, "generation: step with logits, but no token was pending");
  logits_ = std::move(fed_logits);
  unfed_ = -1;
  return step(sink);
}

bool Generation::step(const TextSink& sink) {
  if (finished_) return false;
  if (at_length()) {
    finish(Finish::Length, sink);
    return false;
  }
  if (unfed_ >= 0) logits_ = session_.feed(std::span(&unfed_, 1));
  const int32_t next =
      grammar_ && !grammar_waits_ ? constrained_sample() : sampler_.sample(logits_, history_);
  if (next < 0) {  // the grammar allows no token: its document is done
    finish(Finish::Stop, sink);
    return false;
  }
  if (!r_.ignore_eos && tok_.is_eog(next)) {
    finish(Finish::Stop, sink);
    return false;
  }
  res_.tokens.push_back(next);
  history_.push_back(next);
  unfed_ = next;
  const std::string piece = tok_.token_to_piece(next);
  if (grammar_) follow_grammar(piece);
  emit(stops_.push(utf8_.push(piece)), sink);
  if (stops_.matched() || !open_) {
    finish(Finish::Stop, sink);
    return false;
  }
  return true;
}

size_t shared_prefix(std::span<const int32_t> a, std::span<const int32_t> b) {
  const size_t n = std::min(a.size(), b.size());
  return size_t(std::mismatch(a.begin(), a.begin() + ptrdiff_t(n), b.begin()).first - a.begin());
}

void Generation::cancel() {
  if (finished_) return;
  open_ = false;
  finish(Finish::Cancelled, {});
}

GenerateResult generate(Session& session, const Tokenizer& tok, const GenerateRequest& r,
                        const TextSink& sink) {
  Generation g(session, tok, r);
  while (g.step(sink)) {
  }
  return g.result();
}

}  // namespace rlx::llm
