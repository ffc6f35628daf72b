// A tiny random llama from GGUF (f32, and with its 2-d tensors quantized to q8_0 so the graph
// runs dequant_matmul / dequant_embedding) exported to CoreML with kv_cache=false and
// all_logits=true, run through the MIL interpreter and compared with the CPU runtime.
#include <gtest/gtest.h>

#include <map>

#include "interp_support.h"
#include "rlx/llm.h"
#include "rlx/quant.h"
#include "support/tiny_llm.h"

namespace rlx {
namespace {

// Re-serializes `f` with every 2-d tensor whose rows fit q8_0 blocks quantized to q8_0.
std::string to_q8_0(const gguf::File& f, std::vector<std::string>& storage) {
  std::vector<gguf::WriteTensor> ts;
  storage.reserve(f.tensors.size());
  for (const auto& t : f.tensors) {
    gguf::WriteTensor w{t.name, t.type, t.ne, {}};
    if (t.type == quant::GgmlType::F32 && t.ne.size() == 2 && t.ne[0] % 32 == 0) {
      storage.emplace_back(quant::row_size(quant::GgmlType::Q8_0, t.ne[0]) * size_t(t.ne[1]), '\0');
      quant::quantize(quant::GgmlType::Q8_0, reinterpret_cast<const float*>(t.data),
                      storage.back().data(), t.numel());
      w.type = quant::GgmlType::Q8_0;
      w.data = storage.back();
    } else {
      w.data = std::string_view(reinterpret_cast<const char*>(t.data), t.nbytes);
    }
    ts.push_back(w);
  }
  return gguf::serialize(f.metadata, ts);
}

// `g` with its inputs fixed to `dims` and every shape re-inferred: causal attention and grouped
// kv heads lower with static lengths only.
Graph with_fixed_inputs(const Graph& g, const std::map<std::string, Dims>& dims) {
  Graph r;
  for (const Node& n : g.nodes()) {
    Node m = n;
    if (n.op == Op::Input) {
      auto it = dims.find(n.name);
      if (it != dims.end()) m.shape = Shape(it->second, n.shape.dtype);
    } else {
      std::vector<const Shape*> ins;
      for (NodeId id : n.inputs) ins.push_back(&r.node(id).shape);
      m.shape = infer_shape(m, ins);
    }
    r.append_raw(std::move(m));
  }
  for (const auto& o : g.outputs()) r.add_output(o.name, o.node);
  return r;
}

Tensor ids(const std::vector<int64_t>& v) {
  return Tensor::from_vector({int64_t(v.size())}, v, DType::I64);
}

// Cosine of the interpreted package's logits against the CPU runtime on the same graph, and
// (for quantized files) against the CPU with every tensor dequantized up front (Weights::F32):
// that is the math CoreML runs, since the export dequantizes the weights into consts, while the
// CPU's dequant_matmul also quantizes the activations (q8_0 here).
struct LlmParity {
  double cos_runtime = 0, cos_dequantized = 0;
};

LlmParity check_llm(bool q8, bool fp16) {
  testing::TinyLlm m;
  m.n_ff = 64;  // every projection row fits q8_0 blocks
  std::string bytes = m.gguf_bytes();
  std::vector<std::string> storage;
  if (q8) {
    const gguf::File f32 = gguf::read_bytes(bytes.data(), bytes.size(), "tiny.gguf");
    bytes = to_q8_0(f32, storage);
  }
  const gguf::File f = gguf::read_bytes(bytes.data(), bytes.size(), "tiny-q.gguf");
  const llm::Config cfg = llm::Config::from_gguf(f);
  const llm::GraphOptions go{.kv_cache = false, .all_logits = true};
  Model model = llm::build_model(f, cfg, go, llm::Weights::Quantized);
  int dq = 0;
  for (const Node& n : model.graph.nodes())
    dq += n.op == Op::DequantMatmul || n.op == Op::DequantEmbedding;
  if (q8) {
    EXPECT_GT(dq, 0) << "the q8_0 model should run dequant ops";
  }
  const std::vector<int64_t> tokens{3, 17, 42, 0, 8, 8, 31, 49, 5};
  std::vector<int64_t> pos(tokens.size());
  for (size_t i = 0; i < pos.size(); ++i) pos[i] = int64_t(i);
  const TensorMap inputs{{"tokens", ids(tokens)}, {"positions", ids(pos)}};
  const Tensor want = testing::run_graph(model.graph, inputs, model.weights, 1).at("logits");
  Model dense = llm::build_model(f, cfg, go, llm::Weights::F32);
  const Tensor want_dense = testing::run_graph(dense.graph, inputs, dense.weights, 1).at("logits");
  const int64_t T = int64_t(tokens.size());
  Graph fixed = with_fixed_inputs(model.graph, {{"tokens", {T}}, {"positions", {T}}});
  coreml::ExportOptions o;
  o.fp16 = fp16;
  TensorMap got = coreml_test::export_and_interpret(fixed, model.weights, inputs, o);
  EXPECT_EQ(got.count("logits"), 1u);
  if (!got.count("logits")) return {};
  const Tensor& g = got.at("logits");
  EXPECT_EQ(g.dims(), want.dims());
  LlmParity r{coreml_test::cosine(g, want), coreml_test::cosine(g, want_dense)};
  std::cout << "[ note ] tiny llama " << (q8 ? "q8_0" : "f32") << (fp16 ? " fp16" : " fp32")
            << ": cosine vs CPU runtime " << r.cos_runtime << " (max |diff| "
            << coreml_test::max_abs_diff(g, want) << "), vs CPU with dequantized weights "
            << r.cos_dequantized << " (max |diff| " << coreml_test::max_abs_diff(g, want_dense)
            << ")\n";
  return r;
}

TEST(MilInterpLlm, TinyLlamaF32) {
  auto r = check_llm(false, false);
  EXPECT_GE(r.cos_runtime, 0.9999);
  EXPECT_GE(r.cos_dequantized, 0.9999);
}

// vs the quantized CPU runtime the bound covers its q8_0 activation rounding (measured 0.99985).
TEST(MilInterpLlm, TinyLlamaQ8_0) {
  auto r = check_llm(true, false);
  EXPECT_GE(r.cos_dequantized, 0.9999);
  EXPECT_GE(r.cos_runtime, 0.999);
}

TEST(MilInterpLlm, TinyLlamaQ8_0Fp16) {
  auto r = check_llm(true, true);
  EXPECT_GE(r.cos_dequantized, 0.9999);
  EXPECT_GE(r.cos_runtime, 0.999);
}

}  // namespace
}  // namespace rlx
