// The value model of the template language: Python's None/bool/int/float/str/list/tuple/dict plus
// jinja2's Undefined, callables (builtins, bound methods, macros) and namespace objects.
// Containers are shared (Python reference semantics); dicts keep insertion order.
#pragma once
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace tessera::chat {

class Interpreter;
struct Value;
struct CallArgs;

enum class Kind : uint8_t { Undefined, None, Bool, Int, Float, String, List, Dict, Callable };
// List flavours: a tuple prints with parentheses; a generator (from map/select/...) cannot be
// measured, indexed or serialised, and dict views (d.keys(), d.values(), d.items()) cannot be
// indexed or serialised, exactly as in Python.
enum class ListKind : uint8_t { List, Tuple, Generator, DictKeys, DictValues, DictItems };
// Namespace: namespace() objects (attributes assignable with {% set ns.x %}); Object: attribute-only
// objects such as `loop` and cycler().
enum class DictKind : uint8_t { Dict, Namespace, Object };

// Containers built by a template may nest at most this deep (values are freed recursively).
constexpr uint32_t kMaxContainerDepth = 500;

struct List {
  std::vector<Value> items;
  ListKind kind = ListKind::List;
  uint32_t depth = 1;
  // A generator whose filter failed: Python raises only once it is consumed, so do we.
  std::exception_ptr deferred_error;
};

struct Dict {
  std::vector<std::pair<Value, Value>> items;
  DictKind kind = DictKind::Dict;
  uint32_t depth = 1;
  const Value* find(std::string_view key) const;
  const Value* find(const Value& key) const;
  void set(Value key, Value value);
};

struct Callable {
  std::string name;
  std::function<Value(Interpreter&, CallArgs&)> fn;
};

struct Value {
  Kind kind = Kind::Undefined;
  bool b = false;
  bool unsafe = false;  // an Undefined standing for a blocked attribute: raises SecurityError on use
  bool markup = false;  // a String marked safe (markupsafe.Markup): plain strings joined to it get HTML-escaped
  int64_t i = 0;
  double f = 0;
  std::shared_ptr<const std::string> s;  // String: the text; Undefined: the error to raise on use
  std::shared_ptr<List> list;
  std::shared_ptr<Dict> dict;
  std::shared_ptr<Callable> fn;

  static Value none() { return make(Kind::None); }
  static Value boolean(bool v) { Value r = make(Kind::Bool); r.b = v; return r; }
  static Value integer(int64_t v) { Value r = make(Kind::Int); r.i = v; return r; }
  static Value number(double v) { Value r = make(Kind::Float); r.f = v; return r; }
  static Value string(std::string v);
  static Value markup_string(std::string v) { Value r = string(std::move(v)); r.markup = true; return r; }
  static Value undefined(std::string hint, bool unsafe = false);
  static Value new_list(std::vector<Value> items = {}, ListKind kind = ListKind::List);
  static Value new_dict(DictKind kind = DictKind::Dict);
  static Value callable(std::string name, std::function<Value(Interpreter&, CallArgs&)> fn);

  bool is_undefined() const { return kind == Kind::Undefined; }
  bool is_none() const { return kind == Kind::None; }
  bool is_string() const { return kind == Kind::String; }
  bool is_list() const { return kind == Kind::List; }
  bool is_dict() const { return kind == Kind::Dict; }
  bool is_number() const { return kind == Kind::Int || kind == Kind::Float || kind == Kind::Bool; }
  bool is_mapping() const { return kind == Kind::Dict && dict->kind == DictKind::Dict; }
  // A list or tuple: indexable, sliceable, concatenable.
  bool is_sequence() const {
    return kind == Kind::List && (list->kind == ListKind::List || list->kind == ListKind::Tuple);
  }
  const std::string& str() const { return *s; }
  double as_double() const { return kind == Kind::Float ? f : kind == Kind::Int ? static_cast<double>(i) : b; }

 private:
  static Value make(Kind k) { Value r; r.kind = k; return r; }
};

struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  // Positional argument `index` or keyword `name`; nullptr when neither was passed.
  const Value* get(size_t index, std::string_view name) const;
  const Value* kwarg(std::string_view name) const;
};

// Python's type(x).__name__ as jinja2 reports it in messages ("dict", "str", "NoneType", ...).
std::string type_name(const Value& v);
// The object part of jinja2's "'<x>' has no attribute 'y'" messages ("dict object", "None").
std::string object_repr(const Value& v);

bool truthy(const Value& v);
bool hashable(const Value& v);  // usable as a dict key or set member (tuples only of hashables)  // raises for an unsafe Undefined only
bool equals(const Value& a, const Value& b);
// Python ordering (<): numbers, strings, lists/tuples; other pairs raise TypeError.
bool less(const Value& a, const Value& b);
std::string to_str(const Value& v);   // str(v); Undefined prints as ""
std::string repr(const Value& v);     // repr(v)
void append_str(const Value& v, std::string& out);

struct JsonOptions {
  std::string indent;      // per level; used when has_indent
  bool has_indent = false;
  std::string item_sep = ", ", key_sep = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;
};
// json.dumps(v, ...); raises TypeError for values JSON cannot hold.
std::string to_json(const Value& v, const JsonOptions& opts);

Value from_json(const nlohmann::ordered_json& j);

// Raises the error an Undefined value stands for (UndefinedError or SecurityError).
[[noreturn]] void fail_undefined(const Value& v);

}  // namespace tessera::chat
