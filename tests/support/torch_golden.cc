#include "support/torch_golden.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "rlx/error.h"

namespace rlx::testing {

std::map<std::string, std::vector<Tensor>> torch_goldens(const std::vector<GoldenCase>& cases) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() /
                 ("rlx_golden_" + std::to_string(::getpid()) + "_" + std::to_string(std::rand()));
  fs::create_directories(dir);
  nlohmann::json j = nlohmann::json::array();
  TensorMap inputs;
  for (const auto& c : cases) {
    j.push_back({{"name", c.name}, {"code", c.code}});
    for (const auto& [k, t] : c.inputs) inputs[c.name + "/" + k] = t;
  }
  std::ofstream(dir / "cases.json") << j.dump();
  write_safetensors((dir / "in.safetensors").string(), inputs);
  std::string cmd = "/usr/bin/python3 " RLX_SOURCE_DIR "/tests/support/torch_golden.py " +
                    (dir / "cases.json").string() + " " + (dir / "in.safetensors").string() + " " +
                    (dir / "out.safetensors").string() + " 2>" + (dir / "err.txt").string();
  int rc = std::system(cmd.c_str());
  if (rc != 0) {
    std::ifstream err(dir / "err.txt");
    std::string msg((std::istreambuf_iterator<char>(err)), {});
    fs::remove_all(dir);
    throw make_error("torch golden script failed (is python3-torch installed?): ", msg);
  }
  TensorMap raw = read_safetensors((dir / "out.safetensors").string());
  std::map<std::string, std::vector<Tensor>> out;
  for (const auto& c : cases)
    for (int i = 0;; ++i) {
      auto it = raw.find(c.name + "/" + std::to_string(i));
      if (it == raw.end()) break;
      out[c.name].push_back(it->second.clone());  // detach from the mapping before removal
    }
  fs::remove_all(dir);
  return out;
}

}  // namespace rlx::testing
