// Request checking and response building for `rlx serve` (serve_openai.h).
// Field names, defaults and object shapes follow OpenAI's API reference;
// sampling defaults and the extra fields (top_k, min_p, repeat_penalty,
// ignore_eos) follow llama.cpp's server.
#include "serve_openai.h"

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cmath>
#include <ctime>
#include <random>

namespace rlx::cli::serve {
namespace {

ApiError bad(const std::string& param, const std::string& message) {
  return ApiError{400, message, "invalid_request_error", param, ""};
}

// A field of `body` of the JSON type `want`, or nullptr when absent or null.
const json* field(const json& body, const char* name, json::value_t want, const char* type_name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  const bool ok = want == json::value_t::number_float     ? it->is_number()
                  : want == json::value_t::number_integer ? it->is_number_integer()
                                                          : it->type() == want;
  if (!ok)
    throw bad(name, std::string("'") + name + "' must be " + type_name + ", got " + it->dump());
  return &*it;
}

double number(const json& body, const char* name, double fallback, double lo, double hi) {
  const json* v = field(body, name, json::value_t::number_float, "a number");
  if (!v) return fallback;
  const double x = v->get<double>();
  if (!(x >= lo && x <= hi))
    throw bad(name, std::string("'") + name + "' must be in [" + std::to_string(lo) + ", " +
                        std::to_string(hi) + "], got " + v->dump());
  return x;
}

int64_t integer(const json& body, const char* name, int64_t fallback, int64_t lo, int64_t hi) {
  const json* v = field(body, name, json::value_t::number_integer, "an integer");
  if (!v) return fallback;
  if (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(INT64_MAX))
    throw bad(name, std::string("'") + name + "' is out of range");
  const int64_t x = v->get<int64_t>();
  if (x < lo || x > hi)
    throw bad(name, std::string("'") + name + "' must be in [" + std::to_string(lo) + ", " +
                        std::to_string(hi) + "], got " + std::to_string(x));
  return x;
}

bool boolean(const json& body, const char* name) {
  const json* v = field(body, name, json::value_t::boolean, "true or false");
  return v && v->get<bool>();
}

std::string text_of(const json& v, const std::string& param) {
  if (v.is_string()) return v.get<std::string>();
  // Content parts: [{"type": "text", "text": "..."}]; only text parts exist here.
  if (v.is_array()) {
    std::string out;
    for (const json& part : v) {
      if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
          !part["text"].is_string())
        throw bad(param, "'" + param + "' parts must be {\"type\": \"text\", \"text\": ...}");
      out += part["text"].get<std::string>();
    }
    return out;
  }
  throw bad(param, "'" + param + "' must be a string or an array of text parts");
}

std::vector<int32_t> completion_prompt(const json& body, const llm::ChatModel& m) {
  auto it = body.find("prompt");
  if (it == body.end()) throw bad("prompt", "'prompt' is required");
  const json& p = *it;
  if (p.is_string()) return m.text_prompt(p.get<std::string>());
  if (p.is_array() && p.size() == 1 && p[0].is_string())
    return m.text_prompt(p[0].get<std::string>());
  if (p.is_array() && !p.empty() && p[0].is_number_integer()) {
    std::vector<int32_t> ids;
    for (const json& t : p) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
          t.get<int64_t>() >= m.tokenizer.n_vocab())
        throw bad("prompt", "token ids in 'prompt' must be integers in [0, " +
                                std::to_string(m.tokenizer.n_vocab()) + "), got " + t.dump());
      ids.push_back(int32_t(t.get<int64_t>()));
    }
    return ids;
  }
  throw bad("prompt",
            "'prompt' must be a string, an array of one string, or an array of token ids "
            "(one prompt per request)");
}

// An assistant message's tool_calls: [{id, type: "function", function: {name, arguments}}], the
// arguments JSON text (or an object, which some clients send).
std::vector<llm::ChatToolCall> tool_calls_of(const json& msg, const std::string& at) {
  auto it = msg.find("tool_calls");
  if (it == msg.end() || it->is_null()) return {};
  if (!it->is_array()) throw bad(at + ".tool_calls", "'" + at + ".tool_calls' must be an array");
  std::vector<llm::ChatToolCall> calls;
  for (size_t k = 0; k < it->size(); ++k) {
    const json& c = (*it)[k];
    const std::string ck = at + ".tool_calls[" + std::to_string(k) + "]";
    const json* f =
        c.is_object() ? field(c, "function", json::value_t::object, "an object") : nullptr;
    if (!f || !f->contains("name") || !(*f)["name"].is_string())
      throw bad(ck, "'" + ck + "' must have a 'function' with a string 'name'");
    llm::ChatToolCall call;
    if (const json* id = field(c, "id", json::value_t::string, "a string"))
      call.id = id->get<std::string>();
    call.name = (*f)["name"].get<std::string>();
    auto args = f->find("arguments");
    call.arguments = args == f->end() || args->is_null() ? "{}"
                     : args->is_string()                 ? args->get<std::string>()
                                                         : args->dump();
    calls.push_back(std::move(call));
  }
  return calls;
}

// The tools the model is offered (`tools`, unless tool_choice is "none") and the call it must
// make: any ("required") or one by name, as a start of its reply in the template's format.
struct ToolChoice {
  const json* tools = nullptr;
  std::string reply_start;
  std::string function;  // the call forced by name
  llm::ToolCallFormat format = llm::ToolCallFormat::none;
};
ToolChoice tool_choice(const json& body, const llm::ChatModel& m) {
  const json* t = field(body, "tools", json::value_t::array, "an array");
  ToolChoice c{t && !t->empty() ? t : nullptr, "", "",
               llm::tool_call_format(m.chat_template.source())};
  auto choice = body.find("tool_choice");
  if (choice == body.end() || choice->is_null() || *choice == "auto") return c;
  if (*choice == "none") return {};
  std::string function;
  if (choice->is_object()) {
    const json f = choice->value("function", json());
    if (!f.is_object() || !f.contains("name") || !f["name"].is_string() ||
        f["name"].get<std::string>().empty())
      throw bad("tool_choice",
                "'tool_choice' must name a function: {\"type\": \"function\", "
                "\"function\": {\"name\": ...}}, got " +
                    choice->dump());
    function = f["name"].get<std::string>();
  } else if (*choice != "required") {
    throw bad("tool_choice",
              "'tool_choice' must be \"auto\", \"none\", \"required\" or a function by name");
  }
  if (!c.tools) throw bad("tool_choice", "'tool_choice' forces a call, but there are no 'tools'");
  if (!function.empty() && std::none_of(c.tools->begin(), c.tools->end(), [&](const json& tool) {
        const json* f = tool.is_object() && tool.contains("function") ? &tool["function"] : nullptr;
        return f && f->is_object() && f->value("name", json()) == function;
      }))
    throw bad("tool_choice", "'tool_choice' names '" + function + "', which is not in 'tools'");
  if (c.format == llm::ToolCallFormat::none)
    throw bad("tool_choice",
              "this model's chat template asks for calls in no form rlx knows (<tool_call> "
              "blocks, or JSON with \"parameters\"), so it cannot force one: use \"auto\"");
  c.reply_start = llm::call_reply_start(c.format, function);
  c.function = function;
  return c;
}

// The grammar of llama.cpp's top-level grammar (GBNF) or json_schema, or of response_format
// (json_object, or json_schema's schema); none for text.
std::shared_ptr<const llm::Grammar> format_grammar(const json& body) {
  const char* param = "grammar";
  try {
    if (const json* g = field(body, "grammar", json::value_t::string, "a string"))
      return llm::Grammar::from_gbnf(g->get<std::string>());
    param = "json_schema";
    if (const json* s = field(body, "json_schema", json::value_t::object, "an object"))
      return llm::Grammar::from_json_schema(s->dump());
    param = "response_format";
    const json* rf = field(body, "response_format", json::value_t::object, "an object");
    if (!rf) return nullptr;
    const json type = rf->value("type", json());
    if (type == "text") return nullptr;
    if (type == "json_object")
      return rf->contains("schema") ? llm::Grammar::from_json_schema((*rf)["schema"].dump())
                                    : llm::Grammar::json_object();
    if (type == "json_schema") {
      const json* w = field(*rf, "json_schema", json::value_t::object, "an object");
      if (!w || !w->contains("schema"))
        throw bad(param, "'response_format' of type json_schema needs json_schema.schema");
      return llm::Grammar::from_json_schema((*w)["schema"].dump());
    }
    throw bad(param,
              "'response_format.type' must be \"text\", \"json_object\" or "
              "\"json_schema\", got " +
                  type.dump());
  } catch (const Error& e) {
    throw bad(param, e.what());
  }
}

// What the reply must keep to: a forced call's grammar (after the start the prompt gave it),
// else response_format's, else, for a model that writes <tool_call> blocks, the calls'
// grammar from the first "<tool_call>" on. A tool whose schema no grammar covers leaves the
// calls unconstrained (they are parsed as before).
void constrain(const json& body, const ToolChoice& choice, llm::GenerateRequest& g) {
  std::shared_ptr<const llm::Grammar> calls;
  if (choice.tools && choice.format != llm::ToolCallFormat::none) try {
      calls = llm::Grammar::tool_calls(choice.format, choice.tools->dump(), choice.function);
    } catch (const Error&) {
    }
  if (!choice.reply_start.empty()) {  // a forced call
    if (calls) g.grammar = calls, g.grammar_prefix = choice.reply_start;
    return;
  }
  g.grammar = format_grammar(body);
  if (!g.grammar && calls && choice.format == llm::ToolCallFormat::hermes)
    g.grammar = calls, g.grammar_trigger = "<tool_call>";
}

std::vector<int32_t> chat_prompt(const json& body, const llm::ChatModel& m,
                                 const ToolChoice& choice) {
  const json* msgs = field(body, "messages", json::value_t::array, "an array");
  if (!msgs || msgs->empty()) throw bad("messages", "'messages' must be a non-empty array");
  std::vector<llm::ChatMessage> messages;
  for (size_t i = 0; i < msgs->size(); ++i) {
    const json& msg = (*msgs)[i];
    const std::string at = "messages[" + std::to_string(i) + "]";
    if (!msg.is_object() || !msg.contains("role") || !msg["role"].is_string())
      throw bad(at, "'" + at + "' must be an object with a string 'role'");
    auto c = msg.find("content");
    llm::ChatMessage m{msg["role"].get<std::string>(),
                       c == msg.end() || c->is_null() ? "" : text_of(*c, at + ".content")};
    m.tool_calls = tool_calls_of(msg, at);
    if (const json* id = field(msg, "tool_call_id", json::value_t::string, "a string"))
      m.tool_call_id = id->get<std::string>();
    messages.push_back(std::move(m));
  }
  try {
    return m.chat_prompt(messages, choice.tools ? choice.tools->dump() : "", choice.reply_start);
  } catch (const Error& e) {  // raise_exception in the template: roles out of order, ...
    throw bad("messages", std::string("the chat template rejects these messages: ") + e.what());
  }
}

json tool_calls_json(const std::vector<llm::ChatToolCall>& calls) {
  json out = json::array();
  for (const llm::ChatToolCall& c : calls)
    out.push_back({{"id", c.id},
                   {"type", "function"},
                   {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  return out;
}

std::vector<std::string> stop_strings(const json& body) {
  auto it = body.find("stop");
  if (it == body.end() || it->is_null()) return {};
  if (it->is_string()) return {it->get<std::string>()};
  if (it->is_array() && it->size() <= 16) {
    std::vector<std::string> out;
    for (const json& s : *it) {
      if (!s.is_string()) throw bad("stop", "'stop' entries must be strings");
      out.push_back(s.get<std::string>());
    }
    return out;
  }
  throw bad("stop", "'stop' must be a string or an array of at most 16 strings");
}

void reject_unsupported(const json& body) {
  if (integer(body, "n", 1, 1, INT64_MAX) != 1)
    throw bad("n", "'n' must be 1: one choice per request");
  for (const char* name : {"presence_penalty", "frequency_penalty"})
    if (number(body, name, 0, -2, 2) != 0)
      throw bad(name, std::string("'") + name + "' is not supported (use repeat_penalty)");
  for (const char* name : {"echo", "logprobs"}) {
    auto it = body.find(name);
    if (it != body.end() && !it->is_null() && *it != false && *it != 0)
      throw bad(name, std::string("'") + name + "' is not supported");
  }
}

std::string new_id(const char* prefix) {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = std::random_device{}();
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s-%08" PRIx64 "%06" PRIx64, prefix, salt & 0xffffffffu,
                ++counter);
  return buf;
}

const char* object_name(Endpoint e, bool chunk) {
  if (e == Endpoint::Completions) return "text_completion";
  return chunk ? "chat.completion.chunk" : "chat.completion";
}

json head_json(const ResponseHead& h, bool chunk) {
  return json{{"id", h.id},
              {"object", object_name(h.endpoint, chunk)},
              {"created", h.created},
              {"model", h.model}};
}

json usage(const llm::GenerateResult& r) {
  const int64_t n = int64_t(r.tokens.size());
  return json{{"prompt_tokens", r.prompt_tokens},
              {"completion_tokens", n},
              {"total_tokens", r.prompt_tokens + n}};
}

std::string event(const json& j) { return "data: " + dump(j) + "\n\n"; }

}  // namespace

json error_body(const ApiError& e) {
  auto null_or = [](const std::string& s) { return s.empty() ? json(nullptr) : json(s); };
  return json{{"error",
               {{"message", e.message},
                {"type", e.type},
                {"param", null_or(e.param)},
                {"code", null_or(e.code)}}}};
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

ParsedRequest parse_request(Endpoint e, const std::string& text, const llm::ChatModel& model,
                            const std::string& model_id, const Limits& limits) {
  json body;
  try {
    body = json::parse(text);
  } catch (const json::parse_error& err) {
    throw ApiError{400, std::string("the body is not valid JSON: ") + err.what(),
                   "invalid_request_error", "", ""};
  }
  if (!body.is_object()) throw bad("", "the body must be a JSON object");
  if (const json* m = field(body, "model", json::value_t::string, "a string");
      m && m->get<std::string>() != model_id)
    throw ApiError{404,
                   "the model '" + m->get<std::string>() + "' does not exist; this server has '" +
                       model_id + "'",
                   "invalid_request_error", "model", "model_not_found"};
  reject_unsupported(body);

  ParsedRequest p;
  llm::GenerateRequest& g = p.generate;
  if (e == Endpoint::Completions) {
    g.prompt = completion_prompt(body, model);
    g.grammar = format_grammar(body);
  } else {
    const ToolChoice choice = tool_choice(body, model);
    g.prompt = chat_prompt(body, model, choice);
    p.tools = choice.tools != nullptr;
    p.reply_start = choice.reply_start;
    constrain(body, choice, g);
  }
  if (int64_t(g.prompt.size()) >= limits.n_ctx)
    throw ApiError{400,
                   "the prompt has " + std::to_string(g.prompt.size()) +
                       " tokens and the context holds " + std::to_string(limits.n_ctx) +
                       " (prompt and completion together)",
                   "invalid_request_error", "messages", "context_length_exceeded"};
  const int64_t cap = limits.max_tokens > 0 ? limits.max_tokens : limits.n_ctx;
  const char* max_name =
      body.contains("max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  g.max_tokens = integer(body, max_name, cap, 0, cap);
  g.n_ctx = limits.n_ctx;
  llm::SamplerOptions& s = g.sampling;
  s.temperature = float(number(body, "temperature", s.temperature, 0, 2));
  s.top_p = float(number(body, "top_p", s.top_p, 0, 1));
  s.top_k = int(integer(body, "top_k", s.top_k, 0, INT32_MAX));
  s.min_p = float(number(body, "min_p", s.min_p, 0, 1));
  s.repeat_penalty = float(number(body, "repeat_penalty", s.repeat_penalty, 0, 10));
  s.repeat_last_n = int(integer(body, "repeat_last_n", s.repeat_last_n, 0, INT32_MAX));
  // No seed: a fresh one per request, as OpenAI and llama.cpp do.
  s.seed = uint64_t(integer(body, "seed", int64_t(std::random_device{}() >> 1), 0, INT64_MAX));
  g.stop = stop_strings(body);
  g.ignore_eos = boolean(body, "ignore_eos");
  p.stream = boolean(body, "stream");
  if (const json* o = field(body, "stream_options", json::value_t::object, "an object"))
    p.include_usage = boolean(*o, "include_usage");
  return p;
}

ResponseHead new_head(Endpoint e, const std::string& model) {
  return {e, new_id(e == Endpoint::Completions ? "cmpl" : "chatcmpl"), model,
          int64_t(std::time(nullptr))};
}

json response(const ResponseHead& h, const llm::GenerateResult& r, bool tools,
              const std::string& reply_start) {
  json choice{{"index", 0}, {"logprobs", nullptr}, {"finish_reason", llm::finish_name(r.finish)}};
  if (h.endpoint == Endpoint::Completions) {
    choice["text"] = r.text;
  } else if (tools) {
    // The text trimmed, as a stream sends it (ToolCallEvents), calls or not.
    const llm::ToolCallReply calls = llm::parse_tool_calls(reply_start + r.text);
    const bool called = !calls.calls.empty();
    choice["message"] = {
        {"role", "assistant"},
        {"content", called && calls.content.empty() ? json(nullptr) : json(calls.content)}};
    if (called) {
      choice["message"]["tool_calls"] = tool_calls_json(calls.calls);
      choice["finish_reason"] = "tool_calls";
    }
  } else {
    choice["message"] = {{"role", "assistant"}, {"content", r.text}};
  }
  json j = head_json(h, false);
  j["choices"] = json::array({choice});
  j["usage"] = usage(r);
  return j;
}

std::string text_event(const ResponseHead& h, const std::string& text, const char* finish) {
  json choice{{"index", 0},
              {"logprobs", nullptr},
              {"finish_reason", finish ? json(finish) : json(nullptr)}};
  if (h.endpoint == Endpoint::Completions)
    choice["text"] = text;
  else
    choice["delta"] = finish ? json::object() : json{{"content", text}};
  json j = head_json(h, true);
  j["choices"] = json::array({choice});
  return event(j);
}

ToolCallEvents::ToolCallEvents(const std::string& reply_start) {
  const llm::ToolCallPieces out = stream_.push(reply_start);
  RLX_CHECK(out.content.empty() && out.calls.empty(), "a forced call's start is text or a call");
}

std::string ToolCallEvents::piece(const ResponseHead& h, const std::string& text) {
  return events(h, stream_.push(text));
}

std::string ToolCallEvents::finish(const ResponseHead& h, const llm::GenerateResult& r) {
  std::string out = events(h, stream_.finish());
  return out + text_event(h, "", called_ ? "tool_calls" : llm::finish_name(r.finish));
}

std::string ToolCallEvents::events(const ResponseHead& h, const llm::ToolCallPieces& out) {
  std::string ev = out.content.empty() ? "" : text_event(h, out.content, nullptr);
  if (out.calls.empty()) return ev;
  // A call's first delta names it (id, type, name); every delta carries a piece of its
  // arguments, as OpenAI streams them.
  json deltas = json::array();
  for (const llm::ToolCallDelta& d : out.calls) {
    json c{{"index", d.index}};
    if (!d.id.empty()) c["id"] = d.id, c["type"] = "function";
    c["function"] = json{{"arguments", d.arguments}};
    if (!d.id.empty()) c["function"]["name"] = d.name;
    deltas.push_back(std::move(c));
  }
  called_ = true;
  json j = head_json(h, true);
  j["choices"] = json::array({json{{"index", 0},
                                   {"delta", {{"tool_calls", std::move(deltas)}}},
                                   {"logprobs", nullptr},
                                   {"finish_reason", nullptr}}});
  return ev + event(j);
}

std::string role_event(const ResponseHead& h) {
  if (h.endpoint == Endpoint::Completions) return "";
  json j = head_json(h, true);
  j["choices"] = json::array({json{{"index", 0},
                                   {"delta", {{"role", "assistant"}, {"content", ""}}},
                                   {"logprobs", nullptr},
                                   {"finish_reason", nullptr}}});
  return event(j);
}

std::string usage_event(const ResponseHead& h, const llm::GenerateResult& r) {
  json j = head_json(h, true);
  j["choices"] = json::array();
  j["usage"] = usage(r);
  return event(j);
}

json models_body(const std::string& model_id, int64_t created) {
  return json{
      {"object", "list"},
      {"data",
       json::array({json{
           {"id", model_id}, {"object", "model"}, {"created", created}, {"owned_by", "rlx"}}})}};
}

}  // namespace rlx::cli::serve
