#include "grammar/json_schema.h"

#include <map>
#include <optional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "grammar/code_points.h"
#include "grammar/regex.h"

namespace tessera::grammar {

namespace {

using json = nlohmann::ordered_json;  // properties keep the schema's order
using Sym = Grammar::Symbol;

constexpr int kMaxIndent = 20;      // spaces or tabs after a newline
constexpr int64_t kMaxCount = 100000;  // largest minLength / maxLength / minItems / maxItems taken
constexpr int kMaxDepth = 128;       // nesting of schemas inside schemas

const std::set<std::string>& annotations() {
  static const std::set<std::string> s = {"title",   "description", "default",  "examples",  "format",
                                          "$schema", "$id",         "$comment", "deprecated", "readOnly",
                                          "writeOnly", "$defs",     "definitions"};
  return s;
}
const std::set<std::string>& keywords() {
  static const std::set<std::string> s = {"type",      "properties", "required", "additionalProperties",
                                          "items",     "minItems",   "maxItems", "minLength", "pattern",
                                          "maxLength", "enum",       "const",    "anyOf",
                                          "oneOf",     "allOf",      "$ref"};
  return s;
}

class Compiler {
 public:
  Compiler(const json& root, bool loose) : root_(root), loose_(loose) {}

  std::shared_ptr<const Grammar> run() {
    const int value = compile(root_, 0);
    g_.set_root(rule({R(ws()), R(value), R(ws())}));
    g_.finish();
    return std::make_shared<const Grammar>(std::move(g_));
  }

 private:
  static Sym R(int r) { return Grammar::rule(r); }
  Sym B(unsigned lo, unsigned hi) { return g_.bytes(byte_range(lo, hi)); }
  Sym C(char c) { return g_.bytes(byte_set(std::string_view(&c, 1))); }
  // A new rule of one alternative, or of several.
  int rule(std::vector<Sym> alt) { return choice({std::move(alt)}); }
  int choice(std::vector<std::vector<Sym>> alts) { return g_.new_rule(std::move(alts)); }
  std::vector<Sym> cat(std::vector<Sym> a, const std::vector<Sym>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }
  int literal(const std::string& s) { return rule(g_.literal(s)); }

  [[noreturn]] static void fail(const std::string& at, const std::string& what) {
    throw Error("json_schema" + at + ": " + what);
  }

  // Shared rules, made on first use.
  int ws() {  // "", " ", or a newline and up to 20 spaces or tabs of indent
    if (ws_ < 0) {
      int indent = rule(std::vector<Sym>{});
      for (int k = 0; k < kMaxIndent; ++k) indent = choice({{}, {g_.bytes(byte_set(" \t")), R(indent)}});
      ws_ = choice({{}, {C(' ')}, {C('\n'), R(indent)}});
    }
    return ws_;
  }
  int character() {  // one character of a JSON string, in valid UTF-8: as it is, or escaped
    if (char_ < 0) {
      // \u escapes of UTF-16: a surrogate only as a high one followed by a low one.
      const Sym hex = g_.bytes(byte_range('0', '9') | byte_range('a', 'f') | byte_range('A', 'F'));
      const Sym d = g_.bytes(byte_set("dD"));
      const Sym not_d = g_.bytes(byte_range('0', '9') | byte_range('a', 'c') | byte_range('A', 'C') | byte_set("eEfF"));
      const int low = rule({C('\\'), C('u'), d, g_.bytes(byte_range('c', 'f') | byte_range('C', 'F')), hex, hex});
      const int escape = choice({{g_.bytes(byte_set("\"\\/bfnrt"))},
                                 {C('u'), not_d, hex, hex, hex},
                                 {C('u'), d, B('0', '7'), hex, hex},
                                 {C('u'), d, g_.bytes(byte_set("89abAB")), hex, hex, R(low)}});
      auto alts = character_alternatives(g_, complement({{0, 0x1F}, {'"', '"'}, {'\\', '\\'}}), false);
      alts.push_back({C('\\'), R(escape)});
      char_ = choice(std::move(alts));
    }
    return char_;
  }
  int characters() {  // any number of them
    if (chars_ < 0) {
      chars_ = g_.new_rule();
      g_.add(chars_, {});
      g_.add(chars_, {R(character()), R(chars_)});
    }
    return chars_;
  }
  int string() {
    if (string_ < 0) string_ = rule({C('"'), R(characters()), C('"')});
    return string_;
  }
  int digits() {  // [0-9]*
    if (digits_ < 0) {
      digits_ = g_.new_rule();
      g_.add(digits_, {});
      g_.add(digits_, {B('0', '9'), R(digits_)});
    }
    return digits_;
  }
  int integer() {
    if (integer_ < 0) {
      const int magnitude = choice({{C('0')}, {B('1', '9'), R(digits())}});
      integer_ = choice({{R(magnitude)}, {C('-'), R(magnitude)}});
    }
    return integer_;
  }
  int number() {
    if (number_ < 0) {
      const int frac = choice({{}, {C('.'), B('0', '9'), R(digits())}});
      const int sign = choice({{}, {g_.bytes(byte_set("+-"))}});
      const int exp = choice({{}, {g_.bytes(byte_set("eE")), R(sign), B('0', '9'), R(digits())}});
      number_ = rule({R(integer()), R(frac), R(exp)});
    }
    return number_;
  }
  // Any JSON value. It refers to the object of any members and back: the rule exists first.
  int any_value() {
    if (any_ < 0) {
      any_ = g_.new_rule();
      g_.add(any_, {R(object_of({}, any_))});
      g_.add(any_, {R(array_of(any_, 0, std::nullopt))});
      g_.add(any_, {R(string())});
      g_.add(any_, {R(number())});
      for (const char* lit : {"true", "false", "null"}) g_.add(any_, g_.literal(lit));
    }
    return any_;
  }

  // "{" properties in order, each optional one skippable, then `extra` members (a value rule)
  // when extra >= 0, "}". Commas go between whatever is written: F(i) is the rule at property i
  // with nothing written yet, T(i) the same after something.
  struct Property {
    std::string key;  // the name as JSON text, quotes included
    int value;
    bool required;
  };
  int object_of(const std::vector<Property>& props, int extra) {
    const size_t n = props.size();
    const int colon = rule({R(ws()), C(':'), R(ws())});
    const int comma = rule({R(ws()), C(','), R(ws())});
    const int extra_member = extra < 0 ? -1 : rule({R(string()), R(colon), R(extra)});
    std::vector<int> first(n + 1), then(n + 1);
    // The last ones first: each refers to the next.
    first[n] = g_.new_rule();
    g_.add(first[n], {C('}')});
    then[n] = g_.new_rule();
    g_.add(then[n], {R(ws()), C('}')});
    if (extra_member >= 0) {
      g_.add(first[n], {R(extra_member), R(then[n])});
      g_.add(then[n], {R(comma), R(extra_member), R(then[n])});
    }
    for (size_t i = n; i-- > 0;) {
      const int member = rule(cat(g_.literal(props[i].key), {R(colon), R(props[i].value)}));
      first[i] = g_.new_rule();
      then[i] = g_.new_rule();
      g_.add(first[i], {R(member), R(then[i + 1])});
      g_.add(then[i], {R(comma), R(member), R(then[i + 1])});
      if (!props[i].required) {
        g_.add(first[i], {R(first[i + 1])});
        g_.add(then[i], {R(then[i + 1])});
      }
    }
    return rule({C('{'), R(ws()), R(first[0])});
  }

  // "[" between min and max (none: no limit) items of rule `item`, "]".
  int array_of(int item, int64_t min, std::optional<int64_t> max) {
    const int comma = rule({R(ws()), C(','), R(ws())});
    const int close = rule({R(ws()), C(']')});
    // after[k]: the rest once k >= 1 items are written. Unbounded: one recursive rule from
    // k = max(min, 1) on.
    const int64_t last = max ? *max : std::max<int64_t>(min, 1);
    std::vector<int> after(size_t(last) + 2, -1);
    for (int64_t k = last; k >= 1; --k) after[size_t(k)] = g_.new_rule();
    for (int64_t k = last; k >= 1; --k) {
      const int r = after[size_t(k)];
      if (k >= min) g_.add(r, {R(close)});
      if (!max && k == last) g_.add(r, {R(comma), R(item), R(r)});
      else if (k < last) g_.add(r, {R(comma), R(item), R(after[size_t(k + 1)])});
    }
    std::vector<std::vector<Sym>> body;
    if (min == 0) body.push_back({C(']')});
    if (last >= 1) body.push_back({R(item), R(after[1])});
    return rule({C('['), R(ws()), R(choice(body))});
  }

  // '"' between min and max (none: no limit) characters '"'.
  int string_of(int64_t min, std::optional<int64_t> max) {
    const int quote = literal("\"");
    const int64_t last = max ? *max : min;
    std::vector<int> rest(size_t(last) + 1);  // rest[k]: k characters written
    for (int64_t k = last; k >= 0; --k) {
      const int r = g_.new_rule();
      if (!max && k == last) g_.add(r, {R(characters()), R(quote)});
      else {
        if (k >= min) g_.add(r, {R(quote)});
        if (k < last) g_.add(r, {R(character()), R(rest[size_t(k + 1)])});
      }
      rest[size_t(k)] = r;
    }
    return rule({C('"'), R(rest[0])});
  }

  // A string containing a match of the pattern (the whole string with ^ and $), its characters
  // as the JSON string writes them.
  int pattern(const json& p, const std::string& at) {
    if (!p.is_string()) fail(at, "must be a string");
    RegexRule re;
    try {
      re = add_regex(g_, p.get<std::string>(), true);
    } catch (const Error& e) {
      fail(at, e.what());
    }
    std::vector<Sym> seq = {C('"')};
    if (!re.anchored_start) seq.push_back(R(characters()));
    seq.push_back(R(re.rule));
    if (!re.anchored_end) seq.push_back(R(characters()));
    seq.push_back(C('"'));
    return rule(seq);
  }

  static std::optional<int64_t> count(const json& s, const char* key, const std::string& at) {
    auto it = s.find(key);
    if (it == s.end()) return std::nullopt;
    if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > kMaxCount)
      fail(at + "/" + key, "must be an integer from 0 to " + std::to_string(kMaxCount));
    return it->get<int64_t>();
  }

  int compile(const json& s, int depth, const std::string& at = "") {
    if (depth > kMaxDepth) fail(at, "schemas nested deeper than " + std::to_string(kMaxDepth));
    if (s.is_boolean()) {
      if (!s.get<bool>()) fail(at, "the schema false allows no value");
      return any_value();
    }
    if (!s.is_object()) fail(at, "a schema must be an object or a boolean");
    if (!loose_)
      for (const auto& [key, v] : s.items())
        if (!keywords().count(key) && !annotations().count(key)) fail(at, "the keyword '" + key + "' is not supported");

    if (auto it = s.find("$ref"); it != s.end()) return reference(*it, depth, at);
    if (auto it = s.find("const"); it != s.end()) return literal(it->dump());
    if (auto it = s.find("enum"); it != s.end()) {
      if (!it->is_array() || it->empty()) fail(at + "/enum", "must be a non-empty array");
      std::vector<std::vector<Sym>> alts;
      for (const auto& v : *it) alts.push_back(g_.literal(v.dump()));
      return choice(alts);
    }
    for (const char* key : {"anyOf", "oneOf"})
      if (auto it = s.find(key); it != s.end()) {
        if (!it->is_array() || it->empty()) fail(at + "/" + key, "must be a non-empty array");
        std::vector<std::vector<Sym>> alts;
        for (size_t i = 0; i < it->size(); ++i)
          alts.push_back({R(compile((*it)[i], depth + 1, at + "/" + key + "/" + std::to_string(i)))});
        return choice(alts);
      }
    if (auto it = s.find("allOf"); it != s.end()) {
      if (!it->is_array() || it->size() != 1) fail(at + "/allOf", "only an allOf of one schema is supported");
      return compile((*it)[0], depth + 1, at + "/allOf/0");
    }

    std::vector<std::string> types;
    if (auto it = s.find("type"); it != s.end()) {
      if (it->is_string()) types.push_back(it->get<std::string>());
      else if (it->is_array() && !it->empty())
        for (const auto& t : *it) {
          if (!t.is_string()) fail(at + "/type", "must be a string or an array of strings");
          types.push_back(t.get<std::string>());
        }
      else fail(at + "/type", "must be a string or an array of strings");
    } else if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required")) {
      types.push_back("object");
    } else if (s.contains("items") || s.contains("minItems") || s.contains("maxItems")) {
      types.push_back("array");
    } else if (s.contains("minLength") || s.contains("maxLength")) {
      types.push_back("string");
    } else {
      return any_value();
    }
    if (types.size() == 1) return typed(types[0], s, depth, at);
    std::vector<std::vector<Sym>> alts;
    for (const auto& t : types) alts.push_back({R(typed(t, s, depth, at))});
    return choice(alts);
  }

  int typed(const std::string& type, const json& s, int depth, const std::string& at) {
    if (type == "string") {
      const auto min = count(s, "minLength", at), max = count(s, "maxLength", at);
      if (min && max && *min > *max) fail(at, "minLength is above maxLength");
      if (auto it = s.find("pattern"); it != s.end()) {
        if (!loose_) {
          if (min || max) fail(at, "pattern together with minLength or maxLength is not supported");
          return pattern(*it, at + "/pattern");
        }
        try {
          return pattern(*it, at + "/pattern");
        } catch (const Error&) {  // loose: an expression the grammar cannot hold is left out
        }
      }
      return min || max ? string_of(min.value_or(0), max) : string();
    }
    if (type == "integer") return integer();
    if (type == "number") return number();
    if (type == "boolean") return choice({g_.literal("true"), g_.literal("false")});
    if (type == "null") return literal("null");
    if (type == "array") {
      const auto min = count(s, "minItems", at), max = count(s, "maxItems", at);
      if (min && max && *min > *max) fail(at, "minItems is above maxItems");
      int item = any_value();
      if (auto it = s.find("items"); it != s.end()) item = compile(*it, depth + 1, at + "/items");
      return array_of(item, min.value_or(0), max);
    }
    if (type == "object") return object(s, depth, at);
    fail(at + "/type", "unknown type '" + type + "'");
  }

  int object(const json& s, int depth, const std::string& at) {
    std::set<std::string> required;
    if (auto it = s.find("required"); it != s.end()) {
      if (!it->is_array()) fail(at + "/required", "must be an array of property names");
      for (const auto& r : *it) {
        if (!r.is_string()) fail(at + "/required", "must be an array of property names");
        required.insert(r.get<std::string>());
      }
    }
    std::vector<Property> props;
    const json* listed = nullptr;
    if (auto it = s.find("properties"); it != s.end()) {
      if (!it->is_object()) fail(at + "/properties", "must be an object");
      listed = &*it;
      for (const auto& [name, sub] : it->items())
        props.push_back({json(name).dump(), compile(sub, depth + 1, at + "/properties/" + name), required.count(name) > 0});
    }
    for (const auto& r : required)
      if (!listed || !listed->contains(r)) fail(at + "/required", "'" + r + "' is not among the properties");
    // Extra members: as additionalProperties says; absent, only where no properties are listed.
    int extra = listed ? -1 : any_value();
    if (auto it = s.find("additionalProperties"); it != s.end()) {
      if (it->is_boolean()) extra = it->get<bool>() ? any_value() : -1;
      else extra = compile(*it, depth + 1, at + "/additionalProperties");
    }
    return object_of(props, extra);
  }

  int reference(const json& ref, int depth, const std::string& at) {
    if (!ref.is_string()) fail(at + "/$ref", "must be a string");
    const std::string target = ref.get<std::string>();
    if (auto it = refs_.find(target); it != refs_.end()) return it->second;
    if (target.empty() || target[0] != '#') fail(at + "/$ref", "only references inside the schema ('#...') are supported");
    const json* to = nullptr;
    try {
      to = &root_.at(json::json_pointer(target.substr(1)));
    } catch (const json::exception&) {
      fail(at + "/$ref", "'" + target + "' names nothing in the schema");
    }
    // The rule exists before its body, so a schema that refers to itself refers to it.
    const int r = g_.new_rule();
    refs_[target] = r;
    g_.add(r, {R(compile(*to, depth + 1, target.substr(1)))});
    return r;
  }

  const json& root_;
  const bool loose_;
  Grammar g_;
  std::map<std::string, int> refs_;
  int ws_ = -1, char_ = -1, chars_ = -1, string_ = -1, digits_ = -1, integer_ = -1, number_ = -1;
  int any_ = -1;
};

}  // namespace

std::shared_ptr<const Grammar> json_schema_grammar(const nlohmann::ordered_json& schema, bool loose) {
  try {
    return Compiler(schema, loose).run();
  } catch (const Error& e) {
    const std::string what = e.what();
    // A left-recursive grammar comes from a schema that is its own first part.
    if (what.find("left-recursive") != std::string::npos)
      throw Error("json_schema: a schema refers to itself before any text of its own (" + what + ")");
    throw;
  }
}

}  // namespace tessera::grammar
