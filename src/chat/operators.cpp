// Python's binary operators, `in`, and slicing, as jinja2 evaluates them.
#include <cmath>

#include "chat/builtins.h"
#include "chat/error.h"
#include "chat/interpreter.h"
#include "chat/text.h"

namespace tessera::chat {
namespace {

int64_t int_of(const Value& v) { return v.kind == Kind::Int ? v.i : v.b; }

[[noreturn]] void overflow() { throw TemplateError("OverflowError", "integer result too large"); }

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
  type_error("unsupported operand type(s) for " + op + ": '" + type_name(a) + "' and '" + type_name(b) + "'");
}

// Bytes of `n` copies of something `unit` bytes long, saturating instead of overflowing.
size_t repeated_size(size_t unit, int64_t n) {
  size_t total;
  return __builtin_mul_overflow(unit, static_cast<size_t>(n), &total) ? SIZE_MAX : total;
}

Value repeat(Interpreter& in, const Value& seq, int64_t n) {
  if (n < 0) n = 0;
  if (seq.is_string()) {
    const std::string& s = seq.str();
    if (s.empty()) n = 0;
    in.check_size(repeated_size(s.size(), n));
    std::string r;
    r.reserve(s.size() * static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) r += s;
    Value out = Value::string(std::move(r));
    out.markup = seq.markup;
    return out;
  }
  auto& items = seq.list->items;
  if (items.empty()) n = 0;
  in.check_size(repeated_size(items.size() * sizeof(Value), n));
  std::vector<Value> r;
  for (int64_t k = 0; k < n; ++k) r.insert(r.end(), items.begin(), items.end());
  return Value::new_list(std::move(r), seq.list->kind);
}

bool is_sequence_for_repeat(const Value& v) { return v.is_string() || v.is_sequence(); }

}  // namespace

Value binary_op(Interpreter& in, const std::string& op, const Value& a, const Value& b) {
  if (op == "~") {
    std::string s = to_str(a);
    append_str(b, s);
    in.check_size(s.size());
    return Value::string(std::move(s));
  }
  if (op == "%" && a.is_string()) {  // str % anything is formatting, even with an Undefined argument
    std::string s = percent_format(a.str(), b, a.markup);
    in.check_size(s.size());
    Value r = Value::string(std::move(s));
    r.markup = a.markup;
    return r;
  }
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  bool num = a.is_number() && b.is_number();
  bool fl = num && (a.kind == Kind::Float || b.kind == Kind::Float);
  double x = a.as_double(), y = b.as_double();
  int64_t r = 0;
  switch (op[0]) {
    case '+':
      if (num) {
        if (fl) return Value::number(x + y);
        if (__builtin_add_overflow(int_of(a), int_of(b), &r)) overflow();
        return Value::integer(r);
      }
      if (a.is_string() && b.is_string()) {
        in.check_size(a.str().size() + b.str().size());
        if (a.markup == b.markup) {
          Value r = Value::string(a.str() + b.str());
          r.markup = a.markup;
          return r;
        }
        // Markup + str escapes the plain side (markupsafe semantics).
        return Value::markup_string(a.markup ? a.str() + text::html_escape(b.str()) : text::html_escape(a.str()) + b.str());
      }
      if (a.is_sequence() && b.is_sequence() && a.list->kind == b.list->kind) {
        std::vector<Value> items = a.list->items;
        items.insert(items.end(), b.list->items.begin(), b.list->items.end());
        return Value::new_list(std::move(items), a.list->kind);
      }
      if (a.is_string() || a.is_list())
        type_error("can only concatenate " + type_name(a) + " (not \"" + type_name(b) + "\") to " + type_name(a));
      unsupported("+", a, b);
    case '-':
      if (!num) unsupported("-", a, b);
      if (fl) return Value::number(x - y);
      if (__builtin_sub_overflow(int_of(a), int_of(b), &r)) overflow();
      return Value::integer(r);
    case '*':
      if (op == "**") {
        if (!num) unsupported("** or pow()", a, b);
        if (!fl && int_of(b) >= 0) {
          int64_t base = int_of(a), e = int_of(b), acc = 1;
          while (e > 0) {
            if ((e & 1) && __builtin_mul_overflow(acc, base, &acc)) overflow();
            e >>= 1;
            if (e > 0 && __builtin_mul_overflow(base, base, &base)) overflow();
          }
          return Value::integer(acc);
        }
        if (x == 0 && y < 0) throw TemplateError("ZeroDivisionError", "0.0 cannot be raised to a negative power");
        return Value::number(std::pow(x, y));
      }
      if (num) {
        if (fl) return Value::number(x * y);
        if (__builtin_mul_overflow(int_of(a), int_of(b), &r)) overflow();
        return Value::integer(r);
      }
      if (is_sequence_for_repeat(a) && (b.kind == Kind::Int || b.kind == Kind::Bool)) return repeat(in, a, int_of(b));
      if (is_sequence_for_repeat(b) && (a.kind == Kind::Int || a.kind == Kind::Bool)) return repeat(in, b, int_of(a));
      if (is_sequence_for_repeat(a) || is_sequence_for_repeat(b))
        type_error("can't multiply sequence by non-int of type '" + type_name(is_sequence_for_repeat(a) ? b : a) + "'");
      unsupported("*", a, b);
    case '/':
      if (op == "//") {
        if (!num) unsupported("//", a, b);
        if (fl) {
          if (y == 0) throw TemplateError("ZeroDivisionError", "float floor division by zero");
          return Value::number(std::floor(x / y));
        }
        int64_t p = int_of(a), q = int_of(b);
        if (q == 0) throw TemplateError("ZeroDivisionError", "integer division or modulo by zero");
        if (p == INT64_MIN && q == -1) overflow();
        int64_t d = p / q;
        if ((p % q != 0) && ((p < 0) != (q < 0))) --d;
        return Value::integer(d);
      }
      if (!num) unsupported("/", a, b);
      if (y == 0) throw TemplateError("ZeroDivisionError", "division by zero");
      return Value::number(x / y);
    case '%': {
      if (!num) unsupported("%", a, b);
      if (fl) {
        if (y == 0) throw TemplateError("ZeroDivisionError", "float modulo");
        double m = std::fmod(x, y);
        if (m != 0 && ((m < 0) != (y < 0))) m += y;
        return Value::number(m);
      }
      int64_t p = int_of(a), q = int_of(b);
      if (q == 0) throw TemplateError("ZeroDivisionError", "integer modulo by zero");
      if (q == -1) return Value::integer(0);
      int64_t m = p % q;
      if (m != 0 && ((m < 0) != (q < 0))) m += q;
      return Value::integer(m);
    }
  }
  throw TemplateError("TemplateSyntaxError", "unknown operator " + op);
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind) {
    case Kind::Undefined:
      return false;
    case Kind::String:
      if (!item.is_string())
        type_error("'in <string>' requires string as left operand, not " + type_name(item));
      return container.str().find(item.str()) != std::string::npos;
    case Kind::List:
      if (container.list->deferred_error) std::rethrow_exception(container.list->deferred_error);
      for (auto& x : container.list->items)
        if (equals(x, item)) return true;
      return false;
    case Kind::Dict:
      if (container.dict->kind == DictKind::Dict) {
        if (!hashable(item)) type_error("unhashable type: '" + type_name(item) + "'");
        return container.dict->find(item) != nullptr;
      }
      break;
    default:
      break;
  }
  type_error("argument of type '" + type_name(container) + "' is not iterable");
}

Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_undefined()) fail_undefined(obj);
  auto index = [](const Value& v, const char* what) -> std::optional<int64_t> {
    if (v.is_none()) return std::nullopt;
    if (v.kind == Kind::Int || v.kind == Kind::Bool) return int_of(v);
    type_error(std::string("slice ") + what + " must be integers or None or have an __index__ method");
  };
  auto st = index(step, "indices");
  int64_t k = st.value_or(1);
  if (k == 0) throw TemplateError("ValueError", "slice step cannot be zero");
  bool is_str = obj.is_string();
  // jinja2 compiles slices to plain Python subscripts, so unsliceable values raise.
  if (obj.is_mapping()) type_error("unhashable type: 'slice'");
  if (!is_str && !obj.is_sequence())
    type_error(std::string("'").append(type_name(obj)).append("' object is not subscriptable"));
  std::u32string u;
  if (is_str) u = text::to_u32(obj.str());
  int64_t len = is_str ? static_cast<int64_t>(u.size()) : static_cast<int64_t>(obj.list->items.size());
  int64_t lower = k > 0 ? 0 : -1, upper = k > 0 ? len : len - 1;
  auto clamp = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t x = *v;
    if (x < 0) x += len;
    return x < lower ? lower : x > upper ? upper : x;
  };
  int64_t b = clamp(index(start, "indices"), k > 0 ? lower : upper);
  int64_t e = clamp(index(stop, "indices"), k > 0 ? upper : lower);
  if (is_str) {
    std::u32string r;
    for (int64_t i = b; k > 0 ? i < e : i > e; i += k) r.push_back(u[static_cast<size_t>(i)]);
    return Value::string(text::from_u32(r));
  }
  std::vector<Value> r;
  for (int64_t i = b; k > 0 ? i < e : i > e; i += k) r.push_back(obj.list->items[static_cast<size_t>(i)]);
  return Value::new_list(std::move(r), obj.list->kind);
}

}  // namespace tessera::chat
