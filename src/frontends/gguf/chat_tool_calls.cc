// Function calls in a model's reply (rlx/chat_template.h: parse_tool_calls).
#include <nlohmann/json.hpp>

#include <string_view>

#include "rlx/chat_template.h"

namespace rlx::llm {
namespace {

using json = nlohmann::ordered_json;

std::string trimmed(std::string_view s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return "";
  return std::string(s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1));
}

// {"name": ..., "arguments" | "parameters": ...} as a call; false for any other text.
bool as_call(std::string_view text, size_t index, ChatToolCall& call) {
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("name") || !j["name"].is_string())
    return false;
  const json* args = j.contains("arguments")    ? &j["arguments"]
                     : j.contains("parameters") ? &j["parameters"]
                                                : nullptr;
  if (!args) return false;
  call.id = "call_" + std::to_string(index);
  call.name = j["name"].get<std::string>();
  // A model may write the arguments as a JSON string already.
  call.arguments = args->is_string() ? args->get<std::string>() : args->dump();
  return true;
}

}  // namespace

ToolCallReply parse_tool_calls(const std::string& reply) {
  constexpr std::string_view kOpen = "<tool_call>", kClose = "</tool_call>";
  ToolCallReply r;
  std::string rest;
  size_t at = 0;
  while (true) {
    const size_t open = reply.find(kOpen, at);
    if (open == std::string::npos) break;
    const size_t body = open + kOpen.size();
    size_t close = reply.find(kClose, body);
    // A reply cut by max_tokens or a stop string may lack the closing tag.
    const size_t end = close == std::string::npos ? reply.size() : close;
    const size_t next = close == std::string::npos ? reply.size() : close + kClose.size();
    ChatToolCall call;
    if (as_call(trimmed(std::string_view(reply).substr(body, end - body)), r.calls.size(), call)) {
      rest += reply.substr(at, open - at);
      r.calls.push_back(std::move(call));
    } else {  // not a call: the block stays text, tags included
      rest += reply.substr(at, next - at);
    }
    at = next;
  }
  rest += reply.substr(std::min(at, reply.size()));
  r.content = trimmed(rest);
  if (r.calls.empty()) {
    ChatToolCall call;
    if (as_call(r.content, 0, call)) {
      r.calls.push_back(std::move(call));
      r.content.clear();
    }
  }
  return r;
}

}  // namespace rlx::llm
