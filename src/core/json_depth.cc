#include "core/json_depth.h"

#include "rlx/error.h"

namespace rlx {

void check_json_depth(std::string_view text, std::string_view source, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;  // the escaped character cannot end the string
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      RLX_CHECK(++depth <= max_depth, source, ": JSON nests deeper than ", max_depth,
                " levels (at byte ", i, ")");
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
}

}  // namespace rlx
