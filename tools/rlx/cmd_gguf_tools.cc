// rlx convert IN.gguf -o OUT.safetensors   (every tensor as f32, PyTorch dims)
// rlx quantize IN.gguf OUT.gguf --type q4_K (2-d weights re-quantized)
#include <cstdio>
#include <memory>

#include "commands.h"
#include "rlx/quant.h"

namespace rlx::cli {
namespace {

// One status line rewritten in place: "[ 12/291] blk.3.ffn_up.weight".
void progress(size_t i, size_t n, const std::string& what) {
  std::fprintf(stderr, "\r[%4zu/%zu] %-48.48s", i, n, what.c_str());
  if (i == n) std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

void convert(const std::string& in, const std::string& out) {
  gguf::File f = gguf::read(in);
  TensorMap tensors;
  double bytes = 0;
  for (size_t i = 0; i < f.tensors.size(); ++i) {
    const gguf::TensorInfo& t = f.tensors[i];
    progress(i + 1, f.tensors.size(), t.name);
    RLX_CHECK(quant::traits(t.type).dequantize_row, in, ": tensor '", t.name, "' has type ",
              quant::type_name(uint32_t(t.type)), ", which has no float form");
    tensors[t.name] = gguf::to_f32(f, t);
    bytes += double(tensors[t.name].numel()) * 4;
  }
  write_safetensors(out, tensors);
  std::printf("wrote %zu tensors (%s f32) to %s\n", tensors.size(), human_bytes(bytes).c_str(),
              out.c_str());
}

void quantize_file(const std::string& in, const std::string& out, const std::string& type_name) {
  const quant::GgmlType type = quant::parse_type_name(type_name);
  const quant::TypeTraits& tr = quant::traits(type);
  RLX_CHECK(tr.quantize_row, "quantize: no quantizer for ", tr.name);
  gguf::File f = gguf::read(in);
  std::vector<std::string> storage(f.tensors.size());
  std::vector<gguf::WriteTensor> tensors;
  size_t kept = 0, done = 0;
  for (size_t i = 0; i < f.tensors.size(); ++i) {
    const gguf::TensorInfo& t = f.tensors[i];
    progress(i + 1, f.tensors.size(), t.name);
    // Matrices (and MoE expert stacks) whose rows fit the block size are
    // quantized; norms, biases, odd shapes and MoE routers stay as they are
    // (as llama-quantize does: routing is decided on the router's exact logits).
    const bool router = t.name.find("ffn_gate_inp.weight") != std::string::npos;
    const bool matrix = (t.ne.size() == 2 || t.ne.size() == 3) && !router &&
                        t.ne[0] % tr.block_size == 0 && quant::traits(t.type).dequantize_row;
    if (!matrix || t.type == type) {
      tensors.push_back({t.name, t.type, t.ne,
                         std::string_view(reinterpret_cast<const char*>(t.data), t.nbytes)});
      ++kept;
      continue;
    }
    Tensor w = gguf::to_f32(f, t);
    const int64_t rows = w.numel() / t.ne[0], cols = t.ne[0];
    const size_t row_bytes = quant::row_size(type, cols);
    storage[i].resize(row_bytes * size_t(rows));
    parallel_for(rows, 1, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r)
        tr.quantize_row(w.data<float>() + r * cols, storage[i].data() + size_t(r) * row_bytes,
                        cols);
    });
    tensors.push_back({t.name, type, t.ne, storage[i]});
    ++done;
  }
  auto meta = f.metadata;
  std::erase_if(meta, [](const auto& kv) { return kv.first == "general.quantization_version"; });
  meta.emplace_back("general.quantization_version", gguf::Value::of_u32(2));
  gguf::write(out, meta, tensors);
  std::printf("quantized %zu tensors to %s, kept %zu as they were; wrote %s\n", done, tr.name, kept,
              out.c_str());
}

}  // namespace

void add_gguf_tool_commands(CLI::App& app) {
  auto in = std::make_shared<std::string>(), out = std::make_shared<std::string>(),
       type = std::make_shared<std::string>();
  auto* c = app.add_subcommand("convert", "Dequantize a GGUF file's tensors to f32 safetensors");
  c->add_option("input", *in, "GGUF file")->required();
  c->add_option("-o,--out", *out, "Output .safetensors (PyTorch dim order)")->required();
  c->callback([in, out] { convert(*in, *out); });

  auto* q = app.add_subcommand("quantize", "Re-quantize a GGUF file's weight matrices");
  q->add_option("input", *in, "GGUF file")->required();
  q->add_option("output", *out, "GGUF file to write")->required();
  q->add_option("--type", *type,
                "Target type: q4_0 q4_1 q5_0 q5_1 q8_0 q2_K q3_K q4_K q5_K q6_K ...")
      ->required();
  q->callback([in, out, type] { quantize_file(*in, *out, *type); });
}

}  // namespace rlx::cli
