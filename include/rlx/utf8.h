// Streaming text in whole UTF-8 characters. A language model's tokens are
// bytes, and one character may span several of them (or, on random-weight
// models, never complete): a stream written as it comes would split a
// character wherever generation stops. Utf8Stream holds an incomplete tail
// until its character completes and turns invalid bytes into U+FFFD, as
// Python's incremental UTF-8 decoder with errors="replace" does (one
// replacement per maximal invalid subpart) and as llama.cpp's server
// validates text before it sends it.
#pragma once
#include <string>
#include <string_view>

namespace rlx {

class Utf8Stream {
 public:
  // Appends `bytes`; returns the text that is complete so far, valid UTF-8.
  std::string push(std::string_view bytes);
  // The end of the stream: the held incomplete tail as one U+FFFD (empty when
  // nothing is held). The stream is empty afterwards.
  std::string finish();
  // Bytes held back, waiting for the rest of their character.
  size_t pending() const { return pending_.size(); }

 private:
  std::string pending_;
};

}  // namespace rlx
