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
  // Messages longer than this keep their start (the context) and end (the
  // innermost cause) around a note of what was cut: a hostile file must not
  // make rlx print megabytes (a lying attribute echoed back, say).
  static constexpr size_t kMaxBytes = 16 * 1024;
  explicit Error(std::string msg) : std::runtime_error(bounded(std::move(msg))) {}
  // Returns a new error whose message is "<context>: <this message>".
  Error with_context(const std::string& context) const { return Error(context + ": " + what()); }

 private:
  static std::string bounded(std::string msg) {
    if (msg.size() <= kMaxBytes) return msg;
    constexpr size_t head = kMaxBytes * 3 / 4, tail = kMaxBytes / 8;
    const size_t cut = msg.size() - head - tail;
    return msg.substr(0, head) + " ... [" + std::to_string(cut) +
           " bytes of this message cut] ... " + msg.substr(msg.size() - tail);
  }
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
