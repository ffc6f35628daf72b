// Function calls in a model's reply (rlx/chat_template.h: parse_tool_calls).
#include <nlohmann/json.hpp>

#include <string_view>

#include "rlx/chat_template.h"
#include "rlx/error.h"

namespace rlx::llm {
namespace {

using json = nlohmann::ordered_json;

constexpr std::string_view kOpen = "<tool_call>", kClose = "</tool_call>", kSpace = " \t\r\n";

std::string trimmed(std::string_view s) {
  const auto b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return "";
  return std::string(s.substr(b, s.find_last_not_of(kSpace) - b + 1));
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

// The length of the longest end of s that kOpen begins with (a tag the next piece may complete).
size_t open_tag_start(std::string_view s) {
  for (size_t n = std::min(s.size(), kOpen.size() - 1); n > 0; --n)
    if (kOpen.starts_with(s.substr(s.size() - n))) return n;
  return 0;
}

}  // namespace

ToolCallReply parse_tool_calls(const std::string& reply) {
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

ToolCallFormat tool_call_format(const std::string& template_source) {
  if (template_source.find(kOpen) != std::string::npos) return ToolCallFormat::hermes;
  if (template_source.find("\"parameters\"") != std::string::npos) return ToolCallFormat::json;
  return ToolCallFormat::none;
}

std::string call_reply_start(ToolCallFormat format, const std::string& function) {
  // The name as JSON spells it, without its closing quote when the model names the function.
  const std::string name = json(function).dump();
  const std::string named = function.empty() ? "\"" : name + ", ";
  switch (format) {
    case ToolCallFormat::hermes:
      return std::string(kOpen) + "\n{\"name\": " + named +
             (function.empty() ? "" : "\"arguments\": ");
    case ToolCallFormat::json:
      return "{\"name\": " + named + (function.empty() ? "" : "\"parameters\": ");
    case ToolCallFormat::none:
      break;
  }
  throw make_error("call_reply_start: the chat template writes calls in no form rlx knows");
}

ToolCallReply ToolCallStream::push(std::string_view piece) {
  ToolCallReply out;
  pending_ += piece;
  if (mode_ != Mode::whole) drain(out, false);
  return out;
}

ToolCallReply ToolCallStream::finish() {
  if (mode_ == Mode::whole) return parse_tool_calls(pending_);
  ToolCallReply out;
  drain(out, true);
  return out;  // held_ is the content's trailing whitespace: trimmed away
}

void ToolCallStream::drain(ToolCallReply& out, bool final) {
  while (true) {
    if (mode_ == Mode::start) {
      const size_t b = pending_.find_first_not_of(kSpace);
      if (b == std::string::npos) return;  // whitespace only: nothing decided
      // Nothing has left pending_ yet, so in Mode::whole it keeps the whole reply.
      mode_ = pending_[b] == '{' ? Mode::whole : Mode::text;
      if (mode_ == Mode::whole) return;
    }
    if (mode_ == Mode::text) {
      const size_t open = pending_.find(kOpen);
      if (open == std::string::npos) {
        const size_t keep = final ? 0 : open_tag_start(pending_);
        text(out, std::string_view(pending_).substr(0, pending_.size() - keep));
        pending_.erase(0, pending_.size() - keep);
        return;
      }
      text(out, std::string_view(pending_).substr(0, open));
      pending_.erase(0, open + kOpen.size());
      mode_ = Mode::block;
    }
    // Mode::block: pending_ holds the body after "<tool_call>".
    const size_t close = pending_.find(kClose);
    if (close == std::string::npos && !final) return;
    // A reply cut by max_tokens or a stop string may lack the closing tag.
    const size_t end = close == std::string::npos ? pending_.size() : close;
    const size_t next = close == std::string::npos ? pending_.size() : close + kClose.size();
    ChatToolCall call;
    if (as_call(trimmed(std::string_view(pending_).substr(0, end)), calls_, call)) {
      out.calls.push_back(std::move(call));
      ++calls_;
    } else {  // not a call: the block stays text, tags included
      text(out, std::string(kOpen) + pending_.substr(0, next));
    }
    pending_.erase(0, next);
    mode_ = Mode::text;
  }
}

// Content out as parse_tool_calls trims it: nothing before its first non-space character, and
// a run of whitespace only once more text follows it.
void ToolCallStream::text(ToolCallReply& out, std::string_view s) {
  held_ += s;
  if (!started_) {
    const size_t b = held_.find_first_not_of(kSpace);
    if (b == std::string::npos) return held_.clear();
    held_.erase(0, b);
    started_ = true;
  }
  const size_t e = held_.find_last_not_of(kSpace);
  if (e == std::string::npos) return;
  out.content += held_.substr(0, e + 1);
  held_.erase(0, e + 1);
}

}  // namespace rlx::llm
