// Chat template parser: tokens -> Body. Jinja's precedence
// (or < and < not < comparisons < + - < ~ < * / // % < ** < unary < filters,
// tests and postfix), trim_blocks and lstrip_blocks on, as transformers
// renders chat templates.
#include <algorithm>
#include <cstring>

#include "frontends/gguf/chat_template_impl.h"

namespace rlx::llm::chat_detail {
namespace {

class Parser {
 public:
  explicit Parser(std::vector<Token> toks) : t_(std::move(toks)) {}

  Body run() {
    std::string end;
    Body b = body({}, &end);
    return b;
  }

 private:
  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& p) : p(p) {
      if (++p.depth_ > kMaxNesting) p.fail(p.peek(), "template nested too deeply");
    }
    ~DepthGuard() { --p.depth_; }
  };

  const Token& peek(size_t k = 0) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  const Token& next() { return t_[std::min(i_++, t_.size() - 1)]; }
  bool is_op(const char* op, size_t k = 0) const {
    return peek(k).kind == Tok::Op && peek(k).text == op;
  }
  bool is_name(const char* n, size_t k = 0) const {
    return peek(k).kind == Tok::Name && peek(k).text == n;
  }
  static std::string describe(const Token& t) {
    switch (t.kind) {
      case Tok::Text:
        return "text";
      case Tok::VarBegin:
        return "'{{'";
      case Tok::VarEnd:
        return "'}}'";
      case Tok::BlockBegin:
        return "'{%'";
      case Tok::BlockEnd:
        return "'%}'";
      case Tok::Str:
        return "string";
      case Tok::End:
        return "end of template";
      default:
        return "'" + t.text + "'";
    }
  }
  [[noreturn]] void fail(const Token& t, const std::string& msg) const {
    fail_at(t.line, t.col, msg);
  }
  void expect_op(const char* op) {
    if (!is_op(op)) fail(peek(), std::string("expected '") + op + "', got " + describe(peek()));
    ++i_;
  }
  void expect(Tok k, const char* what) {
    if (peek().kind != k)
      fail(peek(), std::string("expected ") + what + ", got " + describe(peek()));
    ++i_;
  }
  std::string expect_name() {
    if (peek().kind != Tok::Name) fail(peek(), "expected a name, got " + describe(peek()));
    return next().text;
  }

  ExprP make(Expr::K k, const Token& at, std::vector<ExprP> a = {}, std::string name = {}) {
    auto e = std::make_unique<Expr>();
    e->k = k;
    e->line = at.line;
    e->col = at.col;
    e->name = std::move(name);
    for (auto& c : a)
      if (c) e->height = std::max(e->height, c->height + 1);
    e->a = std::move(a);
    // Left-assoc chains (a + b + c ...) grow without parser recursion; the
    // evaluator recurses on height, so cap it here.
    if (e->height > kMaxNesting) fail(at, "expression nested too deeply");
    return e;
  }
  template <typename... E>
  static std::vector<ExprP> list(E&&... e) {
    std::vector<ExprP> v;
    (v.push_back(std::move(e)), ...);
    return v;
  }

  // Statements.
  Body body(const std::vector<std::string>& ends, std::string* which) {
    DepthGuard g(*this);
    Body out;
    for (;;) {
      const Token& t = peek();
      if (t.kind == Tok::End) {
        if (ends.empty()) return out;
        fail(t, "unexpected end of template, expected '{% " + ends.back() + " %}'");
      }
      if (t.kind == Tok::Text) {
        Node n(Node::K::Text, t.line, t.col);
        n.text = next().text;
        out.push_back(std::move(n));
      } else if (t.kind == Tok::VarBegin) {
        next();
        Node n(Node::K::Output, t.line, t.col);
        n.expr = expr();
        expect(Tok::VarEnd, "'}}'");
        out.push_back(std::move(n));
      } else if (t.kind == Tok::BlockBegin) {
        const Token& kw = peek(1);
        if (kw.kind == Tok::Name && std::find(ends.begin(), ends.end(), kw.text) != ends.end()) {
          i_ += 2;
          *which = kw.text;
          return out;
        }
        next();
        out.push_back(statement());
      } else {
        fail(t, "unexpected " + describe(t));
      }
    }
  }

  Node statement() {
    const Token& kw = peek();
    if (kw.kind != Tok::Name) fail(kw, "expected a tag name, got " + describe(kw));
    const std::string name = next().text;
    Node n(Node::K::Text, kw.line, kw.col);
    std::string end;
    if (name == "if") {
      n.k = Node::K::If;
      ExprP cond = expr();
      expect(Tok::BlockEnd, "'%}'");
      for (;;) {
        Body b = body({"elif", "else", "endif"}, &end);
        n.branches.emplace_back(std::move(cond), std::move(b));
        if (end != "elif") break;
        cond = expr();
        expect(Tok::BlockEnd, "'%}'");
      }
      if (end == "else") {
        expect(Tok::BlockEnd, "'%}'");
        n.else_body = body({"endif"}, &end);
      }
    } else if (name == "for") {
      n.k = Node::K::For;
      n.targets.push_back(expect_name());
      while (is_op(",")) {
        next();
        n.targets.push_back(expect_name());
      }
      if (!is_name("in")) fail(peek(), "expected 'in', got " + describe(peek()));
      next();
      n.expr = or_expr();  // no ternary: a trailing "if" filters the loop
      if (is_name("if")) {
        next();
        n.target = expr();
      }
      if (is_name("recursive")) fail(peek(), "recursive loops are not supported");
      expect(Tok::BlockEnd, "'%}'");
      Body b = body({"else", "endfor"}, &end);
      n.branches.emplace_back(nullptr, std::move(b));
      if (end == "else") {
        expect(Tok::BlockEnd, "'%}'");
        n.else_body = body({"endfor"}, &end);
      }
    } else if (name == "set") {
      n.text = expect_name();
      if (is_op(".")) {
        const Token& dot = next();
        n.k = Node::K::SetAttr;
        n.target = make(Expr::K::Name, kw, {}, n.text);
        (void)dot;
        n.text = expect_name();
        expect_op("=");
        n.expr = expr();
      } else if (is_op("=")) {
        next();
        n.k = Node::K::Set;
        n.expr = expr();
      } else {
        n.k = Node::K::SetBlock;
        expect(Tok::BlockEnd, "'%}'");
        n.branches.emplace_back(nullptr, body({"endset"}, &end));
      }
    } else if (name == "break" || name == "continue") {
      n.k = name == "break" ? Node::K::Break : Node::K::Continue;
    } else if (name == "generation") {  // transformers' assistant-mask marker
      n.k = Node::K::Block;
      expect(Tok::BlockEnd, "'%}'");
      n.branches.emplace_back(nullptr, body({"endgeneration"}, &end));
    } else {
      fail(kw, "unknown or unsupported tag '" + name + "'");
    }
    expect(Tok::BlockEnd, "'%}'");
    return n;
  }

  // Expressions.
  ExprP expr() {
    DepthGuard g(*this);
    ExprP e = or_expr();
    while (is_name("if")) {
      const Token& at = next();
      ExprP cond = or_expr();
      ExprP otherwise;
      if (is_name("else")) {
        next();
        otherwise = expr();
      }
      e = make(Expr::K::Cond, at, list(std::move(e), std::move(cond), std::move(otherwise)));
    }
    return e;
  }

  ExprP or_expr() {
    ExprP e = and_expr();
    while (is_name("or")) {
      const Token& at = next();
      e = make(Expr::K::Binary, at, list(std::move(e), and_expr()), "or");
    }
    return e;
  }
  ExprP and_expr() {
    ExprP e = not_expr();
    while (is_name("and")) {
      const Token& at = next();
      e = make(Expr::K::Binary, at, list(std::move(e), not_expr()), "and");
    }
    return e;
  }
  ExprP not_expr() {
    if (is_name("not")) {
      DepthGuard g(*this);
      const Token& at = next();
      return make(Expr::K::Unary, at, list(not_expr()), "not");
    }
    return compare();
  }
  ExprP compare() {
    ExprP e = add();
    for (;;) {
      const Token& at = peek();
      std::string op;
      if (at.kind == Tok::Op && (at.text == "==" || at.text == "!=" || at.text == "<" ||
                                 at.text == "<=" || at.text == ">" || at.text == ">=")) {
        op = next().text;
      } else if (is_name("in")) {
        next();
        op = "in";
      } else if (is_name("not") && is_name("in", 1)) {
        i_ += 2;
        op = "not in";
      } else {
        return e;
      }
      e = make(Expr::K::Binary, at, list(std::move(e), add()), op);
    }
  }
  ExprP binary_chain(ExprP (Parser::*sub)(), std::initializer_list<const char*> ops) {
    ExprP e = (this->*sub)();
    for (;;) {
      const char* hit = nullptr;
      for (const char* op : ops)
        if (is_op(op)) hit = op;
      if (!hit) return e;
      const Token& at = next();
      e = make(Expr::K::Binary, at, list(std::move(e), (this->*sub)()), hit);
    }
  }
  ExprP add() { return binary_chain(&Parser::concat, {"+", "-"}); }
  ExprP concat() { return binary_chain(&Parser::mul, {"~"}); }
  ExprP mul() { return binary_chain(&Parser::pow, {"*", "/", "//", "%"}); }
  ExprP pow() { return binary_chain(&Parser::unary_f, {"**"}); }
  ExprP unary_f() { return unary(true); }

  ExprP unary(bool with_filter) {
    DepthGuard g(*this);
    ExprP e;
    if (is_op("-") || is_op("+")) {
      const Token& at = next();
      e = make(Expr::K::Unary, at, list(unary(false)), at.text);
    } else {
      e = primary();
    }
    e = postfix(std::move(e));
    return with_filter ? filters(std::move(e)) : std::move(e);
  }

  ExprP primary() {
    DepthGuard g(*this);
    const Token& t = next();
    switch (t.kind) {
      case Tok::Name: {
        auto lit = [&](Value v) {
          ExprP e = make(Expr::K::Lit, t);
          e->lit = std::move(v);
          return e;
        };
        if (t.text == "true" || t.text == "True") return lit(Value::boolean(true));
        if (t.text == "false" || t.text == "False") return lit(Value::boolean(false));
        if (t.text == "none" || t.text == "None") return lit(Value::none());
        return make(Expr::K::Name, t, {}, t.text);
      }
      case Tok::Str: {
        std::string s = t.text;
        while (peek().kind == Tok::Str) s += next().text;  // "a" "b" is "ab"
        ExprP e = make(Expr::K::Lit, t);
        e->lit = Value::str(std::move(s));
        return e;
      }
      case Tok::Int:
      case Tok::Float: {
        ExprP e = make(Expr::K::Lit, t);
        try {
          e->lit = t.kind == Tok::Int ? Value::integer(std::stoll(t.text))
                                      : Value::number(std::stod(t.text));
        } catch (const std::exception&) {
          fail(t, "number out of range: " + t.text);
        }
        return e;
      }
      case Tok::Op:
        if (t.text == "(") {
          if (is_op(")")) {
            next();
            return make(Expr::K::List, t, {}, "tuple");
          }
          ExprP e = expr();
          if (!is_op(",")) {
            expect_op(")");
            return e;
          }
          std::vector<ExprP> items = list(std::move(e));
          while (is_op(",")) {
            next();
            if (is_op(")")) break;
            items.push_back(expr());
          }
          expect_op(")");
          return make(Expr::K::List, t, std::move(items), "tuple");
        }
        if (t.text == "[") {
          std::vector<ExprP> items;
          while (!is_op("]")) {
            items.push_back(expr());
            if (!is_op(",")) break;
            next();
          }
          expect_op("]");
          return make(Expr::K::List, t, std::move(items));
        }
        if (t.text == "{") {
          std::vector<ExprP> items;
          while (!is_op("}")) {
            items.push_back(expr());
            expect_op(":");
            items.push_back(expr());
            if (!is_op(",")) break;
            next();
          }
          expect_op("}");
          return make(Expr::K::Dict, t, std::move(items));
        }
        break;
      default:
        break;
    }
    fail(t, "unexpected " + describe(t));
  }

  void call_args(Expr& call) {
    expect_op("(");
    while (!is_op(")")) {
      if (peek().kind == Tok::Name && is_op("=", 1)) {
        std::string key = next().text;
        next();
        call.kwargs.emplace_back(key, expr());
        call.height = std::max(call.height, call.kwargs.back().second->height + 1);
      } else {
        if (!call.kwargs.empty()) fail(peek(), "positional argument after keyword argument");
        call.a.push_back(expr());
        call.height = std::max(call.height, call.a.back()->height + 1);
      }
      if (!is_op(",")) break;
      next();
    }
    expect_op(")");
    if (call.height > kMaxNesting) fail(peek(), "expression nested too deeply");
  }

  ExprP postfix(ExprP e) {
    for (;;) {
      const Token& at = peek();
      if (is_op(".")) {
        next();
        const Token& n = next();
        if (n.kind == Tok::Name) {
          e = make(Expr::K::Attr, at, list(std::move(e)), n.text);
        } else if (n.kind == Tok::Int) {
          ExprP idx = make(Expr::K::Lit, n);
          idx->lit = Value::integer(std::stoll(n.text));
          e = make(Expr::K::Index, at, list(std::move(e), std::move(idx)));
        } else {
          fail(n, "expected an attribute name, got " + describe(n));
        }
      } else if (is_op("[")) {
        next();
        ExprP start, stop, step;
        if (!is_op(":")) start = expr();
        if (is_op(":")) {
          next();
          if (!is_op(":") && !is_op("]")) stop = expr();
          if (is_op(":")) {
            next();
            if (!is_op("]")) step = expr();
          }
          expect_op("]");
          e = make(Expr::K::Slice, at,
                   list(std::move(e), std::move(start), std::move(stop), std::move(step)));
        } else {
          expect_op("]");
          e = make(Expr::K::Index, at, list(std::move(e), std::move(start)));
        }
      } else if (is_op("(")) {
        e = make(Expr::K::Call, at, list(std::move(e)));
        call_args(*e);
      } else {
        return e;
      }
    }
  }

  ExprP filters(ExprP e) {
    for (;;) {
      const Token& at = peek();
      if (is_op("|")) {
        next();
        e = make(Expr::K::Filter, at, list(std::move(e)), expect_name());
        if (is_op("(")) call_args(*e);
      } else if (is_name("is")) {
        next();
        bool neg = false;
        if (is_name("not")) {
          next();
          neg = true;
        }
        // Tests named by keywords: "is none", "is true", "is false".
        const Token& n = next();
        if (n.kind != Tok::Name && !(n.kind == Tok::Op && (n.text == "==" || n.text == "!=")))
          fail(n, "expected a test name, got " + describe(n));
        e = make(Expr::K::Test, at, list(std::move(e)), n.text);
        e->negated = neg;
        static const char* stops[] = {"and", "or", "else", "if", "not", "is", "in"};
        const Token& a = peek();
        bool single =
            a.kind == Tok::Str || a.kind == Tok::Int || a.kind == Tok::Float ||
            (a.kind == Tok::Name && std::none_of(std::begin(stops), std::end(stops),
                                                 [&](const char* s) { return a.text == s; }));
        if (is_op("(")) {
          call_args(*e);
        } else if (single) {
          e->a.push_back(postfix(primary()));
          e->height = std::max(e->height, e->a.back()->height + 1);
        }
      } else if (is_op("(")) {
        e = make(Expr::K::Call, at, list(std::move(e)));
        call_args(*e);
      } else {
        return e;
      }
    }
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  int depth_ = 0;
};

}  // namespace

Body parse(std::string_view source) {
  if (source.size() > kMaxSourceBytes)
    throw make_error("chat template: ", source.size(), " bytes is over the ", kMaxSourceBytes,
                     "-byte cap");
  return Parser(lex(source)).run();
}

}  // namespace rlx::llm::chat_detail
