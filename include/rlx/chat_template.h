// Chat templates: the Jinja2 text a GGUF file carries in tokenizer.chat_template,
// rendered by rlx's own interpreter of the Jinja subset that model families use
// (llama 2/3, ChatML/qwen2/qwen3, mistral, gemma, zephyr). Like Hugging Face's
// apply_chat_template it renders with trim_blocks and lstrip_blocks on, and
// tojson keeps key order and non-ASCII text.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace rlx::llm {

// A function call an assistant message made (OpenAI's tool_calls[i]); `arguments` is JSON text.
struct ChatToolCall {
  std::string id, name, arguments;
};

struct ChatMessage {
  std::string role, content;
  std::vector<ChatToolCall> tool_calls = {};  // an assistant's calls
  std::string tool_call_id = {};              // a "tool" message: the call it answers
};

struct ChatTemplateOptions {
  bool add_generation_prompt = true;
  std::string bos_token, eos_token;
  // The tool schemas the model may call, a JSON array as OpenAI's `tools` takes it; empty: the
  // template sees no `tools` (it is undefined, as without the argument in apply_chat_template).
  std::string tools = {};
};

// A model's reply split into its text and the function calls it makes: <tool_call>{"name": ...,
// "arguments": {...}}</tool_call> blocks (the Hermes format of the Qwen 2.5 / Qwen 3 templates),
// or a reply that is one JSON object {"name": ..., "arguments" | "parameters": {...}} (Llama
// 3.1's JSON calls). `content` is the text outside the blocks, trimmed; a block that is not such
// JSON stays in it. Calls get ids "call_0", "call_1", ...; arguments are the model's own text of
// the object (compact JSON when it wrote them as a string, or only as part of other JSON). A
// block that starts {"name": N, "arguments": { is a call even when its object never closes (a
// reply cut by max_tokens): its arguments are the text up to the block's end, as a stream sent
// them.
struct ToolCallReply {
  std::string content;
  std::vector<ChatToolCall> calls;
};
ToolCallReply parse_tool_calls(const std::string& reply);

// How a template asks the model to write its calls: in <tool_call> blocks (Hermes, as Qwen 2.5 /
// Qwen 3 do), as one JSON object with "parameters" (Llama 3.1 / 3.2), or in no form rlx knows.
enum class ToolCallFormat { none, hermes, json };
ToolCallFormat tool_call_format(const std::string& template_source);
// The start of a reply that calls `function` (empty: a function the model names next), which the
// model continues: a forced call (OpenAI's tool_choice "required" or a function by name).
std::string call_reply_start(ToolCallFormat format, const std::string& function);

// A piece of a streamed call: the first piece of call `index` carries its id and name, and each
// piece the next part of its arguments' text.
struct ToolCallDelta {
  size_t index = 0;
  std::string id, name, arguments;
};
struct ToolCallPieces {
  std::string content;
  std::vector<ToolCallDelta> calls;
};

// parse_tool_calls for a reply that arrives a token at a time (the server's streamed replies):
// push() each piece and send what it returns; finish() returns the rest. The content of every
// piece, in order, is parse_tool_calls(whole reply).content, and each call's pieces add up to
// its call. Text goes out as it comes, except whitespace that may end the reply and the start
// of what may be a "<tool_call>" tag. A block's call goes out once its head
// {"name": N, "arguments": is read, and its arguments as they come; a block in another shape
// goes out when it closes. A reply whose first character (after whitespace) is "{" may be one
// JSON call: it is held to the end.
class ToolCallStream {
 public:
  ToolCallPieces push(std::string_view piece);
  ToolCallPieces finish();

 private:
  void drain(ToolCallPieces& out, bool final);
  void text(ToolCallPieces& out, std::string_view s);
  void call_piece(ToolCallPieces& out, std::string id, std::string name, std::string_view args);

  enum class Mode { start, text, block, whole } mode_ = Mode::start;
  // Not yet decided: text that may open a block, an open block's body, or (Mode::whole) the
  // whole reply.
  std::string pending_;
  std::string held_;  // whitespace that ends the content so far (trimmed away if nothing follows)
  bool started_ = false;  // content has gone out (whitespace before it is trimmed away)
  size_t calls_ = 0;
  // The open block: its head read (its arguments start at args_at_ in pending_, sent up to
  // sent_), or found in another shape.
  bool head_ = false, other_shape_ = false;
  size_t args_at_ = 0, sent_ = 0;
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
