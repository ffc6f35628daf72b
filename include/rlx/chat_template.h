// Chat templates: the Jinja2 text a GGUF file carries in tokenizer.chat_template,
// rendered by rlx's own interpreter of the Jinja subset that model families use
// (llama 2/3, ChatML/qwen2/qwen3, mistral, gemma, zephyr). Like Hugging Face's
// apply_chat_template it renders with trim_blocks and lstrip_blocks on, and
// tojson keeps key order and non-ASCII text.
#pragma once
#include <memory>
#include <string>
#include <vector>

namespace rlx::llm {

struct ChatMessage {
  std::string role, content;
};

struct ChatTemplateOptions {
  bool add_generation_prompt = true;
  std::string bos_token, eos_token;
};

namespace chat_detail {
struct Program;
}

class ChatTemplate {
 public:
  // Parses; throws rlx::Error naming line:column on a syntax error, and on
  // templates past the size and nesting caps.
  explicit ChatTemplate(std::string source);
  // Throws rlx::Error (with line:column) on a runtime error, on
  // raise_exception(msg) (the message is the template's), and when the output
  // or the loop iterations pass their caps (1 MiB, 1M iterations).
  std::string render(const std::vector<ChatMessage>& messages,
                     const ChatTemplateOptions& options = {}) const;
  const std::string& source() const;

 private:
  std::shared_ptr<const chat_detail::Program> program_;
};

}  // namespace rlx::llm
