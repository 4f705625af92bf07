#include "chat/analysis.h"

#include <map>
#include <set>

#include "chat/builtins.h"
#include "chat/error.h"

namespace tessera::chat {
namespace {

// How a scope's local starts out (jinja2's VAR_LOAD_*).
enum class Start { Resolve, Alias, Undefined, Parameter };

struct Symbols {
  const Symbols* parent = nullptr;
  std::map<std::string, Start> refs;
  std::set<std::string> stores;

  bool has_ref(const std::string& n) const {
    for (const Symbols* s = this; s; s = s->parent)
      if (s->refs.count(n)) return true;
    return false;
  }
  void load(const std::string& n) {
    if (!has_ref(n)) refs[n] = Start::Resolve;
  }
  void store(const std::string& n) {
    stores.insert(n);
    if (!refs.count(n)) refs[n] = parent && parent->has_ref(n) ? Start::Alias : Start::Undefined;
  }
  void param(const std::string& n) { refs[n] = Start::Parameter; }

  // Names assigned in only some branches of an if start from the enclosing value instead.
  void branch_update(const std::vector<Symbols>& branches) {
    std::map<std::string, size_t> counts;
    for (auto& b : branches)
      for (auto& n : b.stores)
        if (!stores.count(n)) ++counts[n];
    for (auto& b : branches) {
      for (auto& [n, st] : b.refs) refs[n] = st;
      stores.insert(b.stores.begin(), b.stores.end());
    }
    for (auto& [n, c] : counts) {
      if (c == branches.size()) continue;
      refs[n] = parent && parent->has_ref(n) ? Start::Alias : Start::Resolve;
    }
  }

  std::vector<std::string> undefined_names() const {
    std::vector<std::string> out;
    for (auto& [n, st] : refs)
      if (st == Start::Undefined) out.push_back(n);
    return out;
  }
};

// Visits one scope's own level; nested scopes are collected and analysed after it.
class Visitor {
 public:
  explicit Visitor(Symbols& s) : sym_(&s) {}
  std::vector<std::pair<Stmt*, int>> nested;  // (statement, which body: 0 body, 1 else)

  void expr(const Expr* e) {
    if (!e) return;
    if (e->type == ExprType::Name) sym_->load(e->name);
    for (auto& c : e->a) expr(c.get());
    for (auto& [k, c] : e->kwargs) expr(c.get());
  }

  void body(Body& b) {
    for (auto& s : b) stmt(*s);
  }

  void stmt(Stmt& s) {
    switch (s.type) {
      case StmtType::Print: expr(s.expr.get()); break;
      case StmtType::If: visit_if(s, 0); break;
      case StmtType::For:
        expr(s.expr.get());
        nested.emplace_back(&s, 0);
        nested.emplace_back(&s, 1);
        break;
      case StmtType::Set:
        expr(s.expr.get());
        if (!s.text.empty())
          sym_->load(s.targets[0]);  // ns.attr = ...
        else
          for (auto& t : s.targets) sym_->store(t);
        break;
      case StmtType::SetBlock:
        sym_->store(s.targets[0]);
        nested.emplace_back(&s, 0);
        break;
      case StmtType::Macro:
        sym_->store(s.text);
        nested.emplace_back(&s, 0);
        break;
      case StmtType::CallBlock:
        expr(s.expr.get());
        nested.emplace_back(&s, 0);
        break;
      case StmtType::FilterBlock:
        nested.emplace_back(&s, 0);
        break;
      case StmtType::With:
        for (auto& [names, e] : s.assigns) expr(e.get());
        nested.emplace_back(&s, 0);
        break;
      case StmtType::Scope:
        nested.emplace_back(&s, 0);
        break;
      default:
        break;
    }
  }

 private:
  Symbols* sym_;

  // jinja2 nests elif branches as ifs inside the first if's elif list; each if merges three branches.
  void visit_if(Stmt& s, size_t from) {
    expr(s.branches[from].first.get());
    Symbols& outer = *sym_;
    std::vector<Symbols> branches(3, outer);
    sym_ = &branches[0];
    body(s.branches[from].second);
    sym_ = &branches[1];
    if (from == 0)
      for (size_t i = 1; i < s.branches.size(); ++i) visit_elif(s, i);
    sym_ = &branches[2];
    if (from == 0) body(s.else_body);
    sym_ = &outer;
    outer.branch_update(branches);
  }

  void visit_elif(Stmt& s, size_t i) {
    expr(s.branches[i].first.get());
    Symbols& outer = *sym_;
    std::vector<Symbols> branches(3, outer);
    sym_ = &branches[0];
    body(s.branches[i].second);
    sym_ = &outer;
    outer.branch_update(branches);
  }
};

void analyse(Body& b, Symbols& sym, std::vector<std::string>& undefined);

void analyse_nested(Stmt& s, int which, const Symbols& parent) {
  Symbols sym;
  sym.parent = &parent;
  switch (s.type) {
    case StmtType::For:
      if (which == 1) {
        analyse(s.else_body, sym, s.else_locals);
        return;
      }
      for (auto& t : s.targets) sym.param(t);
      sym.param("loop");
      break;
    case StmtType::Macro:
    case StmtType::CallBlock:
      for (auto& p : s.params) sym.param(p.name);
      for (const char* special : {"varargs", "kwargs", "caller"}) sym.param(special);
      break;
    case StmtType::With:
      for (auto& [names, e] : s.assigns)
        for (auto& n : names) sym.param(n);
      break;
    default:
      break;
  }
  analyse(s.body, sym, s.locals);
}

void analyse(Body& b, Symbols& sym, std::vector<std::string>& undefined) {
  Visitor v(sym);
  v.body(b);
  undefined = sym.undefined_names();
  for (auto& [s, which] : v.nested) analyse_nested(*s, which, sym);
}

// jinja2 resolves filters and tests when it compiles: an unknown one is a TemplateAssertionError
// for the whole template, unless it sits in a "soft" frame (an if statement or an inline if at the
// same level), where it only raises when evaluated. Loop, macro and block bodies are not soft.
// Also rejects break/continue outside a loop body (a macro body is a function of its own).
class NameCheck {
 public:
  void body(const Body& b, bool soft) {
    for (auto& s : b) stmt(*s, soft);
  }

 private:
  bool in_loop_ = false;

  void loop_body(const Body& b, bool in_loop) {
    bool saved = in_loop_;
    in_loop_ = in_loop;
    body(b, false);
    in_loop_ = saved;
  }

  void expr(const Expr* e, bool soft) {
    if (!e) return;
    if (e->type == ExprType::Cond) soft = true;
    if ((e->type == ExprType::Filter && !find_filter(e->name)) || (e->type == ExprType::Test && !find_test(e->name))) {
      if (!soft)
        throw TemplateError("TemplateAssertionError",
                            std::string("No ") + (e->type == ExprType::Filter ? "filter" : "test") + " named '" +
                                e->name + "'.",
                            e->line, e->column);
    }
    for (auto& c : e->a) expr(c.get(), soft);
    for (auto& [k, c] : e->kwargs) expr(c.get(), soft);
  }

  void stmt(const Stmt& s, bool soft) {
    switch (s.type) {
      case StmtType::If:
        for (auto& [cond, b] : s.branches) {
          expr(cond.get(), true);
          body(b, true);
        }
        body(s.else_body, true);
        return;
      case StmtType::For:
        expr(s.expr.get(), soft);
        expr(s.cond.get(), false);
        loop_body(s.body, true);
        body(s.else_body, soft);
        return;
      case StmtType::Macro:
      case StmtType::CallBlock:
        for (auto& p : s.params) expr(p.default_value.get(), false);
        if (s.type == StmtType::CallBlock) expr(s.expr.get(), soft);
        loop_body(s.body, false);
        return;
      case StmtType::SetBlock:
      case StmtType::FilterBlock:
        expr(s.expr.get(), false);
        body(s.body, false);
        return;
      case StmtType::With:
        for (auto& [names, e] : s.assigns) expr(e.get(), soft);
        body(s.body, false);
        return;
      case StmtType::Scope:
        loop_body(s.body, false);
        return;
      case StmtType::Break:
      case StmtType::Continue:
        if (!in_loop_)
          throw TemplateError("SyntaxError", std::string("'") + (s.type == StmtType::Break ? "break" : "continue") +
                                                 "' outside loop", s.line, s.column);
        return;
      default:
        expr(s.expr.get(), soft);
    }
  }
};

// Whether a name is read anywhere in a body (jinja2 lets a macro take extra positional arguments
// only when its body reads `varargs`, and unknown keywords only when it reads `kwargs`).
bool reads(const Expr* e, std::string_view name) {
  if (!e) return false;
  if (e->type == ExprType::Name && e->name == name) return true;
  for (auto& c : e->a)
    if (reads(c.get(), name)) return true;
  for (auto& [k, c] : e->kwargs)
    if (reads(c.get(), name)) return true;
  return false;
}

bool reads(const Body& b, std::string_view name) {
  for (auto& s : b) {
    if (reads(s->expr.get(), name) || reads(s->cond.get(), name) || reads(s->body, name) || reads(s->else_body, name))
      return true;
    for (auto& [c, branch] : s->branches)
      if (reads(c.get(), name) || reads(branch, name)) return true;
    for (auto& p : s->params)
      if (reads(p.default_value.get(), name)) return true;
    for (auto& [n, e] : s->assigns)
      if (reads(e.get(), name)) return true;
  }
  return false;
}

void mark_macros(Body& b) {
  for (auto& s : b) {
    if (s->type == StmtType::Macro || s->type == StmtType::CallBlock) {
      s->takes_varargs = reads(s->body, "varargs");
      s->takes_kwargs = reads(s->body, "kwargs");
    }
    mark_macros(s->body);
    mark_macros(s->else_body);
    for (auto& [c, branch] : s->branches) mark_macros(branch);
  }
}

}  // namespace

void check_names(const Program& program) { NameCheck().body(program.body, false); }

void resolve_scopes(Program& program) {
  mark_macros(program.body);
  Symbols root;
  analyse(program.body, root, program.locals);
}

}  // namespace tessera::chat
