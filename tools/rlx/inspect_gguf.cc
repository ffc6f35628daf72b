// `rlx inspect X.gguf`: metadata, tensors and a type histogram straight from
// the file (no graph is built, no tensor data is read).
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "commands.h"
#include "rlx/gguf.h"

namespace rlx::cli {

bool is_gguf_path(const std::string& path) {
  if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".gguf") == 0) return true;
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  char magic[4] = {};
  const bool ok = std::fread(magic, 1, 4, f) == 4 && std::string(magic, 4) == "GGUF";
  std::fclose(f);
  return ok;
}

static std::string shape_str(const std::vector<int64_t>& ne) {
  std::string s = "[";
  for (size_t k = 0; k < ne.size(); ++k) s += (k ? ", " : "") + std::to_string(ne[k]);
  return s + "]";
}

void inspect_gguf(const std::string& path, const std::string& format) {
  const gguf::File f = gguf::read(path);
  struct Hist {
    int count = 0;
    uint64_t bytes = 0, elems = 0;
  };
  std::map<std::string, Hist> hist;
  uint64_t total = 0, elems = 0;
  for (const gguf::TensorInfo& t : f.tensors) {
    Hist& h = hist[quant::traits(t.type).name];
    ++h.count;
    h.bytes += t.nbytes;
    h.elems += uint64_t(t.numel());
    total += t.nbytes;
    elems += uint64_t(t.numel());
  }
  if (format == "json") {
    nlohmann::json j = {{"model", path},         {"format", "gguf"},
                        {"version", f.version},  {"alignment", f.alignment},
                        {"tensor_bytes", total}, {"params", elems}};
    for (const auto& [k, v] : f.metadata) j["metadata"][k] = v.to_string(16);
    for (const gguf::TensorInfo& t : f.tensors)
      j["tensors"].push_back({{"name", t.name},
                              {"type", quant::traits(t.type).name},
                              {"ne", t.ne},
                              {"bytes", t.nbytes},
                              {"offset", t.offset}});
    for (const auto& [k, h] : hist)
      j["type_histogram"][k] = {{"tensors", h.count}, {"bytes", h.bytes}};
    std::printf("%s\n", j.dump(1).c_str());
    return;
  }
  std::printf("model: %s (gguf v%u, alignment %llu)\n", path.c_str(), f.version,
              (unsigned long long)f.alignment);
  std::printf("tensors: %zu   params: %llu   bytes: %s\n", f.tensors.size(),
              (unsigned long long)elems, human_bytes(double(total)).c_str());
  std::printf("\nmetadata (%zu):\n", f.metadata.size());
  for (const auto& [k, v] : f.metadata)
    std::printf("  %-40s %s\n", k.c_str(), v.to_string(8).c_str());
  std::printf("\ntensors (ne in ggml order, fastest first):\n");
  for (const gguf::TensorInfo& t : f.tensors)
    std::printf("  %-40s %-8s %-24s %s\n", t.name.c_str(), quant::traits(t.type).name,
                shape_str(t.ne).c_str(), human_bytes(double(t.nbytes)).c_str());
  std::printf("\ntype histogram:\n");
  for (const auto& [k, h] : hist)
    std::printf("  %-8s %5d tensors  %12llu elements  %s\n", k.c_str(), h.count,
                (unsigned long long)h.elems, human_bytes(double(h.bytes)).c_str());
}

}  // namespace rlx::cli
