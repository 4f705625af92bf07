#include "chat/parser.h"

#include <algorithm>
#include <initializer_list>

#include "chat/error.h"
#include "chat/lexer.h"
#include "chat/analysis.h"

namespace tessera::chat {
namespace {

constexpr int kMaxNesting = 200;

class Parser {
 public:
  explicit Parser(std::vector<Token> toks) : t_(std::move(toks)) {}

  Body parse_template() {
    std::string end;
    Body body = parse_body({}, end);
    return body;
  }

 private:
  std::vector<Token> t_;
  size_t p_ = 0;
  int depth_ = 0;

  const Token& cur() const { return t_[p_]; }
  const Token& peek(size_t k = 1) const { return t_[std::min(p_ + k, t_.size() - 1)]; }
  void next() {
    if (p_ + 1 < t_.size()) ++p_;
  }

  [[noreturn]] void fail(const std::string& msg, const Token& at) const {
    throw TemplateError("TemplateSyntaxError", msg, at.line, at.column);
  }
  [[noreturn]] void fail(const std::string& msg) const { fail(msg, cur()); }

  static std::string describe(const Token& t) {
    switch (t.type) {
      case Tok::Eof: return "end of template";
      case Tok::VarEnd: return "end of print statement";
      case Tok::BlockEnd: return "end of statement block";
      case Tok::Text: return "template data";
      case Tok::String: return "string";
      case Tok::Int:
      case Tok::Float: return "number";
      default: return "'" + t.value + "'";
    }
  }

  bool is_op(const char* op) const { return cur().type == Tok::Op && cur().value == op; }
  bool is_name(const char* n) const { return cur().type == Tok::Name && cur().value == n; }
  void expect_op(const char* op) {
    if (!is_op(op)) fail(std::string("expected '") + op + "', got " + describe(cur()));
    next();
  }
  void expect_name(const char* n) {
    if (!is_name(n)) fail(std::string("expected '") + n + "', got " + describe(cur()));
    next();
  }
  std::string expect_identifier() {
    if (cur().type != Tok::Name) fail("expected a name, got " + describe(cur()));
    std::string v = cur().value;
    next();
    return v;
  }
  void expect_block_end() {
    if (cur().type != Tok::BlockEnd) fail("expected end of statement block, got " + describe(cur()));
    next();
  }

  ExprPtr node(ExprType type, const Token& at) {
    auto e = std::make_unique<Expr>();
    e->type = type;
    e->line = at.line;
    e->column = at.column;
    return e;
  }

  // ---------------------------------------------------------------- statements

  // Parses statements until a block tag whose name is in `ends`; leaves the parser after that name
  // and stores it in `end`. At top level (ends empty) stops at the end of the template.
  Body parse_body(std::initializer_list<const char*> ends, std::string& end) {
    Body body;
    while (true) {
      const Token& tk = cur();
      if (tk.type == Tok::Eof) {
        if (ends.size() == 0) return body;
        std::string want;
        for (auto* e : ends) want += (want.empty() ? "'" : " or '") + std::string(e) + "'";
        fail("unexpected end of template, expected " + want);
      }
      if (tk.type == Tok::Text) {
        auto s = std::make_unique<Stmt>();
        s->type = StmtType::Text;
        s->line = tk.line;
        s->column = tk.column;
        s->text = tk.value;
        body.push_back(std::move(s));
        next();
      } else if (tk.type == Tok::VarBegin) {
        auto s = std::make_unique<Stmt>();
        s->type = StmtType::Print;
        s->line = tk.line;
        s->column = tk.column;
        next();
        s->expr = parse_tuple(false, true, false, {});
        if (cur().type != Tok::VarEnd) fail("expected end of print statement, got " + describe(cur()));
        next();
        body.push_back(std::move(s));
      } else if (tk.type == Tok::BlockBegin) {
        const Token& name = peek();
        if (name.type != Tok::Name) fail("tag name expected", name);
        for (auto* e : ends)
          if (name.value == e) {
            end = e;
            next();
            next();
            return body;
          }
        next();
        body.push_back(parse_statement());
      } else {
        fail("unexpected " + describe(tk));
      }
    }
  }

  StmtPtr stmt(StmtType type, const Token& at) {
    auto s = std::make_unique<Stmt>();
    s->type = type;
    s->line = at.line;
    s->column = at.column;
    return s;
  }

  StmtPtr parse_statement() {
    DepthGuard g(*this);
    Token tag = cur();
    const std::string& n = tag.value;
    next();
    std::string end;
    if (n == "if") {
      auto s = stmt(StmtType::If, tag);
      ExprPtr cond = parse_tuple(false, false, false, {});
      while (true) {
        expect_block_end();
        Body b = parse_body({"elif", "else", "endif"}, end);
        s->branches.emplace_back(std::move(cond), std::move(b));
        if (end == "elif") {
          cond = parse_tuple(false, false, false, {});
          continue;
        }
        if (end == "else") {
          expect_block_end();
          s->else_body = parse_body({"endif"}, end);
        }
        break;
      }
      expect_block_end();
      return s;
    }
    if (n == "for") {
      auto s = stmt(StmtType::For, tag);
      s->targets = parse_target_names({"in"});
      expect_name("in");
      s->expr = parse_tuple(false, false, false, {"recursive"});
      if (is_name("if")) {
        next();
        s->cond = parse_expression(true);
      }
      if (is_name("recursive")) fail("recursive for loops are not supported");
      expect_block_end();
      s->body = parse_body({"endfor", "else"}, end);
      if (end == "else") {
        expect_block_end();
        s->else_body = parse_body({"endfor"}, end);
      }
      expect_block_end();
      return s;
    }
    if (n == "set") {
      Token at = cur();
      std::vector<std::string> names;
      std::string attr;
      names.push_back(expect_identifier());
      if (is_op(".")) {
        next();
        attr = expect_identifier();
      } else {
        while (is_op(",")) {
          next();
          if (cur().type != Tok::Name) break;
          names.push_back(expect_identifier());
        }
      }
      if (is_op("=")) {
        next();
        auto s = stmt(StmtType::Set, tag);
        s->targets = std::move(names);
        s->text = attr;
        s->expr = parse_tuple(false, true, false, {});
        expect_block_end();
        return s;
      }
      if (!attr.empty() || names.size() != 1) fail("expected '='", at);
      auto s = stmt(StmtType::SetBlock, tag);
      s->targets = std::move(names);
      if (is_op("|")) s->expr = parse_filter_chain(nullptr);
      expect_block_end();
      s->body = parse_body({"endset"}, end);
      expect_block_end();
      return s;
    }
    if (n == "macro") {
      auto s = stmt(StmtType::Macro, tag);
      s->text = expect_identifier();
      parse_signature(s->params);
      expect_block_end();
      s->body = parse_body({"endmacro"}, end);
      if (cur().type == Tok::Name) next();  // {% endmacro name %}
      expect_block_end();
      return s;
    }
    if (n == "call") {
      auto s = stmt(StmtType::CallBlock, tag);
      if (is_op("(")) parse_signature(s->params);
      Token at = cur();
      s->expr = parse_expression(true);
      if (s->expr->type != ExprType::Call) fail("expected call", at);
      expect_block_end();
      s->body = parse_body({"endcall"}, end);
      expect_block_end();
      return s;
    }
    if (n == "filter") {
      auto s = stmt(StmtType::FilterBlock, tag);
      s->expr = parse_filter_chain(nullptr, true);
      expect_block_end();
      s->body = parse_body({"endfilter"}, end);
      expect_block_end();
      return s;
    }
    if (n == "with") {
      auto s = stmt(StmtType::With, tag);
      while (cur().type != Tok::BlockEnd) {
        if (!s->assigns.empty()) expect_op(",");
        auto names = parse_target_names({});
        expect_op("=");
        s->assigns.emplace_back(std::move(names), parse_expression(true));
      }
      expect_block_end();
      s->body = parse_body({"endwith"}, end);
      expect_block_end();
      return s;
    }
    if (n == "generation") {  // transformers' assistant-mask tag: renders its body
      auto s = stmt(StmtType::Scope, tag);
      expect_block_end();
      s->body = parse_body({"endgeneration"}, end);
      expect_block_end();
      return s;
    }
    if (n == "break" || n == "continue") {
      auto s = stmt(n == "break" ? StmtType::Break : StmtType::Continue, tag);
      expect_block_end();
      return s;
    }
    fail("Encountered unknown tag '" + n + "'.", tag);
  }

  std::vector<std::string> parse_target_names(std::initializer_list<const char*> end_names) {
    std::vector<std::string> names;
    bool paren = is_op("(");
    if (paren) next();
    while (true) {
      names.push_back(expect_identifier());
      if (!is_op(",")) break;
      next();
      if (cur().type != Tok::Name) break;
      bool stop = false;
      for (auto* e : end_names) stop |= cur().value == e;
      if (stop) break;
    }
    if (paren) expect_op(")");
    return names;
  }

  void parse_signature(std::vector<Param>& params) {
    expect_op("(");
    while (!is_op(")")) {
      if (!params.empty()) expect_op(",");
      if (is_op(")")) break;
      Param p;
      p.name = expect_identifier();
      if (is_op("=")) {
        next();
        p.default_value = parse_expression(true);
      }
      params.push_back(std::move(p));
    }
    next();
  }

  // `| f(args) | g` applied to `input` (null: the body of a filter/set block).
  ExprPtr parse_filter_chain(ExprPtr input, bool first_without_pipe = false) {
    bool first = true;
    while (is_op("|") || (first && first_without_pipe)) {
      if (is_op("|")) next();
      first = false;
      input = parse_filter(std::move(input));
    }
    return input;
  }

  // ---------------------------------------------------------------- expressions

  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& q) : p(q) {
      if (++p.depth_ > kMaxNesting) p.fail("expression nested too deeply");
    }
    ~DepthGuard() { --p.depth_; }
  };

  bool tuple_end(std::initializer_list<const char*> extra) const {
    auto& tk = cur();
    if (tk.type == Tok::VarEnd || tk.type == Tok::BlockEnd || tk.type == Tok::Eof) return true;
    if (tk.type == Tok::Op && tk.value == ")") return true;
    if (tk.type == Tok::Name)
      for (auto* e : extra)
        if (tk.value == e) return true;
    return false;
  }

  ExprPtr parse_tuple(bool simplified, bool with_condexpr, bool explicit_only,
                      std::initializer_list<const char*> extra_end) {
    Token at = cur();
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (tuple_end(extra_end)) break;
      items.push_back(simplified ? parse_primary() : parse_expression(with_condexpr));
      if (is_op(","))
        is_tuple = true;
      else
        break;
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_only) fail("Expected an expression, got " + describe(cur()));
    }
    auto e = node(ExprType::Tuple, at);
    e->a = std::move(items);
    return e;
  }

  ExprPtr parse_expression(bool with_condexpr) {
    DepthGuard g(*this);
    ExprPtr e = parse_or();
    if (!with_condexpr) return e;
    while (is_name("if")) {
      Token at = cur();
      next();
      auto c = node(ExprType::Cond, at);
      c->a.push_back(parse_or());
      c->a.push_back(std::move(e));
      if (is_name("else")) {
        next();
        c->a.push_back(parse_expression(true));
      } else {
        c->a.push_back(nullptr);
      }
      e = std::move(c);
    }
    return e;
  }

  ExprPtr binary(ExprType type, ExprPtr l, ExprPtr r, const Token& at, std::string op = "") {
    auto e = node(type, at);
    e->name = std::move(op);
    e->a.push_back(std::move(l));
    e->a.push_back(std::move(r));
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr l = parse_and();
    while (is_name("or")) {
      Token at = cur();
      next();
      l = binary(ExprType::Or, std::move(l), parse_and(), at);
    }
    return l;
  }

  ExprPtr parse_and() {
    ExprPtr l = parse_not();
    while (is_name("and")) {
      Token at = cur();
      next();
      l = binary(ExprType::And, std::move(l), parse_not(), at);
    }
    return l;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      DepthGuard g(*this);
      Token at = cur();
      next();
      auto e = node(ExprType::Not, at);
      e->a.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    Token at = cur();
    ExprPtr first = parse_math1();
    ExprPtr cmp;
    while (true) {
      std::string op;
      if (cur().type == Tok::Op &&
          (cur().value == "==" || cur().value == "!=" || cur().value == "<" || cur().value == "<=" ||
           cur().value == ">" || cur().value == ">=")) {
        op = cur().value;
        next();
      } else if (is_name("in")) {
        op = "in";
        next();
      } else if (is_name("not") && peek().type == Tok::Name && peek().value == "in") {
        op = "not in";
        next();
        next();
      } else {
        break;
      }
      if (!cmp) {
        cmp = node(ExprType::Compare, at);
        cmp->a.push_back(std::move(first));
      }
      cmp->ops.push_back(op);
      cmp->a.push_back(parse_math1());
    }
    return cmp ? std::move(cmp) : std::move(first);
  }

  ExprPtr parse_math1() {
    ExprPtr l = parse_concat();
    while (is_op("+") || is_op("-")) {
      Token at = cur();
      next();
      l = binary(ExprType::Binary, std::move(l), parse_concat(), at, at.value);
    }
    return l;
  }

  ExprPtr parse_concat() {
    ExprPtr l = parse_math2();
    while (is_op("~")) {
      Token at = cur();
      next();
      l = binary(ExprType::Binary, std::move(l), parse_math2(), at, "~");
    }
    return l;
  }

  ExprPtr parse_math2() {
    ExprPtr l = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      Token at = cur();
      next();
      l = binary(ExprType::Binary, std::move(l), parse_pow(), at, at.value);
    }
    return l;
  }

  ExprPtr parse_pow() {
    ExprPtr l = parse_unary(true);
    while (is_op("**")) {
      Token at = cur();
      next();
      l = binary(ExprType::Binary, std::move(l), parse_unary(true), at, "**");
    }
    return l;
  }

  ExprPtr parse_unary(bool with_filter) {
    DepthGuard g(*this);
    Token at = cur();
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      next();
      e = node(at.value == "-" ? ExprType::Neg : ExprType::Pos, at);
      e->a.push_back(parse_unary(false));
    } else {
      e = parse_primary();
    }
    e = parse_postfix(std::move(e));
    if (with_filter) e = parse_filter_expr(std::move(e));
    return e;
  }

  ExprPtr parse_primary() {
    DepthGuard g(*this);
    Token at = cur();
    switch (at.type) {
      case Tok::Name: {
        next();
        auto e = node(ExprType::Literal, at);
        const std::string& v = at.value;
        if (v == "true" || v == "True") {
          e->value = Value::boolean(true);
        } else if (v == "false" || v == "False") {
          e->value = Value::boolean(false);
        } else if (v == "none" || v == "None") {
          e->value = Value::none();
        } else {
          e->type = ExprType::Name;
          e->name = v;
        }
        return e;
      }
      case Tok::String: {
        std::string s;
        while (cur().type == Tok::String) {
          s += cur().value;
          next();
        }
        auto e = node(ExprType::Literal, at);
        e->value = Value::string(std::move(s));
        return e;
      }
      case Tok::Int:
      case Tok::Float: {
        next();
        auto e = node(ExprType::Literal, at);
        e->value = at.type == Tok::Int ? Value::integer(at.ival) : Value::number(at.fval);
        return e;
      }
      case Tok::Op:
        if (at.value == "(") {
          next();
          ExprPtr e = parse_tuple(false, true, true, {});
          expect_op(")");
          return e;
        }
        if (at.value == "[") {
          next();
          auto e = node(ExprType::List, at);
          while (!is_op("]")) {
            if (!e->a.empty()) expect_op(",");
            if (is_op("]")) break;
            e->a.push_back(parse_expression(true));
          }
          next();
          return e;
        }
        if (at.value == "{") {
          next();
          auto e = node(ExprType::Dict, at);
          while (!is_op("}")) {
            if (!e->a.empty()) expect_op(",");
            if (is_op("}")) break;
            e->a.push_back(parse_expression(true));
            expect_op(":");
            e->a.push_back(parse_expression(true));
          }
          next();
          return e;
        }
        break;
      default:
        break;
    }
    fail("unexpected " + describe(at));
  }

  ExprPtr parse_postfix(ExprPtr e) {
    while (true) {
      Token at = cur();
      if (is_op(".")) {
        next();
        if (cur().type == Tok::Name) {
          auto g = node(ExprType::GetAttr, at);
          g->name = cur().value;
          g->a.push_back(std::move(e));
          e = std::move(g);
        } else if (cur().type == Tok::Int) {
          auto g = node(ExprType::GetItem, at);
          g->a.push_back(std::move(e));
          auto idx = node(ExprType::Literal, cur());
          idx->value = Value::integer(cur().ival);
          g->a.push_back(std::move(idx));
          e = std::move(g);
        } else {
          fail("expected name or number after '.'");
        }
        next();
      } else if (is_op("[")) {
        next();
        e = parse_subscript(std::move(e), at);
        expect_op("]");
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr obj, const Token& at) {
    std::vector<ExprPtr> parts(3);
    bool slice = false;
    int idx = 0;
    if (!is_op(":")) parts[0] = parse_expression(true);
    while (is_op(":") && idx < 2) {
      slice = true;
      next();
      ++idx;
      if (!is_op(":") && !is_op("]")) parts[static_cast<size_t>(idx)] = parse_expression(true);
    }
    if (!slice) {
      if (is_op(",")) {  // a[x, y] indexes with a tuple
        auto t = node(ExprType::Tuple, at);
        t->a.push_back(std::move(parts[0]));
        while (is_op(",")) {
          next();
          if (is_op("]")) break;
          t->a.push_back(parse_expression(true));
        }
        parts[0] = std::move(t);
      }
      auto g = node(ExprType::GetItem, at);
      g->a.push_back(std::move(obj));
      g->a.push_back(std::move(parts[0]));
      return g;
    }
    auto s = node(ExprType::Slice, at);
    s->a.push_back(std::move(obj));
    for (auto& p : parts) s->a.push_back(std::move(p));
    return s;
  }

  void parse_call_args(Expr& e) {
    expect_op("(");
    bool first = true;
    while (!is_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (is_op(")")) break;
      if (is_op("*") || is_op("**")) fail("*args and **kwargs in calls are not supported");
      if (cur().type == Tok::Name && peek().type == Tok::Op && peek().value == "=") {
        std::string k = cur().value;
        next();
        next();
        e.kwargs.emplace_back(std::move(k), parse_expression(true));
      } else {
        if (!e.kwargs.empty()) fail("positional argument after keyword argument");
        e.a.push_back(parse_expression(true));
      }
    }
    next();
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto e = node(ExprType::Call, cur());
    e->line = callee->line;
    e->column = callee->column;
    e->a.push_back(std::move(callee));
    parse_call_args(*e);
    return e;
  }

  ExprPtr parse_filter(ExprPtr input) {
    Token at = cur();
    auto e = node(ExprType::Filter, at);
    e->name = expect_identifier();
    while (is_op(".")) {
      next();
      e->name += "." + expect_identifier();
    }
    e->a.push_back(std::move(input));
    if (is_op("(")) parse_call_args(*e);
    return e;
  }

  ExprPtr parse_filter_expr(ExprPtr e) {
    while (true) {
      if (is_op("|")) {
        next();
        e = parse_filter(std::move(e));
      } else if (is_name("is")) {
        Token at = cur();
        next();
        auto t = node(ExprType::Test, at);
        if (is_name("not")) {
          t->negated = true;
          next();
        }
        t->name = expect_identifier();
        while (is_op(".")) {
          next();
          t->name += "." + expect_identifier();
        }
        t->a.push_back(std::move(e));
        const Token& c = cur();
        if (is_op("(")) {
          parse_call_args(*t);
        } else if ((c.type == Tok::Name || c.type == Tok::String || c.type == Tok::Int || c.type == Tok::Float ||
                    is_op("[") || is_op("{")) &&
                   !(c.type == Tok::Name && (c.value == "else" || c.value == "or" || c.value == "and"))) {
          if (is_name("is")) fail("You cannot chain multiple tests with is");
          t->a.push_back(parse_postfix(parse_primary()));
        }
        e = std::move(t);
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }
};

}  // namespace

std::shared_ptr<const Program> parse(const std::string& source) {
  auto prog = std::make_shared<Program>();
  prog->source = source;
  prog->body = Parser(tokenize(source)).parse_template();
  check_names(*prog);
  resolve_scopes(*prog);
  return prog;
}

}  // namespace tessera::chat
