#include "grammar/regex.h"

#include <cctype>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "grammar/code_points.h"

namespace tessera::grammar {

namespace {

using Sym = Grammar::Symbol;

constexpr uint32_t kMaxRepeat = 10000;

const std::vector<Range> kDigit = {{'0', '9'}};
const std::vector<Range> kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const std::vector<Range> kSpace = {{'\t', '\r'}, {' ', ' '}};  // \t \n \v \f \r and space

class Parser {
 public:
  Parser(Grammar& g, std::string_view p, bool json_string) : g_(g), p_(p), json_(json_string) {}

  RegexRule run() {
    RegexRule out;
    if (peek() == '^') ++i_, out.anchored_start = true;
    std::string_view body = p_;
    if (!body.empty() && body.back() == '$' && !escaped_at(body.size() - 1)) {
      out.anchored_end = true;
      p_ = body.substr(0, body.size() - 1);
    }
    out.rule = alternatives();
    if (i_ < p_.size()) fail(peek() == ')' ? "unmatched ')'" : "unexpected character");
    return out;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error("regex, at character " + std::to_string(i_ + 1) + ": " + what);
  }
  char peek() const { return i_ < p_.size() ? p_[i_] : '\0'; }
  bool at_end() const { return i_ >= p_.size(); }
  // Whether the character at k is escaped (an odd run of backslashes before it).
  bool escaped_at(size_t k) const {
    size_t n = 0;
    while (k > n && p_[k - n - 1] == '\\') ++n;
    return n % 2 == 1;
  }

  int alternatives() {
    std::vector<std::vector<Sym>> alts(1);
    while (!at_end() && peek() != ')') {
      if (peek() == '|') {
        ++i_;
        alts.emplace_back();
        continue;
      }
      const Sym atom = this->atom();
      for (const Sym& s : quantified(atom)) alts.back().push_back(s);
    }
    return g_.new_rule(std::move(alts));
  }

  Sym atom() {
    const char c = peek();
    if (c == '(') {
      ++i_;
      if (peek() == '?') {
        ++i_;
        if (peek() == ':') ++i_;
        else if (peek() == '<' && i_ + 1 < p_.size() && p_[i_ + 1] != '=' && p_[i_ + 1] != '!') skip_name();
        else if (peek() == 'P' && i_ + 1 < p_.size() && p_[i_ + 1] == '<') ++i_, skip_name();
        else fail("lookarounds and inline flags are not supported");
      }
      const int r = alternatives();
      if (peek() != ')') fail("missing ')'");
      ++i_;
      return Grammar::rule(r);
    }
    if (c == '[') return chars(klass());
    if (c == '.') {
      ++i_;
      return chars(complement({{'\n', '\n'}}));
    }
    if (c == '^' || c == '$') fail("anchors are supported only at the start and the end");
    if (c == '*' || c == '+' || c == '?' || c == '{') fail("a quantifier with nothing to repeat");
    if (c == '\\') {
      std::vector<Range> set;
      escape(set, false);
      return chars(set);
    }
    const uint32_t cp = code_point();
    return chars({{cp, cp}});
  }
  void skip_name() {
    while (!at_end() && peek() != '>') ++i_;
    if (at_end()) fail("unterminated group name");
    ++i_;
  }
  // The character at i_, i_ moved past it.
  uint32_t code_point() {
    const uint32_t cp = read_utf8(p_, i_);
    if (cp == kNotACharacter) fail("invalid UTF-8");
    return cp;
  }
  Sym chars(const std::vector<Range>& set) {
    if (normalized(set).empty()) fail("a class that matches no character");
    return Grammar::rule(character_rule(g_, set, json_));
  }

  // After a backslash: adds its character or class to set. in_class: \b is a backspace there.
  void escape(std::vector<Range>& set, bool in_class) {
    ++i_;  // the backslash
    if (at_end()) fail("a pattern ending in '\\'");
    const char e = p_[i_++];
    auto one = [&](uint32_t c) { set.emplace_back(c, c); };
    auto add = [&](const std::vector<Range>& rs) { set.insert(set.end(), rs.begin(), rs.end()); };
    switch (e) {
      case 'd': return add(kDigit);
      case 'w': return add(kWord);
      case 's': return add(kSpace);
      case 'D': return add(complement(kDigit));
      case 'W': return add(complement(kWord));
      case 'S': return add(complement(kSpace));
      case 'n': return one('\n');
      case 't': return one('\t');
      case 'r': return one('\r');
      case 'f': return one('\f');
      case 'v': return one('\v');
      case '0': return one(0);
      case 'x': return one(hex(2));
      case 'u': return one(hex(4));
      case 'U': return one(hex(8));
      case 'b':
        if (in_class) return one('\b');
        fail("word boundaries (\\b) are not supported");
      default:
        if (std::isdigit(uint8_t(e))) fail("backreferences are not supported");
        if (std::isalnum(uint8_t(e))) fail(std::string("unknown escape '\\") + e + "'");
        --i_;  // an escaped punctuation or other character stands for itself
        one(code_point());
    }
  }
  uint32_t hex(int digits) {
    uint32_t v = 0;
    for (int k = 0; k < digits; ++k, ++i_) {
      const char c = peek();
      const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) fail("expected " + std::to_string(digits) + " hex digits");
      v = v << 4 | uint32_t(d);
    }
    if (v > 0x10FFFF) fail("not a character");
    return v;
  }

  // One item of a class: an escape (a character or a set) or a character.
  std::vector<Range> class_item() {
    std::vector<Range> item;
    if (peek() == '\\') {
      escape(item, true);
    } else {
      const uint32_t c = code_point();
      item.emplace_back(c, c);
    }
    return item;
  }

  // [...]: its code points.
  std::vector<Range> klass() {
    ++i_;  // '['
    const bool negated = peek() == '^';
    if (negated) ++i_;
    std::vector<Range> set;
    bool first = true;
    while (!at_end() && (peek() != ']' || first)) {
      first = false;
      if (p_.substr(i_, 2) == "[:") fail("POSIX classes ([:alpha:]) are not supported");
      std::vector<Range> item = class_item();
      // A range a-b of two single characters.
      if (item.size() == 1 && item[0].first == item[0].second && peek() == '-' && i_ + 1 < p_.size() && p_[i_ + 1] != ']') {
        ++i_;
        const std::vector<Range> end = class_item();
        if (end.size() != 1 || end[0].first != end[0].second) fail("a range must end in one character");
        if (end[0].first < item[0].first) fail("a range that runs backwards");
        item[0].second = end[0].first;
      }
      set.insert(set.end(), item.begin(), item.end());
    }
    if (at_end()) fail("unterminated class");
    ++i_;  // ']'
    return negated ? complement(set) : set;
  }

  std::vector<Sym> quantified(Sym atom) {
    const char c = peek();
    uint32_t min = 1;
    std::optional<uint32_t> max = 1;
    if (c == '*') min = 0, max.reset(), ++i_;
    else if (c == '+') max.reset(), ++i_;
    else if (c == '?') min = 0, ++i_;
    else if (c == '{' && braces_quantifier()) {
      ++i_;
      min = number();
      max = min;
      if (peek() == ',') {
        ++i_;
        if (peek() == '}') max.reset();
        else max = number();
      }
      ++i_;  // '}'
      if (max && *max < min) fail("a repetition whose maximum is below its minimum");
    } else {
      return {atom};
    }
    if (peek() == '?' || peek() == '+') ++i_;  // lazy / possessive: the same texts
    return g_.repeat(atom, min, max);
  }
  // Whether '{' here opens {m}, {m,} or {m,n} (else it is a literal brace, as in most engines).
  bool braces_quantifier() const {
    size_t k = i_ + 1;
    const size_t digits = k;
    while (k < p_.size() && std::isdigit(uint8_t(p_[k]))) ++k;
    if (k == digits) return false;
    if (k < p_.size() && p_[k] == ',') {
      ++k;
      while (k < p_.size() && std::isdigit(uint8_t(p_[k]))) ++k;
    }
    return k < p_.size() && p_[k] == '}';
  }
  uint32_t number() {
    uint32_t v = 0;
    while (std::isdigit(uint8_t(peek()))) {
      v = v * 10 + uint32_t(peek() - '0');
      if (v > kMaxRepeat) fail("a repetition count above " + std::to_string(kMaxRepeat));
      ++i_;
    }
    return v;
  }

  Grammar& g_;
  std::string_view p_;
  bool json_;
  size_t i_ = 0;
};

}  // namespace

RegexRule add_regex(Grammar& g, std::string_view pattern, bool json_string) {
  return Parser(g, pattern, json_string).run();
}

std::shared_ptr<const Grammar> regex_grammar(std::string_view pattern) {
  Grammar g;
  g.set_root(add_regex(g, pattern, false).rule);
  try {
    g.finish();
  } catch (const Error&) {
    throw Error("regex: a pattern that can repeat nothing forever (such as (a*)*) is not supported");
  }
  return std::make_shared<const Grammar>(std::move(g));
}

}  // namespace tessera::grammar
