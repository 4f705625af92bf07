#include "grammar/gbnf.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "grammar/code_points.h"

namespace tessera::grammar {

namespace {

using Sym = Grammar::Symbol;

constexpr uint32_t kMaxRepeat = 10000;

class Parser {
 public:
  explicit Parser(std::string_view text) : t_(text) {}

  std::shared_ptr<const Grammar> run() {
    skip();
    while (i_ < t_.size()) {
      const size_t at = i_;
      const std::string name = identifier();
      skip();
      if (t_.substr(i_, 3) != "::=") fail("expected '::=' after the rule name '" + name + "'", i_);
      i_ += 3;
      if (defined_.count(name)) fail("rule '" + name + "' is defined twice", at);
      defined_[name] = at;
      const int r = rule(name);
      for (auto& alt : alternatives(false)) g_.add(r, std::move(alt));
    }
    for (const auto& [name, at] : used_)
      if (!defined_.count(name)) fail("rule '" + name + "' is used but not defined", at);
    if (!defined_.count("root")) fail("no rule 'root'", t_.size());
    g_.set_root(rules_["root"]);
    try {
      g_.finish();
    } catch (const Error& e) {  // left recursion: name the rule, where it is one of the text's
      const std::string what = e.what();
      const size_t at = what.find("rule ");
      const int id = at == std::string::npos ? -1 : std::atoi(what.c_str() + at + 5);
      std::string name = "a group or repetition";
      for (const auto& [n, r] : rules_)
        if (r == id) name = "rule '" + n + "'";
      throw Error("grammar: " + name + " can reach itself before reading a character (left recursion)");
    }
    return std::make_shared<const Grammar>(std::move(g_));
  }

 private:
  [[noreturn]] void fail(const std::string& what, size_t at) const {
    size_t line = 1, col = 1;
    for (size_t k = 0; k < at && k < t_.size(); ++k) t_[k] == '\n' ? (++line, col = 1) : ++col;
    throw Error("grammar line " + std::to_string(line) + ", column " + std::to_string(col) + ": " + what);
  }
  bool at_end() const { return i_ >= t_.size(); }
  char peek() const { return at_end() ? '\0' : t_[i_]; }
  static bool name_char(char c) { return std::isalnum(uint8_t(c)) || c == '-' || c == '_'; }

  // Spaces, newlines and comments.
  void skip() {
    while (!at_end()) {
      if (std::isspace(uint8_t(peek()))) ++i_;
      else if (peek() == '#') while (!at_end() && peek() != '\n') ++i_;
      else break;
    }
  }
  // Whether a rule definition starts here (`name ::=`): the end of the one before.
  bool definition_ahead() const {
    size_t k = i_;
    while (k < t_.size() && name_char(t_[k])) ++k;
    if (k == i_) return false;
    while (k < t_.size() && (t_[k] == ' ' || t_[k] == '\t' || t_[k] == '\n' || t_[k] == '\r')) ++k;
    return t_.substr(k, 3) == "::=";
  }
  std::string identifier() {
    const size_t start = i_;
    while (!at_end() && name_char(peek())) ++i_;
    if (i_ == start) fail("expected a rule name", start);
    return std::string(t_.substr(start, i_ - start));
  }
  int rule(const std::string& name) {
    auto it = rules_.find(name);
    if (it == rules_.end()) it = rules_.emplace(name, g_.new_rule()).first;
    return it->second;
  }

  // alternatives ::= sequence ("|" sequence)*, up to ')' when nested, else up to the next rule.
  std::vector<std::vector<Sym>> alternatives(bool nested) {
    std::vector<std::vector<Sym>> alts(1);
    for (;;) {
      skip();
      if (at_end() || (!nested && definition_ahead())) break;
      if (peek() == ')') {
        if (!nested) fail("unmatched ')'", i_);
        break;
      }
      if (peek() == '|') {
        ++i_;
        alts.emplace_back();
        continue;
      }
      std::vector<Sym> item = primary();
      item = repeated(std::move(item));
      alts.back().insert(alts.back().end(), item.begin(), item.end());
    }
    return alts;
  }

  std::vector<Sym> primary() {
    const size_t at = i_;
    const char c = peek();
    if (c == '"') {
      ++i_;
      std::string bytes;
      while (!at_end() && peek() != '"') bytes += utf8(character(true));
      if (at_end()) fail("unterminated string", at);
      ++i_;
      return g_.literal(bytes);
    }
    if (c == '[') {
      ++i_;
      const bool negated = peek() == '^';
      if (negated) ++i_;
      std::vector<Range> ranges;
      while (!at_end() && peek() != ']') {
        const uint32_t a = character(false);
        uint32_t b = a;
        if (peek() == '-' && i_ + 1 < t_.size() && t_[i_ + 1] != ']') {
          ++i_;
          b = character(false);
          if (b < a) fail("a character range that runs backwards", at);
        }
        ranges.emplace_back(a, b);
      }
      if (at_end()) fail("unterminated character class", at);
      ++i_;
      return {Grammar::rule(characters(negated ? complement(ranges) : normalized(ranges), at))};
    }
    if (c == '.') {
      ++i_;
      return {Grammar::rule(characters(complement({}), at))};
    }
    if (c == '(') {
      ++i_;
      auto alts = alternatives(true);
      if (peek() != ')') fail("missing ')'", at);
      ++i_;
      return {Grammar::rule(g_.new_rule(std::move(alts)))};
    }
    if (name_char(c)) {
      const std::string name = identifier();
      used_.emplace(name, at);
      return {Grammar::rule(rule(name))};
    }
    fail(std::string("unexpected '") + c + "'", at);
  }

  int characters(const std::vector<Range>& ranges, size_t at) {
    if (ranges.empty()) fail("a character class that matches nothing", at);
    return character_rule(g_, ranges, false);
  }

  // One character of a string (in_string) or a class, escapes decoded, as a code point.
  uint32_t character(bool in_string) {
    const size_t at = i_;
    if (at_end()) fail("unexpected end", at);
    if (peek() != '\\') {
      const uint32_t cp = read_utf8(t_, i_);
      if (cp == kNotACharacter) fail("invalid UTF-8", at);
      return cp;
    }
    ++i_;
    const char e = peek();
    ++i_;
    switch (e) {
      case 'n': return '\n';
      case 'r': return '\r';
      case 't': return '\t';
      case '\\': case '"': case '[': case ']': case '-': case '^': case '\'': return uint32_t(e);
      case 'x': return hex(2, at);
      case 'u': return hex(4, at);
      case 'U': return hex(8, at);
      default: fail(std::string("unknown escape '\\") + e + "'" + (in_string ? " in a string" : " in a class"), at);
    }
  }
  uint32_t hex(int digits, size_t at) {
    uint32_t v = 0;
    for (int k = 0; k < digits; ++k, ++i_) {
      const char c = peek();
      const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) fail("expected " + std::to_string(digits) + " hex digits", at);
      v = v << 4 | uint32_t(d);
    }
    if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) fail("not a character", at);
    return v;
  }

  // item followed by *, +, ?, {m}, {m,} or {m,n}.
  std::vector<Sym> repeated(std::vector<Sym> item) {
    const size_t at = i_;
    const char c = peek();
    if (c != '*' && c != '+' && c != '?' && c != '{') return item;
    ++i_;
    uint32_t min = 0, max = 0;
    bool unbounded = false;
    if (c == '*') unbounded = true;
    else if (c == '+') min = 1, unbounded = true;
    else if (c == '?') max = 1;
    else {
      min = number(at);
      max = min;
      if (peek() == ',') {
        ++i_;
        if (peek() == '}') unbounded = true;
        else max = number(at);
      }
      if (peek() != '}') fail("expected '}'", at);
      ++i_;
      if (!unbounded && max < min) fail("a repetition whose maximum is below its minimum", at);
    }
    const Sym x = item.size() == 1 ? item[0] : Grammar::rule(g_.new_rule({item}));
    return g_.repeat(x, min, unbounded ? std::nullopt : std::optional<uint32_t>(max));
  }
  uint32_t number(size_t at) {
    skip();
    uint32_t v = 0;
    const size_t start = i_;
    while (!at_end() && std::isdigit(uint8_t(peek()))) {
      v = v * 10 + uint32_t(peek() - '0');
      if (v > kMaxRepeat) fail("a repetition count above " + std::to_string(kMaxRepeat), at);
      ++i_;
    }
    if (i_ == start) fail("expected a number", at);
    skip();
    return v;
  }

  std::string_view t_;
  size_t i_ = 0;
  Grammar g_;
  std::map<std::string, int> rules_;
  std::map<std::string, size_t> defined_, used_;  // where each name is defined / first used
};

}  // namespace

std::shared_ptr<const Grammar> gbnf_grammar(std::string_view text) { return Parser(text).run(); }

}  // namespace tessera::grammar
