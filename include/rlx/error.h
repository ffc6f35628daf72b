// rlx::Error: the one exception type library code throws. Messages name what
// failed and where (file, node, op, shapes, dtypes); callers add context on the
// way up with `with_context`.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace rlx {

class Error : public std::runtime_error {
 public:
  explicit Error(std::string msg) : std::runtime_error(std::move(msg)) {}
  // Returns a new error whose message is "<context>: <this message>".
  Error with_context(const std::string& context) const { return Error(context + ": " + what()); }
};

namespace detail {
template <typename... Args>
std::string concat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}
}  // namespace detail

// Builds an rlx::Error from streamable pieces: throw make_error("bad dim ", d);
template <typename... Args>
Error make_error(Args&&... args) {
  return Error(detail::concat(std::forward<Args>(args)...));
}

}  // namespace rlx

#define RLX_CHECK(cond, ...)                           \
  do {                                                 \
    if (!(cond)) throw ::rlx::make_error(__VA_ARGS__); \
  } while (0)
