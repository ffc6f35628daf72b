// Tokenizer tests: llama.cpp's vocab fixtures (ggml-vocab-<name>.gguf with
// .inp/.out pairs; ids must match exactly), decode round trips, hostile input,
// special tokens, and metadata validation on synthetic GGUF files.
//
// The fixtures come from $RLX_LLAMA_SRC/models (default
// $HOME/.cache/rlx-peers/llama.cpp/models); absent fixtures skip the test
// unless RLX_REQUIRE_GGML=1.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include "frontends/gguf/tokenizer_impl.h"  // tok::pre_split
#include "frontends/gguf/unicode.h"
#include "rlx/error.h"
#include "rlx/gguf.h"
#include "rlx/tokenizer.h"
#include "support/testing.h"

namespace rlx {
namespace {

namespace fs = std::filesystem;
using gguf::Value;
using gguf::ValueType;

std::string llama_src() {
  if (const char* p = std::getenv("RLX_LLAMA_SRC")) return p;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "") + "/.cache/rlx-peers/llama.cpp";
}
bool require_fixtures() {
  const char* r = std::getenv("RLX_REQUIRE_GGML");
  return r && std::string(r) == "1";
}
std::string vocab_path(const std::string& name) {
  return llama_src() + "/models/ggml-vocab-" + name + ".gguf";
}

struct VocabCase {
  std::string text;
  std::vector<int32_t> ids;
};

// .inp: inputs separated by "\n__ggml_vocab_test__\n"; .out: one line of ids per input.
std::vector<VocabCase> load_cases(const std::string& path) {
  std::ifstream fi(path + ".inp", std::ios::binary), fo(path + ".out");
  std::stringstream ss;
  ss << fi.rdbuf();
  const std::string raw = ss.str();
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> ins;
  for (size_t pos = 0; pos < raw.size();) {
    const size_t n = raw.find(sep, pos);
    if (n == std::string::npos) {
      ins.push_back(raw.substr(pos));
      break;
    }
    ins.push_back(raw.substr(pos, n - pos));
    pos = n + sep.size();
  }
  std::vector<VocabCase> cases;
  std::string line;
  for (const auto& in : ins) {
    if (!std::getline(fo, line)) break;
    VocabCase c{in, {}};
    std::istringstream ls(line);
    for (int32_t x; ls >> x;) c.ids.push_back(x);
    cases.push_back(std::move(c));
  }
  EXPECT_EQ(cases.size(), ins.size()) << path << ": .inp and .out disagree on the case count";
  return cases;
}

// Loads a fixture vocab once per process (large vocabs take a while);
// returns null (after failing when fixtures are required) when absent.
struct VocabFixture {
  std::unique_ptr<Tokenizer> tok;
  std::vector<VocabCase> cases;
};
const VocabFixture* load_vocab(const std::string& name) {
  static std::map<std::string, VocabFixture> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second.tok ? &it->second : nullptr;
  VocabFixture& fx = cache[name];
  const std::string p = vocab_path(name);
  if (!fs::exists(p) || !fs::exists(p + ".inp")) {
    if (require_fixtures()) ADD_FAILURE() << "missing fixture " << p << " (RLX_REQUIRE_GGML=1)";
    return nullptr;
  }
  fx.tok = std::make_unique<Tokenizer>(Tokenizer::from_gguf(gguf::read(p)));
  fx.cases = load_cases(p);
  return &fx;
}

class TokenizerFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerFixture, MatchesLlamaCppIds) {
  const VocabFixture* fx = load_vocab(GetParam());
  if (!fx) GTEST_SKIP() << "no fixture for " << GetParam();
  const Tokenizer& tok = *fx->tok;
  const std::vector<VocabCase>& cases = fx->cases;
  ASSERT_GT(cases.size(), 40u);
  int failures = 0;
  for (const VocabCase& c : cases) {
    const auto got = tok.encode(c.text, /*add_special=*/false, /*parse_special=*/false);
    if (got != c.ids && ++failures <= 5)
      ADD_FAILURE() << GetParam() << ": input '" << c.text << "'";
  }
  EXPECT_EQ(failures, 0) << GetParam() << ": " << failures << " of " << cases.size()
                         << " cases differ";
}

// decode(encode(x)) == x holds for every fixture input (all are valid UTF-8
// and every character is reachable through byte tokens).
TEST_P(TokenizerFixture, DecodeRoundTrips) {
  const VocabFixture* fx = load_vocab(GetParam());
  if (!fx) GTEST_SKIP() << "no fixture for " << GetParam();
  const Tokenizer& tok = *fx->tok;
  const std::vector<VocabCase>& cases = fx->cases;
  for (const VocabCase& c : cases) {
    EXPECT_EQ(tok.decode(tok.encode(c.text, false, false)), c.text) << GetParam();
    EXPECT_EQ(tok.decode(tok.encode(c.text, true, false)), c.text) << GetParam() << " (with BOS)";
  }
}

TEST_P(TokenizerFixture, HostileInputIsFastAndInRange) {
  const VocabFixture* fx = load_vocab(GetParam());
  if (!fx) GTEST_SKIP() << "no fixture for " << GetParam();
  const Tokenizer& tok = *fx->tok;
  EXPECT_TRUE(tok.encode("", false, false).empty());
  const std::vector<std::string> inputs = {
      std::string("\xff\xfe\x80\xc3", 4),         // invalid / truncated UTF-8
      std::string("a\xe2\x82", 3) + "b\xf0\x9f",  // cut sequences
      std::string(1, '\0') + "x" + std::string(1, '\0'),
      std::string(200000, 'a'),  // one huge word: merges must not be quadratic
      std::string(200000, ' '),
      std::string(100000, '7'),
      [] {
        std::string s;
        for (int i = 0; i < 50000; ++i) s += "\xe4\xb8\x80";  // 一 x 50000
        return s;
      }(),
      [] {
        std::string s;
        for (int i = 0; i < 40000; ++i) s += "ab \n\t!";
        return s;
      }(),
  };
  for (const auto& in : inputs) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto ids = tok.encode(in, true, true);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(s, 5.0) << GetParam() << ": " << in.size() << " bytes took " << s << " s";
    if (!in.empty()) {
      EXPECT_FALSE(ids.empty());
    }
    for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tok.n_vocab()) << id;
    (void)tok.decode(ids);
  }
}

INSTANTIATE_TEST_SUITE_P(Vocabs, TokenizerFixture,
                         ::testing::Values("llama-spm", "llama-bpe", "qwen2", "gpt-2", "phi-3",
                                           "deepseek-coder", "deepseek-llm", "falcon", "starcoder",
                                           "refact", "mpt", "command-r", "qwen35"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

TEST(Tokenizer, SpecialTokensAndFlags) {
  const VocabFixture* fx = load_vocab("qwen2");
  if (!fx) GTEST_SKIP();
  const Tokenizer& tok = *fx->tok;
  EXPECT_EQ(tok.model(), "gpt2");
  EXPECT_EQ(tok.pre(), "qwen2");
  const std::string text = "<|im_start|>user\nhi<|im_end|>";
  const auto with = tok.encode(text, false, true);
  ASSERT_GE(with.size(), 3u);
  EXPECT_EQ(tok.token_text(with.front()), "<|im_start|>");
  EXPECT_EQ(tok.token_text(with.back()), "<|im_end|>");
  EXPECT_TRUE(tok.is_eog(with.back()));
  EXPECT_FALSE(tok.is_eog(with.front()));
  EXPECT_EQ(tok.decode(with, /*render_special=*/true), text);
  EXPECT_EQ(tok.decode(with), "user\nhi");
  const auto without = tok.encode(text, false, false);
  EXPECT_GT(without.size(), with.size());  // spelled out as ordinary text
  EXPECT_EQ(tok.decode(without), text);
  EXPECT_THROW(tok.token_to_piece(-1), Error);
  EXPECT_THROW(tok.token_to_piece(tok.n_vocab()), Error);
}

TEST(Tokenizer, BosFollowsAddBosToken) {
  const VocabFixture* fx = load_vocab("llama-bpe");
  if (!fx) GTEST_SKIP();
  const Tokenizer& tok = *fx->tok;
  ASSERT_TRUE(tok.add_bos());
  const auto ids = tok.encode("Hello", true, false);
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(ids[0], tok.bos());
  EXPECT_EQ(tok.token_text(tok.bos()), "<|begin_of_text|>");
  EXPECT_EQ(tok.encode("Hello", false, false).size(), 1u);
  EXPECT_EQ(tok.encode("", true, false), std::vector<int32_t>{tok.bos()});
}

// Encoding throughput on a long mixed text (printed for the report).
TEST(Tokenizer, Throughput) {
  for (const char* name : {"llama-bpe", "llama-spm"}) {
    const VocabFixture* fx = load_vocab(name);
    if (!fx) GTEST_SKIP();
    const Tokenizer& tok = *fx->tok;
    const std::vector<VocabCase>& cases = fx->cases;
    std::string text;
    while (text.size() < (2u << 20))
      for (const VocabCase& c : cases) text += c.text + "\n";
    const auto t0 = std::chrono::steady_clock::now();
    const auto ids = tok.encode(text, false, false);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("[ tokenizer ] %s: %zu bytes -> %zu tokens in %.3f s (%.2f M tokens/s)\n", name,
                text.size(), ids.size(), s, ids.size() / s / 1e6);
    EXPECT_EQ(tok.decode(ids), text);
  }
}

// ---- synthetic vocabs (no fixtures needed) ----

Value strings(std::vector<std::string> v) {
  std::vector<Value> a;
  for (auto& s : v) a.push_back(Value::of_string(std::move(s)));
  return Value::of_array(ValueType::STRING, std::move(a));
}
Value f32s(std::vector<float> v) {
  std::vector<Value> a;
  for (float x : v) a.push_back(Value::of_f32(x));
  return Value::of_array(ValueType::F32, std::move(a));
}
Value i32s(std::vector<int32_t> v) {
  std::vector<Value> a;
  for (int32_t x : v) a.push_back(Value::of_i32(x));
  return Value::of_array(ValueType::I32, std::move(a));
}
using Meta = std::vector<std::pair<std::string, Value>>;
gguf::File file_of(const Meta& m) {
  static std::vector<std::string> keep;  // read_bytes points into the buffer
  keep.push_back(gguf::serialize(m, {}));
  return gguf::read_bytes(keep.back().data(), keep.back().size(), "synthetic.gguf");
}
void set(Meta& m, const std::string& k, Value v) {
  for (auto& [key, val] : m)
    if (key == k) {
      val = std::move(v);
      return;
    }
  m.emplace_back(k, std::move(v));
}
void drop(Meta& m, const std::string& k) {
  std::erase_if(m, [&](const auto& kv) { return kv.first == k; });
}

// A tiny SentencePiece vocab: ids 0..2 specials, 3 "▁", 4 "a", 5 "b",
// 6 "ab" (score -1), 7 "▁a" (score -2), 8 "▁ab" (score -0.5), then bytes.
Meta spm_meta() {
  std::vector<std::string> toks = {"<unk>",
                                   "<s>",
                                   "</s>",
                                   "\xE2\x96\x81",
                                   "a",
                                   "b",
                                   "ab",
                                   "\xE2\x96\x81"
                                   "a",
                                   "\xE2\x96\x81"
                                   "ab"};
  std::vector<float> scores = {0, 0, 0, -3, -4, -4, -1, -2, -0.5f};
  std::vector<int32_t> types = {2, 3, 3, 1, 1, 1, 1, 1, 1};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    toks.push_back(buf);
    scores.push_back(0);
    types.push_back(6);
  }
  return {{"tokenizer.ggml.model", Value::of_string("llama")},
          {"tokenizer.ggml.tokens", strings(toks)},
          {"tokenizer.ggml.scores", f32s(scores)},
          {"tokenizer.ggml.token_type", i32s(types)},
          {"tokenizer.ggml.bos_token_id", Value::of_u32(1)},
          {"tokenizer.ggml.eos_token_id", Value::of_u32(2)}};
}

TEST(TokenizerSynthetic, SentencePieceMergesByScore) {
  const Tokenizer tok = Tokenizer::from_gguf(file_of(spm_meta()));
  EXPECT_EQ(tok.model(), "llama");
  EXPECT_EQ(tok.bos(), 1);
  // "ab" -> "▁ab": pairs ▁a (-2) and ab (-1): ab merges first, then ▁+ab = ▁ab.
  EXPECT_EQ(tok.encode("ab", false, false), (std::vector<int32_t>{8}));
  EXPECT_EQ(tok.encode("ab", true, false), (std::vector<int32_t>{1, 8}));
  // "ba": ▁b is no token; "ba" neither -> ▁ b a.
  EXPECT_EQ(tok.encode("ba", false, false), (std::vector<int32_t>{3, 5, 4}));
  // "c" is not in the vocab: byte fallback <0x63> = 9 + 0x63.
  EXPECT_EQ(tok.encode("c", false, false), (std::vector<int32_t>{3, 9 + 0x63}));
  // "é" = C3 A9 as two byte tokens.
  EXPECT_EQ(tok.encode("\xC3\xA9", false, false), (std::vector<int32_t>{3, 9 + 0xC3, 9 + 0xA9}));
  EXPECT_EQ(tok.decode(tok.encode("ab c\xC3\xA9", true, false)), "ab c\xC3\xA9");
  EXPECT_EQ(tok.token_to_piece(8), " ab");
  EXPECT_EQ(tok.token_to_piece(9 + 0x41), "A");
  EXPECT_EQ(tok.token_to_piece(1, /*special=*/false), "");
  EXPECT_EQ(tok.token_to_piece(1, /*special=*/true), "<s>");
  // parse_special turns "</s>" into the token, else it is spelled with bytes.
  EXPECT_EQ(tok.encode("a</s>", false, true), (std::vector<int32_t>{7, 2}));
  EXPECT_NE(tok.encode("a</s>", false, false).back(), 2);
  EXPECT_TRUE(tok.is_eog(2));
  EXPECT_FALSE(tok.is_eog(1));
}

// Tokens may contain U+2581 inside ("b▁a"): the encoder's split of the text
// into independent pieces must not cut such a token apart.
TEST(TokenizerSynthetic, SentencePieceTokensSpanningSpaces) {
  Meta m = spm_meta();
  std::vector<std::string> toks = {"<unk>",
                                   "<s>",
                                   "</s>",
                                   "\xE2\x96\x81",
                                   "a",
                                   "b",
                                   "b\xE2\x96\x81",
                                   "b\xE2\x96\x81"
                                   "a"};
  set(m, "tokenizer.ggml.tokens", strings(toks));
  set(m, "tokenizer.ggml.scores", f32s({0, 0, 0, -5, -5, -5, -2, -1}));
  set(m, "tokenizer.ggml.token_type", i32s({2, 3, 3, 1, 1, 1, 1, 1}));
  set(m, "tokenizer.ggml.add_space_prefix", Value::of_bool(false));
  const Tokenizer tok = Tokenizer::from_gguf(file_of(m));
  EXPECT_EQ(tok.encode("b a", false, false), (std::vector<int32_t>{7}));
  EXPECT_EQ(tok.encode("ab ab a", false, false), (std::vector<int32_t>{4, 7, 7}));
  EXPECT_EQ(tok.decode(tok.encode("ab ab a", true, false)), "ab ab a");
}

// A tiny byte-level BPE vocab over "a", "b", " ": merges by rank.
Meta bpe_meta() {
  // "Ġ" (U+0120) is the GPT-2 mapping of the space byte.
  std::vector<std::string> toks = {"a",
                                   "b",
                                   "\xC4\xA0",
                                   "ab",
                                   "\xC4\xA0"
                                   "a",
                                   "\xC4\xA0"
                                   "ab",
                                   "<|end|>"};
  return {{"tokenizer.ggml.model", Value::of_string("gpt2")},
          {"tokenizer.ggml.pre", Value::of_string("gpt-2")},
          {"tokenizer.ggml.tokens", strings(toks)},
          {"tokenizer.ggml.token_type", i32s({1, 1, 1, 1, 1, 1, 3})},
          // rank 0: "Ġ a", rank 1: "a b", rank 2: "Ġa b"
          {"tokenizer.ggml.merges", strings({"\xC4\xA0 a", "a b",
                                             "\xC4\xA0"
                                             "a b"})},
          {"tokenizer.ggml.eos_token_id", Value::of_u32(6)}};
}

TEST(TokenizerSynthetic, BytePairMergesByRank) {
  const Tokenizer tok = Tokenizer::from_gguf(file_of(bpe_meta()));
  EXPECT_EQ(tok.encode("ab", false, false), (std::vector<int32_t>{3}));
  // " ab": Ġa (rank 0) before ab (rank 1), then Ġa+b (rank 2) = Ġab.
  EXPECT_EQ(tok.encode(" ab", false, false), (std::vector<int32_t>{5}));
  EXPECT_EQ(tok.encode("ab ab", false, false), (std::vector<int32_t>{3, 5}));
  EXPECT_EQ(tok.decode(tok.encode("ab ab", false, false)), "ab ab");
  EXPECT_EQ(tok.token_to_piece(5), " ab");
  // "c" has no token and no single-byte fallback: dropped, never out of range.
  EXPECT_EQ(tok.encode("c", false, false), (std::vector<int32_t>{}));
  EXPECT_EQ(tok.encode("a<|end|>", false, true), (std::vector<int32_t>{0, 6}));
  EXPECT_TRUE(tok.is_eog(6));
  EXPECT_EQ(tok.bos(), -1);  // default 11 is out of this vocab's range
}

void expect_metadata_error(const Meta& m, const std::string& needle) {
  try {
    (void)Tokenizer::from_gguf(file_of(m));
    ADD_FAILURE() << "expected an error mentioning " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(TokenizerSynthetic, MetadataErrorsNameTheKey) {
  {
    Meta m = spm_meta();
    drop(m, "tokenizer.ggml.tokens");
    expect_metadata_error(m, "tokenizer.ggml.tokens");
  }
  {
    Meta m = spm_meta();
    drop(m, "tokenizer.ggml.model");
    expect_metadata_error(m, "tokenizer.ggml.model");
  }
  {
    Meta m = spm_meta();
    set(m, "tokenizer.ggml.tokens", Value::of_u32(3));
    expect_metadata_error(m, "tokenizer.ggml.tokens");
  }
  {
    Meta m = spm_meta();
    set(m, "tokenizer.ggml.tokens", i32s({1, 2}));
    expect_metadata_error(m, "tokenizer.ggml.tokens");
  }
  {
    Meta m = spm_meta();
    set(m, "tokenizer.ggml.scores", f32s({0, 1}));
    expect_metadata_error(m, "tokenizer.ggml.scores");
  }
  {
    Meta m = spm_meta();
    set(m, "tokenizer.ggml.token_type", f32s({0, 1}));
    expect_metadata_error(m, "tokenizer.ggml.token_type");
  }
  {
    Meta m = spm_meta();
    set(m, "tokenizer.ggml.bos_token_id", Value::of_u32(100000));
    expect_metadata_error(m, "tokenizer.ggml.bos_token_id");
  }
  {
    Meta m = spm_meta();
    set(m, "tokenizer.ggml.eos_token_id", Value::of_string("2"));
    expect_metadata_error(m, "tokenizer.ggml.eos_token_id");
  }
  {
    Meta m = spm_meta();
    set(m, "tokenizer.ggml.model", Value::of_string("t5"));
    expect_metadata_error(m, "tokenizer.ggml.model");
  }
  {
    Meta m = bpe_meta();
    drop(m, "tokenizer.ggml.merges");
    expect_metadata_error(m, "tokenizer.ggml.merges");
  }
  {
    Meta m = bpe_meta();
    set(m, "tokenizer.ggml.merges", strings({"nospace"}));
    expect_metadata_error(m, "tokenizer.ggml.merges");
  }
  {
    Meta m = bpe_meta();
    set(m, "tokenizer.ggml.pre", Value::of_string("no-such-pre"));
    expect_metadata_error(m, "tokenizer.ggml.pre");
  }
  {
    Meta m = bpe_meta();
    set(m, "tokenizer.ggml.add_bos_token", Value::of_bool(true));  // and no BOS in range
    expect_metadata_error(m, "tokenizer.ggml.add_bos_token");
  }
}

}  // namespace
}  // namespace rlx

namespace rlx {
namespace {

std::string run_tokenize_cli(const std::string& args) {
  return rlx::testing::run_cli("tokenize " + args).output;
}

TEST(TokenizerCli, PrintsIdsAndPieces) {
  const std::string path = (fs::temp_directory_path() /
                            ("rlx_tokenizer_cli_test." + std::to_string(::getpid()) + ".gguf"))
                               .string();
  gguf::write(path, bpe_meta(), {});
  EXPECT_EQ(run_tokenize_cli(path + " -p 'ab ab' --ids-only"), "3 5\n");
  const std::string out = run_tokenize_cli(path + " -p 'ab<|end|>' --parse-special");
  EXPECT_NE(out.find("gpt2/gpt-2"), std::string::npos) << out;
  EXPECT_NE(out.find("3 -> 'ab'"), std::string::npos) << out;
  EXPECT_NE(out.find("6 -> '<|end|>'"), std::string::npos) << out;
  EXPECT_NE(run_tokenize_cli("/no/such/file.gguf -p x").find("rlx: error:"), std::string::npos);
  fs::remove(path);
}

}  // namespace
}  // namespace rlx

namespace rlx {
namespace {

std::vector<std::string> words(tok::Pre pre, std::string_view text) {
  std::vector<std::string> r;
  for (auto w : tok::pre_split(pre, text)) r.emplace_back(w);
  return r;
}
using Pieces = std::vector<std::string>;

// Expected splits worked out by hand from each pattern.
TEST(TokenizerPreSplit, Patterns) {
  using tok::Pre;
  EXPECT_EQ(words(Pre::Gpt2, "Hello world's  12ab!!\n"),
            (Pieces{"Hello", " world", "'s", " ", " 12", "ab", "!!", "\n"}));
  EXPECT_EQ(words(Pre::Llama3, "I'M 12345 ok.\n\n  x"),
            (Pieces{"I", "'M", " ", "123", "45", " ok", ".\n\n", " ", " x"}));
  EXPECT_EQ(words(Pre::Qwen2, "a123"), (Pieces{"a", "1", "2", "3"}));
  EXPECT_EQ(words(Pre::Starcoder, " 42x"), (Pieces{" ", "4", "2", "x"}));
  EXPECT_EQ(words(Pre::Default, "a+=1234"), (Pieces{"a", "+=", "123", "4"}));
  EXPECT_EQ(words(Pre::Bloom, "hi, you (x)"),
            (Pieces{"hi", ",", " you", " (", "x", ")"}));  // unmatched runs stay whole
  EXPECT_EQ(words(Pre::Viking, "ab12"), (Pieces{"ab", "1", "2"}));
  EXPECT_EQ(words(Pre::DeepseekCoder, "x\r\n, 7"), (Pieces{"x", "\r", "\n", ",", " ", "7"}));
  // \s+$ splits trailing white space off each segment.
  EXPECT_EQ(words(Pre::DeepseekLlm, "ab  "), (Pieces{"ab", "  "}));
  EXPECT_TRUE(words(Pre::Gpt2, "").empty());
  // Invalid UTF-8 bytes stay inside words; the concatenation is the input.
  const std::string bad("a\xff\xfe b", 5);
  std::string joined;
  for (const auto& w : words(Pre::Llama3, bad)) joined += w;
  EXPECT_EQ(joined, bad);
}

}  // namespace
}  // namespace rlx

namespace rlx {
namespace {

// Spot checks of the generated category table and the UTF-8 helpers.
TEST(TokenizerUnicode, CategoriesAndUtf8) {
  using namespace tok;
  EXPECT_EQ(cpt_flags('A'), kLetter);
  EXPECT_EQ(cpt_flags('7'), kNumber);
  EXPECT_EQ(cpt_flags('!'), kPunctuation);
  EXPECT_EQ(cpt_flags('$'), kSymbol);
  EXPECT_EQ(cpt_flags(' '), kSeparator | kWhitespace);
  EXPECT_EQ(cpt_flags('\n'), kControl | kWhitespace);
  EXPECT_EQ(cpt_flags(0xA0), kSeparator | kWhitespace);  // no-break space
  EXPECT_EQ(cpt_flags(0x85), kControl | kWhitespace);    // next line
  EXPECT_EQ(cpt_flags(0x4E00), kLetter);                 // 一
  EXPECT_EQ(cpt_flags(0x0301), kMark);                   // combining acute
  EXPECT_EQ(cpt_flags(0x20AC), kSymbol);                 // €
  EXPECT_EQ(cpt_flags(0x00BD), kNumber);                 // ½
  EXPECT_EQ(cpt_flags(0x3000), kSeparator | kWhitespace);
  EXPECT_EQ(cpt_flags(0x1F999), kSymbol);  // 🦙
  EXPECT_EQ(cpt_flags(0x10FFFF), kUndefined);
  EXPECT_EQ(cpt_flags(0x110000), kUndefined);
  EXPECT_EQ(to_cpts("a\xC3\xA9\xF0\x9F\xA6\x99"), (std::vector<uint32_t>{'a', 0xE9, 0x1F999}));
  EXPECT_EQ(to_cpts(std::string("\xC3\x80\xFF\xE2\x82", 5)),
            (std::vector<uint32_t>{0xC0, 0xFFFD, 0xFFFD, 0xFFFD}));
  std::string s;
  for (uint32_t cp : {0x41u, 0xE9u, 0x2581u, 0x1F999u}) append_utf8(s, cp);
  EXPECT_EQ(s, "A\xC3\xA9\xE2\x96\x81\xF0\x9F\xA6\x99");
  for (int b = 0; b < 256; ++b) {
    const std::string& u = byte_to_unicode(static_cast<uint8_t>(b));
    size_t pos = 0;
    EXPECT_EQ(byte_from_unicode(decode_utf8(u, pos)), b);
  }
  EXPECT_EQ(byte_to_unicode(' '), "\xC4\xA0");  // Ġ
  EXPECT_EQ(byte_from_unicode(0x4E00), -1);
}

}  // namespace
}  // namespace rlx
