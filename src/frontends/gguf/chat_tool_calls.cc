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

// The length of the longest end of s that `tag` begins with (a tag the next piece may complete).
size_t tag_start(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
    if (tag.starts_with(s.substr(s.size() - n))) return n;
  return 0;
}

enum class Head { more, no, yes };

// Whether a block's body starts {"name": N, "arguments" | "parameters": { (blanks anywhere
// between), so its arguments can go out as they come; more: the body ends before that is known.
// On yes, args_at is where the arguments' "{" stands.
Head read_head(std::string_view body, std::string& name, size_t& args_at) {
  size_t i = 0;
  auto blank = [&] {
    while (i < body.size() && kSpace.find(body[i]) != std::string_view::npos) ++i;
  };
  auto word = [&](std::string_view w) {  // one of the words, or the body ends inside one
    const std::string_view rest = body.substr(i);
    if (rest.starts_with(w)) return i += w.size(), Head::yes;
    return w.starts_with(rest) ? Head::more : Head::no;
  };
  for (std::string_view w : {"{", "\"name\"", ":"}) {
    blank();
    if (Head h = word(w); h != Head::yes) return h;
  }
  blank();
  if (i == body.size()) return Head::more;
  if (body[i] != '"') return Head::no;
  size_t j = i + 1;
  while (j < body.size() && body[j] != '"') j += body[j] == '\\' ? 2 : 1;
  if (j >= body.size()) return Head::more;
  const json n = json::parse(body.substr(i, j + 1 - i), nullptr, false);
  if (!n.is_string()) return Head::no;
  name = n.get<std::string>();
  i = j + 1;
  blank();
  if (Head h = word(","); h != Head::yes) return h;
  blank();
  const Head a = word("\"arguments\"");
  if (a != Head::yes) {
    const Head p = word("\"parameters\"");
    if (p != Head::yes) return a == Head::more || p == Head::more ? Head::more : Head::no;
  }
  blank();
  if (Head h = word(":"); h != Head::yes) return h;
  blank();
  if (i == body.size()) return Head::more;
  if (body[i] != '{') return Head::no;  // arguments as a string: read whole
  args_at = i;
  return Head::yes;
}

// Where the JSON object starting at s[at] ends (one past its "}"), or npos if s ends first.
size_t object_end(std::string_view s, size_t at) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = at; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if ((c == '}' || c == ']') && --depth == 0) {
      return i + 1;
    }
  }
  return std::string_view::npos;
}

// A call's name and its arguments as the model wrote them, when `text` starts with a head: the
// arguments run to where their object ends, or to the text's end when it never does.
bool written_call(std::string_view text, std::string& name, std::string& arguments) {
  size_t at = 0;
  if (read_head(text, name, at) != Head::yes) return false;
  arguments = std::string(text.substr(at, object_end(text, at) - at));
  return true;
}

// A block's call: by its head, else any JSON call.
bool block_call(std::string_view body, size_t index, ChatToolCall& call) {
  if (!written_call(body, call.name, call.arguments)) return as_call(trimmed(body), index, call);
  call.id = "call_" + std::to_string(index);
  return true;
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
    if (block_call(std::string_view(reply).substr(body, end - body), r.calls.size(), call)) {
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
      // The arguments as the model wrote them, when its object is where a call puts it.
      std::string name;
      written_call(r.content, name, call.arguments);
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

ToolCallPieces ToolCallStream::push(std::string_view piece) {
  ToolCallPieces out;
  pending_ += piece;
  if (mode_ != Mode::whole) drain(out, false);
  return out;
}

ToolCallPieces ToolCallStream::finish() {
  ToolCallPieces out;
  if (mode_ == Mode::whole) {
    ToolCallReply r = parse_tool_calls(pending_);
    out.content = std::move(r.content);
    for (ChatToolCall& c : r.calls) call_piece(out, c.id, c.name, c.arguments);
    return out;
  }
  drain(out, true);
  return out;  // held_ is the content's trailing whitespace: trimmed away
}

void ToolCallStream::call_piece(ToolCallPieces& out, std::string id, std::string name,
                                std::string_view args) {
  if (!out.calls.empty() && out.calls.back().index == calls_ && id.empty()) {
    out.calls.back().arguments += args;
    return;
  }
  out.calls.push_back({calls_, std::move(id), std::move(name), std::string(args)});
}

void ToolCallStream::drain(ToolCallPieces& out, bool final) {
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
        const size_t keep = final ? 0 : tag_start(pending_, kOpen);
        text(out, std::string_view(pending_).substr(0, pending_.size() - keep));
        pending_.erase(0, pending_.size() - keep);
        return;
      }
      text(out, std::string_view(pending_).substr(0, open));
      pending_.erase(0, open + kOpen.size());
      mode_ = Mode::block;
      head_ = other_shape_ = false;
    }
    // Mode::block: pending_ holds the body after "<tool_call>".
    const size_t close = pending_.find(kClose);
    const bool closed = close != std::string::npos || final;
    // A reply cut by max_tokens or a stop string may lack the closing tag.
    const std::string_view body =
        std::string_view(pending_).substr(0, std::min(close, pending_.size()));
    if (!head_ && !other_shape_) {
      std::string name;
      const Head h = read_head(body, name, args_at_);
      if (h == Head::yes) {
        head_ = true;
        sent_ = args_at_;
        call_piece(out, "call_" + std::to_string(calls_), name, "");
      }
      other_shape_ = h == Head::no || (h == Head::more && closed);
    }
    if (head_) {  // the arguments so far, less what may be the start of the closing tag
      size_t upto = std::min(object_end(body, args_at_), body.size());
      if (upto == body.size() && !closed) upto -= tag_start(body, kClose);
      if (upto > sent_) call_piece(out, "", "", body.substr(sent_, upto - sent_));
      sent_ = std::max(sent_, upto);
    }
    if (!closed) return;
    const size_t next = close == std::string::npos ? pending_.size() : close + kClose.size();
    ChatToolCall call;
    if (head_) {
      ++calls_;
    } else if (as_call(trimmed(body), calls_, call)) {
      call_piece(out, call.id, call.name, call.arguments);
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
void ToolCallStream::text(ToolCallPieces& out, std::string_view s) {
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
