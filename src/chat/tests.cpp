// jinja2's builtin tests (`x is defined`, `x is string`, ...).
#include <unordered_map>

#include "chat/builtins.h"
#include "chat/error.h"
#include "chat/text.h"

namespace tessera::chat {
namespace {

const Value& arg(const CallArgs& a, const char* test) {
  if (a.pos.empty()) type_error(std::string("test '") + test + "' requires an argument");
  return a.pos[0];
}

bool t_defined(Interpreter&, const Value& v, CallArgs&) { return !v.is_undefined(); }
bool t_undefined(Interpreter&, const Value& v, CallArgs&) { return v.is_undefined(); }
bool t_none(Interpreter&, const Value& v, CallArgs&) { return v.is_none(); }
bool t_boolean(Interpreter&, const Value& v, CallArgs&) { return v.kind == Kind::Bool; }
bool t_true(Interpreter&, const Value& v, CallArgs&) { return v.kind == Kind::Bool && v.b; }
bool t_false(Interpreter&, const Value& v, CallArgs&) { return v.kind == Kind::Bool && !v.b; }
bool t_integer(Interpreter&, const Value& v, CallArgs&) { return v.kind == Kind::Int; }
bool t_float(Interpreter&, const Value& v, CallArgs&) { return v.kind == Kind::Float; }
bool t_number(Interpreter&, const Value& v, CallArgs&) { return v.is_number(); }
bool t_string(Interpreter&, const Value& v, CallArgs&) { return v.is_string(); }
bool t_mapping(Interpreter&, const Value& v, CallArgs&) { return v.is_mapping(); }
bool t_callable(Interpreter&, const Value& v, CallArgs&) { return v.kind == Kind::Callable; }
bool t_escaped(Interpreter&, const Value&, CallArgs&) { return false; }

bool t_iterable(Interpreter&, const Value& v, CallArgs&) {
  return v.is_undefined() || v.is_string() || v.is_list() || v.is_mapping();
}
// len() and __getitem__ both exist (Undefined has both, generators have neither).
bool t_sequence(Interpreter&, const Value& v, CallArgs&) {
  return v.is_undefined() || v.is_string() || v.is_sequence() || v.is_mapping();
}

// value % 2 == 1 / == 0, with Python's % (2.5 is neither odd nor even).
bool t_odd(Interpreter& in, const Value& v, CallArgs&) {
  return equals(binary_op(in, "%", v, Value::integer(2)), Value::integer(1));
}
bool t_even(Interpreter& in, const Value& v, CallArgs&) {
  return equals(binary_op(in, "%", v, Value::integer(2)), Value::integer(0));
}
bool t_divisibleby(Interpreter& in, const Value& v, CallArgs& a) {
  Value m = binary_op(in, "%", v, arg(a, "divisibleby"));
  return equals(m, Value::integer(0));
}

bool t_eq(Interpreter&, const Value& v, CallArgs& a) { return equals(v, arg(a, "eq")); }
bool t_ne(Interpreter&, const Value& v, CallArgs& a) { return !equals(v, arg(a, "ne")); }
bool t_lt(Interpreter&, const Value& v, CallArgs& a) { return less(v, arg(a, "lt")); }
bool t_gt(Interpreter&, const Value& v, CallArgs& a) { return less(arg(a, "gt"), v); }
bool t_le(Interpreter&, const Value& v, CallArgs& a) { return less(v, arg(a, "le")) || equals(v, a.pos[0]); }
bool t_ge(Interpreter&, const Value& v, CallArgs& a) { return less(arg(a, "ge"), v) || equals(v, a.pos[0]); }
bool t_in(Interpreter&, const Value& v, CallArgs& a) { return contains(arg(a, "in"), v); }

bool t_sameas(Interpreter&, const Value& v, CallArgs& a) {
  const Value& o = arg(a, "sameas");
  if (v.kind != o.kind) return false;
  switch (v.kind) {
    case Kind::List: return v.list == o.list;
    case Kind::Dict: return v.dict == o.dict;
    case Kind::Callable: return v.fn == o.fn;
    case Kind::Undefined: return v.s == o.s;
    default: return equals(v, o);
  }
}

bool t_lower(Interpreter&, const Value& v, CallArgs&) {
  std::string s = to_str(v);
  return text::lower(s) == s && text::upper(s) != s;
}
bool t_upper(Interpreter&, const Value& v, CallArgs&) {
  std::string s = to_str(v);
  return text::upper(s) == s && text::lower(s) != s;
}

bool t_filter(Interpreter&, const Value& v, CallArgs&) { return v.is_string() && find_filter(v.str()) != nullptr; }
bool t_test(Interpreter&, const Value& v, CallArgs&) { return v.is_string() && find_test(v.str()) != nullptr; }

const std::unordered_map<std::string_view, TestFn>& table() {
  static const std::unordered_map<std::string_view, TestFn> t = {
      {"boolean", t_boolean}, {"callable", t_callable}, {"defined", t_defined},   {"divisibleby", t_divisibleby},
      {"eq", t_eq},           {"equalto", t_eq},        {"==", t_eq},             {"escaped", t_escaped},
      {"even", t_even},       {"false", t_false},       {"filter", t_filter},     {"float", t_float},
      {"ge", t_ge},           {">=", t_ge},             {"gt", t_gt},             {"greaterthan", t_gt},
      {">", t_gt},            {"in", t_in},             {"integer", t_integer},   {"iterable", t_iterable},
      {"le", t_le},           {"<=", t_le},             {"lower", t_lower},       {"lt", t_lt},
      {"lessthan", t_lt},     {"<", t_lt},              {"mapping", t_mapping},   {"ne", t_ne},
      {"!=", t_ne},           {"none", t_none},         {"number", t_number},     {"odd", t_odd},
      {"sameas", t_sameas},   {"sequence", t_sequence}, {"string", t_string},     {"test", t_test},
      {"true", t_true},       {"undefined", t_undefined}, {"upper", t_upper},
  };
  return t;
}

}  // namespace

void check_test_arity(std::string_view name, const CallArgs& args) {
  static const std::unordered_map<std::string_view, size_t> one_arg = {
      {"divisibleby", 1}, {"eq", 1}, {"equalto", 1}, {"==", 1}, {"ne", 1}, {"!=", 1}, {"lt", 1}, {"lessthan", 1},
      {"<", 1}, {"le", 1}, {"<=", 1}, {"gt", 1}, {"greaterthan", 1}, {">", 1}, {"ge", 1}, {">=", 1}, {"in", 1},
      {"sameas", 1}};
  auto it = one_arg.find(name);
  size_t max = it == one_arg.end() ? 0 : it->second;
  size_t given = args.pos.size() + args.kw.size();
  if (given > max)
    type_error("test_" + std::string(name) + "() takes " + std::to_string(max + 1) + " positional argument" +
               (max ? "s" : "") + " but " + std::to_string(given + 1) + " were given");
}

TestFn find_test(std::string_view name) {
  auto& t = table();
  auto it = t.find(name);
  return it == t.end() ? nullptr : it->second;
}

}  // namespace tessera::chat
