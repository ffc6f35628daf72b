// Chat template renderer: walks the syntax tree over a stack of scopes (the
// globals, then one per loop iteration, as Jinja scopes `set` inside loops).
#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "frontends/gguf/chat_template_impl.h"

namespace rlx::llm::chat_detail {
namespace {

using K = Value::Kind;
enum class Flow { Normal, Break, Continue };

bool contains_namespace(const Value& v) {
  if (v.dict) {
    if (v.dict->is_namespace) return true;
    for (const auto& kv : v.dict->items)
      if (contains_namespace(kv.second)) return true;
  }
  if (v.list)
    for (const auto& x : v.list->items)
      if (contains_namespace(x)) return true;
  return false;
}

int64_t as_int(const Value& v) { return v.is(K::Bool) ? int64_t(v.b) : v.i; }

// Python's slice over n items: the indices visited.
std::vector<size_t> slice_indices(int64_t n, const Value* start, const Value* stop,
                                  const Value* step, const Expr& at) {
  auto num = [&](const Value* v, int64_t dflt) {
    if (!v || v->is(K::None) || v->undefined()) return dflt;
    if (!v->is(K::Int) && !v->is(K::Bool))
      fail_at(at.line, at.col, "slice bounds must be integers");
    return as_int(*v);
  };
  const int64_t st = num(step, 1);
  if (st == 0) fail_at(at.line, at.col, "slice step cannot be zero");
  auto clamp = [&](int64_t i, int64_t lo, int64_t hi) {
    if (i < 0) i += n;
    return std::clamp(i, lo, hi);
  };
  int64_t b = st > 0 ? clamp(num(start, 0), 0, n) : clamp(num(start, n - 1), -1, n - 1);
  int64_t e =
      st > 0 ? clamp(num(stop, n), 0, n)
             : (stop && !stop->is(K::None) && !stop->undefined() ? clamp(num(stop, 0), -1, n - 1)
                                                                 : -1);
  std::vector<size_t> out;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) out.push_back(size_t(i));
  return out;
}

class Renderer {
 public:
  Renderer() { frames_.emplace_back(); }
  void define(const std::string& name, Value v) { frames_.front()[name] = std::move(v); }
  std::string take() { return std::move(out_); }

  Flow exec(const Body& body) {
    for (const Node& n : body) {
      Flow f = exec(n);
      if (f != Flow::Normal) return f;
    }
    return Flow::Normal;
  }

 private:
  struct Scope {
    Renderer& r;
    explicit Scope(Renderer& r) : r(r) { r.frames_.emplace_back(); }
    ~Scope() { r.frames_.pop_back(); }
  };

  void emit(const std::string& s) {
    out_ += s;
    if (out_.size() > kMaxOutputBytes)
      throw make_error("chat template: output over the ", kMaxOutputBytes, "-byte cap");
  }

  Flow exec(const Node& n) {
    switch (n.k) {
      case Node::K::Text:
        emit(n.text);
        return Flow::Normal;
      case Node::K::Output:
        emit(to_str(eval(*n.expr)));
        return Flow::Normal;
      case Node::K::If:
        for (const auto& [cond, body] : n.branches)
          if (truthy(eval(*cond))) return exec(body);
        return exec(n.else_body);
      case Node::K::For:
        return run_for(n);
      case Node::K::Set:
        frames_.back()[n.text] = eval(*n.expr);
        return Flow::Normal;
      case Node::K::SetAttr: {
        Value ns = eval(*n.target);
        if (!ns.is(K::Dict) || !ns.dict->is_namespace)
          fail_at(n.line, n.col,
                  "cannot set attribute '" + n.text + "' on a " + kind_name(ns) +
                      " (only on a namespace)");
        Value v = eval(*n.expr);
        // Namespaces are the only mutable values: keeping them out of one
        // another rules out reference cycles.
        if (contains_namespace(v)) fail_at(n.line, n.col, "a namespace cannot hold a namespace");
        if (v.depth() + 1 > kMaxNesting) fail_at(n.line, n.col, "values nested too deeply");
        ns.dict->set(n.text, std::move(v));
        return Flow::Normal;
      }
      case Node::K::SetBlock: {
        const size_t mark = out_.size();
        exec(n.branches[0].second);
        std::string captured = out_.substr(mark);
        out_.resize(mark);
        frames_.back()[n.text] = Value::str(std::move(captured));
        return Flow::Normal;
      }
      case Node::K::Break:
        return Flow::Break;
      case Node::K::Continue:
        return Flow::Continue;
      case Node::K::Block:
        return exec(n.branches[0].second);
    }
    return Flow::Normal;
  }

  void bind(const Node& n, const Value& item) {
    if (n.targets.size() == 1) {
      frames_.back()[n.targets[0]] = item;
      return;
    }
    if (!item.is(K::List) || item.list->items.size() != n.targets.size())
      fail_at(n.line, n.col,
              "cannot unpack a " + std::string(kind_name(item)) + " into " +
                  std::to_string(n.targets.size()) + " loop variables");
    for (size_t i = 0; i < n.targets.size(); ++i)
      frames_.back()[n.targets[i]] = item.list->items[i];
  }

  Flow run_for(const Node& n) {
    Args at;
    at.line = n.line;
    at.col = n.col;
    std::vector<Value> items = iterate(eval(*n.expr), at);
    if (n.target) {
      std::vector<Value> kept;
      for (auto& item : items) {
        count_iteration(n);
        Scope s(*this);
        bind(n, item);
        if (truthy(eval(*n.target))) kept.push_back(std::move(item));
      }
      items = std::move(kept);
    }
    if (items.empty()) return exec(n.else_body);
    const int64_t len = int64_t(items.size());
    for (int64_t i = 0; i < len; ++i) {
      count_iteration(n);
      Scope s(*this);
      std::vector<std::pair<std::string, Value>> loop = {{"index", Value::integer(i + 1)},
                                                         {"index0", Value::integer(i)},
                                                         {"first", Value::boolean(i == 0)},
                                                         {"last", Value::boolean(i == len - 1)},
                                                         {"length", Value::integer(len)},
                                                         {"revindex", Value::integer(len - i)},
                                                         {"revindex0", Value::integer(len - i - 1)},
                                                         {"depth", Value::integer(1)},
                                                         {"depth0", Value::integer(0)}};
      if (i > 0) loop.emplace_back("previtem", items[i - 1]);
      if (i + 1 < len) loop.emplace_back("nextitem", items[i + 1]);
      Value lv;
      lv.kind = K::Dict;
      lv.dict = std::make_shared<Dict>();
      lv.dict->items = std::move(loop);
      frames_.back()["loop"] = std::move(lv);
      bind(n, items[i]);
      if (exec(n.branches[0].second) == Flow::Break) break;
    }
    return Flow::Normal;
  }

  void count_iteration(const Node& n) {
    if (++iterations_ > kMaxIterations)
      fail_at(n.line, n.col,
              "loops ran past the cap of " + std::to_string(kMaxIterations) + " iterations");
  }

  Value lookup(const std::string& name) const {
    for (auto it = frames_.rbegin(); it != frames_.rend(); ++it) {
      auto f = it->find(name);
      if (f != it->end()) return f->second;
    }
    return Value();
  }

  Args args(const Expr& e, size_t first) {
    Args a;
    a.line = e.line;
    a.col = e.col;
    for (size_t i = first; i < e.a.size(); ++i) a.pos.push_back(eval(*e.a[i]));
    for (const auto& [k, v] : e.kwargs) a.kw.emplace_back(k, eval(*v));
    return a;
  }

  Value eval(const Expr& e) {
    switch (e.k) {
      case Expr::K::Lit:
        return e.lit;
      case Expr::K::Name:
        return lookup(e.name);
      case Expr::K::Attr: {
        Value obj = eval(*e.a[0]);
        if (obj.is(K::Dict))
          if (const Value* v = obj.dict->find(e.name)) return *v;
        return Value();  // undefined, and attributes of it stay undefined
      }
      case Expr::K::Index:
        return index(eval(*e.a[0]), eval(*e.a[1]));
      case Expr::K::Slice: {
        Value obj = eval(*e.a[0]);
        Value b = e.a[1] ? eval(*e.a[1]) : Value(), s = e.a[2] ? eval(*e.a[2]) : Value(),
              st = e.a[3] ? eval(*e.a[3]) : Value();
        if (obj.is(K::List)) {
          std::vector<Value> out;
          for (size_t i : slice_indices(int64_t(obj.list->items.size()), &b, &s, &st, e))
            out.push_back(obj.list->items[i]);
          return Value::of_list(std::move(out));
        }
        if (obj.is(K::String)) {
          std::vector<std::string> cs = chars(obj.s);
          std::string out;
          for (size_t i : slice_indices(int64_t(cs.size()), &b, &s, &st, e)) out += cs[i];
          return Value::str(std::move(out));
        }
        if (obj.undefined()) return Value();
        fail_at(e.line, e.col, std::string("cannot slice a ") + kind_name(obj));
      }
      case Expr::K::Call: {
        const Expr& callee = *e.a[0];
        if (callee.k == Expr::K::Attr) {
          Value obj = eval(*callee.a[0]);
          return call_method(obj, callee.name, args(e, 1));
        }
        if (callee.k == Expr::K::Name) return call_function(callee.name, args(e, 1));
        fail_at(e.line, e.col, "this expression is not callable");
      }
      case Expr::K::Filter:
        return apply_filter(e.name, eval(*e.a[0]), args(e, 1));
      case Expr::K::Test: {
        Value v = eval(*e.a[0]);
        return Value::boolean(apply_test(e.name, v, args(e, 1)) != e.negated);
      }
      case Expr::K::Unary: {
        Value v = eval(*e.a[0]);
        if (e.name == "not") return Value::boolean(!truthy(v));
        if (!v.numeric())
          fail_at(e.line, e.col,
                  std::string("bad operand for unary ") + e.name + ": " + kind_name(v));
        if (e.name == "+") return v.is(K::Float) ? v : Value::integer(as_int(v));
        if (v.is(K::Float)) return Value::number(-v.f);
        if (as_int(v) == INT64_MIN) fail_at(e.line, e.col, "integer overflow");
        return Value::integer(-as_int(v));
      }
      case Expr::K::Binary: {
        if (e.name == "and" || e.name == "or") {
          Value l = eval(*e.a[0]);
          if (truthy(l) == (e.name == "or")) return l;
          return eval(*e.a[1]);
        }
        Value l = eval(*e.a[0]);
        Value r = eval(*e.a[1]);
        return binary(e, l, r);
      }
      case Expr::K::Cond:
        if (truthy(eval(*e.a[1]))) return eval(*e.a[0]);
        return e.a[2] ? eval(*e.a[2]) : Value();
      case Expr::K::List: {
        std::vector<Value> items;
        for (const auto& x : e.a) items.push_back(eval(*x));
        Value v = Value::of_list(std::move(items));
        v.list->tuple = e.name == "tuple";
        return v;
      }
      case Expr::K::Dict: {
        std::vector<std::pair<std::string, Value>> items;
        for (size_t i = 0; i + 1 < e.a.size(); i += 2) {
          Value k = eval(*e.a[i]);
          if (!k.is(K::String)) fail_at(e.a[i]->line, e.a[i]->col, "dict keys must be strings");
          items.emplace_back(k.s, eval(*e.a[i + 1]));
        }
        return Value::of_dict(std::move(items));
      }
    }
    return Value();
  }

  static Value index(const Value& obj, const Value& key) {
    if (obj.is(K::Dict)) {
      if (key.is(K::String))
        if (const Value* v = obj.dict->find(key.s)) return *v;
      return Value();
    }
    if ((obj.is(K::List) || obj.is(K::String)) && (key.is(K::Int) || key.is(K::Bool))) {
      if (obj.is(K::List)) {
        const int64_t n = int64_t(obj.list->items.size());
        int64_t i = as_int(key) < 0 ? as_int(key) + n : as_int(key);
        return i >= 0 && i < n ? obj.list->items[size_t(i)] : Value();
      }
      std::vector<std::string> cs = chars(obj.s);
      const int64_t n = int64_t(cs.size());
      int64_t i = as_int(key) < 0 ? as_int(key) + n : as_int(key);
      return i >= 0 && i < n ? Value::str(cs[size_t(i)]) : Value();
    }
    return Value();
  }

  static Value binary(const Expr& e, const Value& l, const Value& r) {
    const std::string& op = e.name;
    auto fail = [&](const std::string& msg) { fail_at(e.line, e.col, msg); };
    auto bad = [&]() {
      fail(std::string("unsupported operand types for ") + op + ": " + kind_name(l) + " and " +
           kind_name(r));
    };
    if (op == "==") return Value::boolean(equal(l, r));
    if (op == "!=") return Value::boolean(!equal(l, r));
    if (op == "~") return Value::str(to_str(l) + to_str(r));
    if (op == "in" || op == "not in") {
      bool found = false;
      if (r.is(K::String) && l.is(K::String))
        found = r.s.find(l.s) != std::string::npos;
      else if (r.is(K::List))
        found = std::any_of(r.list->items.begin(), r.list->items.end(),
                            [&](const Value& x) { return equal(x, l); });
      else if (r.is(K::Dict))
        found = l.is(K::String) && r.dict->find(l.s);
      else
        fail(std::string("'in' needs a string, list or dict on the right, got ") + kind_name(r));
      return Value::boolean(found != (op == "not in"));
    }
    if (op == "<" || op == "<=" || op == ">" || op == ">=") {
      int c;
      if (l.numeric() && r.numeric()) {
        double a = l.as_double(), b = r.as_double();
        c = a < b ? -1 : a > b ? 1 : 0;
      } else if (l.is(K::String) && r.is(K::String)) {
        c = l.s.compare(r.s);
      } else {
        bad();
      }
      return Value::boolean(op == "<" ? c < 0 : op == "<=" ? c <= 0 : op == ">" ? c > 0 : c >= 0);
    }
    if (op == "+") {
      if (l.is(K::String) && r.is(K::String)) {
        if (l.s.size() + r.s.size() > kMaxValueBytes) fail("string over the size cap");
        return Value::str(l.s + r.s);
      }
      if (l.is(K::List) && r.is(K::List)) {
        std::vector<Value> items = l.list->items;
        if (items.size() + r.list->items.size() > kMaxListItems) fail("list over the size cap");
        items.insert(items.end(), r.list->items.begin(), r.list->items.end());
        return Value::of_list(std::move(items));
      }
    }
    if (op == "*" && (l.is(K::String) || l.is(K::List) || r.is(K::String) || r.is(K::List))) {
      const Value& seq = l.is(K::String) || l.is(K::List) ? l : r;
      const Value& n = &seq == &l ? r : l;
      if (!n.is(K::Int) && !n.is(K::Bool)) bad();
      const int64_t times = std::max<int64_t>(0, as_int(n));
      const size_t unit = seq.is(K::String) ? seq.s.size() : seq.list->items.size();
      if (unit && uint64_t(times) > (seq.is(K::String) ? kMaxValueBytes : kMaxListItems) / unit)
        fail("repetition over the size cap");
      if (seq.is(K::String)) {
        std::string out;
        for (int64_t i = 0; i < times; ++i) out += seq.s;
        return Value::str(std::move(out));
      }
      std::vector<Value> items;
      for (int64_t i = 0; i < times; ++i)
        items.insert(items.end(), seq.list->items.begin(), seq.list->items.end());
      return Value::of_list(std::move(items));
    }
    if (!l.numeric() || !r.numeric()) bad();
    const bool ints = !l.is(K::Float) && !r.is(K::Float);
    const double a = l.as_double(), b = r.as_double();
    if (op == "/") {
      if (b == 0) fail("division by zero");
      return Value::number(a / b);
    }
    if (ints) {
      const int64_t x = as_int(l), y = as_int(r);
      int64_t z = 0;
      if (op == "+" && !__builtin_add_overflow(x, y, &z)) return Value::integer(z);
      if (op == "-" && !__builtin_sub_overflow(x, y, &z)) return Value::integer(z);
      if (op == "*" && !__builtin_mul_overflow(x, y, &z)) return Value::integer(z);
      if (op == "//" || op == "%") {
        if (y == 0) fail("division by zero");
        if (x == INT64_MIN && y == -1) fail("integer overflow");
        int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) {
          --q;
          m += y;
        }
        return Value::integer(op == "//" ? q : m);
      }
      if (op == "**" && y >= 0) {
        int64_t p = 1;
        for (int64_t i = 0; i < y; ++i)
          if (__builtin_mul_overflow(p, x, &p))
            fail("integer overflow");
          else if (p == 0 || p == 1)
            break;
        return Value::integer(p);
      }
      if (op != "**") fail("integer overflow");
    }
    if (op == "+") return Value::number(a + b);
    if (op == "-") return Value::number(a - b);
    if (op == "*") return Value::number(a * b);
    if (op == "**") return Value::number(std::pow(a, b));
    if (b == 0) fail("division by zero");
    if (op == "//") return Value::number(std::floor(a / b));
    if (op == "%") {
      double m = std::fmod(a, b);
      if (m != 0 && ((m < 0) != (b < 0))) m += b;
      return Value::number(m);
    }
    bad();
    return Value();
  }

  std::vector<std::unordered_map<std::string, Value>> frames_;
  std::string out_;
  int64_t iterations_ = 0;
};

}  // namespace

std::string render(const Program& p, const std::vector<ChatMessage>& messages,
                   const ChatTemplateOptions& o) {
  Renderer r;
  std::vector<Value> ms;
  for (const auto& m : messages) {
    std::vector<std::pair<std::string, Value>> d{{"role", Value::str(m.role)},
                                                 {"content", Value::str(m.content)}};
    if (!m.tool_calls.empty()) {
      // As transformers' templates expect them: arguments an object (OpenAI sends JSON text).
      std::vector<Value> calls;
      for (const auto& c : m.tool_calls) {
        Value args = Value::str(c.arguments);
        try {
          args = from_json(c.arguments);
        } catch (const Error&) {  // not JSON: the text as it is
        }
        calls.push_back(Value::of_dict(
            {{"id", Value::str(c.id)},
             {"type", Value::str("function")},
             {"function", Value::of_dict({{"name", Value::str(c.name)}, {"arguments", args}})}}));
      }
      d.push_back({"tool_calls", Value::of_list(std::move(calls))});
    }
    if (!m.tool_call_id.empty()) d.push_back({"tool_call_id", Value::str(m.tool_call_id)});
    ms.push_back(Value::of_dict(std::move(d)));
  }
  r.define("messages", Value::of_list(std::move(ms)));
  if (!o.tools.empty()) r.define("tools", from_json(o.tools));
  r.define("add_generation_prompt", Value::boolean(o.add_generation_prompt));
  r.define("bos_token", Value::str(o.bos_token));
  r.define("eos_token", Value::str(o.eos_token));
  r.exec(p.body);
  return r.take();
}

}  // namespace rlx::llm::chat_detail

namespace rlx::llm {

ChatTemplate::ChatTemplate(std::string source) {
  auto p = std::make_shared<chat_detail::Program>();
  p->body = chat_detail::parse(source);
  p->source = std::move(source);
  program_ = std::move(p);
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages,
                                 const ChatTemplateOptions& options) const {
  return chat_detail::render(*program_, messages, options);
}

const std::string& ChatTemplate::source() const { return program_->source; }

}  // namespace rlx::llm
