// Text generation over an llm::Session, shared by `rlx generate`, `rlx chat`
// and `rlx serve`: a GGUF model loaded once with its tokenizer and chat
// template, and a generation loop that streams whole UTF-8 characters, stops
// at end-of-generation tokens, stop strings, a token budget or the context
// size, and reuses the session's cache for a prompt that extends the last one.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rlx/chat_template.h"
#include "rlx/grammar.h"
#include "rlx/llm.h"
#include "rlx/tokenizer.h"
#include "rlx/utf8.h"

namespace rlx::llm {

// A model ready to serve: compiled once; sessions share the executable.
struct ChatModel {
  std::string path;
  Config config;
  Tokenizer tokenizer;
  std::shared_ptr<const Executable> exe;
  // The batched decode graph (GraphOptions::batch) when loaded with one.
  std::shared_ptr<const Executable> batch_exe;
  ChatTemplate chat_template;
  // Where the template came from: "gguf" (tokenizer.chat_template), "file",
  // or "chatml" (the fallback for files without one, as llama.cpp does).
  std::string template_origin;

  // Reads, builds and compiles `path`. A non-empty template_source replaces
  // the file's template. Throws rlx::Error naming the file and what is wrong.
  // batched: also compile the batched decode graph (rlx serve with several slots).
  // kv_dtype: the KV cache's element type (GraphOptions::kv_dtype); n_ctx:
  // the context it will serve (GraphOptions::n_ctx).
  static ChatModel load(const std::string& path, Weights w = Weights::Quantized,
                        const std::string& template_source = "", bool batched = false,
                        DType kv_dtype = DType::F32, int64_t n_ctx = 0);
  // The rendered conversation (with the generation prompt) as token ids:
  // control tokens spelled in the text become those tokens, and BOS is added
  // when the model wants one and the template did not write it.
  // `tools`: OpenAI's tool schemas as a JSON array for the template (empty: none).
  // `reply_start`: text the reply starts with, which the model continues (a forced call).
  std::vector<int32_t> chat_prompt(const std::vector<ChatMessage>& messages,
                                   const std::string& tools = {},
                                   const std::string& reply_start = {}) const;
  // Plain text as a prompt (BOS as the model wants; special tokens parsed).
  std::vector<int32_t> text_prompt(const std::string& text) const;
};

// Holds back text that may be the start of a stop string, so a stop string
// split over tokens is never sent, and cuts the text where one appears.
class StopStrings {
 public:
  explicit StopStrings(std::vector<std::string> stops);
  // Appends text; returns the part that can no longer turn into a stop string.
  std::string push(std::string_view text);
  // Everything still held (nothing once a stop string matched).
  std::string finish();
  bool matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool matched_ = false;
};

enum class Finish {
  Stop,       // an end-of-generation token or a stop string
  Length,     // max_tokens, or the context is full
  Cancelled,  // the sink returned false (a client went away)
};
const char* finish_name(Finish f);  // "stop", "length", "cancelled"

struct GenerateRequest {
  std::vector<int32_t> prompt;
  int64_t max_tokens = 64;
  int64_t n_ctx = 0;  // > 0: prompt + completion may not pass it
  SamplerOptions sampling;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  // Constrained generation: only tokens whose bytes the grammar accepts, and an end token only
  // once the reply is a whole document of it. The grammar first takes grammar_prefix, the
  // reply's start that the prompt already holds (a forced call's opening). A grammar_trigger
  // leaves the reply free until that text appears in it; from there on the grammar holds
  // (a reply that may call tools: the call block must be a valid call).
  std::shared_ptr<const Grammar> grammar;
  std::string grammar_prefix, grammar_trigger;
};

struct GenerateResult {
  std::string text;
  std::vector<int32_t> tokens;                   // the completion's tokens
  int64_t prompt_tokens = 0, cached_tokens = 0;  // cached: reused from the session
  Finish finish = Finish::Stop;
  double prefill_s = 0, decode_s = 0;
};

// Receives each piece of final text (valid UTF-8) as it comes; returns false
// to stop generating.
using TextSink = std::function<bool(std::string_view)>;

// One completion, a token at a time, so a scheduler can interleave several.
// The constructor feeds the prompt: only the part past the longest prefix the
// session already holds. Throws rlx::Error for an empty prompt or one that
// does not fit n_ctx. The session must outlive the generation.
class Generation {
 public:
  Generation(Session& session, const Tokenizer& tok, GenerateRequest r);
  // Samples and streams one token; returns false once finished (then the
  // last text has gone to the sink and result() is complete).
  bool step(const TextSink& sink = {});
  // The token the next step() would feed its session, or -1 when that step
  // feeds none (it samples the prompt's logits, or the length limit ends it).
  // A scheduler may feed it itself, batched with other generations' tokens
  // (BatchDecoder), then call step(sink, logits) with what came back.
  int32_t pending_feed() const;
  bool step(const TextSink& sink, std::vector<float> fed_logits);
  // Ends the generation now, as Finish::Cancelled; nothing more is sent.
  void cancel();
  bool finished() const { return finished_; }
  const GenerateResult& result() const { return res_; }

 private:
  bool at_length() const;  // the token budget or the context is used up
  int32_t constrained_sample();
  bool grammar_allows(int32_t token) const;
  void follow_grammar(const std::string& piece);
  void finish(Finish f, const TextSink& sink);
  void emit(const std::string& text, const TextSink& sink);

  Session& session_;
  const Tokenizer& tok_;
  GenerateRequest r_;
  GenerateResult res_;
  Sampler sampler_;
  std::optional<GrammarMatcher> grammar_;
  bool grammar_waits_ = false;       // for its trigger
  std::string before_trigger_;       // the reply's end while the trigger is awaited
  std::vector<std::string> pieces_;  // each token's bytes; empty for control tokens
  std::vector<int16_t> first_byte_;  // of each piece; -1 for none
  std::vector<float> logits_;
  std::vector<int32_t> history_;
  Utf8Stream utf8_;
  StopStrings stops_;
  int32_t unfed_ = -1;  // the last sampled token, fed only if another follows
  bool finished_ = false, open_ = true;
  std::chrono::steady_clock::time_point decode_start_;
};

// How many leading tokens a and b have in common: what a session holding a can
// keep of its cache for a prompt b.
size_t shared_prefix(std::span<const int32_t> a, std::span<const int32_t> b);

// A whole completion: Generation stepped until it finishes.
GenerateResult generate(Session& session, const Tokenizer& tok, const GenerateRequest& r,
                        const TextSink& sink = {});

}  // namespace rlx::llm
