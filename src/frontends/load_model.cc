#include <filesystem>
#include <fstream>
#include <sstream>

#include "frontends/onnx/import.h"
#include "frontends/torch/import.h"
#include "io/io_util.h"
#include "rlx/error.h"
#include "rlx/llm.h"
#include "rlx/model.h"

namespace rlx {
namespace fs = std::filesystem;
namespace {

std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  RLX_CHECK(f, p.string(), ": cannot open");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string sniff(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  char buf[64] = {};
  f.read(buf, sizeof buf);
  return std::string(buf, size_t(f.gcount()));
}

Model load_rlx_graph(const fs::path& graph_file) {
  Model m;
  m.source = graph_file.string();
  m.format = "rlx-graph";
  m.graph = from_json(read_text(graph_file), graph_file.string());
  fs::path w = graph_file.parent_path() / kWeightsFile;
  if (fs::exists(w)) m.weights = read_safetensors(w.string());
  return m;
}

Model load_gguf(const std::string& path, const LoadOptions& o) {
  gguf::File f = gguf::read(path);
  llm::Config c = llm::Config::from_gguf(f);
  Model m = llm::build_model(
      f, c, {.kv_cache = o.kv_cache, .all_logits = o.all_logits, .n_tokens = o.n_tokens},
      o.dequantize ? llm::Weights::F32 : llm::Weights::Quantized);
  m.summary = c.summary();
  try {
    m.graph.verify();  // every loaded graph passes the verifier, whatever its frontend
  } catch (const Error& e) {
    throw e.with_context(path);
  }
  return m;
}

// ONNX files are bare protobuf with no magic: the extension, or a first byte
// that starts ir_version (field 1, varint), is the tell.
bool looks_like_onnx(const fs::path& p, std::string_view head) {
  return p.extension() == ".onnx" || looks_like_onnx_bytes(head);
}

}  // namespace

bool is_onnx_model(const std::string& path) {
  const fs::path p(path);
  return fs::is_regular_file(p) && looks_like_onnx(p, sniff(p));
}

Model load_model(const std::string& path, const LoadOptions& options) {
  fs::path p(path);
  RLX_CHECK(fs::exists(p), path, ": no such file or directory");
  const bool onnx_only = !options.input_shapes.empty() || !options.frozen_inputs.empty();
  auto not_onnx = [&](const char* format) {
    RLX_CHECK(!onnx_only, path, ": input shapes and frozen inputs at load apply to ONNX models; ",
              "this is ", format, " (give input shapes at compile time: --specialize)");
  };
  if (fs::is_directory(p)) {
    if (fs::exists(p / kGraphFile)) {
      not_onnx("an rlx graph");
      return load_rlx_graph(p / kGraphFile);
    }
    if (fs::exists(p / "torch-ir.json")) {
      not_onnx("a torch export");
      return import_torch_export(path);
    }
    throw make_error(path, ": directory has neither ", kGraphFile, " nor torch-ir.json");
  }
  std::string head = sniff(p);
  if (head.rfind("GGUF", 0) == 0) {
    not_onnx("a GGUF model");
    return load_gguf(path, options);
  }
  if (looks_like_onnx(p, head)) return import_onnx(path, options);
  if (head.find('{') != std::string::npos) {
    not_onnx("an rlx graph");
    return load_rlx_graph(p);
  }
  throw make_error(
      path,
      ": unrecognized model format (expected an rlx graph JSON, a GGUF file, an ONNX model, or a "
      "directory holding ",
      kGraphFile, " or torch-ir.json)");
}

void save_model(const std::string& dir, const Graph& g, const TensorMap& weights) {
  fs::create_directories(dir);
  // Weights first, both atomically: a failure leaves no half-written file, and
  // no graph whose weights never arrived.
  if (!weights.empty()) write_safetensors((fs::path(dir) / kWeightsFile).string(), weights);
  const std::string text = to_json(g);
  io::write_file_atomic((fs::path(dir) / kGraphFile).string(), {text});
}

}  // namespace rlx
