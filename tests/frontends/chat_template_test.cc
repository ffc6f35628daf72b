// Chat template tests: the public templates of each model family rendered to
// their exact prompts, then the Jinja subset piece by piece, syntax errors,
// raise_exception, and the caps against hostile templates.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "rlx/chat_template.h"
#include "rlx/error.h"

namespace rlx::llm {
namespace {

const std::vector<ChatMessage> kChat = {{"system", "You are helpful."},
                                        {"user", "Hi"},
                                        {"assistant", "Hello!"},
                                        {"user", "How are you?"}};

std::string render(const std::string& src, const std::vector<ChatMessage>& msgs = {},
                   bool gen = true, std::string bos = "<s>", std::string eos = "</s>") {
  ChatTemplateOptions o;
  o.add_generation_prompt = gen;
  o.bos_token = std::move(bos);
  o.eos_token = std::move(eos);
  return ChatTemplate(src).render(msgs, o);
}

// The message of the rlx::Error that parsing or rendering src throws.
std::string render_error(const std::string& src, const std::vector<ChatMessage>& msgs = {}) {
  try {
    render(src, msgs);
  } catch (const rlx::Error& e) {
    return e.what();
  }
  return "(no error)";
}

const char* kChatML =
    R"J({% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %})J";

const char* kChatMLPrompt =
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
    "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nHow are you?<|im_end|>\n";

TEST(ChatTemplateFamilies, ChatML) {
  EXPECT_EQ(render(kChatML, kChat, false), kChatMLPrompt);
  EXPECT_EQ(render(kChatML, kChat, true), std::string(kChatMLPrompt) + "<|im_start|>assistant\n");
}

const char* kQwen25 = R"J({%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
    {%- else %}
        {{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\n<tool_call>\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- message.content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
)J";

// OpenAI-style tools and calls, rendered as transformers renders them: tools and the call's
// arguments as objects through tojson (key order kept), the tool's reply as a user turn.
TEST(ChatTemplateFamilies, Qwen25WithToolsAndToolCalls) {
  ChatTemplateOptions o;
  o.tools =
      R"([{"type": "function", "function": {"name": "get_weather", "description": "Weather in a )"
      R"(city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, )"
      R"("required": ["city"]}}}])";
  ChatMessage call{"assistant", ""};
  call.tool_calls = {{"call_0", "get_weather", R"({"city":"Paris"})"}};
  ChatMessage reply{"tool", "18C"};
  reply.tool_call_id = "call_0";
  const std::string got =
      ChatTemplate(kQwen25).render({{"user", "Weather in Paris?"}, call, reply}, o);
  EXPECT_EQ(got,
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
            "assistant.\n\n# Tools\n\nYou may call one or more functions to assist with the "
            "user query.\n\nYou are provided with function signatures within <tools></tools> "
            "XML tags:\n<tools>\n"
            R"({"type": "function", "function": {"name": "get_weather", "description": "Weather )"
            R"(in a city", "parameters": {"type": "object", "properties": {"city": {"type": )"
            R"("string"}}, "required": ["city"]}}})"
            "\n</tools>\n\nFor each function call, return a json object with function name "
            "and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
            "<function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n"
            "<|im_start|>user\nWeather in Paris?<|im_end|>\n"
            "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
            "{\"city\": \"Paris\"}}\n</tool_call><|im_end|>\n"
            "<|im_start|>user\n<tool_response>\n18C\n</tool_response><|im_end|>\n"
            "<|im_start|>assistant\n");
  // Arguments that are not JSON reach the template as the text they are.
  call.tool_calls[0].arguments = "city=Paris";
  EXPECT_NE(ChatTemplate(kQwen25).render({{"user", "Hi"}, call}, o).find("\"city=Paris\""),
            std::string::npos);
  o.tools = "[{";
  try {
    ChatTemplate(kQwen25).render({{"user", "Hi"}}, o);
    ADD_FAILURE() << "bad tools JSON rendered";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not valid JSON"), std::string::npos) << e.what();
  }
}

TEST(ToolCalls, HermesBlocksAndJsonReplies) {
  auto r = parse_tool_calls(
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\", \"days\": 2}}\n</tool_call>\n<tool_call>{\"name\": \"now\", "
      "\"arguments\": {}}</tool_call>");
  EXPECT_EQ(r.content, "Let me check.");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].id, "call_0");
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[0].arguments, R"({"city": "Paris", "days": 2})");  // as the model wrote it
  EXPECT_EQ(r.calls[1].id, "call_1");
  EXPECT_EQ(r.calls[1].arguments, "{}");
  // Llama 3.1's JSON call, "parameters" for the arguments.
  r = parse_tool_calls(R"( {"name": "f", "parameters": {"x": 1}} )");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, R"({"x": 1})");
  EXPECT_TRUE(r.content.empty());
  // Arguments before the name: a call still, its arguments re-written compact.
  r = parse_tool_calls(R"(<tool_call>{"arguments": {"x": 1}, "name": "f"}</tool_call>)");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, R"({"x":1})");
  // A call cut inside its arguments (max_tokens) is a call with the arguments it got to.
  r = parse_tool_calls("<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": [1, ");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, "{\"a\": [1, ");
  EXPECT_TRUE(r.content.empty());
  // A block cut off by max_tokens still counts when its JSON is whole; one that is not JSON, or
  // JSON without a name, stays text.
  r = parse_tool_calls("<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, R"({"a": 1})");  // arguments given as a JSON string
  r = parse_tool_calls("<tool_call>not json</tool_call> and {\"x\": 1}");
  EXPECT_TRUE(r.calls.empty());
  EXPECT_EQ(r.content, "<tool_call>not json</tool_call> and {\"x\": 1}");
  EXPECT_TRUE(parse_tool_calls("plain text").calls.empty());
}

// A reply pushed in pieces of every size gives the content and calls parse_tool_calls gives the
// whole reply: tags and whitespace split anywhere, blocks that are not calls, a block cut off,
// a JSON reply, and text that only looks like a tag.
TEST(ToolCalls, StreamedPiecesGiveWhatTheWholeReplyGives) {
  const std::vector<std::string> replies = {
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\"}}\n</tool_call>\n<tool_call>{\"name\": \"now\", \"arguments\": {}}</tool_call>",
      "  \n<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>\n\n Done.  \n",
      "a <tool_call>not json</tool_call> b  <tool_call>{\"name\": \"g\", \"parameters\": "
      "{\"x\": [1, 2]}}</tool_call>  c ",
      "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}",
      "<tool_call>{\"name\": \"f\", \"argu",
      "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": [1, {\"b\"",
      "<tool_call> {\"name\":\"f\",\"arguments\":{\"s\": \"}{ </tool \\\" ]\"}} </tool_call> ok",
      "<tool_call>{\"name\": \"f\", \"arguments\": {\"s\": \"</tool_call>\"}}</tool_call>",
      "<tool_call>{\"name\": \"f\", \"arguments\": {}, \"x\": 1}</tool_call>",
      "<tool_call>{\"arguments\": {\"x\": 1}, \"name\": \"f\"}</tool_call>",
      " {\"name\": \"f\", \"parameters\": {\"x\": 1}} ",
      "{\"x\": 1} and <tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>",
      "x < y, <tool <tool_cal <tool_call",
      "<tool_call><tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call></tool_call>",
      "plain text with\ttabs\n\nand lines\n",
      " \n\t ",
      "",
  };
  for (const std::string& reply : replies) {
    const ToolCallReply want = parse_tool_calls(reply);
    for (size_t size : {size_t(1), size_t(2), size_t(3), size_t(5), size_t(11), reply.size() + 1}) {
      ToolCallStream stream;
      ToolCallReply got;
      auto take = [&](const ToolCallPieces& out) {
        got.content += out.content;
        for (const ToolCallDelta& d : out.calls) {
          if (!d.id.empty()) {
            ASSERT_EQ(d.index, got.calls.size());
            got.calls.push_back({d.id, d.name, ""});
          }
          ASSERT_LT(d.index, got.calls.size());
          got.calls[d.index].arguments += d.arguments;
        }
      };
      for (size_t at = 0; at < reply.size(); at += size) take(stream.push(reply.substr(at, size)));
      take(stream.finish());
      EXPECT_EQ(got.content, want.content) << "pieces of " << size << " of: " << reply;
      ASSERT_EQ(got.calls.size(), want.calls.size()) << "pieces of " << size << " of: " << reply;
      for (size_t k = 0; k < want.calls.size(); ++k) {
        EXPECT_EQ(got.calls[k].id, want.calls[k].id);
        EXPECT_EQ(got.calls[k].name, want.calls[k].name);
        EXPECT_EQ(got.calls[k].arguments, want.calls[k].arguments);
      }
    }
  }
}

// Text goes out as it comes; a call's name as soon as its head is read, then its arguments as
// they come, not at the end.
TEST(ToolCalls, StreamedTextAndCallsGoOutAsTheyComplete) {
  ToolCallStream s;
  EXPECT_EQ(s.push("Let me").content, "Let me");
  EXPECT_EQ(s.push(" check. ").content, " check.");  // the space waits for what follows it
  EXPECT_EQ(s.push("<tool_").content, "");
  EXPECT_TRUE(s.push("call>{\"name\": \"f\", \"arguments\": ").calls.empty());
  ToolCallPieces out = s.push("{\"a\": ");
  ASSERT_EQ(out.calls.size(), 1u);
  EXPECT_EQ(out.calls[0].id, "call_0");
  EXPECT_EQ(out.calls[0].name, "f");
  EXPECT_EQ(out.calls[0].arguments, "{\"a\": ");
  out = s.push("\"x</tool");  // may be the closing tag: held
  ASSERT_EQ(out.calls.size(), 1u);
  EXPECT_EQ(out.calls[0].index, 0u);
  EXPECT_TRUE(out.calls[0].id.empty());
  EXPECT_EQ(out.calls[0].arguments, "\"x");
  out = s.push(" y\"}}</tool_call>");
  ASSERT_EQ(out.calls.size(), 1u);
  EXPECT_EQ(out.calls[0].arguments, "</tool y\"}");
  EXPECT_EQ(s.push("\nOK").content, " \nOK");
  out = s.finish();
  EXPECT_TRUE(out.content.empty() && out.calls.empty());
  // A reply that starts as JSON may be one call: held to the end.
  ToolCallStream json_reply;
  EXPECT_EQ(json_reply.push("{\"name\": \"f\",").content, "");
  EXPECT_TRUE(json_reply.push(" \"parameters\": {}}").calls.empty());
  EXPECT_EQ(json_reply.finish().calls.size(), 1u);
}

TEST(ChatTemplateFamilies, Qwen25) {
  EXPECT_EQ(render(kQwen25, kChat, false), kChatMLPrompt);
  EXPECT_EQ(render(kQwen25, kChat, true), std::string(kChatMLPrompt) + "<|im_start|>assistant\n");
  // No system message: the template's default one.
  EXPECT_EQ(render(kQwen25, {{"user", "Hi"}, {"tool", "42"}}, false),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
            "assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>user\n<tool_response>\n42\n</tool_response><|im_end|>\n");
}

const char* kQwen3 = R"J({%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0].role == 'system' %}
        {{- messages[0].content + '\n\n' }}
    {%- endif %}
    {{- "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0].role == 'system' %}
        {{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" and message.content is string and not(message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}
        {%- set ns.multi_step_tool = false %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- if message.content is string %}
        {%- set content = message.content %}
    {%- else %}
        {%- set content = '' %}
    {%- endif %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\n' + content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {%- set reasoning_content = '' %}
        {%- if message.reasoning_content is string %}
            {%- set reasoning_content = message.reasoning_content %}
        {%- else %}
            {%- if '</think>' in content %}
                {%- set reasoning_content = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') %}
                {%- set content = content.split('</think>')[-1].lstrip('\n') %}
            {%- endif %}
        {%- endif %}
        {%- if loop.index0 > ns.last_query_index %}
            {%- if loop.last or (not loop.last and reasoning_content) %}
                {{- '<|im_start|>' + message.role + '\n<think>\n' + reasoning_content.strip('\n') + '\n</think>\n\n' + content.lstrip('\n') }}
            {%- else %}
                {{- '<|im_start|>' + message.role + '\n' + content }}
            {%- endif %}
        {%- else %}
            {{- '<|im_start|>' + message.role + '\n' + content }}
        {%- endif %}
        {%- if message.tool_calls %}
            {%- for tool_call in message.tool_calls %}
                {%- if (loop.first and content) or (not loop.first) %}
                    {{- '\n' }}
                {%- endif %}
                {%- if tool_call.function %}
                    {%- set tool_call = tool_call.function %}
                {%- endif %}
                {{- '<tool_call>\n{"name": "' }}
                {{- tool_call.name }}
                {{- '", "arguments": ' }}
                {%- if tool_call.arguments is string %}
                    {{- tool_call.arguments }}
                {%- else %}
                    {{- tool_call.arguments | tojson }}
                {%- endif %}
                {{- '}\n</tool_call>' }}
            {%- endfor %}
        {%- endif %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if loop.first or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\n\n</think>\n\n' }}
    {%- endif %}
{%- endif %})J";

TEST(ChatTemplateFamilies, Qwen3) {
  EXPECT_EQ(render(kQwen3, kChat, false), kChatMLPrompt);
  EXPECT_EQ(render(kQwen3, kChat, true), std::string(kChatMLPrompt) + "<|im_start|>assistant\n");
  // Thinking after the last user turn is kept, reformatted; before it, dropped.
  const std::string think = "<think>\nhmm\n</think>\n\nHello!";
  EXPECT_EQ(render(kQwen3, {{"user", "Hi"}, {"assistant", think}}, false),
            "<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n<think>\nhmm\n</think>\n\nHello!<|im_end|>\n");
  EXPECT_EQ(render(kQwen3, {{"user", "Hi"}, {"assistant", think}, {"user", "Ok"}}, true),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"
            "<|im_start|>user\nOk<|im_end|>\n<|im_start|>assistant\n");
}

const char* kLlama3 =
    R"J({% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>

'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>

' }}{% endif %})J";

TEST(ChatTemplateFamilies, Llama3) {
  const std::string want =
      "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are helpful.<|eot_id|>"
      "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
      "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
      "<|start_header_id|>user<|end_header_id|>\n\nHow are you?<|eot_id|>";
  EXPECT_EQ(render(kLlama3, kChat, false, "<|begin_of_text|>"), want);
  EXPECT_EQ(render(kLlama3, kChat, true, "<|begin_of_text|>"),
            want + "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

const char* kLlama31 = R"J({{- bos_token }}
{%- if custom_tools is defined %}
    {%- set tools = custom_tools %}
{%- endif %}
{%- if not tools_in_user_message is defined %}
    {%- set tools_in_user_message = true %}
{%- endif %}
{%- if not date_string is defined %}
    {%- set date_string = "26 Jul 2024" %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}

{#- This block extracts the system message, so we can slot it into the right place. #}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}

{#- System message + builtin tools #}
{{- "<|start_header_id|>system<|end_header_id|>\n\n" }}
{%- if builtin_tools is defined or tools is not none %}
    {{- "Environment: ipython\n" }}
{%- endif %}
{%- if builtin_tools is defined %}
    {{- "Tools: " + builtin_tools | reject('equalto', 'code_interpreter') | join(", ") + "\n\n"}}
{%- endif %}
{{- "Cutting Knowledge Date: December 2023\n" }}
{{- "Today Date: " + date_string + "\n\n" }}
{%- if tools is not none and not tools_in_user_message %}
    {{- "You have access to the following functions. To call a function, please respond with JSON for a function call." }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {{- "Do not use variables.\n\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
{%- endif %}
{{- system_message }}
{{- "<|eot_id|>" }}

{#- Custom tools are passed in a user message with some extra guidance #}
{%- if tools_in_user_message and not tools is none %}
    {#- Extract the first user message so we can plug it in here #}
    {%- if messages | length != 0 %}
        {%- set first_user_message = messages[0]['content']|trim %}
        {%- set messages = messages[1:] %}
    {%- else %}
        {{- raise_exception("Cannot put tools in the first user message when there's no first user message!") }}
{%- endif %}
    {{- '<|start_header_id|>user<|end_header_id|>\n\n' -}}
    {{- "Given the following functions, please respond with a JSON for a function call " }}
    {{- "with its proper arguments that best answers the given prompt.\n\n" }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {{- "Do not use variables.\n\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
    {{- first_user_message + "<|eot_id|>"}}
{%- endif %}

{%- for message in messages %}
    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}
        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' }}
    {%- elif 'tool_calls' in message %}
        {%- if not message.tool_calls|length == 1 %}
            {{- raise_exception("This model only supports single tool-calls at once!") }}
        {%- endif %}
        {%- set tool_call = message.tool_calls[0].function %}
        {%- if builtin_tools is defined and tool_call.name in builtin_tools %}
            {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
            {{- "<|python_tag|>" + tool_call.name + ".call(" }}
            {%- for arg_name, arg_val in tool_call.arguments | items %}
                {{- arg_name + '="' + arg_val + '"' }}
                {%- if not loop.last %}
                    {{- ", " }}
                {%- endif %}
                {%- endfor %}
            {{- ")" }}
        {%- else  %}
            {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
            {{- '{"name": "' + tool_call.name + '", ' }}
            {{- '"parameters": ' }}
            {{- tool_call.arguments | tojson }}
            {{- "}" }}
        {%- endif %}
        {%- if builtin_tools is defined %}
            {#- This means we're in ipython mode #}
            {{- "<|eom_id|>" }}
        {%- else %}
            {{- "<|eot_id|>" }}
        {%- endif %}
    {%- elif message.role == "tool" or message.role == "ipython" %}
        {{- "<|start_header_id|>ipython<|end_header_id|>\n\n" }}
        {%- if message.content is mapping or message.content is iterable %}
            {{- message.content | tojson }}
        {%- else %}
            {{- message.content }}
        {%- endif %}
        {{- "<|eot_id|>" }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %}
)J";

TEST(ChatTemplateFamilies, Llama31) {
  const std::string want =
      "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
      "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n"
      "You are helpful.<|eot_id|>"
      "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
      "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
      "<|start_header_id|>user<|end_header_id|>\n\nHow are you?<|eot_id|>";
  EXPECT_EQ(render(kLlama31, kChat, false, "<|begin_of_text|>"), want);
  EXPECT_EQ(render(kLlama31, kChat, true, "<|begin_of_text|>"),
            want + "<|start_header_id|>assistant<|end_header_id|>\n\n");
  // A tool result is JSON-quoted: a string is iterable, as in Jinja.
  EXPECT_NE(render(kLlama31, {{"user", "Hi"}, {"tool", "4"}}, false, "")
                .find("<|start_header_id|>ipython<|end_header_id|>\n\n\"4\"<|eot_id|>"),
            std::string::npos);
}

const char* kLlama2 =
    R"J({% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\n' + system_message + '\n<</SYS>>\n\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %})J";

// A forced call starts the reply the way the template tells the model to write calls, and a
// reply that finishes it is that call: by name, or with the name left to the model.
TEST(ToolCalls, ForcedCallsStartInTheTemplatesForm) {
  EXPECT_EQ(tool_call_format(kQwen25), ToolCallFormat::hermes);
  EXPECT_EQ(tool_call_format(kQwen3), ToolCallFormat::hermes);
  EXPECT_EQ(tool_call_format(kLlama31), ToolCallFormat::json);
  EXPECT_EQ(tool_call_format(kLlama3), ToolCallFormat::none);
  EXPECT_EQ(tool_call_format(kChatML), ToolCallFormat::none);
  const std::string named = call_reply_start(ToolCallFormat::hermes, "get_weather");
  EXPECT_EQ(named, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ");
  ToolCallReply r = parse_tool_calls(named + "{\"city\": \"Paris\"}}\n</tool_call>");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[0].arguments, R"({"city": "Paris"})");
  const std::string any = call_reply_start(ToolCallFormat::hermes, "");
  EXPECT_EQ(any, "<tool_call>\n{\"name\": \"");
  r = parse_tool_calls(any + "now\", \"arguments\": {}}</tool_call>");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "now");
  const std::string llama = call_reply_start(ToolCallFormat::json, "say \"hi\"");
  EXPECT_EQ(llama, R"({"name": "say \"hi\"", "parameters": )");
  r = parse_tool_calls(llama + R"({"a": 1}})");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "say \"hi\"");
  EXPECT_EQ(r.calls[0].arguments, R"({"a": 1})");
  EXPECT_THROW(call_reply_start(ToolCallFormat::none, "f"), Error);
}

TEST(ChatTemplateFamilies, Llama2) {
  const std::string want =
      "<s>[INST] <<SYS>>\nYou are helpful.\n<</SYS>>\n\nHi [/INST] Hello! </s>"
      "<s>[INST] How are you? [/INST]";
  EXPECT_EQ(render(kLlama2, kChat, false), want);
  EXPECT_EQ(render(kLlama2, kChat, true), want);  // no generation prompt in llama 2
  EXPECT_EQ(render(kLlama2, {{"user", "Hi"}}), "<s>[INST] Hi [/INST]");
}

const char* kZephyr =
    "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\\n' + "
    "message['content'] + eos_token }}\n{% elif message['role'] == 'system' %}\n{{ "
    "'<|system|>\\n' + message['content'] + eos_token }}\n{% elif message['role'] == "
    "'assistant' %}\n{{ '<|assistant|>\\n'  + message['content'] + eos_token }}\n{% endif %}\n{% "
    "if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% endfor "
    "%}";

TEST(ChatTemplateFamilies, ZephyrTinyLlama) {
  const std::string want =
      "<|system|>\nYou are helpful.</s>\n<|user|>\nHi</s>\n<|assistant|>\nHello!</s>\n"
      "<|user|>\nHow are you?</s>\n";
  EXPECT_EQ(render(kZephyr, kChat, false), want);
  EXPECT_EQ(render(kZephyr, kChat, true), want + "<|assistant|>\n");
}

const char* kMistralV1 =
    R"J({{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %})J";

TEST(ChatTemplateFamilies, MistralV1) {
  const std::vector<ChatMessage> chat(kChat.begin() + 1, kChat.end());
  EXPECT_EQ(render(kMistralV1, chat, false),
            "<s>[INST] Hi [/INST]Hello!</s>[INST] How are you? [/INST]");
  EXPECT_EQ(render(kMistralV1, chat, true), render(kMistralV1, chat, false));
  // A system message breaks the alternation: the template's own error.
  const std::string err = render_error(kMistralV1, kChat);
  EXPECT_NE(err.find("raise_exception: Conversation roles must alternate "
                     "user/assistant/user/assistant/..."),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("1:"), std::string::npos) << err;
}

// Mistral v0.3's plain-chat part: the system message joins the last user turn.
const char* kMistralV3 = R"J({%- if messages[0]["role"] == "system" %}
    {%- set system_message = messages[0]["content"] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}
{%- set user_messages = loop_messages | selectattr("role", "equalto", "user") | list %}

{#- This block checks for alternating user/assistant messages, skipping tool calling messages #}
{%- set ns = namespace() %}
{%- set ns.index = 0 %}
{%- for message in loop_messages %}
    {%- if not (message.role == "tool" or message.role == "tool_results" or (message.tool_calls is defined and message.tool_calls is not none)) %}
        {%- if (message["role"] == "user") != (ns.index % 2 == 0) %}
            {{- raise_exception("After the optional system message, conversation roles must alternate user/assistant/user/assistant/...") }}
        {%- endif %}
        {%- set ns.index = ns.index + 1 %}
    {%- endif %}
{%- endfor %}

{{- bos_token }}
{%- for message in loop_messages %}
    {%- if message["role"] == "user" %}
        {%- if tools is not none and (message == user_messages[-1]) %}
            {{- "[AVAILABLE_TOOLS] [" }}
            {%- for tool in tools %}
                {{- tool | tojson }}
                {%- if not loop.last %}
                    {{- ", " }}
                {%- endif %}
            {%- endfor %}
            {{- "][/AVAILABLE_TOOLS]" }}
        {%- endif %}
        {%- if loop.last and system_message is defined %}
            {{- "[INST] " + system_message + "\n\n" + message["content"] + "[/INST]" }}
        {%- else %}
            {{- "[INST] " + message["content"] + "[/INST]" }}
        {%- endif %}
    {%- elif message["role"] == "assistant" %}
        {{- " " + message["content"]|trim + eos_token}}
    {%- else %}
        {{- raise_exception("Only user and assistant roles are supported, with the exception of an initial optional system message!") }}
    {%- endif %}
{%- endfor %}
)J";

TEST(ChatTemplateFamilies, MistralV3) {
  EXPECT_EQ(render(kMistralV3, kChat, true),
            "<s>[INST] Hi[/INST] Hello!</s>[INST] You are helpful.\n\nHow are you?[/INST]");
  EXPECT_NE(render_error(kMistralV3, {{"user", "a"}, {"user", "b"}})
                .find("raise_exception: After the optional system message, conversation roles "
                      "must alternate"),
            std::string::npos);
}

const char* kGemma3 = R"J({{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- if messages[0]['content'] is string -%}
        {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}
    {%- else -%}
        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' -%}
    {%- endif -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}
    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- elif message['content'] is iterable -%}
        {%- for item in message['content'] -%}
            {%- if item['type'] == 'image' -%}
                {{ '<start_of_image>' }}
            {%- elif item['type'] == 'text' -%}
                {{ item['text'] | trim }}
            {%- endif -%}
        {%- endfor -%}
    {%- else -%}
        {{ raise_exception("Invalid content type") }}
    {%- endif -%}
    {{ '<end_of_turn>
' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model\n'}}
{%- endif -%}
)J";

TEST(ChatTemplateFamilies, Gemma) {
  const std::string want =
      "<bos><start_of_turn>user\nYou are helpful.\n\nHi<end_of_turn>\n"
      "<start_of_turn>model\nHello!<end_of_turn>\n"
      "<start_of_turn>user\nHow are you?<end_of_turn>\n";
  EXPECT_EQ(render(kGemma3, kChat, false, "<bos>"), want);
  EXPECT_EQ(render(kGemma3, kChat, true, "<bos>"), want + "<start_of_turn>model\n");
}

TEST(ChatTemplateExpr, Arithmetic) {
  EXPECT_EQ(render("{{ 1 + 2 * 3 }}|{{ (1 + 2) * 3 }}|{{ 2 ** 10 }}|{{ -3 + 1 }}"), "7|9|1024|-2");
  EXPECT_EQ(render("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 1.5 * 2 }}"),
            "3 -4 1 2 3.5 3.0");
  EXPECT_EQ(render("{{ 'a' ~ 1 ~ none ~ true }}|{{ 'ab' * 3 }}|{{ [1] + [2] }}"),
            "a1NoneTrue|ababab|[1, 2]");
  EXPECT_NE(render_error("{{ 1 // 0 }}").find("division by zero"), std::string::npos);
  EXPECT_NE(render_error("{{ 'a' + 1 }}").find("unsupported operand types for +"),
            std::string::npos);
}

TEST(ChatTemplateExpr, LogicAndComparison) {
  EXPECT_EQ(render("{{ 1 < 2 and 'x' in 'xyz' and 3 not in [1, 2] }}"), "True");
  EXPECT_EQ(render("{{ not 1 == 1 or 'b' > 'a' }}|{{ 0 or 'z' }}|{{ 1 and 0 }}|{{ 1 != 1.0 }}"),
            "True|z|0|False");
  EXPECT_EQ(
      render("{{ 'k' in {'k': 1} }}{{ 'yes' if x is undefined else 'no' }}[{{ 'a' if false }}]"),
      "Trueyes[]");
  EXPECT_EQ(render("{{ 'model' if messages[0].role == 'assistant' else messages[0].role }}",
                   {{"assistant", ""}}),
            "model");
}

TEST(ChatTemplateExpr, LiteralsAndAccess) {
  EXPECT_EQ(render("{{ [1, 'a', none, True, 1.5, {'k': 'v'}] }}"),
            "[1, 'a', None, True, 1.5, {'k': 'v'}]");
  EXPECT_EQ(render(R"({{ 'a\tb\n' }}{{ "\u00e9\x41" }}{{ "it's" ~ 'q"' }})"),
            "a\tb\n\xC3\xA9"
            "Ait'sq\"");
  EXPECT_EQ(render("{{ [1,2,3,4][::-1] }}{{ 'hello'[1:3] }}{{ [1,2,3][1:] }}{{ [1,2,3][-1] }}"),
            "[4, 3, 2, 1]el[2, 3]3");
  EXPECT_EQ(render("{{ 'abc'[::-1] }}{{ [1,2,3,4,5][1::2] }}{{ [1,2,3][5] }}"), "cba[2, 4]");
  EXPECT_EQ(render("{{ messages[0].role }}:{{ messages[0]['content'] }}:{{ messages[1].role }}",
                   {{"user", "hi"}}),
            "user:hi:");
  // Undefined renders empty and its attributes stay undefined.
  EXPECT_EQ(render("[{{ x }}{{ x.y.z }}{{ x['k'] }}]{{ x.y is defined }}{{ tools is none }}"),
            "[]FalseFalse");
}

TEST(ChatTemplateExpr, Filters) {
  EXPECT_EQ(
      render("{{ '  x  ' | trim }}|{{ 'ab' | upper }}|{{ 'AB' | lower }}|{{ [1,2,3] | length }}"),
      "x|AB|ab|3");
  EXPECT_EQ(render("{{ [1,2,3] | first }}{{ [1,2,3] | last }}|{{ ['a','b'] | join(', ') }}"),
            "13|a, b");
  EXPECT_EQ(render("{{ x | default('d') }}|{{ '' | default('d', true) }}|{{ 42 | string ~ '!' }}"),
            "d|d|42!");
  EXPECT_EQ(render("{{ '12' | int + 1 }}|{{ 'ab' | list }}|{{ 'aXbX' | replace('X', '-') }}"),
            "13|['a', 'b']|a-b-");
  EXPECT_EQ(
      render("{{ 'hello World' | capitalize }}|{{ 'é' | length }}|{{ \"it's 3rd\" | title }}"),
      "Hello world|1|It'S 3Rd");
  EXPECT_EQ(render("{% for k, v in {'a': 1, 'b': 2} | items %}{{ k }}={{ v }};{% endfor %}"),
            "a=1;b=2;");
  EXPECT_EQ(render("{{ {'b': [1, 'x\"'], 'a': none, 'u': 'é'} | tojson }}"),
            "{\"b\": [1, \"x\\\"\"], \"a\": null, \"u\": \"é\"}");
  EXPECT_EQ(render("{{ {'a': [1, 2], 'b': {}} | tojson(indent=2) }}"),
            "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": {}\n}");
  EXPECT_EQ(
      render(
          "{{ [{'r': 'u'}, {'r': 'a'}, {'r': 'u'}] | selectattr('r', 'equalto', 'u') | list | "
          "length }}"
          "{{ [1, 2, 3] | reject('odd') | list }}{{ [{'n': 'x'}] | map(attribute='n') | join }}"),
      "2[2]x");
  EXPECT_NE(render_error("{{ 1 | nosuch }}").find("unknown filter 'nosuch'"), std::string::npos);
}

TEST(ChatTemplateExpr, Methods) {
  EXPECT_EQ(render("{{ '  x '.strip() }}|{{ 'xxaxx'.lstrip('x') }}|{{ 'xxaxx'.rstrip('x') }}"),
            "x|axx|xxa");
  EXPECT_EQ(render("{{ 'a,b,,c'.split(',') }}{{ ' a  b '.split() }}{{ 'a b c'.split(' ', 1) }}"),
            "['a', 'b', '', 'c']['a', 'b']['a', 'b c']");
  EXPECT_EQ(render("{{ ' a b c '.split(none, 1) }}{{ (1,) }}{{ (1, 'a') }}"),
            "['a', 'b c '](1,)(1, 'a')");
  EXPECT_EQ(
      render("{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith('bc') }}{{ 'abc'.startswith('c') }}"),
      "TrueTrueFalse");
  EXPECT_EQ(render("{{ 'abc'.upper() }}{{ 'ABC'.lower() }}{{ 'a-b'.replace('-', '+') }}{{ 'hi "
                   "there'.title() }}"),
            "ABCabca+bHi There");
  EXPECT_EQ(
      render("{% set d = {'a': 1, 'b': 2} %}{{ d.get('a') }}{{ d.get('z', 5) }}{{ d.get('z') }}"
             "{{ d.keys() }}{{ d.values() }}{{ d.items() }}"),
      "15None['a', 'b'][1, 2][('a', 1), ('b', 2)]");
  EXPECT_NE(render_error("{{ 'a'.nosuch() }}").find("unknown method 'nosuch' on a string"),
            std::string::npos);
}

TEST(ChatTemplateExpr, Tests) {
  EXPECT_EQ(
      render("{{ 1 is number }}{{ 'a' is string }}{{ none is none }}{{ {} is mapping }}"
             "{{ [] is iterable }}{{ 'a' is sequence }}{{ true is true }}{{ false is false }}"),
      "TrueTrueTrueTrueTrueTrueTrueTrue");
  EXPECT_EQ(render("{{ x is defined }}{{ x is undefined }}{{ 1 is not string }}{{ 1 is true }}"
                   "{{ 4 is divisibleby 2 }}{{ 3 is odd }}{{ 'a' is in 'cat' }}"),
            "FalseTrueTrueFalseTrueTrueTrue");
}

TEST(ChatTemplateStmt, Loops) {
  EXPECT_EQ(
      render("{% for x in ['a','b','c'] %}{{ x }}{{ loop.index }}{{ loop.index0 }}"
             "{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }} {% endfor %}"),
      "a10TrueFalse33 b21FalseFalse32 c32FalseTrue31 ");
  EXPECT_EQ(render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for x in range(6) if x is odd %}{{ x }}{% endfor %}{{ range(1, 10, 3) }}"),
            "135[1, 4, 7]");
  EXPECT_EQ(render("{% for i in range(10) %}{% if i == 3 %}{% break %}{% endif %}"
                   "{% if i == 1 %}{% continue %}{% endif %}{{ i }}{% endfor %}"),
            "02");
  EXPECT_EQ(render("{% for a in [1, 2] %}{% for b in 'xy' %}{{ loop.index }}{{ b }}{% endfor %}"
                   "{{ loop.index }};{% endfor %}"),
            "1x2y1;1x2y2;");
}

TEST(ChatTemplateStmt, SetScopesAndNamespace) {
  // A set inside a loop stays in that iteration, as in Jinja; a namespace carries out.
  EXPECT_EQ(render("{% set x = 1 %}{% for i in [5, 6] %}{% set x = i %}{{ x }}{% endfor %}{{ x }}"),
            "561");
  EXPECT_EQ(
      render("{% set ns = namespace(n=0, s='') %}{% for i in range(5) %}"
             "{% set ns.n = ns.n + i %}{% set ns.s = ns.s ~ i %}{% endfor %}{{ ns.n }} {{ ns.s }}"),
      "10 01234");
  EXPECT_EQ(render("{% set x %}hi {{ 1 }}{% endset %}[{{ x }}]"), "[hi 1]");
  EXPECT_NE(render_error("{% set d = {} %}{% set d.a = 1 %}").find("only on a namespace"),
            std::string::npos);
  EXPECT_EQ(render("{{ strftime_now('%Y-%m-%d') | length }}"), "10");
}

TEST(ChatTemplateStmt, WhitespaceControl) {
  EXPECT_EQ(render("a  {{- 'b' -}}  c"), "abc");
  EXPECT_EQ(render("a \n {%- if true -%} \n x \n {%- endif -%} \n b"), "axb");
  EXPECT_EQ(render("a {#- comment -#} b{# another #}c"), "abc");
  // trim_blocks and lstrip_blocks, as transformers renders templates.
  EXPECT_EQ(render("x\n  {% if true %}\n  y\n  {% endif %}\nz"), "x\n  y\nz");
  EXPECT_EQ(render("  {%+ if true %}x{% endif +%}\n"), "  x\n");
  EXPECT_EQ(render("{{ 'a' }}\n{{ 'b' }}"), "a\nb");  // trim_blocks spares {{ }}
  EXPECT_EQ(render("a {% if true %}b{% endif %} c"), "a b c");
}

TEST(ChatTemplateErrors, SyntaxErrorsNameLineAndColumn) {
  auto parse_error = [](const std::string& src) {
    try {
      ChatTemplate t(src);
    } catch (const rlx::Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  std::string e = parse_error("{{ 1 + }}");
  EXPECT_NE(e.find("1:8"), std::string::npos) << e;
  EXPECT_NE(e.find("unexpected '}}'"), std::string::npos) << e;
  e = parse_error("line1\n{% if x %}\n  {% endfor %}");
  EXPECT_NE(e.find("3:6: unknown or unsupported tag 'endfor'"), std::string::npos) << e;
  e = parse_error("ab\n{% if x %}abc");
  EXPECT_NE(e.find("expected '{% endif %}'"), std::string::npos) << e;
  e = parse_error("{{ 'abc }}");
  EXPECT_NE(e.find("1:4: unterminated string"), std::string::npos) << e;
  e = parse_error("x\n {{ y");
  EXPECT_NE(e.find("2:2: unclosed tag"), std::string::npos) << e;
  e = parse_error("{# never closed");
  EXPECT_NE(e.find("1:1: unclosed comment"), std::string::npos) << e;
  e = parse_error("{% macro f() %}{% endmacro %}");
  EXPECT_NE(e.find("unsupported tag 'macro'"), std::string::npos) << e;
  e = parse_error("{{ a b }}");
  EXPECT_NE(e.find("1:6"), std::string::npos) << e;
  e = parse_error("{{ $ }}");
  EXPECT_NE(e.find("1:4: unexpected character '$'"), std::string::npos) << e;
}

TEST(ChatTemplateErrors, RaiseException) {
  const std::string e = render_error("ok\n  {{ raise_exception('Bad role: ' + messages[0].role) }}",
                                     {{"robot", "x"}});
  EXPECT_NE(e.find("raise_exception: Bad role: robot"), std::string::npos) << e;
  EXPECT_NE(e.find("chat template 2:"), std::string::npos) << e;
}

TEST(ChatTemplateHostile, NestingIsCappedAtParse) {
  const std::string deep = std::string(100000, '(') + "1" + std::string(100000, ')');
  EXPECT_THROW(ChatTemplate("{{ " + deep + " }}"), rlx::Error);
  std::string chain = "{{ 1";
  for (int i = 0; i < 100000; ++i) chain += " + 1";
  EXPECT_THROW(ChatTemplate(chain + " }}"), rlx::Error);
  std::string ifs;
  for (int i = 0; i < 100000; ++i) ifs += "{% if true %}";
  EXPECT_THROW(ChatTemplate{ifs}, rlx::Error);
  std::string nots = "{{ ";
  for (int i = 0; i < 100000; ++i) nots += "not ";
  EXPECT_THROW(ChatTemplate(nots + "1 }}"), rlx::Error);
  EXPECT_THROW(ChatTemplate(std::string(2 << 20, 'x')), rlx::Error);
}

TEST(ChatTemplateHostile, RenderCaps) {
  auto has = [](const std::string& e, const char* what) {
    return e.find(what) != std::string::npos;
  };
  std::string e = render_error("{% for i in range(100000) %}{{ 'x' * 100 }}{% endfor %}");
  EXPECT_TRUE(has(e, "output over")) << e;
  e = render_error("{% for i in range(2000) %}{% for j in range(2000) %}{% endfor %}{% endfor %}");
  EXPECT_TRUE(has(e, "iterations")) << e;
  e = render_error(
      "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% "
      "endfor %}");
  EXPECT_TRUE(has(e, "cap")) << e;
  e = render_error(
      "{% set ns = namespace(l=[]) %}{% for i in range(1000) %}{% set ns.l = [ns.l] %}{% endfor "
      "%}");
  EXPECT_TRUE(has(e, "nested too deeply")) << e;
  e = render_error("{% set ns = namespace() %}{% set ns.me = [ns] %}");
  EXPECT_TRUE(has(e, "namespace cannot hold a namespace")) << e;
  e = render_error("{{ range(1000000000000) | length }}");
  EXPECT_TRUE(has(e, "range of more than")) << e;
  e = render_error("{{ 'ab' * 1000000000000 }}");
  EXPECT_TRUE(has(e, "cap")) << e;
  e = render_error("{{ 2 ** 200 }}");
  EXPECT_TRUE(has(e, "overflow")) << e;
}

}  // namespace
}  // namespace rlx::llm
