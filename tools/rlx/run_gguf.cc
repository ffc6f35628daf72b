// rlx run MODEL.gguf --tokens "1 15043 3186": one prefill over a token list,
// logits for every position.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>

#include "commands.h"
#include "rlx/llm.h"

namespace rlx::cli {

std::vector<int32_t> parse_token_list(const std::string& text) {
  std::vector<int32_t> ids;
  std::string s = text;
  for (char& ch : s)
    if (ch == ',') ch = ' ';
  std::istringstream in(s);
  std::string word;
  while (in >> word) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    RLX_CHECK(used == word.size() && v >= 0 && v <= INT32_MAX, "--tokens: '", word,
              "' is not a token id");
    ids.push_back(int32_t(v));
  }
  RLX_CHECK(!ids.empty(), "--tokens: no token ids given");
  return ids;
}

llm::Weights weight_mode(bool dequantize) {
  return dequantize ? llm::Weights::F32 : llm::Weights::Quantized;
}

void run_gguf_tokens(const std::string& path, const std::string& tokens, const std::string& out,
                     bool dequantize, const CompileOptions& options) {
  Model m = load_model(path, {.kv_cache = false, .all_logits = true, .dequantize = dequantize});
  std::printf("%s\n", m.summary.c_str());
  std::vector<int32_t> ids = parse_token_list(tokens);
  const Graph& g = m.graph;
  auto logits = std::find_if(g.outputs().begin(), g.outputs().end(),
                             [](const auto& o) { return o.name == "logits"; });
  RLX_CHECK(logits != g.outputs().end(), path, ": the model has no 'logits' output");
  const Shape& ls = g.node(logits->node).shape;
  RLX_CHECK(ls.rank() == 2 && ls.dims[1].is_static(), path, ": logits are ", ls.str(),
            ", expected [tokens, n_vocab]");
  const int64_t n_vocab = ls.dims[1].value;
  auto exe = Executable::compile(std::move(m.graph), m.weights, options);
  Session session(exe);
  TensorMap inputs = llm::token_inputs(ids, 0, n_vocab);
  auto t0 = std::chrono::steady_clock::now();
  TensorMap outputs = session.run(inputs);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%s\n", tensor_summary("logits", outputs.at("logits")).c_str());
  std::printf("%zu tokens in %.3f s (%.1f tokens/s)\n", ids.size(), s, double(ids.size()) / s);
  if (!out.empty()) {
    write_safetensors(out, {{"logits", outputs.at("logits")}});
    std::printf("wrote logits to %s\n", out.c_str());
  }
}

}  // namespace rlx::cli
