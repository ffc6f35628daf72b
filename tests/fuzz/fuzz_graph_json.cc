// libFuzzer target for model.rlx.json graph deserialization (see
// tests/fuzz/README.md): from_json (which runs shape inference and the
// verifier), the printers, and a to_json / from_json round trip, which must
// succeed and give back the same text. Any input must give a graph or an
// rlx::Error.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string_view>

#include "fuzz_common.h"
#include "rlx/graph.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::optional<rlx::Graph> g;
  rlx::fuzz::expect_clean([&] { g = rlx::from_json(text, "fuzz/model.rlx.json"); });
  if (!g) return 0;
  // A graph that loaded must print, verify and round-trip without any error.
  g->verify();
  volatile size_t sink = rlx::to_text(*g).size() + rlx::to_dot(*g).size();
  (void)sink;
  const std::string once = rlx::to_json(*g);
  const std::string twice = rlx::to_json(rlx::from_json(once, "fuzz/round-trip"));
  if (once != twice) {
    std::fprintf(stderr, "fuzz: to_json/from_json round trip changed the graph\n");
    std::abort();
  }
  return 0;
}
