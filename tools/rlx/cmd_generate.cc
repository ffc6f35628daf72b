// rlx generate MODEL.gguf -p "text" -n 64: prefill the prompt once, then
// decode one token at a time over the KV cache, streaming text as it comes, in
// whole UTF-8 characters.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>

#include "commands.h"
#include "rlx/grammar.h"
#include "rlx/llm.h"
#include "rlx/llm_generate.h"
#include "rlx/tokenizer.h"
#include "rlx/utf8.h"

namespace rlx::cli {
namespace {

struct GenerateOptions {
  std::string model, prompt, tokens, json_schema, json_schema_file, grammar, grammar_file;
  int n_predict = 64;
  int threads = 0;
  bool dequantize = false, ignore_eos = false, no_bos = false, warmup = false;
  std::string kv_type = "f16";
  llm::SamplerOptions sampling;
};

// The grammar -j / --json-schema-file or --grammar / --grammar-file ask for (before the
// model loads, so a bad one fails at once), or none.
std::shared_ptr<const llm::Grammar> requested_grammar(const GenerateOptions& o) {
  const bool gbnf = !o.grammar.empty() || !o.grammar_file.empty();
  const std::string& file = gbnf ? o.grammar_file : o.json_schema_file;
  std::string text = gbnf ? o.grammar : o.json_schema;
  if (text.empty() && file.empty()) return nullptr;
  if (!file.empty()) {
    std::ifstream in(file, std::ios::binary);
    RLX_CHECK(in, file, ": cannot open the ", gbnf ? "grammar" : "JSON schema");
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  try {
    return gbnf ? llm::Grammar::from_gbnf(text) : llm::Grammar::from_json_schema(text);
  } catch (const Error& e) {
    throw Error((file.empty() ? gbnf ? "--grammar" : "--json-schema" : file) + ": " + e.what());
  }
}

void generate(const GenerateOptions& o) {
  set_num_threads(o.threads);
  RLX_CHECK(o.prompt.empty() != o.tokens.empty(),
            "generate: pass exactly one of -p/--prompt and --tokens");
  std::shared_ptr<const llm::Grammar> grammar = requested_grammar(o);
  gguf::File f = gguf::read(o.model);
  llm::Config c = llm::Config::from_gguf(f);
  Tokenizer tok = Tokenizer::from_gguf(f);
  std::vector<int32_t> ids =
      o.tokens.empty() ? tok.encode(o.prompt, !o.no_bos, true) : parse_token_list(o.tokens);
  RLX_CHECK(!ids.empty(), "generate: the prompt encodes to no tokens");
  // The context is the prompt and what it may grow by (LongRoPE models take
  // their long rope factors when it passes the original context).
  const int64_t n_ctx = int64_t(ids.size()) + std::max<int64_t>(o.n_predict, 0);
  Model m = llm::build_model(f, c, {.kv_dtype = kv_dtype(o.kv_type), .n_ctx = n_ctx},
                             weight_mode(o.dequantize));
  std::fprintf(stderr, "%s\n%s", c.summary().c_str(), rope_factors_line(c, n_ctx).c_str());
  llm::Session session(Executable::compile(std::move(m.graph), m.weights), c);

  // Whole characters only: a character split over tokens waits for its rest,
  // and bytes that never make one are written as U+FFFD (utf8.h).
  auto write = [](std::string_view s) {
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fflush(stdout);
    return true;
  };
  Utf8Stream prompt_text;
  for (int32_t id : ids) write(prompt_text.push(tok.token_to_piece(id, false)));
  write(prompt_text.finish());
  if (o.warmup) {  // touch the mapped weights and plan the shapes once, untimed
    session.feed(ids);
    session.feed(std::span(ids).first(1));
    session.reset();
  }
  llm::GenerateRequest req;
  req.prompt = ids;
  req.max_tokens = o.n_predict;
  req.sampling = o.sampling;
  req.ignore_eos = o.ignore_eos;
  req.grammar = grammar;
  llm::GenerateResult r = llm::generate(session, tok, req, write);
  std::printf("\n");
  std::fflush(stdout);
  std::fprintf(stderr, "prompt: %zu tokens in %.3f s (%.1f tokens/s)\n", ids.size(), r.prefill_s,
               double(ids.size()) / r.prefill_s);
  const size_t produced = r.tokens.size();
  std::fprintf(stderr, "decode: %zu tokens in %.3f s (%.1f tokens/s), %d threads\n", produced,
               r.decode_s, r.decode_s > 0 ? double(produced) / r.decode_s : 0.0, num_threads());
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto o = std::make_shared<GenerateOptions>();
  auto* cmd = app.add_subcommand("generate", "Generate text with a GGUF language model");
  cmd->add_option(
         "model", o->model,
         "GGUF model (llama, qwen2, qwen3, qwen3moe, phi3, gemma2, gemma3; MoE llama as mixtral)")
      ->required();
  cmd->add_option("-p,--prompt", o->prompt, "Prompt text");
  cmd->add_option("--tokens", o->tokens, "Prompt as token ids instead of text (\"1 15043\")");
  cmd->add_option("-n,--n-predict", o->n_predict, "Tokens to generate")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  add_sampling_flags(cmd, o->sampling);
  cmd->add_option("-t,--threads", o->threads, "Worker threads (default: all cores)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--dequantize", o->dequantize, "Dequantize every weight to f32 up front");
  add_kv_type_flag(cmd, o->kv_type);
  cmd->add_flag("--ignore-eos", o->ignore_eos, "Keep going past end-of-generation tokens");
  auto* schema =
      cmd->add_option("-j,--json-schema", o->json_schema,
                      "Constrain the reply to JSON this schema accepts ('{}': any JSON)");
  auto* schema_file =
      cmd->add_option("--json-schema-file", o->json_schema_file, "-j's schema from a file")
          ->check(CLI::ExistingFile)
          ->excludes(schema);
  auto* gbnf = cmd->add_option("--grammar", o->grammar,
                               "Constrain the reply to this GBNF grammar (llama.cpp's notation, "
                               "from rule root)")
                   ->excludes(schema)
                   ->excludes(schema_file);
  cmd->add_option("--grammar-file", o->grammar_file, "--grammar's grammar from a file")
      ->check(CLI::ExistingFile)
      ->excludes(schema)
      ->excludes(schema_file)
      ->excludes(gbnf);
  cmd->add_flag("--no-bos", o->no_bos, "Do not add the BOS token to the prompt");
  cmd->add_flag("--warmup", o->warmup,
                "Run the prompt once untimed first (page in weights, plan shapes) for benchmarks");
  cmd->callback([o] { generate(*o); });
}

}  // namespace rlx::cli
