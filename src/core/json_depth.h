// A nesting limit for every JSON document rlx reads (graph JSON, torch-ir,
// safetensors headers, CoreML manifests). nlohmann::json parses iteratively,
// but walking, dumping and lowering parsed documents recurse, so a file
// nested a million deep would overflow the stack; it is rejected up front.
#pragma once
#include <string_view>

namespace rlx {

inline constexpr int kMaxJsonDepth = 512;

// Throws rlx::Error naming `source` when arrays and objects in `text` nest
// deeper than `max_depth`. Brackets inside strings do not count; the text is
// not otherwise validated (the parser does that).
void check_json_depth(std::string_view text, std::string_view source,
                      int max_depth = kMaxJsonDepth);

}  // namespace rlx
