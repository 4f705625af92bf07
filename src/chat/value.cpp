#include "chat/value.h"

#include <algorithm>
#include <cmath>

#include "chat/error.h"
#include "chat/text.h"

namespace tessera::chat {

Value Value::string(std::string v) {
  Value r = make(Kind::String);
  r.s = std::make_shared<const std::string>(std::move(v));
  return r;
}

Value Value::undefined(std::string hint, bool unsafe) {
  Value r;
  r.s = std::make_shared<const std::string>(std::move(hint));
  r.unsafe = unsafe;
  return r;
}

static uint32_t depth_of(const Value& v) {
  return v.kind == Kind::List ? v.list->depth : v.kind == Kind::Dict ? v.dict->depth : 0;
}

static void check_depth(uint32_t depth) {
  if (depth > kMaxContainerDepth)
    throw TemplateError("RecursionError", "lists and dicts nested more than " + std::to_string(kMaxContainerDepth) +
                                              " deep");
}

Value Value::new_list(std::vector<Value> items, ListKind kind) {
  uint32_t depth = 1;
  for (auto& x : items) depth = std::max(depth, depth_of(x) + 1);
  check_depth(depth);
  Value r = make(Kind::List);
  r.list = std::make_shared<List>(List{std::move(items), kind, depth, nullptr});
  return r;
}

Value Value::new_dict(DictKind kind) {
  Value r = make(Kind::Dict);
  r.dict = std::make_shared<Dict>();
  r.dict->kind = kind;
  return r;
}

Value Value::callable(std::string name, std::function<Value(Interpreter&, CallArgs&)> fn) {
  Value r = make(Kind::Callable);
  r.fn = std::make_shared<Callable>(Callable{std::move(name), std::move(fn)});
  return r;
}

const Value* Dict::find(std::string_view key) const {
  for (auto& [k, v] : items)
    if (k.kind == Kind::String && *k.s == key) return &v;
  return nullptr;
}

const Value* Dict::find(const Value& key) const {
  if (key.kind == Kind::String) return find(*key.s);
  for (auto& [k, v] : items)
    if (equals(k, key)) return &v;
  return nullptr;
}

void Dict::set(Value key, Value value) {
  uint32_t d = std::max(depth_of(key), depth_of(value)) + 1;
  check_depth(d);
  depth = std::max(depth, d);
  for (auto& [k, v] : items)
    if (equals(k, key)) {
      v = std::move(value);
      return;
    }
  items.emplace_back(std::move(key), std::move(value));
}

const Value* CallArgs::kwarg(std::string_view name) const {
  for (auto& [k, v] : kw)
    if (k == name) return &v;
  return nullptr;
}

const Value* CallArgs::get(size_t index, std::string_view name) const {
  if (index < pos.size()) return &pos[index];
  return kwarg(name);
}

std::string type_name(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::List:
      switch (v.list->kind) {
        case ListKind::Tuple: return "tuple";
        case ListKind::Generator: return "generator";
        case ListKind::DictKeys: return "dict_keys";
        case ListKind::DictValues: return "dict_values";
        case ListKind::DictItems: return "dict_items";
        default: return "list";
      }
    case Kind::Dict:
      return v.dict->kind == DictKind::Namespace ? "Namespace" : v.dict->kind == DictKind::Object ? "object" : "dict";
    case Kind::Callable: return "function";
  }
  return "object";
}

std::string object_repr(const Value& v) { return v.is_none() ? "None" : type_name(v) + " object"; }

void fail_undefined(const Value& v) {
  throw TemplateError(v.unsafe ? "SecurityError" : "UndefinedError", v.s ? *v.s : "value is undefined");
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined: return false;
    case Kind::None: return false;
    case Kind::Bool: return v.b;
    case Kind::Int: return v.i != 0;
    case Kind::Float: return v.f != 0;
    case Kind::String: return !v.s->empty();
    case Kind::List: return v.list->kind == ListKind::Generator || !v.list->items.empty();
    case Kind::Dict: return v.dict->kind != DictKind::Dict || !v.dict->items.empty();
    case Kind::Callable: return true;
  }
  return false;
}

bool hashable(const Value& v) {
  if (v.kind == Kind::Dict) return v.dict->kind != DictKind::Dict;
  if (v.kind != Kind::List) return true;
  if (v.list->kind == ListKind::Generator) return true;
  if (v.list->kind != ListKind::Tuple) return false;
  return std::all_of(v.list->items.begin(), v.list->items.end(), hashable);
}

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind == Kind::Float || b.kind == Kind::Float) return a.as_double() == b.as_double();
    return (a.kind == Kind::Int ? a.i : a.b) == (b.kind == Kind::Int ? b.i : b.b);
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Kind::Undefined:
    case Kind::None: return true;
    case Kind::String: return a.s == b.s || *a.s == *b.s;
    case Kind::List: {
      if (a.list == b.list) return true;
      if (a.list->kind != b.list->kind || a.list->kind == ListKind::Generator || a.list->kind == ListKind::DictValues)
        return false;
      auto& x = a.list->items;
      auto& y = b.list->items;
      if (x.size() != y.size()) return false;
      if (a.list->kind != ListKind::List && a.list->kind != ListKind::Tuple) {  // keys/items views compare as sets
        for (auto& v : x)
          if (std::none_of(y.begin(), y.end(), [&](const Value& w) { return equals(v, w); })) return false;
        return true;
      }
      for (size_t i = 0; i < x.size(); ++i)
        if (!equals(x[i], y[i])) return false;
      return true;
    }
    case Kind::Dict: {
      if (a.dict == b.dict) return true;
      if (a.dict->kind != DictKind::Dict || b.dict->kind != DictKind::Dict) return false;
      if (a.dict->items.size() != b.dict->items.size()) return false;
      for (auto& [k, v] : a.dict->items) {
        auto* o = b.dict->find(k);
        if (!o || !equals(v, *o)) return false;
      }
      return true;
    }
    case Kind::Callable: return a.fn == b.fn;
    default: return false;
  }
}

bool less(const Value& a, const Value& b) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (a.is_number() && b.is_number()) {
    if (a.kind == Kind::Float || b.kind == Kind::Float) return a.as_double() < b.as_double();
    return (a.kind == Kind::Int ? a.i : a.b) < (b.kind == Kind::Int ? b.i : b.b);
  }
  if (a.is_string() && b.is_string()) return *a.s < *b.s;
  if (a.is_sequence() && b.is_sequence() && a.list->kind == b.list->kind) {
    auto& x = a.list->items;
    auto& y = b.list->items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equals(x[i], y[i])) continue;
      return less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  throw TemplateError("TypeError", "'<' not supported between instances of '" + type_name(a) + "' and '" +
                                       type_name(b) + "'");
}

static void append_repr(const Value& v, std::string& out, int depth);

static void append_container(const Value& v, std::string& out, int depth) {
  if (depth > 1000) throw TemplateError("RecursionError", "maximum recursion depth exceeded while getting repr");
  if (v.kind == Kind::List) {
    bool tuple = v.list->kind == ListKind::Tuple;
    out += tuple ? '(' : '[';
    bool first = true;
    for (auto& x : v.list->items) {
      if (!first) out += ", ";
      first = false;
      append_repr(x, out, depth + 1);
    }
    if (tuple && v.list->items.size() == 1) out += ',';
    out += tuple ? ')' : ']';
    return;
  }
  out += '{';
  bool first = true;
  for (auto& [k, x] : v.dict->items) {
    if (!first) out += ", ";
    first = false;
    append_repr(k, out, depth + 1);
    out += ": ";
    append_repr(x, out, depth + 1);
  }
  out += '}';
}

static void append_object(const Value& v, std::string& out, int depth) {
  switch (v.kind) {
    case Kind::None: out += "None"; break;
    case Kind::Bool: out += v.b ? "True" : "False"; break;
    case Kind::Int: out += std::to_string(v.i); break;
    case Kind::Float: out += text::float_repr(v.f); break;
    case Kind::List:
      if (v.list->kind == ListKind::Generator) {
        out += "<generator object>";
      } else if (v.is_sequence()) {
        append_container(v, out, depth);
      } else {  // dict_keys([...])
        out += type_name(v) + "(";
        append_container(Value::new_list(v.list->items), out, depth);
        out += ")";
      }
      break;
    case Kind::Dict:
      if (v.dict->kind == DictKind::Namespace) {
        out += "<Namespace ";
        Value plain = v;
        plain.dict = std::make_shared<Dict>(Dict{v.dict->items, DictKind::Dict});
        if (depth > 50) throw TemplateError("RecursionError", "maximum recursion depth exceeded");
        append_container(plain, out, depth + 1);
        out += '>';
      } else if (v.dict->kind == DictKind::Object) {
        out += "<object>";
      } else {
        append_container(v, out, depth);
      }
      break;
    case Kind::Callable: out += "<function " + v.fn->name + ">"; break;
    default: break;
  }
}

static void append_repr(const Value& v, std::string& out, int depth) {
  if (v.kind == Kind::String && v.markup)
    out += "Markup(" + text::repr(*v.s) + ")";
  else if (v.kind == Kind::String)
    out += text::repr(*v.s);
  else if (v.kind == Kind::Undefined)
    out += "Undefined";
  else
    append_object(v, out, depth);
}

void append_str(const Value& v, std::string& out) {
  if (v.kind == Kind::String)
    out += *v.s;
  else if (v.kind != Kind::Undefined)
    append_object(v, out, 0);
}

std::string to_str(const Value& v) {
  if (v.kind == Kind::String) return *v.s;
  std::string out;
  append_str(v, out);
  return out;
}

std::string repr(const Value& v) {
  std::string out;
  append_repr(v, out, 0);
  return out;
}

static void json_float(double f, std::string& out) {
  if (std::isnan(f))
    out += "NaN";
  else if (std::isinf(f))
    out += f < 0 ? "-Infinity" : "Infinity";
  else
    out += text::float_repr(f);
}

static void dump(const Value& v, const JsonOptions& o, int level, std::string& out) {
  if (level > 1000) throw TemplateError("RecursionError", "maximum recursion depth exceeded while encoding a JSON object");
  auto newline = [&](int lvl) {
    out += '\n';
    for (int i = 0; i < lvl; ++i) out += o.indent;
  };
  auto not_serializable = [&] {
    throw TemplateError("TypeError", "Object of type " + type_name(v) + " is not JSON serializable");
  };
  switch (v.kind) {
    case Kind::None: out += "null"; return;
    case Kind::Bool: out += v.b ? "true" : "false"; return;
    case Kind::Int: out += std::to_string(v.i); return;
    case Kind::Float: json_float(v.f, out); return;
    case Kind::String: text::json_escape(*v.s, out, o.ensure_ascii); return;
    case Kind::List: {
      if (!v.is_sequence()) not_serializable();
      auto& items = v.list->items;
      if (items.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      if (o.has_indent) newline(level + 1);
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) {
          out += o.item_sep;
          if (o.has_indent) newline(level + 1);
        }
        dump(items[i], o, level + 1, out);
      }
      if (o.has_indent) newline(level);
      out += ']';
      return;
    }
    case Kind::Dict: {
      if (v.dict->kind != DictKind::Dict) not_serializable();
      std::vector<std::pair<std::string, const Value*>> entries;
      for (auto& [k, x] : v.dict->items) {
        std::string key;
        switch (k.kind) {
          case Kind::String: key = *k.s; break;
          case Kind::None: key = "null"; break;
          case Kind::Bool: key = k.b ? "true" : "false"; break;
          case Kind::Int: key = std::to_string(k.i); break;
          case Kind::Float: json_float(k.f, key); break;
          default:
            throw TemplateError("TypeError", "keys must be str, int, float, bool or None, not " + type_name(k));
        }
        entries.emplace_back(std::move(key), &x);
      }
      if (entries.empty()) {
        out += "{}";
        return;
      }
      if (o.sort_keys)
        std::stable_sort(entries.begin(), entries.end(), [](auto& a, auto& b) { return a.first < b.first; });
      out += '{';
      if (o.has_indent) newline(level + 1);
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i) {
          out += o.item_sep;
          if (o.has_indent) newline(level + 1);
        }
        text::json_escape(entries[i].first, out, o.ensure_ascii);
        out += o.key_sep;
        dump(*entries[i].second, o, level + 1, out);
      }
      if (o.has_indent) newline(level);
      out += '}';
      return;
    }
    default: not_serializable();
  }
}

std::string to_json(const Value& v, const JsonOptions& opts) {
  std::string out;
  dump(v, opts, 0, out);
  return out;
}

Value from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::none();
    case nlohmann::ordered_json::value_t::boolean: return Value::boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value::integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      auto u = j.get<uint64_t>();
      return u <= static_cast<uint64_t>(INT64_MAX) ? Value::integer(static_cast<int64_t>(u))
                                                   : Value::number(static_cast<double>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value::number(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value::string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (auto& x : j) items.push_back(from_json(x));
      return Value::new_list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Value d = Value::new_dict();
      d.dict->items.reserve(j.size());
      for (auto& [k, x] : j.items()) d.dict->items.emplace_back(Value::string(k), from_json(x));
      return d;
    }
    default: return Value::none();
  }
}

}  // namespace tessera::chat
