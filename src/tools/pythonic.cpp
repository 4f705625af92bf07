// Pythonic calls (Llama 4, LFM2): [f(a=1, b="x"), g()], arguments as Python keyword literals,
// between <|tool_call_start|> and <|tool_call_end|> or bare in the text. A bare list that does
// not parse as calls stays content.
#include <cctype>

#include "tools/formats.h"
#include "tools/scan.h"

namespace tessera::tools {
namespace {

constexpr std::string_view kStart = "<|tool_call_start|>";
constexpr std::string_view kEnd = "<|tool_call_end|>";

class Cursor {
 public:
  explicit Cursor(std::string_view s) : s_(s) {}
  bool eat(char c) {
    skip();
    if (pos_ == s_.size() || s_[pos_] != c) return false;
    ++pos_;
    return true;
  }
  std::string identifier() {
    skip();
    size_t start = pos_;
    while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_' ||
                                s_[pos_] == '.' || s_[pos_] == '-'))
      ++pos_;
    return std::string(s_.substr(start, pos_ - start));
  }
  std::optional<ordered_json> value() { return parse_python_value(s_, pos_); }
  bool done() {
    skip();
    return pos_ == s_.size();
  }

 private:
  void skip() {
    while (pos_ < s_.size() && is_space(s_[pos_])) ++pos_;
  }
  std::string_view s_;
  size_t pos_ = 0;
};

bool parse_calls(std::string_view text, std::vector<ParsedCall>& calls) {
  Cursor c(text);
  if (!c.eat('[')) return false;
  do {
    ParsedCall call;
    call.name = c.identifier();
    if (call.name.empty() || !c.eat('(')) return false;
    ordered_json args = ordered_json::object();
    if (!c.eat(')')) {
      do {
        std::string key = c.identifier();
        if (key.empty() || !c.eat('=')) return false;
        auto v = c.value();
        if (!v) return false;
        args[key] = std::move(*v);
      } while (c.eat(','));
      if (!c.eat(')')) return false;
    }
    call.arguments = arguments_text(args);
    calls.push_back(std::move(call));
  } while (c.eat(','));
  return c.eat(']') && c.done();
}

bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-'; }

// Whether `block` (from its '[') can still begin "[name(": 1 yes, 0 not yet known, -1 no.
int opens_call(std::string_view block) {
  size_t p = 1;
  while (p < block.size() && is_space(block[p])) ++p;
  if (p == block.size()) return 0;
  if (!std::isalpha(static_cast<unsigned char>(block[p])) && block[p] != '_') return -1;
  while (p < block.size() && is_name_char(block[p])) ++p;
  while (p < block.size() && is_space(block[p])) ++p;
  if (p == block.size()) return 0;
  return block[p] == '(' ? 1 : -1;
}

// End of the bracketed list opening `block`, Python strings skipped; resumable.
std::optional<size_t> list_end(std::string_view block, ScanState& scan) {
  for (size_t& i = scan.pos; i < block.size(); ++i) {
    char c = block[i];
    if (scan.quote) {
      if (c == '\\') {
        if (i + 1 == block.size()) return std::nullopt;
        ++i;
      } else if (c == scan.quote) {
        scan.quote = 0;
      }
      continue;
    }
    if (c == '"' || c == '\'') scan.quote = c;
    else if (c == '[' || c == '(' || c == '{') ++scan.depth;
    else if ((c == ']' || c == ')' || c == '}') && --scan.depth == 0) return ++i;
  }
  return std::nullopt;
}

class PythonicFormat : public BlockFormat {
 public:
  std::vector<std::string> start_markers() const override { return {std::string(kStart), "["}; }

  BlockEnd find_end(std::string_view block, int marker, bool at_eof, ScanState& scan) const override {
    if (marker == 0) return end_at_marker(block, kStart.size(), kEnd, false, false, at_eof, scan);
    int opens = opens_call(block);
    if (opens < 0 || (opens == 0 && at_eof)) return {BlockEnd::Kind::NotACall, 1};
    if (opens == 0) return {};
    auto end = list_end(block, scan);
    if (!end) return at_eof ? BlockEnd{BlockEnd::Kind::NotACall, 1} : BlockEnd{};
    std::vector<ParsedCall> calls;
    if (!parse_calls(block.substr(0, *end), calls)) return {BlockEnd::Kind::NotACall, *end};
    return {BlockEnd::Kind::Complete, *end};
  }

  bool parse(std::string_view block, int marker, const ToolSet&, std::vector<ParsedCall>& calls) const override {
    if (marker == 1) return parse_calls(block, calls);
    std::string_view inner = block.substr(kStart.size());
    inner.remove_suffix(kEnd.size());
    return parse_calls(trim(inner), calls);
  }
};

}  // namespace

std::unique_ptr<BlockFormat> make_pythonic_format() { return std::make_unique<PythonicFormat>(); }

}  // namespace tessera::tools
