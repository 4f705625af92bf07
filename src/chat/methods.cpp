// Methods of Python's str, dict and list that templates call (`s.strip()`, `d.items()`, ...).
// The immutable sandbox blocks every method that mutates a list or dict.
#include <algorithm>
#include <unordered_map>

#include "chat/builtins.h"
#include "chat/error.h"
#include "chat/text.h"

namespace tessera::chat {
namespace {

using StrMethod = Value (*)(const std::string&, const CallArgs&);

const Value& need(const CallArgs& a, size_t i, const char* name, const char* method) {
  auto* v = a.get(i, name);
  if (!v) type_error(std::string(method) + "() missing required argument '" + name + "'");
  return *v;
}

std::optional<std::string> opt_str(const CallArgs& a, size_t i, const char* name) {
  auto* v = a.get(i, name);
  if (!v || v->is_none()) return std::nullopt;
  if (!v->is_string()) type_error(std::string(name) + " must be None or a string, not " + type_name(*v));
  return v->str();
}

int64_t opt_int(const CallArgs& a, size_t i, const char* name, int64_t dflt) {
  auto* v = a.get(i, name);
  return v && !v->is_none() ? to_int(*v, name) : dflt;
}

Value list_of(const std::vector<std::string>& parts) {
  std::vector<Value> items;
  items.reserve(parts.size());
  for (auto& p : parts) items.push_back(Value::string(p));
  return Value::new_list(std::move(items));
}

Value m_strip(const std::string& s, const CallArgs& a) { return Value::string(text::strip(s, opt_str(a, 0, "chars"), true, true)); }
Value m_lstrip(const std::string& s, const CallArgs& a) { return Value::string(text::strip(s, opt_str(a, 0, "chars"), true, false)); }
Value m_rstrip(const std::string& s, const CallArgs& a) { return Value::string(text::strip(s, opt_str(a, 0, "chars"), false, true)); }

Value m_split(const std::string& s, const CallArgs& a) {
  auto sep = opt_str(a, 0, "sep");
  if (sep && sep->empty()) throw TemplateError("ValueError", "empty separator");
  return list_of(text::split(s, sep, opt_int(a, 1, "maxsplit", -1)));
}
Value m_rsplit(const std::string& s, const CallArgs& a) {
  auto sep = opt_str(a, 0, "sep");
  if (sep && sep->empty()) throw TemplateError("ValueError", "empty separator");
  return list_of(text::rsplit(s, sep, opt_int(a, 1, "maxsplit", -1)));
}
Value m_splitlines(const std::string& s, const CallArgs& a) {
  auto* k = a.get(0, "keepends");
  return list_of(text::splitlines(s, k && truthy(*k)));
}

// The code-point range [start, end) of s that startswith/endswith/find/count look at.
std::u32string window(const std::string& s, const CallArgs& a, size_t first_index) {
  auto u = text::to_u32(s);
  auto n = static_cast<int64_t>(u.size());
  auto norm = [&](int64_t x) { return x < 0 ? std::max<int64_t>(0, x + n) : std::min(x, n); };
  int64_t b = norm(opt_int(a, first_index, "start", 0)), e = norm(opt_int(a, first_index + 1, "end", n));
  if (b > e) return {};
  return u.substr(static_cast<size_t>(b), static_cast<size_t>(e - b));
}

Value affix(const std::string& s, const CallArgs& a, bool prefix, const char* method) {
  const Value& p = need(a, 0, prefix ? "prefix" : "suffix", method);
  std::u32string w = (a.pos.size() > 1 || a.kwarg("start") || a.kwarg("end")) ? window(s, a, 1) : text::to_u32(s);
  auto check = [&](const Value& x) {
    if (!x.is_string())
      type_error(std::string(method) + " first arg must be str or a tuple of str, not " + type_name(x));
    auto q = text::to_u32(x.str());
    if (q.size() > w.size()) return false;
    return prefix ? w.compare(0, q.size(), q) == 0 : w.compare(w.size() - q.size(), q.size(), q) == 0;
  };
  if (p.is_list() && p.list->kind == ListKind::Tuple) {
    for (auto& x : p.list->items)
      if (check(x)) return Value::boolean(true);
    return Value::boolean(false);
  }
  return Value::boolean(check(p));
}
Value m_startswith(const std::string& s, const CallArgs& a) { return affix(s, a, true, "startswith"); }
Value m_endswith(const std::string& s, const CallArgs& a) { return affix(s, a, false, "endswith"); }

Value find_common(const std::string& s, const CallArgs& a, bool reverse, bool raise) {
  const Value& sub = need(a, 0, "sub", "find");
  if (!sub.is_string()) type_error("must be str, not " + type_name(sub));
  auto u = text::to_u32(s);
  auto n = static_cast<int64_t>(u.size());
  auto norm = [&](int64_t x) { return x < 0 ? std::max<int64_t>(0, x + n) : std::min(x, n); };
  int64_t b = norm(opt_int(a, 1, "start", 0)), e = norm(opt_int(a, 2, "end", n));
  auto q = text::to_u32(sub.str());
  int64_t found = -1;
  if (b <= e && static_cast<int64_t>(q.size()) <= e - b) {
    std::u32string_view w(u.data() + b, static_cast<size_t>(e - b));
    auto f = reverse ? w.rfind(q) : w.find(q);
    if (f != std::u32string_view::npos) found = b + static_cast<int64_t>(f);
  }
  if (found < 0 && raise) throw TemplateError("ValueError", "substring not found");
  return Value::integer(found);
}
Value m_find(const std::string& s, const CallArgs& a) { return find_common(s, a, false, false); }
Value m_rfind(const std::string& s, const CallArgs& a) { return find_common(s, a, true, false); }
Value m_index(const std::string& s, const CallArgs& a) { return find_common(s, a, false, true); }
Value m_rindex(const std::string& s, const CallArgs& a) { return find_common(s, a, true, true); }

Value m_count(const std::string& s, const CallArgs& a) {
  const Value& sub = need(a, 0, "sub", "count");
  if (!sub.is_string()) type_error("must be str, not " + type_name(sub));
  auto w = window(s, a, 1);
  auto q = text::to_u32(sub.str());
  if (q.empty()) return Value::integer(static_cast<int64_t>(w.size()) + 1);
  int64_t n = 0;
  for (size_t p = w.find(q); p != std::u32string::npos; p = w.find(q, p + q.size())) ++n;
  return Value::integer(n);
}

Value m_replace(const std::string& s, const CallArgs& a) {
  const Value& o = need(a, 0, "old", "replace");
  const Value& n = need(a, 1, "new", "replace");
  if (!o.is_string() || !n.is_string()) type_error("replace() arguments must be str");
  return Value::string(text::replace(s, o.str(), n.str(), opt_int(a, 2, "count", -1)));
}

Value m_upper(const std::string& s, const CallArgs&) { return Value::string(text::upper(s)); }
Value m_lower(const std::string& s, const CallArgs&) { return Value::string(text::lower(s)); }
Value m_title(const std::string& s, const CallArgs&) { return Value::string(text::py_title(s)); }
Value m_capitalize(const std::string& s, const CallArgs&) { return Value::string(text::capitalize(s)); }
Value m_swapcase(const std::string& s, const CallArgs&) { return Value::string(text::swapcase(s)); }

Value m_join(const std::string& s, const CallArgs& a) {
  const Value& it = need(a, 0, "iterable", "join");
  if (it.is_undefined()) return Value::string("");
  std::vector<Value> items;
  if (it.is_list()) {
    if (it.list->deferred_error) std::rethrow_exception(it.list->deferred_error);
    items = it.list->items;
  }
  else if (it.is_mapping()) for (auto& [k, v] : it.dict->items) items.push_back(k);
  else if (it.is_string()) for (size_t p = 0; p < it.str().size();) {
    size_t q = p;
    text::decode(it.str(), q);
    items.push_back(Value::string(it.str().substr(p, q - p)));
    p = q;
  }
  else type_error("can only join an iterable");
  std::string r;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!items[i].is_string())
      type_error("sequence item " + std::to_string(i) + ": expected str instance, " + type_name(items[i]) + " found");
    if (i) r += s;
    r += items[i].str();
  }
  return Value::string(std::move(r));
}

Value m_format(const std::string& s, const CallArgs& a) { return Value::string(str_format(s, a)); }

Value justify(const std::string& s, const CallArgs& a, int mode, const char* method) {
  int64_t width = to_int(need(a, 0, "width", method), "width");
  check_width(width);
  auto* f = a.get(1, "fillchar");
  std::string fill = f ? to_str(*f) : " ";
  if (text::length(fill) != 1) type_error("The fill character must be exactly one character long");
  auto len = static_cast<int64_t>(text::length(s));
  if (width <= len) return Value::string(s);
  int64_t pad = width - len;
  int64_t left = mode < 0 ? 0 : mode > 0 ? pad : pad / 2 + (pad & width & 1);
  std::string r;
  for (int64_t i = 0; i < left; ++i) r += fill;
  r += s;
  for (int64_t i = left; i < pad; ++i) r += fill;
  return Value::string(std::move(r));
}
Value m_center(const std::string& s, const CallArgs& a) { return justify(s, a, 0, "center"); }
Value m_ljust(const std::string& s, const CallArgs& a) { return justify(s, a, -1, "ljust"); }
Value m_rjust(const std::string& s, const CallArgs& a) { return justify(s, a, 1, "rjust"); }
Value m_zfill(const std::string& s, const CallArgs& a) {
  int64_t width = to_int(need(a, 0, "width", "zfill"), "width");
  check_width(width);
  auto len = static_cast<int64_t>(text::length(s));
  if (width <= len) return Value::string(s);
  std::string zeros(static_cast<size_t>(width - len), '0');
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) return Value::string(s.substr(0, 1) + zeros + s.substr(1));
  return Value::string(zeros + s);
}

template <bool (*Pred)(char32_t)>
Value all_of_cp(const std::string& s, const CallArgs&) {
  auto u = text::to_u32(s);
  return Value::boolean(!u.empty() && std::all_of(u.begin(), u.end(), Pred));
}
bool alnum(char32_t c) { return text::is_alpha(c) || text::is_digit(c); }
Value m_islower(const std::string& s, const CallArgs&) { return Value::boolean(text::lower(s) == s && text::upper(s) != s); }
Value m_isupper(const std::string& s, const CallArgs&) { return Value::boolean(text::upper(s) == s && text::lower(s) != s); }

Value m_removeprefix(const std::string& s, const CallArgs& a) {
  std::string p = to_str(need(a, 0, "prefix", "removeprefix"));
  return Value::string(s.compare(0, p.size(), p) == 0 ? s.substr(p.size()) : s);
}
Value m_removesuffix(const std::string& s, const CallArgs& a) {
  std::string p = to_str(need(a, 0, "suffix", "removesuffix"));
  bool ends = !p.empty() && s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
  return Value::string(ends ? s.substr(0, s.size() - p.size()) : s);
}

Value partition(const std::string& s, const CallArgs& a, bool reverse) {
  std::string sep = to_str(need(a, 0, "sep", "partition"));
  if (sep.empty()) throw TemplateError("ValueError", "empty separator");
  auto f = reverse ? s.rfind(sep) : s.find(sep);
  std::vector<Value> parts;
  if (f == std::string::npos) {
    parts = reverse ? std::vector<Value>{Value::string(""), Value::string(""), Value::string(s)}
                    : std::vector<Value>{Value::string(s), Value::string(""), Value::string("")};
  } else {
    parts = {Value::string(s.substr(0, f)), Value::string(sep), Value::string(s.substr(f + sep.size()))};
  }
  return Value::new_list(std::move(parts), ListKind::Tuple);
}
Value m_partition(const std::string& s, const CallArgs& a) { return partition(s, a, false); }
Value m_rpartition(const std::string& s, const CallArgs& a) { return partition(s, a, true); }

const std::unordered_map<std::string_view, StrMethod>& str_methods() {
  static const std::unordered_map<std::string_view, StrMethod> t = {
      {"strip", m_strip},           {"lstrip", m_lstrip},         {"rstrip", m_rstrip},
      {"split", m_split},           {"rsplit", m_rsplit},         {"splitlines", m_splitlines},
      {"startswith", m_startswith}, {"endswith", m_endswith},     {"find", m_find},
      {"rfind", m_rfind},           {"index", m_index},           {"rindex", m_rindex},
      {"count", m_count},           {"replace", m_replace},       {"upper", m_upper},
      {"lower", m_lower},           {"casefold", m_lower},        {"title", m_title},
      {"capitalize", m_capitalize}, {"swapcase", m_swapcase},     {"join", m_join},
      {"format", m_format},         {"center", m_center},         {"ljust", m_ljust},
      {"rjust", m_rjust},           {"zfill", m_zfill},           {"isalpha", all_of_cp<text::is_alpha>},
      {"isdigit", all_of_cp<text::is_digit>}, {"isdecimal", all_of_cp<text::is_digit>},
      {"isnumeric", all_of_cp<text::is_digit>}, {"isalnum", all_of_cp<alnum>},
      {"isspace", all_of_cp<text::is_space>}, {"islower", m_islower}, {"isupper", m_isupper},
      {"removeprefix", m_removeprefix}, {"removesuffix", m_removesuffix},
      {"partition", m_partition},   {"rpartition", m_rpartition},
  };
  return t;
}

bool one_of(std::string_view name, std::initializer_list<std::string_view> names) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

MethodAccess method_access(const Value& obj, std::string_view name) {
  switch (obj.kind) {
    case Kind::String:
      return str_methods().count(name) ? MethodAccess::Safe : MethodAccess::None;
    case Kind::Dict:
      if (obj.dict->kind != DictKind::Dict) return MethodAccess::None;
      if (one_of(name, {"get", "items", "keys", "values", "copy"})) return MethodAccess::Safe;
      if (one_of(name, {"pop", "popitem", "setdefault", "update", "clear"})) return MethodAccess::Unsafe;
      return MethodAccess::None;
    case Kind::List:
      if (!obj.is_sequence()) return MethodAccess::None;
      if (one_of(name, {"count", "index"})) return MethodAccess::Safe;
      if (obj.list->kind == ListKind::Tuple) return MethodAccess::None;
      if (name == "copy") return MethodAccess::Safe;
      if (one_of(name, {"append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear"}))
        return MethodAccess::Unsafe;
      return MethodAccess::None;
    default:
      return MethodAccess::None;
  }
}

Value call_method(Interpreter&, const Value& obj, const std::string& name, CallArgs& args) {
  if (obj.is_string()) {
    Value r = str_methods().at(name)(obj.str(), args);
    // Markup's string-returning methods return Markup.
    if (obj.markup && r.is_string() &&
        one_of(name, {"strip", "lstrip", "rstrip", "upper", "lower", "title", "capitalize", "swapcase", "center",
                      "ljust", "rjust", "zfill", "replace", "format", "join"}))
      r.markup = true;
    return r;
  }
  if (obj.is_dict()) {
    auto& d = *obj.dict;
    if (name == "get") {
      const Value& key = need(args, 0, "key", "get");
      if (auto* v = d.find(key)) return *v;
      auto* dflt = args.get(1, "default");
      return dflt ? *dflt : Value::none();
    }
    if (name == "copy") {
      Value r = Value::new_dict();
      r.dict->items = d.items;
      return r;
    }
    std::vector<Value> out;
    out.reserve(d.items.size());
    for (auto& [k, v] : d.items) {
      if (name == "items") out.push_back(Value::new_list({k, v}, ListKind::Tuple));
      else out.push_back(name == "keys" ? k : v);
    }
    return Value::new_list(std::move(out), name == "items" ? ListKind::DictItems
                                           : name == "keys" ? ListKind::DictKeys : ListKind::DictValues);
  }
  auto& items = obj.list->items;
  if (name == "copy") return Value::new_list(items);
  const Value& x = need(args, 0, "value", name.c_str());
  if (name == "count")
    return Value::integer(std::count_if(items.begin(), items.end(), [&](const Value& v) { return equals(v, x); }));
  for (size_t i = 0; i < items.size(); ++i)
    if (equals(items[i], x)) return Value::integer(static_cast<int64_t>(i));
  throw TemplateError("ValueError", repr(x) + " is not in list");
}

}  // namespace tessera::chat
