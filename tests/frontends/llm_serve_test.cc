// `rlx serve` over HTTP on a loopback port: concurrent streaming and
// non-streaming clients get the greedy text of `rlx generate --temp 0`, the
// OpenAI error objects for bad requests, and a client that goes away mid-stream
// frees its slot.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <thread>

#include "rlx/llm_generate.h"
#include "support/greedy_request.h"
#include "support/testing.h"
#include "support/tiny_llm.h"

namespace rlx {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

// An `rlx serve` process on a free loopback port, stopped (SIGTERM) and checked for a clean
// exit by stop().
struct ServeProcess {
  FILE* pipe = nullptr;
  int port = 0, pid = 0;

  void start(const std::string& args, const fs::path& err) {
    const std::string cmd =
        std::string("exec ") + RLX_CLI_PATH + " serve " + args + " 2>" + err.string();
    pipe = popen(cmd.c_str(), "r");
    ASSERT_NE(pipe, nullptr);
    char line[256] = {};
    ASSERT_NE(std::fgets(line, sizeof line, pipe), nullptr) << "rlx serve printed nothing";
    ASSERT_EQ(
        std::sscanf(line, "rlx serve: listening on http://127.0.0.1:%d (pid %d)", &port, &pid), 2)
        << line;
  }
  void stop() {
    if (!pipe) return;
    if (pid > 0) kill(pid, SIGTERM);
    const int status = pclose(pipe);
    pipe = nullptr;
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "rlx serve did not stop cleanly";
  }
};

class LlmServe : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = testing::process_temp_dir("rlx_llm_serve_test");
    std::ofstream(model_path(), std::ios::binary) << testing::TinyLlm{}.gguf_bytes();
    server_.start(
        model_path() + " --port 0 --parallel 2 --queue 4 --max-body 4096 --ctx 100000 -t 1",
        dir_ / "serve.err");
    port_ = server_.port;
  }
  static void TearDownTestSuite() {
    server_.stop();
    fs::remove_all(dir_);
  }
  static std::string model_path() { return (dir_ / "tiny.gguf").string(); }
  static httplib::Client client() { return client(port_); }
  static httplib::Client client(int port) {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(30s);
    return c;
  }
  static json post(const std::string& path, const json& body, int* status = nullptr,
                   int port = port_) {
    auto res = client(port).Post(path, body.dump(), "application/json");
    EXPECT_TRUE(res) << path;
    if (!res) return {};
    if (status) *status = res->status;
    return json::parse(res->body);
  }
  // The body goes to `receive` as it comes; receive returning false hangs up.
  static httplib::Result post_streaming(const json& body,
                                        std::function<bool(const char*, size_t)> receive) {
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.body = body.dump();
    req.set_header("Content-Type", "application/json");
    req.content_receiver = [receive](const char* data, size_t n, uint64_t, uint64_t) {
      return receive(data, n);
    };
    return client().send(req);
  }
  // The text of a streamed completion and its finish reason; the HTTP status
  // and no text when it is refused.
  struct Streamed {
    int status = 0;
    std::string text, finish;
  };
  static Streamed stream(const json& body) {
    std::string raw;
    auto res = post_streaming(body, [&](const char* data, size_t n) {
      raw.append(data, n);
      return true;
    });
    EXPECT_TRUE(res);
    if (!res || res->status != 200) return {res ? res->status : -1, "", ""};
    std::string text, finish;
    const bool done = for_each_choice(raw, [&](const json& choice) {
      text += choice["text"].get<std::string>();
      if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"];
    });
    EXPECT_TRUE(done) << raw;
    return {200, text, finish};
  }
  // Each server-sent event's choices[0], in order; whether the stream ended with [DONE].
  static bool for_each_choice(const std::string& raw, const std::function<void(const json&)>& f) {
    bool done = false;
    for (size_t at = 0; (at = raw.find("data: ", at)) != std::string::npos;) {
      const size_t end = raw.find("\n\n", at);
      const std::string payload = raw.substr(at + 6, end - at - 6);
      at = end;
      if (payload == "[DONE]")
        done = true;
      else
        f(json::parse(payload)["choices"][0]);
    }
    return done;
  }
  // A streamed chat reply's content deltas joined, and its finish reason.
  struct StreamedChat {
    std::string content, finish, raw;
  };
  static StreamedChat stream_chat(json body, int port = port_) {
    body["stream"] = true;
    auto res = client(port).Post("/v1/chat/completions", body.dump(), "application/json");
    EXPECT_TRUE(res);
    if (!res) return {};
    EXPECT_EQ(res->status, 200) << res->body;
    StreamedChat out{"", "", res->body};
    for_each_choice(res->body, [&](const json& choice) {
      if (choice["delta"].contains("content")) out.content += choice["delta"]["content"];
      if (!choice["finish_reason"].is_null()) out.finish = choice["finish_reason"];
    });
    return out;
  }
  static inline fs::path dir_;
  static inline ServeProcess server_;
  static inline int port_ = 0;
};

json greedy_completion(const std::string& prompt, int max_tokens, bool stream) {
  return json{{"prompt", prompt},
              {"max_tokens", max_tokens},
              {"temperature", 0},
              {"ignore_eos", true},
              {"stream", stream}};
}

TEST_F(LlmServe, ConcurrentClientsGetTheGreedyTextOfGenerate) {
  const std::vector<std::string> prompts{"ab ba", "ba ab", "a a b", "b", "ab", "bab a"};
  llm::ChatModel m = llm::ChatModel::load(model_path(), llm::Weights::F32);
  std::vector<std::string> want;
  for (const auto& p : prompts) {
    llm::Session fresh(m.exe, m.config);
    want.push_back(
        llm::generate(fresh, m.tokenizer, testing::greedy_request(m.text_prompt(p), 6)).text);
  }
  // What the server and the library give is what `rlx generate` prints.
  auto cli =
      testing::run_cli("generate " + model_path() + " -p 'ab ba' -n 6 --temp 0 --ignore-eos");
  ASSERT_EQ(cli.status, 0) << cli.output;
  EXPECT_NE(cli.output.find(want[0] + "\n"), std::string::npos) << cli.output << " / " << want[0];

  // Twice as many clients as slots and queue places: each is served right or
  // turned away with 503, never anything else.
  std::vector<std::string> got(prompts.size() * 2);
  std::vector<int> status(got.size(), 0);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < got.size(); ++i)
    clients.emplace_back([&, i] {
      const std::string& p = prompts[i % prompts.size()];
      if (i % 2 == 0) {
        Streamed r = stream(greedy_completion(p, 6, true));
        got[i] = r.text;
        status[i] = r.status;
        if (r.status == 200) {
          EXPECT_EQ(r.finish, "length");
        }
      } else {
        json r = post("/v1/completions", greedy_completion(p, 6, false), &status[i]);
        if (status[i] == 200) {
          got[i] = r["choices"][0]["text"];
          EXPECT_EQ(r["usage"]["completion_tokens"], 6);
          EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
        } else {
          EXPECT_EQ(r["error"]["code"], "server_busy") << r.dump();
        }
      }
    });
  for (auto& t : clients) t.join();
  int served = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_TRUE(status[i] == 200 || status[i] == 503) << "client " << i << ": " << status[i];
    if (status[i] != 200) continue;
    ++served;
    EXPECT_EQ(got[i], want[i % prompts.size()]) << "client " << i;
  }
  EXPECT_GE(served, 6);
}

TEST_F(LlmServe, ChatModelsHealthAndOpenAiErrors) {
  int status = 0;
  json chat = post("/v1/chat/completions",
                   {{"messages", {{{"role", "user"}, {"content", "ab"}}}},
                    {"max_tokens", 3},
                    {"temperature", 0},
                    {"model", "tiny"}},
                   &status);
  EXPECT_EQ(status, 200) << chat.dump();
  EXPECT_EQ(chat["object"], "chat.completion");
  EXPECT_EQ(chat["choices"][0]["message"]["role"], "assistant");
  EXPECT_GT(chat["usage"]["prompt_tokens"].get<int>(), 1);

  auto health = client().Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(json::parse(health->body)["status"], "ok");
  auto models = client().Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(json::parse(models->body)["data"][0]["id"], "tiny");

  auto bad_json = client().Post("/v1/completions", "{\"prompt\":", "application/json");
  ASSERT_TRUE(bad_json);
  EXPECT_EQ(bad_json->status, 400);
  EXPECT_NE(bad_json->body.find("not valid JSON"), std::string::npos) << bad_json->body;
  json e = post("/v1/completions", {{"prompt", "ab"}, {"model", "gpt-4"}}, &status);
  EXPECT_EQ(status, 404);
  EXPECT_EQ(e["error"]["code"], "model_not_found");
  e = post("/v1/completions", {{"prompt", "ab"}, {"temperature", "hot"}}, &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(e["error"]["param"], "temperature");
  e = post("/v1/completions", {{"prompt", "ab"}, {"n", 2}}, &status);
  EXPECT_EQ(status, 400);
  e = post("/v1/chat/completions", {{"messages", json::array()}}, &status);
  EXPECT_EQ(status, 400);
  auto big = client().Post("/v1/completions", std::string(5000, ' '), "application/json");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 413);
  EXPECT_EQ(json::parse(big->body)["error"]["type"], "invalid_request_error");
  auto nowhere = client().Get("/v2/nothing");
  ASSERT_TRUE(nowhere);
  EXPECT_EQ(nowhere->status, 404);
}

// Requests with tools and with the calls and replies of an earlier turn: accepted (the tiny
// model's ChatML template has no tools section, and its random weights call nothing, so the reply
// is text), streamed as it comes; a malformed call is a 400 naming it.
TEST_F(LlmServe, ToolRequestsAndToolTurns) {
  const json tools =
      json::array({{{"type", "function"},
                    {"function",
                     {{"name", "get_weather"},
                      {"parameters", {{"type", "object"}, {"properties", json::object()}}}}}}});
  const json messages = json::array(
      {{{"role", "user"}, {"content", "ab"}},
       {{"role", "assistant"},
        {"content", nullptr},
        {"tool_calls",
         json::array(
             {{{"id", "call_0"},
               {"type", "function"},
               {"function", {{"name", "get_weather"}, {"arguments", "{\"city\": \"x\"}"}}}}})}},
       {{"role", "tool"}, {"tool_call_id", "call_0"}, {"content", "18C"}}});
  int status = 0;
  json r = post("/v1/chat/completions",
                {{"messages", messages}, {"tools", tools}, {"max_tokens", 3}, {"temperature", 0}},
                &status);
  EXPECT_EQ(status, 200) << r.dump();
  EXPECT_EQ(r["choices"][0]["message"]["role"], "assistant");
  EXPECT_TRUE(r["choices"][0]["message"]["content"].is_string()) << r.dump();

  // Streamed, its text adds up to the whole reply's content (how many pieces it comes in depends
  // on how far decoding got each time the server looked; ToolCalls.Streamed* check the pieces).
  r = post("/v1/chat/completions",
           {{"messages", messages}, {"tools", tools}, {"max_tokens", 8}, {"temperature", 0}},
           &status);
  ASSERT_EQ(status, 200) << r.dump();
  const StreamedChat streamed = stream_chat(
      {{"messages", messages}, {"tools", tools}, {"max_tokens", 8}, {"temperature", 0}});
  EXPECT_EQ(streamed.content, r["choices"][0]["message"]["content"]) << streamed.raw;
  EXPECT_EQ(streamed.finish, "length") << streamed.raw;

  // tool_choice "none" hides the tools; a forced call is refused by name.
  r = post("/v1/chat/completions",
           {{"messages", messages}, {"tools", tools}, {"tool_choice", "none"}, {"max_tokens", 3}},
           &status);
  EXPECT_EQ(status, 200) << r.dump();
  // The ChatML fallback asks for calls in no form: a forced call is refused, naming the field.
  r = post("/v1/chat/completions",
           {{"messages", messages}, {"tools", tools}, {"tool_choice", "required"}}, &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(r["error"]["param"], "tool_choice") << r.dump();
  EXPECT_NE(r["error"]["message"].get<std::string>().find("cannot force"), std::string::npos);

  json bad = messages;
  bad[1]["tool_calls"][0].erase("function");
  json e = post("/v1/chat/completions", {{"messages", bad}, {"max_tokens", 3}}, &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(e["error"]["param"], "messages[1].tool_calls[0]") << e.dump();
}

// tool_choice forces a call by starting the reply in the template's call form, and the call's
// grammar keeps what the model writes after it to a call of an offered tool with arguments its
// schema accepts (the tiny model here has tokens for JSON's punctuation; free, its random
// weights write none). Streamed, the call comes as deltas: its name first, then its arguments
// in pieces that add up to the whole reply's. A name not in `tools`, a forced call without
// tools, or a malformed tool_choice: 400 naming it.
TEST_F(LlmServe, ToolChoiceForcesAValidCallInTheTemplatesForm) {
  const fs::path hermes_template = dir_ / "hermes.jinja", json_model = dir_ / "json.gguf";
  std::ofstream(hermes_template)
      << "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
         "{%- endfor %}{%- if tools %}<|im_start|>system\nCall a function as <tool_call>{\"name\":"
         " ..., \"arguments\": ...}</tool_call>: {{ tools | tojson }}<|im_end|>\n{%- endif %}"
         "<|im_start|>assistant\n";
  testing::TinyLlm spec;
  spec.extra_tokens = testing::TinyLlm::json_tokens();
  spec.n_vocab = 50 + int64_t(spec.extra_tokens.size());
  std::ofstream(json_model, std::ios::binary) << spec.gguf_bytes();
  ServeProcess hermes;
  hermes.start(
      json_model.string() + " --port 0 --ctx 4096 -t 1 --chat-template " + hermes_template.string(),
      dir_ / "hermes.err");
  const json weather_args = {{"type", "object"},
                             {"properties",
                              {{"city", {{"type", "string"}, {"maxLength", 8}}},
                               {"days", {{"type", "integer"}, {"minimum", 0}}}}},
                             {"required", {"city"}}};
  const json tools =
      json::array({{{"type", "function"},
                    {"function", {{"name", "get_weather"}, {"parameters", weather_args}}}},
                   {{"type", "function"}, {"function", {{"name", "now"}}}}});
  const json ask = {{"messages", json::array({{{"role", "user"}, {"content", "ab"}}})},
                    {"tools", tools},
                    {"max_tokens", 200},
                    {"temperature", 0}};
  auto with_choice = [&](const json& choice) {
    json body = ask;
    body["tool_choice"] = choice;
    return body;
  };
  // A call's arguments checked against weather_args by hand.
  auto check_weather = [](const std::string& arguments) {
    const json a = json::parse(arguments, nullptr, false);
    ASSERT_TRUE(a.is_object()) << arguments;
    ASSERT_TRUE(a.contains("city") && a["city"].is_string()) << arguments;
    EXPECT_LE(a["city"].get<std::string>().size(), 8u) << arguments;
    for (const auto& [k, v] : a.items()) {
      EXPECT_TRUE(k == "city" || k == "days") << arguments;
      if (k == "days") {
        EXPECT_TRUE(v.is_number_unsigned()) << arguments;
      }
    }
  };
  int status = 0;
  const json free = post("/v1/chat/completions", ask, &status, hermes.port);
  ASSERT_EQ(status, 200) << free.dump();
  // "auto": free text, where a "<tool_call>" the model writes must go on as a valid call.
  for (const json& c : free["choices"][0]["message"].value("tool_calls", json::array()))
    EXPECT_TRUE(json::parse(c["function"]["arguments"].get<std::string>()).is_object());
  const json by_name = with_choice({{"type", "function"}, {"function", {{"name", "get_weather"}}}});
  const json named = post("/v1/chat/completions", by_name, &status, hermes.port);
  ASSERT_EQ(status, 200) << named.dump();
  const json& message = named["choices"][0]["message"];
  EXPECT_EQ(named["choices"][0]["finish_reason"], "tool_calls") << named.dump();
  EXPECT_TRUE(message["content"].is_null()) << named.dump();
  ASSERT_EQ(message["tool_calls"].size(), 1u) << named.dump();
  const json& call = message["tool_calls"][0];
  EXPECT_EQ(call["id"], "call_0");
  EXPECT_EQ(call["function"]["name"], "get_weather");
  check_weather(call["function"]["arguments"]);
  EXPECT_GT(named["usage"]["prompt_tokens"], free["usage"]["prompt_tokens"]) << named.dump();

  // Streamed: the first delta names the call, later ones carry its arguments.
  const StreamedChat streamed = stream_chat(by_name, hermes.port);
  EXPECT_EQ(streamed.content, "") << streamed.raw;
  EXPECT_EQ(streamed.finish, "tool_calls") << streamed.raw;
  std::string id, name, arguments;
  for_each_choice(streamed.raw, [&](const json& choice) {
    if (!choice["delta"].contains("tool_calls")) return;
    for (const json& d : choice["delta"]["tool_calls"]) {
      EXPECT_EQ(d["index"], 0) << d.dump();
      if (d.contains("id")) {
        EXPECT_TRUE(id.empty()) << "a second head: " << d.dump();
        id = d["id"], name = d["function"]["name"];
        EXPECT_EQ(d["type"], "function");
      }
      EXPECT_FALSE(id.empty()) << "arguments before the call's head: " << d.dump();
      arguments += d["function"]["arguments"].get<std::string>();
    }
  });
  EXPECT_EQ(id, "call_0");
  EXPECT_EQ(name, "get_weather");
  EXPECT_EQ(arguments, call["function"]["arguments"]) << streamed.raw;

  // "required": one call or more, each of an offered tool.
  const json any = post("/v1/chat/completions", with_choice("required"), &status, hermes.port);
  ASSERT_EQ(status, 200) << any.dump();
  ASSERT_TRUE(any["choices"][0]["message"].contains("tool_calls")) << any.dump();
  for (const json& c : any["choices"][0]["message"]["tool_calls"]) {
    const std::string f = c["function"]["name"];
    EXPECT_TRUE(f == "get_weather" || f == "now") << any.dump();
    if (f == "get_weather") check_weather(c["function"]["arguments"]);
    EXPECT_TRUE(json::parse(c["function"]["arguments"].get<std::string>()).is_object());
  }

  for (const json& body :
       {with_choice({{"type", "function"}, {"function", {{"name", "get_time"}}}}),
        with_choice({{"type", "function"}}), with_choice("sometimes"),
        json{{"messages", ask["messages"]}, {"tool_choice", "required"}}}) {
    const json e = post("/v1/chat/completions", body, &status, hermes.port);
    EXPECT_EQ(status, 400) << body.dump();
    EXPECT_EQ(e["error"]["param"], "tool_choice") << e.dump();
  }

  // response_format: a JSON object, or one that a schema accepts, on both endpoints.
  const json user = json::array({{{"role", "user"}, {"content", "ab"}}});
  const json schema = {{"type", "object"},
                       {"properties", {{"ok", {{"type", "boolean"}}}, {"n", {{"type", "null"}}}}},
                       {"required", {"ok", "n"}}};
  for (const char* path : {"/v1/chat/completions", "/v1/completions"}) {
    json body = {{"max_tokens", 200}, {"temperature", 0.9}, {"seed", 3}};
    if (std::string(path) == "/v1/completions")
      body["prompt"] = "ab";
    else
      body["messages"] = user;
    auto text_of = [&](const json& r) {
      const json& c = r["choices"][0];
      return c.contains("text") ? c["text"].get<std::string>()
                                : c["message"]["content"].get<std::string>();
    };
    body["response_format"] = {{"type", "json_schema"},
                               {"json_schema", {{"name", "answer"}, {"schema", schema}}}};
    json r = post(path, body, &status, hermes.port);
    ASSERT_EQ(status, 200) << r.dump();
    EXPECT_EQ(r["choices"][0]["finish_reason"], "stop") << r.dump();
    const json doc = json::parse(text_of(r), nullptr, false);
    ASSERT_TRUE(doc.is_object()) << r.dump();
    EXPECT_TRUE(doc["ok"].is_boolean() && doc["n"].is_null() && doc.size() == 2) << r.dump();
    body["response_format"] = {{"type", "json_object"}};
    body["max_tokens"] = 400;
    r = post(path, body, &status, hermes.port);
    ASSERT_EQ(status, 200) << r.dump();
    if (r["choices"][0]["finish_reason"] == "stop") {
      EXPECT_TRUE(json::parse(text_of(r), nullptr, false).is_object()) << r.dump();
    }
    body["response_format"] = {
        {"type", "json_schema"},
        {"json_schema", {{"schema", {{"type", "string"}, {"pattern", "^a+$"}}}}}};
    r = post(path, body, &status, hermes.port);
    ASSERT_EQ(status, 200) << r.dump();
    if (r["choices"][0]["finish_reason"] == "stop") {
      const json reply = json::parse(text_of(r), nullptr, false);
      ASSERT_TRUE(reply.is_string()) << r.dump();
      const std::string a = reply.get<std::string>();
      EXPECT_TRUE(!a.empty() && a.find_first_not_of('a') == std::string::npos) << r.dump();
    }
    body["response_format"] = {{"type", "json_schema"},
                               {"json_schema", {{"schema", {{"not", {{"type", "null"}}}}}}}};
    r = post(path, body, &status, hermes.port);
    EXPECT_EQ(status, 400) << r.dump();
    EXPECT_EQ(r["error"]["param"], "response_format") << r.dump();
    EXPECT_NE(r["error"]["message"].get<std::string>().find("'not' is not supported"),
              std::string::npos)
        << r.dump();
    body["response_format"] = {{"type", "xml"}};
    r = post(path, body, &status, hermes.port);
    EXPECT_EQ(status, 400) << r.dump();
    EXPECT_EQ(r["error"]["param"], "response_format") << r.dump();
    // llama.cpp's grammar field: GBNF, before response_format.
    body.erase("response_format");
    body["grammar"] = "root ::= (\"true\" | \"false\") (\",\" [0-9]){2}";
    r = post(path, body, &status, hermes.port);
    ASSERT_EQ(status, 200) << r.dump();
    const std::string text = text_of(r);
    EXPECT_TRUE(text.size() >= 8 && (text.rfind("true,", 0) == 0 || text.rfind("false,", 0) == 0) &&
                std::count(text.begin(), text.end(), ',') == 2)
        << r.dump();
    body["grammar"] = "root ::= [a-";
    r = post(path, body, &status, hermes.port);
    EXPECT_EQ(status, 400) << r.dump();
    EXPECT_EQ(r["error"]["param"], "grammar") << r.dump();
  }
  hermes.stop();
}

TEST_F(LlmServe, AClientGoneMidStreamFreesItsSlot) {
  // Far more tokens than it could make before the test gives up on it.
  json body = greedy_completion("ab", 90000, true);
  size_t chunks = 0;
  std::string first;
  post_streaming(body, [&](const char* data, size_t n) {
    if (chunks == 0) first.assign(data, n);
    return ++chunks < 3;
  });
  EXPECT_GE(chunks, 3u);
  EXPECT_TRUE(first.starts_with("data: {")) << first;
  bool freed = false;
  for (int i = 0; i < 100 && !freed; ++i) {
    auto h = client().Get("/health");
    freed = h && json::parse(h->body)["requests_in_flight"] == 0;
    if (!freed) std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(freed) << "the abandoned stream still runs";
}

// The same for a request that does not stream: the server looks at the client while it waits.
TEST_F(LlmServe, AClientGoneBeforeItsReplyFreesItsSlot) {
  {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(300ms);  // gives up long before 90000 tokens
    auto res =
        c.Post("/v1/completions", greedy_completion("ab", 90000, false).dump(), "application/json");
    EXPECT_FALSE(res);
  }
  bool freed = false;
  for (int i = 0; i < 100 && !freed; ++i) {
    auto h = client().Get("/health");
    freed = h && json::parse(h->body)["requests_in_flight"] == 0;
    if (!freed) std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(freed) << "the abandoned request still runs";
}

}  // namespace
}  // namespace rlx
