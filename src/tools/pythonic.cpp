// Pythonic calls (Llama 4, LFM2): <|tool_call_start|>[f(a=1, b="x"), g()]<|tool_call_end|>,
// arguments as Python keyword literals.
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
    if (pos_ < s_.size() && s_[pos_] == c) return ++pos_, true;
    return false;
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

class PythonicFormat : public BlockFormat {
 public:
  std::vector<std::string> start_markers() const override { return {std::string(kStart)}; }

  BlockEnd find_end(std::string_view block, int, bool at_eof, ScanState& scan) const override {
    return end_at_marker(block, kStart.size(), kEnd, false, false, at_eof, scan);
  }

  bool parse(std::string_view block, int, const ToolSet&, std::vector<ParsedCall>& calls) const override {
    std::string_view inner = block.substr(kStart.size());
    inner.remove_suffix(kEnd.size());
    return parse_calls(trim(inner), calls);
  }
};

}  // namespace

std::unique_ptr<BlockFormat> make_pythonic_format() { return std::make_unique<PythonicFormat>(); }

}  // namespace tessera::tools
