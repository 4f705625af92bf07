// jinja2's builtin filters (as of 3.1) plus transformers' tojson.
#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "chat/builtins.h"
#include "chat/error.h"
#include "chat/text.h"

namespace tessera::chat {
namespace {

using Items = std::vector<Value>;

Value generator(Items items) { return Value::new_list(std::move(items), ListKind::Generator); }

// jinja2's generator filters (map, select, items, batch, unique, ...) run only when consumed: an
// error they hit is kept in the generator and raised when something iterates it.
template <FilterFn F>
Value lazy(Interpreter& in, const Value& v, CallArgs& a) {
  try {
    return F(in, v, a);
  } catch (const TemplateError&) {
    Value g = generator({});
    g.list->deferred_error = std::current_exception();
    return g;
  }
}

bool arg_bool(const CallArgs& a, size_t i, const char* name, bool dflt) {
  auto* v = a.get(i, name);
  return v ? truthy(*v) : dflt;
}

std::string soft_str(const Value& v) { return to_str(v); }

// String filters keep a Markup input Markup (they call the Markup's own str methods).
Value like(const Value& input, std::string s) {
  Value r = Value::string(std::move(s));
  r.markup = input.is_string() && input.markup;
  return r;
}

// jinja2's make_attrgetter: "a.b.0" looked up item by item (integers index), with an optional default.
Value lookup_path(Interpreter& in, Value item, const std::string& path, const Value* dflt) {
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    item = in.getitem(item, numeric && part.size() < 18 ? Value::integer(std::stoll(part)) : Value::string(part));
    if (dflt && !dflt->is_none() && item.is_undefined()) item = *dflt;
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return item;
}

Value attr_arg(Interpreter& in, const Value& item, const Value* attribute) {
  if (!attribute || attribute->is_none()) return item;
  if (attribute->kind == Kind::Int) return in.getitem(item, *attribute);
  return lookup_path(in, item, to_str(*attribute), nullptr);
}

Value ignore_case(const Value& v) { return v.is_string() ? Value::string(text::lower(v.str())) : v; }

Value f_abs(Interpreter&, const Value& v, CallArgs&) {
  if (v.kind == Kind::Int) return Value::integer(v.i < 0 ? -v.i : v.i);
  if (v.kind == Kind::Bool) return Value::integer(v.b);
  if (v.kind == Kind::Float) return Value::number(std::fabs(v.f));
  if (v.is_undefined()) fail_undefined(v);
  type_error("bad operand type for abs(): '" + type_name(v) + "'");
}

Value f_attr(Interpreter& in, const Value& v, CallArgs& a) {
  auto* name = a.get(0, "name");
  if (!name) type_error("attr() missing required argument 'name'");
  return in.getattr(v, to_str(*name));
}

Value f_batch(Interpreter& in, const Value& v, CallArgs& a) {
  auto* n = a.get(0, "linecount");
  if (!n) type_error("batch() missing required argument 'linecount'");
  int64_t size = to_int(*n, "linecount");
  if (size <= 0) throw TemplateError("ValueError", "batch size must be positive");
  auto* fill = a.get(1, "fill_with");
  Items out, cur;
  for (auto& x : in.iterate(v)) {
    cur.push_back(x);
    if (static_cast<int64_t>(cur.size()) == size) out.push_back(Value::new_list(std::move(cur))), cur.clear();
  }
  if (!cur.empty()) {
    if (fill && !fill->is_none())
      while (static_cast<int64_t>(cur.size()) < size) cur.push_back(*fill);
    out.push_back(Value::new_list(std::move(cur)));
  }
  return generator(std::move(out));
}

Value f_capitalize(Interpreter&, const Value& v, CallArgs&) { return like(v, text::capitalize(soft_str(v))); }

// Filters that call a str method on their input directly (no str() conversion first).
const std::string& need_str(const Value& v, const char* method) {
  if (v.is_undefined()) fail_undefined(v);
  if (!v.is_string()) throw TemplateError("AttributeError", "'" + type_name(v) + "' object has no attribute '" + method + "'");
  return v.str();
}

Value f_center(Interpreter&, const Value& v, CallArgs& a) {
  auto* w = a.get(0, "width");
  int64_t width = w ? to_int(*w, "width") : 80;
  check_width(width);
  std::string s = soft_str(v);
  auto len = static_cast<int64_t>(text::length(s));
  if (width <= len) return Value::string(s);
  int64_t pad = width - len, left = pad / 2 + (pad & width & 1);
  return Value::string(std::string(static_cast<size_t>(left), ' ') + s + std::string(static_cast<size_t>(pad - left), ' '));
}

Value f_length(Interpreter&, const Value& v, CallArgs&) {
  switch (v.kind) {
    case Kind::Undefined: return Value::integer(0);
    case Kind::String: return Value::integer(static_cast<int64_t>(text::length(v.str())));
    case Kind::List:
      if (v.list->kind != ListKind::Generator) return Value::integer(static_cast<int64_t>(v.list->items.size()));
      break;
    case Kind::Dict:
      if (v.dict->kind == DictKind::Dict) return Value::integer(static_cast<int64_t>(v.dict->items.size()));
      break;
    default: break;
  }
  type_error("object of type '" + type_name(v) + "' has no len()");
}

Value f_default(Interpreter&, const Value& v, CallArgs& a) {
  auto* d = a.get(0, "default_value");
  bool boolean = arg_bool(a, 1, "boolean", false);
  if (v.is_undefined() || (boolean && !truthy(v))) return d ? *d : Value::string("");
  return v;
}

Value f_dictsort(Interpreter&, const Value& v, CallArgs& a) {
  if (v.is_undefined()) fail_undefined(v);
  if (!v.is_mapping()) type_error("'" + type_name(v) + "' object has no attribute 'items'");
  bool cs = arg_bool(a, 0, "case_sensitive", false);
  auto* by = a.get(1, "by");
  std::string by_s = by ? to_str(*by) : "key";
  if (by_s != "key" && by_s != "value")
    throw TemplateError("FilterArgumentError", "You can only sort by either \"key\" or \"value\"");
  size_t pos = by_s == "key" ? 0 : 1;
  bool reverse = arg_bool(a, 2, "reverse", false);
  std::vector<std::pair<Value, Value>> keyed;
  for (auto& [k, x] : v.dict->items) {
    Value sort_key = pos == 0 ? k : x;
    keyed.emplace_back(cs ? sort_key : ignore_case(sort_key), Value::new_list({k, x}, ListKind::Tuple));
  }
  std::stable_sort(keyed.begin(), keyed.end(),
                   [&](auto& p, auto& q) { return reverse ? less(q.first, p.first) : less(p.first, q.first); });
  Items out;
  for (auto& [k, t] : keyed) out.push_back(t);
  return Value::new_list(std::move(out));
}

Value f_escape(Interpreter&, const Value& v, CallArgs&) {
  if (v.is_string() && v.markup) return v;
  return Value::markup_string(text::html_escape(soft_str(v)));
}

Value first_or_last(Interpreter& in, const Value& v, bool first) {
  if (!first && v.is_list() && v.list->kind == ListKind::Generator) type_error("'generator' object is not reversible");
  Items items = in.iterate(v);
  if (items.empty())
    return Value::undefined(first ? "No first item, sequence was empty." : "No last item, sequence was empty.");
  return first ? items.front() : items.back();
}
Value f_first(Interpreter& in, const Value& v, CallArgs&) { return first_or_last(in, v, true); }
Value f_last(Interpreter& in, const Value& v, CallArgs&) { return first_or_last(in, v, false); }

std::optional<double> parse_float(const std::string& raw) {
  std::string s = text::strip(raw, std::nullopt, true, true);
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  if (s.empty()) return std::nullopt;
  if (s.find_first_of("xXpP") != std::string::npos) return std::nullopt;  // strtod's hex floats
  char* end = nullptr;
  double d = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return std::nullopt;
  return d;
}

std::optional<int64_t> parse_int(const std::string& raw, int base) {
  std::string s = text::strip(raw, std::nullopt, true, true);
  bool neg = false;
  size_t p = 0;
  if (p < s.size() && (s[p] == '+' || s[p] == '-')) neg = s[p++] == '-';
  if (base == 16 && s.compare(p, 2, "0x") == 0) p += 2;
  if (p >= s.size() || s[p] == '_') return std::nullopt;
  int64_t r = 0;
  for (; p < s.size(); ++p) {
    char c = s[p];
    if (c == '_' && p + 1 < s.size() && s[p + 1] != '_') continue;
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'z' ? c - 'a' + 10 : c >= 'A' && c <= 'Z' ? c - 'A' + 10 : 99;
    if (d >= base) return std::nullopt;
    if (__builtin_mul_overflow(r, base, &r) || __builtin_add_overflow(r, d, &r)) return std::nullopt;
  }
  return neg ? -r : r;
}

Value f_float(Interpreter&, const Value& v, CallArgs& a) {
  auto* d = a.get(0, "default");
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_number()) return Value::number(v.as_double());
  if (v.is_string())
    if (auto x = parse_float(v.str())) return Value::number(*x);
  return d ? *d : Value::number(0.0);
}

Value f_int(Interpreter&, const Value& v, CallArgs& a) {
  auto* d = a.get(0, "default");
  auto* b = a.get(1, "base");
  int base = b ? static_cast<int>(to_int(*b, "base")) : 10;
  if (v.is_undefined()) fail_undefined(v);
  if (v.kind == Kind::Int || v.kind == Kind::Bool) return Value::integer(v.kind == Kind::Int ? v.i : v.b);
  if (v.kind == Kind::Float && std::isfinite(v.f) && std::fabs(v.f) < 9.2e18)
    return Value::integer(static_cast<int64_t>(v.f));
  if (v.is_string()) {
    if (auto x = parse_int(v.str(), base)) return Value::integer(*x);
    if (auto x = parse_float(v.str()); x && std::isfinite(*x) && std::fabs(*x) < 9.2e18)
      return Value::integer(static_cast<int64_t>(*x));
  }
  return d ? *d : Value::integer(0);
}

Value f_format(Interpreter&, const Value& v, CallArgs& a) {
  if (!a.pos.empty() && !a.kw.empty())
    throw TemplateError("FilterArgumentError", "can't handle positional and keyword arguments at the same time");
  if (!a.kw.empty()) {
    Value d = Value::new_dict();
    for (auto& [k, x] : a.kw) d.dict->set(Value::string(k), x);
    return like(v, percent_format(soft_str(v), d, v.markup));
  }
  return like(v, percent_format(soft_str(v), Value::new_list(a.pos, ListKind::Tuple), v.markup));
}

Value f_indent(Interpreter&, const Value& v, CallArgs& a) {
  auto* w = a.get(0, "width");
  int64_t n = w && !w->is_string() ? to_int(*w, "width") : 4;
  check_width(n);
  std::string ind = w && w->is_string() ? w->str() : std::string(static_cast<size_t>(std::max<int64_t>(0, n)), ' ');
  bool first = arg_bool(a, 1, "first", false), blank = arg_bool(a, 2, "blank", false);
  std::string s = need_str(v, "splitlines") + "\n";
  auto lines = text::splitlines(s, false);
  std::string rv;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) rv += (i ? "\n" + ind : "") + lines[i];
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) rv += "\n" + (lines[i].empty() ? "" : ind + lines[i]);
  }
  if (first) rv = ind + rv;
  return like(v, std::move(rv));
}

Value f_items(Interpreter&, const Value& v, CallArgs&) {
  if (v.is_undefined()) return generator({});
  if (!v.is_mapping()) type_error("Can only get item pairs from a mapping.");
  Items out;
  for (auto& [k, x] : v.dict->items) out.push_back(Value::new_list({k, x}, ListKind::Tuple));
  return generator(std::move(out));
}

Value f_join(Interpreter& in, const Value& v, CallArgs& a) {
  auto* d = a.get(0, "d");
  auto* attr = a.get(1, "attribute");
  std::string sep = d ? to_str(*d) : "", r;
  bool first = true;
  for (auto& x : in.iterate(v)) {
    if (!first) r += sep;
    first = false;
    append_str(attr_arg(in, x, attr), r);
    in.check_size(r.size());
  }
  return Value::string(std::move(r));
}

Value f_list(Interpreter& in, const Value& v, CallArgs&) { return Value::new_list(in.iterate(v)); }
Value f_lower(Interpreter&, const Value& v, CallArgs&) { return like(v, text::lower(soft_str(v))); }
Value f_upper(Interpreter&, const Value& v, CallArgs&) { return like(v, text::upper(soft_str(v))); }
Value f_title(Interpreter&, const Value& v, CallArgs&) { return like(v, text::jinja_title(soft_str(v))); }
Value f_safe(Interpreter&, const Value& v, CallArgs&) {
  if (v.is_string() && v.markup) return v;
  return Value::markup_string(to_str(v));
}
Value f_string(Interpreter&, const Value& v, CallArgs&) { return v.is_string() ? v : Value::string(to_str(v)); }

Value f_map(Interpreter& in, const Value& v, CallArgs& a) {
  Items out;
  if (!truthy(v)) return generator({});  // jinja2 maps over `if value:` only
  if (a.pos.empty()) {
    auto* attr = a.kwarg("attribute");
    if (!attr) type_error("map() requires a filter name or attribute=");
    auto* dflt = a.kwarg("default");
    for (auto& x : in.iterate(v)) out.push_back(attr->kind == Kind::Int ? in.getitem(x, *attr) : lookup_path(in, x, to_str(*attr), dflt));
    return generator(std::move(out));
  }
  std::string name = to_str(a.pos[0]);
  CallArgs rest;
  rest.pos.assign(a.pos.begin() + 1, a.pos.end());
  rest.kw = a.kw;
  for (auto& x : in.iterate(v)) {
    CallArgs each = rest;
    out.push_back(in.filter(name, x, each));
  }
  return generator(std::move(out));
}

Value min_max(Interpreter& in, const Value& v, CallArgs& a, bool want_max) {
  bool cs = arg_bool(a, 0, "case_sensitive", false);
  auto* attr = a.get(1, "attribute");
  Items items = in.iterate(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  Value best_key;
  for (size_t i = 0; i < items.size(); ++i) {
    Value k = attr_arg(in, items[i], attr);
    if (!cs) k = ignore_case(k);
    if (i == 0 || (want_max ? less(best_key, k) : less(k, best_key))) best = i, best_key = k;
  }
  return items[best];
}
Value f_max(Interpreter& in, const Value& v, CallArgs& a) { return min_max(in, v, a, true); }
Value f_min(Interpreter& in, const Value& v, CallArgs& a) { return min_max(in, v, a, false); }

Value f_replace(Interpreter&, const Value& v, CallArgs& a) {
  auto* old = a.get(0, "old");
  auto* rep = a.get(1, "new");
  if (!old || !rep) type_error("replace() missing required arguments");
  auto* count = a.get(2, "count");
  int64_t n = count && !count->is_none() ? to_int(*count, "count") : -1;
  return Value::string(text::replace(soft_str(v), to_str(*old), to_str(*rep), n));
}

Value f_reverse(Interpreter& in, const Value& v, CallArgs&) {
  if (v.is_string()) {
    auto u = text::to_u32(v.str());
    std::reverse(u.begin(), u.end());
    return Value::string(text::from_u32(u));
  }
  Items items = in.iterate(v);
  std::reverse(items.begin(), items.end());
  bool was_generator = v.is_list() && v.list->kind == ListKind::Generator;
  return Value::new_list(std::move(items), was_generator ? ListKind::List : ListKind::Generator);
}

Value f_round(Interpreter&, const Value& v, CallArgs& a) {
  auto* p = a.get(0, "precision");
  auto* m = a.get(1, "method");
  int64_t prec = p ? to_int(*p, "precision") : 0;
  std::string method = m ? to_str(*m) : "common";
  if (!v.is_number()) {
    if (v.is_undefined()) fail_undefined(v);
    type_error("type " + type_name(v) + " doesn't define __round__ method");
  }
  double x = v.as_double(), scale = std::pow(10.0, static_cast<double>(prec));
  if (method == "common") {
    if (v.kind != Kind::Float) return Value::integer(v.kind == Kind::Int ? v.i : v.b);
    return Value::number(std::nearbyint(x * scale) / scale);  // round-half-even, like Python's round()
  }
  if (method == "ceil") return Value::number(std::ceil(x * scale) / scale);
  if (method == "floor") return Value::number(std::floor(x * scale) / scale);
  throw TemplateError("FilterArgumentError", "method must be common, ceil or floor");
}

// select/reject/selectattr/rejectattr.
Value select_common(Interpreter& in, const Value& v, CallArgs& a, bool by_attr, bool keep_if) {
  size_t off = by_attr ? 1 : 0;
  if (by_attr && a.pos.empty()) throw TemplateError("FilterArgumentError", "Missing parameter for attribute name");
  std::string attr = by_attr ? to_str(a.pos[0]) : "";
  bool has_test = a.pos.size() > off;
  std::string test_name = has_test ? to_str(a.pos[off]) : "";
  CallArgs targs;
  if (has_test) targs.pos.assign(a.pos.begin() + static_cast<long>(off) + 1, a.pos.end());
  targs.kw = a.kw;
  Items out;
  if (!truthy(v)) return generator({});  // jinja2 selects over `if value:` only
  for (auto& x : in.iterate(v)) {
    Value probe = by_attr ? lookup_path(in, x, attr, nullptr) : x;
    bool r;
    if (has_test) {
      CallArgs each = targs;
      r = in.test(test_name, probe, each);
    } else {
      r = truthy(probe);
    }
    if (r == keep_if) out.push_back(x);
  }
  return generator(std::move(out));
}
Value f_select(Interpreter& in, const Value& v, CallArgs& a) { return select_common(in, v, a, false, true); }
Value f_reject(Interpreter& in, const Value& v, CallArgs& a) { return select_common(in, v, a, false, false); }
Value f_selectattr(Interpreter& in, const Value& v, CallArgs& a) { return select_common(in, v, a, true, true); }
Value f_rejectattr(Interpreter& in, const Value& v, CallArgs& a) { return select_common(in, v, a, true, false); }

std::vector<std::string> split_attrs(const Value* attr) {
  std::vector<std::string> parts;
  if (!attr || attr->is_none()) return parts;
  if (attr->kind == Kind::Int) return {std::to_string(attr->i)};
  for (auto& p : text::split(to_str(*attr), std::string(","), -1)) parts.push_back(p);
  return parts;
}

Value f_sort(Interpreter& in, const Value& v, CallArgs& a) {
  bool reverse = arg_bool(a, 0, "reverse", false), cs = arg_bool(a, 1, "case_sensitive", false);
  auto attrs = split_attrs(a.get(2, "attribute"));
  Items items = in.iterate(v);
  std::vector<std::pair<Value, size_t>> keyed;
  for (size_t i = 0; i < items.size(); ++i) {
    Value k;
    if (attrs.empty()) {
      k = cs ? items[i] : ignore_case(items[i]);
    } else {
      Items ks;
      for (auto& part : attrs) {
        Value x = lookup_path(in, items[i], part, nullptr);
        ks.push_back(cs ? x : ignore_case(x));
      }
      k = attrs.size() == 1 ? ks[0] : Value::new_list(std::move(ks), ListKind::Tuple);
    }
    keyed.emplace_back(std::move(k), i);
  }
  std::stable_sort(keyed.begin(), keyed.end(),
                   [&](auto& p, auto& q) { return reverse ? less(q.first, p.first) : less(p.first, q.first); });
  Items out;
  for (auto& [k, i] : keyed) out.push_back(items[i]);
  return Value::new_list(std::move(out));
}

Value f_sum(Interpreter& in, const Value& v, CallArgs& a) {
  auto* attr = a.get(0, "attribute");
  auto* start = a.get(1, "start");
  Value acc = start ? *start : Value::integer(0);
  for (auto& x : in.iterate(v)) acc = binary_op(in, "+", acc, attr_arg(in, x, attr));
  return acc;
}

Value f_tojson(Interpreter&, const Value& v, CallArgs& a) {
  JsonOptions o;
  o.ensure_ascii = arg_bool(a, 0, "ensure_ascii", false);
  auto* indent = a.get(1, "indent");
  if (indent && !indent->is_none()) {
    o.has_indent = true;
    int64_t n = indent->is_string() ? 0 : to_int(*indent, "indent");
    check_width(n);
    o.indent = indent->is_string() ? indent->str() : std::string(static_cast<size_t>(std::max<int64_t>(0, n)), ' ');
    o.item_sep = ",";
  }
  auto* seps = a.get(2, "separators");
  if (seps && !seps->is_none()) {
    if (!seps->is_list() || seps->list->items.size() != 2) type_error("separators must be a (item, key) pair");
    o.item_sep = to_str(seps->list->items[0]);
    o.key_sep = to_str(seps->list->items[1]);
  }
  o.sort_keys = arg_bool(a, 3, "sort_keys", false);
  return Value::string(to_json(v, o));
}

Value f_trim(Interpreter&, const Value& v, CallArgs& a) {
  auto* chars = a.get(0, "chars");
  std::optional<std::string> c;
  if (chars && !chars->is_none()) c = to_str(*chars);
  return like(v, text::strip(soft_str(v), c, true, true));
}

Value f_truncate(Interpreter& in, const Value& v, CallArgs& a) {
  auto* l = a.get(0, "length");
  int64_t length = l ? to_int(*l, "length") : 255;
  bool killwords = arg_bool(a, 1, "killwords", false);
  auto* e = a.get(2, "end");
  std::string end = e ? to_str(*e) : "...";
  auto* lp = a.get(3, "leeway");
  int64_t leeway = lp ? to_int(*lp, "leeway") : 5;
  if (!v.is_string()) {  // jinja2 measures the value itself with len()
    CallArgs none;
    if (to_int(f_length(in, v, none), "len") <= length + leeway) return v;
    need_str(v, "rsplit");
  }
  auto u = text::to_u32(soft_str(v));
  auto end_len = static_cast<int64_t>(text::length(end));
  if (static_cast<int64_t>(u.size()) <= length + leeway) return Value::string(text::from_u32(u));
  size_t keep = static_cast<size_t>(std::max<int64_t>(0, length - end_len));
  std::u32string head = u.substr(0, keep);
  if (!killwords) {
    auto sp = head.rfind(U' ');
    if (sp != std::u32string::npos) head = head.substr(0, sp);
  }
  return Value::string(text::from_u32(head) + end);
}

Value f_unique(Interpreter& in, const Value& v, CallArgs& a) {
  bool cs = arg_bool(a, 0, "case_sensitive", false);
  auto* attr = a.get(1, "attribute");
  Items seen, out;
  for (auto& x : in.iterate(v)) {
    Value k = attr_arg(in, x, attr);
    if (!cs) k = ignore_case(k);
    if (!hashable(k)) type_error("unhashable type: '" + type_name(k) + "'");  // Python keeps them in a set
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, k); })) {
      seen.push_back(k);
      out.push_back(x);
    }
  }
  return generator(std::move(out));
}

Value f_wordcount(Interpreter&, const Value& v, CallArgs&) {
  auto u = text::to_u32(soft_str(v));
  int64_t n = 0;
  bool in_word = false;
  for (char32_t c : u) {
    bool w = c == '_' || text::is_alpha(c) || text::is_digit(c);
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value::integer(n);
}

const std::unordered_map<std::string_view, FilterFn>& table() {
  static const std::unordered_map<std::string_view, FilterFn> t = {
      {"abs", f_abs},           {"attr", f_attr},           {"batch", lazy<f_batch>},         {"capitalize", f_capitalize},
      {"center", f_center},     {"count", f_length},        {"d", f_default},           {"default", f_default},
      {"dictsort", f_dictsort}, {"e", f_escape},            {"escape", f_escape},       {"first", f_first},
      {"float", f_float},       {"format", f_format},       {"indent", f_indent},       {"int", f_int},
      {"items", lazy<f_items>},       {"join", f_join},           {"last", f_last},           {"length", f_length},
      {"list", f_list},         {"lower", f_lower},         {"map", lazy<f_map>},             {"max", f_max},
      {"min", f_min},           {"reject", lazy<f_reject>},       {"rejectattr", lazy<f_rejectattr>}, {"replace", f_replace},
      {"reverse", f_reverse},   {"round", f_round},         {"safe", f_safe},           {"select", lazy<f_select>},
      {"selectattr", lazy<f_selectattr>}, {"sort", f_sort},       {"string", f_string},       {"sum", f_sum},
      {"title", f_title},       {"tojson", f_tojson},       {"trim", f_trim},           {"truncate", f_truncate},
      {"unique", lazy<f_unique>},     {"upper", f_upper},         {"wordcount", f_wordcount},
  };
  return t;
}

}  // namespace

FilterFn find_filter(std::string_view name) {
  auto& t = table();
  auto it = t.find(name);
  return it == t.end() ? nullptr : it->second;
}

}  // namespace tessera::chat
