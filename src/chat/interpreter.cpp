#include "chat/interpreter.h"

#include "chat/builtins.h"
#include "chat/error.h"
#include "chat/text.h"

namespace tessera::chat {

const Value* Frame::lookup(std::string_view name) const {
  for (const Frame* f = this; f; f = f->parent.get())
    for (auto& [k, v] : f->vars)
      if (k == name) return &v;
  return nullptr;
}

void Frame::set(std::string_view name, Value v) {
  for (auto& [k, x] : vars)
    if (k == name) {
      x = std::move(v);
      return;
    }
  vars.emplace_back(std::string(name), std::move(v));
}

// Deep enough for any real template (a macro nesting 200 deep with expressions nested 10 deep).
constexpr int kMaxEvalDepth = 2000;

Interpreter::Interpreter(const RenderOptions& opts) : opts_(opts) {}

std::string Interpreter::render(const Program& program, const Value& context) {
  auto globals = std::make_shared<Frame>();
  install_globals(*globals, opts_);
  auto top = std::make_shared<Frame>();
  top->parent = globals;
  if (context.is_dict())
    for (auto& [k, v] : context.dict->items) top->vars.emplace_back(to_str(k), v);
  bind_locals(*top, program.locals);
  std::string out;
  exec(program.body, top, out);
  return out;
}

void Interpreter::count_iterations(int64_t n) {
  iterations_ += n;
  if (iterations_ > opts_.max_loop_iterations)
    throw TemplateError("RuntimeError", "the template ran more than " + std::to_string(opts_.max_loop_iterations) +
                                            " loop iterations");
}

void Interpreter::check_size(size_t bytes) const {
  if (bytes > opts_.max_output_bytes)
    throw TemplateError("MemoryError", "the template built a string of more than " +
                                           std::to_string(opts_.max_output_bytes) + " bytes");
}

Interpreter::Flow Interpreter::exec(const Body& body, const FramePtr& f, std::string& out) {
  for (auto& s : body) {
    Flow fl = exec_stmt(*s, f, out);
    if (fl != Flow::Normal) return fl;
  }
  return Flow::Normal;
}

void Interpreter::bind_locals(Frame& frame, const std::vector<std::string>& names) {
  for (auto& n : names) frame.set(n, Value::undefined("'" + n + "' is undefined"));
}

Value Interpreter::render_block(const Stmt& s, const FramePtr& parent) {
  const Body& body = s.body;
  auto inner = std::make_shared<Frame>();
  inner->parent = parent;
  bind_locals(*inner, s.locals);
  std::string out;
  exec(body, inner, out);
  return Value::string(std::move(out));
}

Interpreter::Flow Interpreter::exec_stmt(const Stmt& s, const FramePtr& f, std::string& out) {
  try {
    switch (s.type) {
      case StmtType::Text:
        out += s.text;
        check_size(out.size());
        return Flow::Normal;
      case StmtType::Print:
        append_str(eval(*s.expr, f), out);
        check_size(out.size());
        return Flow::Normal;
      case StmtType::If:
        for (auto& [cond, body] : s.branches)
          if (truthy(eval(*cond, f))) return exec(body, f, out);
        return exec(s.else_body, f, out);
      case StmtType::For:
        return exec_for(s, f, out);
      case StmtType::Set:
        exec_set(s, f);
        return Flow::Normal;
      case StmtType::SetBlock: {
        Value v = render_block(s, f);
        if (s.expr) {
          block_inputs_.push_back(std::move(v));
          v = eval(*s.expr, f);
          block_inputs_.pop_back();
        }
        f->set(s.targets[0], std::move(v));
        return Flow::Normal;
      }
      case StmtType::Macro:
        f->set(s.text, make_macro(s, f, false));
        return Flow::Normal;
      case StmtType::CallBlock: {
        const Expr& call_expr = *s.expr;
        Value fn = eval(*call_expr.a[0], f);
        CallArgs args;
        eval_args(call_expr, 1, f, args);
        args.kw.emplace_back("caller", make_macro(s, f, true));
        append_str(call(fn, args), out);
        check_size(out.size());
        return Flow::Normal;
      }
      case StmtType::FilterBlock: {
        block_inputs_.push_back(render_block(s, f));
        Value v = eval(*s.expr, f);
        block_inputs_.pop_back();
        append_str(v, out);
        check_size(out.size());
        return Flow::Normal;
      }
      case StmtType::With: {
        auto inner = std::make_shared<Frame>();
        inner->parent = f;
        for (auto& [names, expr] : s.assigns) {
          Value v = eval(*expr, f);
          if (names.size() == 1) {
            inner->set(names[0], std::move(v));
          } else {
            auto items = iterate(v);
            if (items.size() != names.size()) throw TemplateError("ValueError", "wrong number of values to unpack");
            for (size_t i = 0; i < names.size(); ++i) inner->set(names[i], items[i]);
          }
        }
        bind_locals(*inner, s.locals);
        return exec(s.body, inner, out);
      }
      case StmtType::Scope: {
        auto inner = std::make_shared<Frame>();
        inner->parent = f;
        bind_locals(*inner, s.locals);
        return exec(s.body, inner, out);
      }
      case StmtType::Break:
        return Flow::Break;
      case StmtType::Continue:
        return Flow::Continue;
    }
  } catch (TemplateError& e) {
    if (!e.located()) e.locate(s.line, s.column);
    throw;
  }
  return Flow::Normal;
}

static void bind_targets(Frame& frame, const std::vector<std::string>& names, const Value& v, Interpreter& in) {
  if (names.size() == 1) {
    frame.set(names[0], v);
    return;
  }
  auto items = in.iterate(v);
  if (items.size() < names.size())
    throw TemplateError("ValueError", "not enough values to unpack (expected " + std::to_string(names.size()) +
                                          ", got " + std::to_string(items.size()) + ")");
  if (items.size() > names.size())
    throw TemplateError("ValueError", "too many values to unpack (expected " + std::to_string(names.size()) + ")");
  for (size_t i = 0; i < names.size(); ++i) frame.set(names[i], items[i]);
}

Interpreter::Flow Interpreter::exec_for(const Stmt& s, const FramePtr& f, std::string& out) {
  std::vector<Value> items = iterate(eval(*s.expr, f));
  auto frame = std::make_shared<Frame>();
  frame->parent = f;
  if (s.cond) {
    std::vector<Value> kept;
    for (auto& item : items) {
      count_iterations(1);
      bind_targets(*frame, s.targets, item, *this);
      if (truthy(eval(*s.cond, frame))) kept.push_back(item);
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    auto else_frame = std::make_shared<Frame>();
    else_frame->parent = f;
    bind_locals(*else_frame, s.else_locals);
    return exec(s.else_body, else_frame, out);
  }

  // `loop`: one object updated in place each iteration; cycle() and changed() read shared state.
  auto index0 = std::make_shared<int64_t>(0);
  auto last_changed = std::make_shared<std::vector<Value>>();
  auto has_changed = std::make_shared<bool>(false);
  int64_t n = static_cast<int64_t>(items.size());
  Value loop = Value::new_dict(DictKind::Object);
  auto& L = loop.dict->items;
  for (const char* k : {"index0", "index", "revindex", "revindex0", "first", "last", "length", "previtem",
                        "nextitem", "depth", "depth0"})
    L.emplace_back(Value::string(k), Value::none());
  L[6].second = Value::integer(n);
  L[9].second = Value::integer(1);
  L[10].second = Value::integer(0);
  L.emplace_back(Value::string("cycle"), Value::callable("cycle", [index0](Interpreter&, CallArgs& a) {
                   if (a.pos.empty()) throw TemplateError("TypeError", "no items for cycling given");
                   return a.pos[static_cast<size_t>(*index0 % static_cast<int64_t>(a.pos.size()))];
                 }));
  L.emplace_back(Value::string("changed"),
                 Value::callable("changed", [last_changed, has_changed](Interpreter&, CallArgs& a) {
                   bool same = *has_changed && last_changed->size() == a.pos.size();
                   for (size_t i = 0; same && i < a.pos.size(); ++i) same = equals((*last_changed)[i], a.pos[i]);
                   *last_changed = a.pos;
                   *has_changed = true;
                   return Value::boolean(!same);
                 }));
  for (int64_t i = 0; i < n; ++i) {
    // Variables set in the body do not survive into the next iteration (jinja2 re-initialises them).
    frame->vars.clear();
    frame->vars.emplace_back("loop", loop);
    bind_locals(*frame, s.locals);
    count_iterations(1);
    *index0 = i;
    L[0].second = Value::integer(i);
    L[1].second = Value::integer(i + 1);
    L[2].second = Value::integer(n - i);
    L[3].second = Value::integer(n - i - 1);
    L[4].second = Value::boolean(i == 0);
    L[5].second = Value::boolean(i == n - 1);
    L[7].second = i > 0 ? items[static_cast<size_t>(i - 1)] : Value::undefined("there is no previous item");
    L[8].second = i + 1 < n ? items[static_cast<size_t>(i + 1)] : Value::undefined("there is no next item");
    bind_targets(*frame, s.targets, items[static_cast<size_t>(i)], *this);
    if (exec(s.body, frame, out) == Flow::Break) break;
  }
  return Flow::Normal;
}

void Interpreter::exec_set(const Stmt& s, const FramePtr& f) {
  Value v = eval(*s.expr, f);
  if (!s.text.empty()) {
    const Value* ns = f->lookup(s.targets[0]);
    if (!ns || !ns->is_dict() || ns->dict->kind != DictKind::Namespace)
      throw TemplateError("TemplateRuntimeError", "cannot assign attribute on non-namespace object");
    ns->dict->set(Value::string(s.text), std::move(v));
    return;
  }
  bind_targets(*f, s.targets, v, *this);
}

Value Interpreter::make_macro(const Stmt& s, const FramePtr& def, bool is_caller) {
  const Stmt* st = &s;
  return Value::callable(is_caller ? "caller" : s.text, [st, def, is_caller](Interpreter& in, CallArgs& args) {
    if (++in.call_depth_ > in.opts_.max_call_depth) {
      --in.call_depth_;
      throw TemplateError("RecursionError", "maximum macro call depth (" + std::to_string(in.opts_.max_call_depth) +
                                                ") exceeded");
    }
    struct Guard {
      int& d;
      ~Guard() { --d; }
    } guard{in.call_depth_};
    auto frame = std::make_shared<Frame>();
    frame->parent = def;
    auto& params = st->params;
    for (size_t i = 0; i < params.size(); ++i) {
      const Value* v = args.get(i, params[i].name);
      if (v)
        frame->set(params[i].name, *v);
      else if (params[i].default_value)
        frame->set(params[i].name, in.eval(*params[i].default_value, frame));
      else
        frame->set(params[i].name, Value::undefined("parameter '" + params[i].name + "' was not provided"));
    }
    std::string what = is_caller ? "caller" : "macro '" + st->text + "'";
    if (args.pos.size() > params.size() && !st->takes_varargs)
      throw TemplateError("TypeError", what + " takes not more than " + std::to_string(params.size()) + " argument(s)");
    std::vector<Value> extra;
    for (size_t i = params.size(); i < args.pos.size(); ++i) extra.push_back(args.pos[i]);
    frame->set("varargs", Value::new_list(std::move(extra), ListKind::Tuple));
    Value kwargs = Value::new_dict();
    for (auto& [k, v] : args.kw) {
      bool is_param = false;
      for (auto& p : params) is_param |= p.name == k;
      if (k == "caller")
        frame->set("caller", v);
      else if (!is_param && !st->takes_kwargs)
        throw TemplateError("TypeError", what + " takes no keyword argument '" + k + "'");
      else if (!is_param)
        kwargs.dict->set(Value::string(k), v);
    }
    frame->set("kwargs", kwargs);
    in.bind_locals(*frame, st->locals);
    std::string out;
    in.exec(st->body, frame, out);
    return Value::string(std::move(out));
  });
}

Value Interpreter::eval(const Expr& e, const FramePtr& f) {
  struct Guard {
    int& d;
    ~Guard() { --d; }
  } guard{eval_depth_};
  if (++eval_depth_ > kMaxEvalDepth)
    throw TemplateError("RecursionError", "expressions and macro calls nested too deeply", e.line, e.column);
  try {
    return eval_inner(e, f);
  } catch (TemplateError& err) {
    if (!err.located()) err.locate(e.line, e.column);
    throw;
  }
}

void Interpreter::eval_args(const Expr& e, size_t first, const FramePtr& f, CallArgs& args) {
  args.pos.reserve(e.a.size() - first);
  for (size_t i = first; i < e.a.size(); ++i) args.pos.push_back(eval(*e.a[i], f));
  for (auto& [k, x] : e.kwargs) args.kw.emplace_back(k, eval(*x, f));
}

Value Interpreter::eval_inner(const Expr& e, const FramePtr& f) {
  switch (e.type) {
    case ExprType::Literal:
      return e.value;
    case ExprType::Name:
      if (auto* v = f->lookup(e.name)) return *v;
      return Value::undefined("'" + e.name + "' is undefined");
    case ExprType::GetAttr:
      return getattr(eval(*e.a[0], f), e.name);
    case ExprType::GetItem: {
      Value obj = eval(*e.a[0], f);
      return getitem(obj, eval(*e.a[1], f));
    }
    case ExprType::Slice: {
      Value obj = eval(*e.a[0], f);
      auto part = [&](size_t i) { return e.a[i] ? eval(*e.a[i], f) : Value::none(); };
      Value start = part(1), stop = part(2), step = part(3);
      return slice(obj, start, stop, step);
    }
    case ExprType::Call:
      return eval_call(e, f);
    case ExprType::Filter: {
      Value input = e.a[0] ? eval(*e.a[0], f) : block_inputs_.back();
      CallArgs args;
      eval_args(e, 1, f, args);
      return filter(e.name, input, args);
    }
    case ExprType::Test: {
      Value input = eval(*e.a[0], f);
      CallArgs args;
      eval_args(e, 1, f, args);
      return Value::boolean(test(e.name, input, args) != e.negated);
    }
    case ExprType::Neg:
    case ExprType::Pos: {
      Value v = eval(*e.a[0], f);
      if (v.is_undefined()) fail_undefined(v);
      bool neg = e.type == ExprType::Neg;
      if (v.kind == Kind::Int || v.kind == Kind::Bool) {
        int64_t i = v.kind == Kind::Int ? v.i : v.b;
        return Value::integer(neg ? -i : i);
      }
      if (v.kind == Kind::Float) return Value::number(neg ? -v.f : v.f);
      type_error(std::string("bad operand type for unary ") + (neg ? "-" : "+") + ": '" + type_name(v) + "'");
    }
    case ExprType::Not:
      return Value::boolean(!truthy(eval(*e.a[0], f)));
    case ExprType::Binary: {
      Value l = eval(*e.a[0], f);
      return binary_op(*this, e.name, l, eval(*e.a[1], f));
    }
    case ExprType::Compare:
      return eval_compare(e, f);
    case ExprType::And: {
      Value l = eval(*e.a[0], f);
      return truthy(l) ? eval(*e.a[1], f) : l;
    }
    case ExprType::Or: {
      Value l = eval(*e.a[0], f);
      return truthy(l) ? l : eval(*e.a[1], f);
    }
    case ExprType::Cond:
      if (truthy(eval(*e.a[0], f))) return eval(*e.a[1], f);
      return e.a[2] ? eval(*e.a[2], f) : Value::undefined("the inline if-expression evaluated to false and no else section was defined.");
    case ExprType::List:
    case ExprType::Tuple: {
      std::vector<Value> items;
      items.reserve(e.a.size());
      for (auto& x : e.a) items.push_back(eval(*x, f));
      return Value::new_list(std::move(items), e.type == ExprType::Tuple ? ListKind::Tuple : ListKind::List);
    }
    case ExprType::Dict: {
      Value d = Value::new_dict();
      for (size_t i = 0; i + 1 < e.a.size(); i += 2) {
        Value k = eval(*e.a[i], f);
        if (!hashable(k)) type_error("unhashable type: '" + type_name(k) + "'");
        d.dict->set(std::move(k), eval(*e.a[i + 1], f));
      }
      return d;
    }
  }
  return Value();
}

Value Interpreter::eval_call(const Expr& e, const FramePtr& f) {
  const Expr& callee = *e.a[0];
  CallArgs args;
  if (callee.type == ExprType::GetAttr) {
    Value obj = eval(*callee.a[0], f);
    if (method_access(obj, callee.name) == MethodAccess::Safe) {
      eval_args(e, 1, f, args);
      return call_method(*this, obj, callee.name, args);
    }
    Value fn = getattr(obj, callee.name);
    eval_args(e, 1, f, args);
    return call(fn, args);
  }
  Value fn = eval(callee, f);
  eval_args(e, 1, f, args);
  return call(fn, args);
}

Value Interpreter::eval_compare(const Expr& e, const FramePtr& f) {
  Value l = eval(*e.a[0], f);
  for (size_t i = 0; i < e.ops.size(); ++i) {
    Value r = eval(*e.a[i + 1], f);
    const std::string& op = e.ops[i];
    bool ok;
    if (op == "==") ok = equals(l, r);
    else if (op == "!=") ok = !equals(l, r);
    else if (op == "<") ok = less(l, r);
    else if (op == ">") ok = less(r, l);
    else if (op == "<=") ok = less(l, r) || equals(l, r);
    else if (op == ">=") ok = less(r, l) || equals(l, r);
    else if (op == "in") ok = contains(r, l);
    else ok = !contains(r, l);
    if (!ok) return Value::boolean(false);
    l = std::move(r);
  }
  return Value::boolean(true);
}

Value Interpreter::call(const Value& callee, CallArgs& args) {
  if (callee.kind == Kind::Callable) return callee.fn->fn(*this, args);
  if (callee.is_undefined()) fail_undefined(callee);
  type_error(std::string("'").append(type_name(callee)).append("' object is not callable"));
}

static std::string attr_hint(const Value& obj, const std::string& name) {
  std::string r = "'";
  r += object_repr(obj);
  r += "' has no attribute '";
  r += name;
  r += "'";
  return r;
}

Value Interpreter::getattr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) fail_undefined(obj);
  switch (method_access(obj, name)) {
    case MethodAccess::Safe: {
      Value self = obj;
      return Value::callable(name, [self, name](Interpreter& in, CallArgs& a) { return call_method(in, self, name, a); });
    }
    case MethodAccess::Unsafe:
      return Value::undefined("access to attribute '" + name + "' of '" + type_name(obj) + "' object is unsafe.", true);
    case MethodAccess::None:
      break;
  }
  if (obj.is_dict())
    if (auto* v = obj.dict->find(name)) return *v;
  return Value::undefined(attr_hint(obj, name));
}

Value Interpreter::getitem(const Value& obj, const Value& key) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (obj.is_mapping()) {
    if (auto* v = obj.dict->find(key)) return *v;
  } else if (obj.is_sequence() || obj.is_string()) {
    if (key.kind == Kind::Int || key.kind == Kind::Bool) {
      int64_t i = key.kind == Kind::Int ? key.i : key.b;
      if (obj.is_list()) {
        auto n = static_cast<int64_t>(obj.list->items.size());
        if (i < 0) i += n;
        if (i >= 0 && i < n) return obj.list->items[static_cast<size_t>(i)];
      } else {
        const std::string& s = obj.str();
        auto n = static_cast<int64_t>(text::length(s));
        if (i < 0) i += n;
        if (i >= 0 && i < n) {
          size_t p = 0;
          for (int64_t k = 0; k < i; ++k) text::decode(s, p);
          size_t q = p;
          text::decode(s, q);
          return Value::string(s.substr(p, q - p));
        }
      }
      return Value::undefined("'" + object_repr(obj) + "' has no element " + std::to_string(i));
    }
  }
  if (key.is_string()) {
    if (obj.is_dict() && obj.dict->kind != DictKind::Dict)
      if (auto* v = obj.dict->find(key)) return *v;
    if (method_access(obj, key.str()) != MethodAccess::None) return getattr(obj, key.str());
    return Value::undefined(attr_hint(obj, key.str()));
  }
  return Value::undefined("'" + object_repr(obj) + "' has no element " + repr(key));
}

Value Interpreter::filter(const std::string& name, const Value& input, CallArgs& args) {
  FilterFn fn = find_filter(name);
  if (!fn) throw TemplateError("TemplateRuntimeError", "No filter named '" + name + "' found.");
  return fn(*this, input, args);
}

bool Interpreter::test(const std::string& name, const Value& input, CallArgs& args) {
  TestFn fn = find_test(name);
  if (!fn) throw TemplateError("TemplateRuntimeError", "No test named '" + name + "' found.");
  check_test_arity(name, args);
  return fn(*this, input, args);
}

std::vector<Value> Interpreter::iterate(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined:
      return {};
    case Kind::List:
      if (v.list->deferred_error) std::rethrow_exception(v.list->deferred_error);
      return v.list->items;
    case Kind::Dict:
      if (v.dict->kind == DictKind::Dict) {
        std::vector<Value> keys;
        keys.reserve(v.dict->items.size());
        for (auto& [k, x] : v.dict->items) keys.push_back(k);
        return keys;
      }
      break;
    case Kind::String: {
      std::vector<Value> chars;
      const std::string& s = v.str();
      for (size_t p = 0; p < s.size();) {
        size_t q = p;
        text::decode(s, q);
        chars.push_back(Value::string(s.substr(p, q - p)));
        p = q;
      }
      return chars;
    }
    default:
      break;
  }
  type_error("'" + type_name(v) + "' object is not iterable");
}

}  // namespace tessera::chat
