// The OpenAI-compatible JSON of `rlx serve`: request bodies of /v1/completions
// and /v1/chat/completions checked and turned into a GenerateRequest, and the
// response objects and server-sent-event chunks built from results.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "rlx/llm_generate.h"

namespace rlx::cli::serve {

using json = nlohmann::ordered_json;

// A request the server answers with an OpenAI error object and this status.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param, code;  // empty: null
};
json error_body(const ApiError& e);
// json.dump that replaces invalid UTF-8 instead of throwing.
std::string dump(const json& j);

struct Limits {
  int64_t n_ctx = 0;       // per slot: prompt + completion
  int64_t max_tokens = 0;  // the most a request may ask for; 0: up to n_ctx
};

enum class Endpoint { Completions, ChatCompletions };

struct ParsedRequest {
  llm::GenerateRequest generate;
  bool stream = false, include_usage = false;
  // A chat request with `tools`: the reply is read for function calls (llm::parse_tool_calls;
  // a stream sends its text as it comes and each call once its block is complete).
  bool tools = false;
  // A forced call (tool_choice "required" or a function by name): the start of the reply the
  // prompt ends with, in the template's call format; the model writes the rest.
  std::string reply_start;
};
// Throws ApiError naming the field at fault.
ParsedRequest parse_request(Endpoint e, const std::string& body, const llm::ChatModel& model,
                            const std::string& model_id, const Limits& limits);

// The fields every response and chunk starts with.
struct ResponseHead {
  Endpoint endpoint;
  std::string id, model;
  int64_t created = 0;
};
ResponseHead new_head(Endpoint e, const std::string& model);
// tools: read the reply for function calls (message.tool_calls, finish_reason "tool_calls";
// the content is the text outside them, trimmed).
json response(const ResponseHead& h, const llm::GenerateResult& r, bool tools = false,
              const std::string& reply_start = "");
// One "data: {...}\n\n" event: a piece of text, or (finish set) the last one.
std::string text_event(const ResponseHead& h, const std::string& text, const char* finish);
// A streamed chat reply read for function calls as it comes (a request with tools): its
// text as content deltas, each call as tool_calls deltas (its name once its head is read, then
// its arguments as they come), and finish_reason "tool_calls" if it made any.
class ToolCallEvents {
 public:
  explicit ToolCallEvents(const std::string& reply_start = "");
  std::string piece(const ResponseHead& h, const std::string& text);
  // The rest, then the finish.
  std::string finish(const ResponseHead& h, const llm::GenerateResult& r);

 private:
  std::string events(const ResponseHead& h, const llm::ToolCallPieces& out);
  llm::ToolCallStream stream_;
  bool called_ = false;
};
// The chat stream's first event (the assistant role), empty for completions.
std::string role_event(const ResponseHead& h);
std::string usage_event(const ResponseHead& h, const llm::GenerateResult& r);
inline const char* done_event() { return "data: [DONE]\n\n"; }

json models_body(const std::string& model_id, int64_t created);

}  // namespace rlx::cli::serve
