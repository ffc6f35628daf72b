// rlx chat MODEL.gguf: an interactive chat in the terminal. Each turn renders
// the whole conversation with the model's chat template and feeds only what
// the cache does not hold yet; replies stream in whole UTF-8 characters.
// Ctrl-C stops a reply; at the prompt it (or end of input) quits.
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>

#include "commands.h"

namespace rlx::cli {
namespace {

struct ChatOptions {
  std::string model, system, chat_template;
  int64_t n_predict = 512, ctx = 0;
  int threads = 0;
  bool dequantize = false, verbose = false;
  std::string kv_type = "f16";
  llm::SamplerOptions sampling;
};

std::atomic<bool> g_interrupted{false};
extern "C" void on_interrupt(int) { g_interrupted = true; }

// SIGINT without SA_RESTART: a reply checks the flag between tokens, and a
// read at the prompt returns, so Ctrl-C there ends the chat.
void catch_interrupts() {
  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  sigaction(SIGINT, &sa, nullptr);
}

void chat(const ChatOptions& o) {
  set_num_threads(o.threads);
  llm::ChatModel model =
      load_chat_model(o.model, o.dequantize, o.chat_template, false, o.kv_type, o.ctx);
  const int64_t ctx = context_size(model.config, o.ctx);
  llm::Session session(model.exe, model.config);
  const bool interactive = isatty(STDIN_FILENO);
  std::fprintf(stderr,
               "%s\n%schat template: %s, context %lld tokens\n"
               "Type a message; /reset starts over, /exit quits, Ctrl-C stops a reply.\n",
               model.config.summary().c_str(), rope_factors_line(model.config, ctx).c_str(),
               model.template_origin.c_str(), (long long)ctx);
  catch_interrupts();

  std::vector<llm::ChatMessage> messages;
  const auto start_over = [&] {
    messages.clear();
    if (!o.system.empty()) messages.push_back({"system", o.system});
  };
  start_over();
  auto write = [](std::string_view s) {
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fflush(stdout);
    return !g_interrupted;
  };
  for (uint64_t turn = 0;; ++turn) {
    if (interactive) write("> ");
    std::string line;
    g_interrupted = false;
    if (!std::getline(std::cin, line) || g_interrupted) break;
    if (line == "/exit" || line == "/quit") break;
    if (line == "/reset") {
      start_over();
      session.reset();
      std::fprintf(stderr, "(the conversation starts over)\n");
      continue;
    }
    if (line.empty()) continue;
    messages.push_back({"user", line});
    llm::GenerateRequest req;
    req.prompt = model.chat_prompt(messages);
    if (int64_t(req.prompt.size()) >= ctx) {
      std::fprintf(stderr,
                   "(the conversation has %zu tokens and the context holds %lld: /reset to start "
                   "over)\n",
                   req.prompt.size(), (long long)ctx);
      messages.pop_back();
      continue;
    }
    req.max_tokens = o.n_predict;
    req.n_ctx = ctx;
    req.sampling = o.sampling;
    req.sampling.seed += turn;
    llm::GenerateResult r = llm::generate(session, model.tokenizer, req, write);
    std::printf("\n");
    std::fflush(stdout);
    if (r.finish == llm::Finish::Cancelled) std::fprintf(stderr, "(stopped)\n");
    if (o.verbose)
      std::fprintf(
          stderr, "[prompt %lld tokens, %lld cached; reply %zu tokens, %s, %.1f tokens/s]\n",
          (long long)r.prompt_tokens, (long long)r.cached_tokens, r.tokens.size(),
          llm::finish_name(r.finish), r.decode_s > 0 ? double(r.tokens.size()) / r.decode_s : 0.0);
    messages.push_back({"assistant", r.text});
  }
  if (interactive) std::printf("\n");
}

}  // namespace

void add_chat_command(CLI::App& app) {
  auto o = std::make_shared<ChatOptions>();
  auto* cmd = app.add_subcommand("chat", "Chat with a GGUF language model in the terminal");
  cmd->add_option("model", o->model, "GGUF model")->required();
  cmd->add_option("-s,--system", o->system, "System message opening the conversation");
  cmd->add_option("--chat-template", o->chat_template,
                  "Jinja chat template file replacing the model's");
  cmd->add_option("-n,--n-predict", o->n_predict, "Most tokens per reply")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("-c,--ctx", o->ctx,
                  "Context for the conversation (default: the model's, at most 4096)")
      ->check(CLI::NonNegativeNumber);
  add_sampling_flags(cmd, o->sampling);
  cmd->add_option("-t,--threads", o->threads, "Worker threads (default: all cores)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--dequantize", o->dequantize, "Dequantize every weight to f32 up front");
  add_kv_type_flag(cmd, o->kv_type);
  cmd->add_flag("-v,--verbose", o->verbose,
                "After each reply, print its token counts (prompt, cached, reply) and speed");
  cmd->callback([o] { chat(*o); });
}

}  // namespace rlx::cli
