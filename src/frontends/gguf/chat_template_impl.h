// The chat template interpreter's pieces: values (chat_template_value.cc), the
// lexer and parser (chat_template_lex.cc, chat_template_parse.cc), the syntax
// tree, the renderer (chat_template_eval.cc) and builtins
// (chat_template_builtins.cc).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rlx/chat_template.h"
#include "rlx/error.h"

namespace rlx::llm::chat_detail {

// Caps against hostile templates: each one fails with an error, never a crash.
inline constexpr size_t kMaxSourceBytes = 1 << 20;
inline constexpr int kMaxNesting = 128;  // syntax tree height and value nesting
inline constexpr size_t kMaxOutputBytes = 1 << 20;
inline constexpr size_t kMaxValueBytes = 1 << 20;  // one string
inline constexpr size_t kMaxListItems = 1 << 20;
inline constexpr int64_t kMaxIterations = 1 << 20;  // loop bodies, all loops together

struct Value;
struct List {
  std::vector<Value> items;
  int depth = 1;
  bool tuple = false;  // prints as (a, b)
};
// Insertion-ordered: tojson and items() keep the order a template built.
struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  int depth = 1;
  bool is_namespace = false;
  const Value* find(std::string_view key) const;
  void set(const std::string& key, Value v);
};

struct Value {
  enum class Kind : uint8_t { Undefined, None, Bool, Int, Float, String, List, Dict };
  Kind kind = Kind::Undefined;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::shared_ptr<List> list;  // shared: values are immutable except namespaces
  std::shared_ptr<Dict> dict;

  static Value none() { return make(Kind::None); }
  static Value boolean(bool v) {
    Value r = make(Kind::Bool);
    r.b = v;
    return r;
  }
  static Value integer(int64_t v) {
    Value r = make(Kind::Int);
    r.i = v;
    return r;
  }
  static Value number(double v) {
    Value r = make(Kind::Float);
    r.f = v;
    return r;
  }
  static Value str(std::string v);  // throws past kMaxValueBytes
  static Value of_list(std::vector<Value> items);
  static Value of_dict(std::vector<std::pair<std::string, Value>> items, bool ns = false);

  bool is(Kind k) const { return kind == k; }
  bool undefined() const { return kind == Kind::Undefined; }
  bool numeric() const { return kind == Kind::Bool || kind == Kind::Int || kind == Kind::Float; }
  double as_double() const { return kind == Kind::Float ? f : kind == Kind::Bool ? b : double(i); }
  int depth() const { return list ? list->depth : dict ? dict->depth : 0; }

 private:
  static Value make(Kind k) {
    Value r;
    r.kind = k;
    return r;
  }
};

bool truthy(const Value& v);
std::string to_str(const Value& v);               // Python's str(): what {{ }} prints
std::string repr(const Value& v);                 // Python's repr(), for strings inside lists
std::string to_json(const Value& v, int indent);  // indent < 0: one line
// JSON text as a value, object keys in their order; throws rlx::Error on bad JSON and past the
// nesting and size caps.
Value from_json(const std::string& text);
bool equal(const Value& a, const Value& b);
const char* kind_name(const Value& v);
// The UTF-8 characters of s (one string each).
std::vector<std::string> chars(std::string_view s);
size_t char_count(std::string_view s);

// Syntax tree.
struct Expr;
using ExprP = std::unique_ptr<Expr>;
struct Expr {
  enum class K {
    Lit,
    Name,
    Attr,
    Index,
    Slice,
    Call,
    Filter,
    Test,
    Unary,
    Binary,
    Cond,
    List,
    Dict
  };
  K k;
  int line = 0, col = 0, height = 1;
  Value lit;
  std::string name;      // variable, attribute, filter, test or operator
  bool negated = false;  // "is not"
  // Attr/Index/Slice/Call/Filter/Test: a[0] is the subject, then the arguments
  // (a Slice's missing bounds are null). Dict: key, value, key, value, ...
  std::vector<ExprP> a;
  std::vector<std::pair<std::string, ExprP>> kwargs;
};

struct Node;
using Body = std::vector<Node>;
struct Node {
  enum class K { Text, Output, If, For, Set, SetAttr, SetBlock, Break, Continue, Block };
  Node(K k, int line, int col) : k(k), line(line), col(col) {}
  K k;
  int line = 0, col = 0;
  std::string text;                  // Text; Set/SetBlock: the name; SetAttr: the attribute
  ExprP expr;                        // Output, Set and SetAttr's value, For's iterable
  ExprP target;                      // SetAttr: the namespace expression; For: the filter
  std::vector<std::string> targets;  // For's loop variables
  std::vector<std::pair<ExprP, Body>> branches;  // If: (condition, body); For/Block: (null, body)
  Body else_body;
};

struct Program {
  std::string source;
  Body body;
};

enum class Tok { Text, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, Str, Int, Float, Op, End };
struct Token {
  Tok kind;
  std::string text;
  int line, col;
};
std::vector<Token> lex(std::string_view source);  // chat_template_lex.cc
Body parse(std::string_view source);              // chat_template_parse.cc

[[noreturn]] inline void fail_at(int line, int col, const std::string& msg) {
  throw make_error("chat template ", line, ":", col, ": ", msg);
}

// Evaluated call arguments, with where the call is for errors.
struct Args {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  int line = 0, col = 0;
  // The argument at position i or named name; null when absent.
  const Value* get(size_t i, std::string_view name) const;
  [[noreturn]] void fail(const std::string& msg) const { fail_at(line, col, msg); }
};
// chat_template_builtins.cc. Each throws rlx::Error (at args' place) for an
// unknown name or bad arguments.
Value apply_filter(const std::string& name, const Value& v, const Args& args);
bool apply_test(const std::string& name, const Value& v, const Args& args);
Value call_method(const Value& obj, const std::string& name, const Args& args);
Value call_function(const std::string& name, const Args& args);
// The items a for loop visits: list items, dict keys, string characters;
// none for undefined. Throws for other values.
std::vector<Value> iterate(const Value& v, const Args& at);
std::string render(const Program& p, const std::vector<ChatMessage>& messages,
                   const ChatTemplateOptions& options);

}  // namespace rlx::llm::chat_detail
