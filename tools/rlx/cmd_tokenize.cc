// rlx tokenize MODEL.gguf -p TEXT [--no-bos] [--parse-special] [--ids-only]
#include <cstdio>
#include <memory>

#include "commands.h"
#include "rlx/gguf.h"
#include "rlx/tokenizer.h"

namespace rlx::cli {
namespace {

struct TokenizeOptions {
  std::string model, prompt;
  bool no_bos = false, parse_special = false, ids_only = false;
};

// Pieces are printed with control bytes escaped so one token is one line.
std::string printable(const std::string& s) {
  std::string r;
  for (unsigned char c : s) {
    if (c == '\n') {
      r += "\\n";
    } else if (c == '\t') {
      r += "\\t";
    } else if (c == '\r') {
      r += "\\r";
    } else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      r += buf;
    } else {
      r += static_cast<char>(c);
    }
  }
  return r;
}

void tokenize(const TokenizeOptions& o) {
  const gguf::File f = gguf::read(o.model);
  const Tokenizer tok = Tokenizer::from_gguf(f);
  const auto ids = tok.encode(o.prompt, !o.no_bos, o.parse_special);
  if (o.ids_only) {
    for (size_t i = 0; i < ids.size(); ++i) std::printf(i ? " %d" : "%d", ids[i]);
    std::printf("\n");
    return;
  }
  std::printf("tokenizer: %s%s%s, %d tokens; %zu ids\n", tok.model().c_str(),
              tok.pre().empty() ? "" : "/", tok.pre().c_str(), tok.n_vocab(), ids.size());
  for (int32_t id : ids)
    std::printf("%8d -> '%s'\n", id, printable(tok.token_to_piece(id, true)).c_str());
}

}  // namespace

void add_tokenize_command(CLI::App& app) {
  auto o = std::make_shared<TokenizeOptions>();
  auto* cmd = app.add_subcommand(
      "tokenize", "Tokenize text with a GGUF file's tokenizer; print ids and pieces");
  cmd->add_option("model", o->model, "GGUF file (only its tokenizer.ggml.* metadata is used)")
      ->required();
  cmd->add_option("-p,--prompt", o->prompt, "Text to tokenize")->required();
  cmd->add_flag("--no-bos", o->no_bos, "Do not add BOS/EOS (default: as add_bos_token says)");
  cmd->add_flag("--parse-special", o->parse_special,
                "Turn special-token text such as <|im_start|> into those tokens");
  cmd->add_flag("--ids-only", o->ids_only, "Print only the ids, space separated");
  cmd->callback([o] { tokenize(*o); });
}

}  // namespace rlx::cli
