// llama_peer: llama.cpp as the reference for rlx's GGUF LLM runner.
//
// Built against llama.cpp's headers (source checkout, $RLX_LLAMA_SRC) and
// linked to node-llama-cpp's PREBUILT libllama/libggml (no llama.cpp build
// needed); see bench/llama_peer/CMakeLists.txt. The CPU backend variants
// (libggml-cpu-*.so) are loaded at run time from the library directory
// (compiled in; override with env LLAMA_PEER_BACKEND_DIR).
//
//   llama_peer logits   M.gguf --tokens "1 2 3" --out logits.safetensors
//        -> safetensors with "logits" f32 [n_tokens, n_vocab] (every position)
//   llama_peer tokenize M.gguf -p "text" [--no-bos] [--parse-special]
//        -> token ids on one line
//   llama_peer generate M.gguf --tokens "1 2 3" -n 32
//        -> greedy (argmax) continuation ids on one line
//   llama_peer bench    M.gguf --prompt 512 --decode 64 [--reps 3]
//        -> one JSON line: prefill / decode tokens per second (medians);
//           --decode-depth N times the decode steps after N cached tokens
//           (default 0 = llama-bench's tg; N = prompt = "generate" style)
// Common options: --threads N (default 2), --kv f32|f16 (KV cache type),
// --fa auto|on|off (flash attention), --verbose. Defaults: logits/generate
// use f32 KV + no flash attention (the most exact reference); bench uses
// llama.cpp's defaults (f16 KV, flash attention auto = on for CPU).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "llama.h"

#ifndef LLAMA_PEER_BACKEND_DIR
#define LLAMA_PEER_BACKEND_DIR ""
#endif

namespace {

struct Options {
  std::string mode, model, tokens_text, prompt_text, out;
  int threads = 2, n_gen = 32, n_prompt = 512, n_decode = 64, reps = 3, depth = 0, parallel = 1;
  bool no_bos = false, parse_special = false, verbose = false;
  std::string kv;  // empty = mode default
  std::string fa;  // empty = mode default
};

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "llama_peer: %s\n", msg.c_str());
  std::exit(2);
}

void usage() {
  std::fprintf(
      stderr,
      "usage: llama_peer logits|tokenize|generate|bench MODEL.gguf [options]\n"
      "  --tokens \"1 2 3\"  --out F.safetensors  -p TEXT  --no-bos  --parse-special\n"
      "  -n N (generate)  --prompt N --decode N --decode-depth N --reps N --parallel N (bench)\n"
      "  --threads N  --kv f32|f16  --fa auto|on|off  --verbose\n");
  std::exit(2);
}

Options parse(int argc, char** argv) {
  if (argc < 3) usage();
  Options o;
  o.mode = argv[1];
  o.model = argv[2];
  auto need = [&](int& i) -> std::string {
    if (i + 1 >= argc) die(std::string("missing value for ") + argv[i]);
    return argv[++i];
  };
  for (int i = 3; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--tokens")
      o.tokens_text = need(i);
    else if (a == "--out")
      o.out = need(i);
    else if (a == "-p" || a == "--text")
      o.prompt_text = need(i);
    else if (a == "--no-bos")
      o.no_bos = true;
    else if (a == "--parse-special")
      o.parse_special = true;
    else if (a == "-n")
      o.n_gen = std::stoi(need(i));
    else if (a == "--prompt")
      o.n_prompt = std::stoi(need(i));
    else if (a == "--decode")
      o.n_decode = std::stoi(need(i));
    else if (a == "--reps")
      o.reps = std::stoi(need(i));
    else if (a == "--decode-depth")
      o.depth = std::stoi(need(i));
    else if (a == "--parallel")
      o.parallel = std::stoi(need(i));
    else if (a == "--threads" || a == "-t")
      o.threads = std::stoi(need(i));
    else if (a == "--kv")
      o.kv = need(i);
    else if (a == "--fa")
      o.fa = need(i);
    else if (a == "--verbose" || a == "-v")
      o.verbose = true;
    else
      die("unknown option " + a);
  }
  return o;
}

std::vector<llama_token> parse_tokens(const std::string& s) {
  std::vector<llama_token> ids;
  std::string norm = s;
  std::replace(norm.begin(), norm.end(), ',', ' ');
  std::istringstream in(norm);
  long long v;
  while (in >> v) ids.push_back(static_cast<llama_token>(v));
  if (!in.eof()) die("bad --tokens list: " + s);
  return ids;
}

void quiet_log(enum ggml_log_level level, const char* text, void*) {
  if (level == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}

void load_backends() {
  const char* env = std::getenv("LLAMA_PEER_BACKEND_DIR");
  std::string dir = env && *env ? env : LLAMA_PEER_BACKEND_DIR;
  if (!dir.empty())
    ggml_backend_load_all_from_path(dir.c_str());
  else
    ggml_backend_load_all();
  if (ggml_backend_dev_count() == 0) die("no ggml backend loaded from '" + dir + "'");
}

struct Model {
  llama_model* m = nullptr;
  explicit Model(const Options& o, bool vocab_only) {
    llama_model_params p = llama_model_default_params();
    p.vocab_only = vocab_only;
    p.n_gpu_layers = 0;
    m = llama_model_load_from_file(o.model.c_str(), p);
    if (!m) die("cannot load model " + o.model);
  }
  ~Model() { llama_model_free(m); }
  const llama_vocab* vocab() const { return llama_model_get_vocab(m); }
};

struct Context {
  llama_context* c = nullptr;
  // n_seq sequences of n_ctx tokens each.
  Context(const Model& model, const Options& o, int n_ctx, int n_batch, bool exact, int n_seq = 1) {
    llama_context_params p = llama_context_default_params();
    p.n_ctx = static_cast<uint32_t>(n_ctx * n_seq);
    p.n_batch = p.n_ubatch = static_cast<uint32_t>(n_batch);
    p.n_seq_max = static_cast<uint32_t>(n_seq);
    p.n_threads = p.n_threads_batch = o.threads;
    // exact: f32 KV cache and no flash attention (ggml's CPU flash attention
    // rounds to f16: ~2e-3 logit error on the test models).
    std::string kv = o.kv.empty() ? (exact ? "f32" : "f16") : o.kv;
    std::string fa = o.fa.empty() ? (exact ? "off" : "auto") : o.fa;
    if (kv != "f32" && kv != "f16") die("--kv must be f32|f16");
    p.type_k = p.type_v = kv == "f16" ? GGML_TYPE_F16 : GGML_TYPE_F32;
    if (fa == "on")
      p.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_ENABLED;
    else if (fa == "off")
      p.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    else if (fa == "auto")
      p.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_AUTO;
    else
      die("--fa must be auto|on|off");
    p.no_perf = true;
    c = llama_init_from_model(model.m, p);
    if (!c) die("cannot create context");
  }
  ~Context() { llama_free(c); }
  void clear() { llama_memory_clear(llama_get_memory(c), true); }
};

// Decode `ids` at positions [pos0, pos0+n) of sequence `seq`; request logits for every token
// (all_logits) or only the last one. one_each: token i is the next of sequence i instead, at
// position pos0 (a batched decode step of several sequences, logits for each).
void decode(Context& ctx, const std::vector<llama_token>& ids, int pos0, bool all_logits,
            int seq = 0, bool one_each = false) {
  llama_batch b = llama_batch_init(static_cast<int32_t>(ids.size()), 0, 1);
  b.n_tokens = static_cast<int32_t>(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    b.token[i] = ids[i];
    b.pos[i] = pos0 + (one_each ? 0 : static_cast<llama_pos>(i));
    b.n_seq_id[i] = 1;
    b.seq_id[i][0] = one_each ? static_cast<llama_seq_id>(i) : seq;
    b.logits[i] = all_logits || one_each || i + 1 == ids.size();
  }
  int rc = llama_decode(ctx.c, b);
  llama_batch_free(b);
  if (rc != 0) die("llama_decode failed with " + std::to_string(rc));
}

void check_ids(const std::vector<llama_token>& ids, int n_vocab) {
  if (ids.empty()) die("empty token list");
  for (llama_token t : ids)
    if (t < 0 || t >= n_vocab)
      die("token id " + std::to_string(t) + " out of range [0, " + std::to_string(n_vocab) + ")");
}

void write_safetensors(const std::string& path, const std::vector<float>& data, int rows,
                       int cols) {
  std::string header = "{\"logits\":{\"dtype\":\"F32\",\"shape\":[" + std::to_string(rows) + "," +
                       std::to_string(cols) + "],\"data_offsets\":[0," +
                       std::to_string(data.size() * sizeof(float)) + "]}}";
  while (header.size() % 8) header += ' ';  // align the data section
  uint64_t n = header.size();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) die("cannot write " + path);
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
  bool ok = std::fwrite(len, 1, 8, f) == 8 && std::fwrite(header.data(), 1, n, f) == n &&
            std::fwrite(data.data(), sizeof(float), data.size(), f) == data.size();
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) die("short write to " + path);
}

int round_up(int x, int m) { return (x + m - 1) / m * m; }

int cmd_logits(const Options& o) {
  if (o.out.empty()) die("logits needs --out");
  Model model(o, false);
  const int n_vocab = llama_vocab_n_tokens(model.vocab());
  auto ids = parse_tokens(o.tokens_text);
  check_ids(ids, n_vocab);
  const int n = static_cast<int>(ids.size());
  Context ctx(model, o, round_up(std::max(n, 256), 256), std::max(n, 32), true);
  decode(ctx, ids, 0, true);
  std::vector<float> out(static_cast<size_t>(n) * n_vocab);
  for (int i = 0; i < n; ++i) {
    const float* row = llama_get_logits_ith(ctx.c, i);
    if (!row) die("no logits for position " + std::to_string(i));
    std::memcpy(&out[static_cast<size_t>(i) * n_vocab], row, sizeof(float) * n_vocab);
  }
  write_safetensors(o.out, out, n, n_vocab);
  return 0;
}

int argmax(const float* x, int n) { return static_cast<int>(std::max_element(x, x + n) - x); }

int cmd_generate(const Options& o) {
  Model model(o, false);
  const int n_vocab = llama_vocab_n_tokens(model.vocab());
  auto ids = parse_tokens(o.tokens_text);
  check_ids(ids, n_vocab);
  const int n = static_cast<int>(ids.size());
  Context ctx(model, o, round_up(std::max(n + o.n_gen, 256), 256), std::max(n, 32), true);
  decode(ctx, ids, 0, false);
  std::string line;
  for (int i = 0; i < o.n_gen; ++i) {
    llama_token next = argmax(llama_get_logits_ith(ctx.c, -1), n_vocab);
    line += (i ? " " : "") + std::to_string(next);
    if (i + 1 < o.n_gen) decode(ctx, {next}, n + i, false);
  }
  std::printf("%s\n", line.c_str());
  return 0;
}

int cmd_tokenize(const Options& o) {
  Model model(o, true);
  const std::string& t = o.prompt_text;
  int cap = static_cast<int>(t.size()) + 8;
  std::vector<llama_token> ids(cap);
  int n = llama_tokenize(model.vocab(), t.data(), static_cast<int32_t>(t.size()), ids.data(), cap,
                         !o.no_bos, o.parse_special);
  if (n < 0) {
    ids.resize(-n);
    n = llama_tokenize(model.vocab(), t.data(), static_cast<int32_t>(t.size()), ids.data(), -n,
                       !o.no_bos, o.parse_special);
  }
  if (n < 0) die("tokenize failed");
  std::string line;
  for (int i = 0; i < n; ++i) line += (i ? " " : "") + std::to_string(ids[i]);
  std::printf("%s\n", line.c_str());
  return 0;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t k = v.size() / 2;
  return v.size() % 2 ? v[k] : 0.5 * (v[k - 1] + v[k]);
}

// Like llama-bench: pp = one batch of n_prompt tokens into an empty cache;
// tg = n_decode single-token decodes after `depth` cached tokens (0 = empty
// cache, like llama-bench). Random token ids. --parallel N: tg decodes N
// sequences at once, one batch of N tokens a step (llama-server's continuous
// batching of N slots; llama-batched-bench's S_TG), tok/s over all N.
int cmd_bench(const Options& o) {
  Model model(o, false);
  const int n_vocab = llama_vocab_n_tokens(model.vocab());
  if (o.depth < 0 || o.n_prompt < 0 || o.n_decode < 0 || o.reps < 1 || o.parallel < 1)
    die("bad bench sizes");
  const int n_seq = o.parallel;
  Context ctx(model, o, round_up(std::max(o.n_prompt, o.depth + o.n_decode) + 16, 256),
              std::max({o.n_prompt, o.depth, 32}), false, n_seq);
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int> dist(0, n_vocab - 1);
  std::vector<llama_token> prompt(std::max({o.n_prompt, o.depth, 16}));
  for (auto& t : prompt) t = dist(rng);
  using clock = std::chrono::steady_clock;
  auto secs = [](clock::time_point a, clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  };
  // Warm-up: one small batch and one single-token decode (page in weights).
  const int warm = std::clamp(o.n_prompt, 1, 16);
  decode(ctx, std::vector<llama_token>(prompt.begin(), prompt.begin() + warm), 0, false);
  decode(ctx, {prompt[0]}, warm, false);
  std::vector<double> pp, tg;
  for (int r = 0; r < o.reps; ++r) {
    if (o.n_prompt > 0) {
      ctx.clear();
      auto t0 = clock::now();
      decode(ctx, std::vector<llama_token>(prompt.begin(), prompt.begin() + o.n_prompt), 0, false);
      llama_synchronize(ctx.c);
      pp.push_back(o.n_prompt / secs(t0, clock::now()));
    }
    if (o.n_decode > 0) {
      ctx.clear();
      if (o.depth > 0)
        for (int s = 0; s < n_seq; ++s)
          decode(ctx, std::vector<llama_token>(prompt.begin(), prompt.begin() + o.depth), 0, false,
                 s);
      std::vector<llama_token> toks(n_seq);
      for (int s = 0; s < n_seq; ++s) toks[s] = prompt[s % prompt.size()];
      auto t0 = clock::now();
      for (int i = 0; i < o.n_decode; ++i) {
        decode(ctx, toks, o.depth + i, false, 0, n_seq > 1);
        // the sampling cost a generator pays
        for (int s = 0; s < n_seq; ++s)
          toks[s] = argmax(llama_get_logits_ith(ctx.c, n_seq > 1 ? s : -1), n_vocab);
      }
      llama_synchronize(ctx.c);
      tg.push_back(double(n_seq) * o.n_decode / secs(t0, clock::now()));
    }
  }
  auto list = [](const std::vector<double>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
    return s + "]";
  };
  std::printf(
      "{\"engine\":\"llama.cpp\",\"model\":\"%s\",\"threads\":%d,\"prompt\":%d,\"decode\":%d,"
      "\"depth\":%d,\"parallel\":%d,\"reps\":%d,"
      "\"kv\":\"%s\",\"fa\":\"%s\",\"prefill_tok_s\":%.3f,\"decode_tok_s\":%.3f,\"prefill_runs\":%"
      "s,\"decode_runs\":%s}\n",
      o.model.c_str(), o.threads, o.n_prompt, o.n_decode, o.depth, o.parallel, o.reps,
      o.kv.empty() ? "f16" : o.kv.c_str(), o.fa.empty() ? "auto" : o.fa.c_str(),
      pp.empty() ? 0.0 : median(pp), tg.empty() ? 0.0 : median(tg), list(pp).c_str(),
      list(tg).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  if (!o.verbose) {
    ggml_log_set(quiet_log, nullptr);
    llama_log_set(quiet_log, nullptr);
  }
  load_backends();
  llama_backend_init();
  int rc;
  if (o.mode == "logits")
    rc = cmd_logits(o);
  else if (o.mode == "generate")
    rc = cmd_generate(o);
  else if (o.mode == "tokenize")
    rc = cmd_tokenize(o);
  else if (o.mode == "bench")
    rc = cmd_bench(o);
  else
    usage();
  llama_backend_free();
  return rc;
}
