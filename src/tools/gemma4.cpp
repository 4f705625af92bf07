// Gemma 4: <|tool_call>call:NAME{key:value,...}<tool_call|>, strings between <|"|> marks, bare
// numbers/booleans/null, nested {…} and […]; one block may hold several calls. FunctionGemma
// writes the same grammar between <start_function_call>/<end_function_call> with <escape> marks.
#include "tools/formats.h"
#include "tools/scan.h"

namespace tessera::tools {
namespace {

struct Syntax {
  std::string_view start, end, quote;
};

constexpr Syntax kGemma4{"<|tool_call>", "<tool_call|>", "<|\"|>"};
constexpr Syntax kFunctionGemma{"<start_function_call>", "<end_function_call>", "<escape>"};

class Reader {
 public:
  Reader(std::string_view text, std::string_view quote) : s_(text), quote_(quote) {}

  bool at_end() {
    skip_space();
    return pos_ >= s_.size();
  }
  bool eat(std::string_view token) {
    skip_space();
    if (!s_.substr(pos_).starts_with(token)) return false;
    pos_ += token.size();
    return true;
  }
  // Whether `c` comes next (after whitespace), without taking it.
  bool next_is(char c) {
    skip_space();
    return pos_ < s_.size() && s_[pos_] == c;
  }
  size_t pos() const { return pos_; }
  std::string_view rest_until(char c) {
    size_t end = s_.find(c, pos_);
    if (end == std::string_view::npos) return {};
    std::string_view out = s_.substr(pos_, end - pos_);
    pos_ = end;
    return out;
  }

  // `schema`: the parameter's schema, for bare words at the top level.
  std::optional<ordered_json> value(const nlohmann::json* schema) {
    skip_space();
    if (pos_ >= s_.size()) return std::nullopt;
    if (s_.substr(pos_).starts_with(quote_)) return ordered_json(quoted());
    if (s_[pos_] == '{') return object(nullptr, nullptr);
    if (s_[pos_] == '[') {
      ++pos_;
      ordered_json arr = ordered_json::array();
      while (!eat("]")) {
        auto v = value(nullptr);
        if (!v) return std::nullopt;
        arr.push_back(std::move(*v));
        if (!eat(",") && !next_is(']')) return std::nullopt;
      }
      return arr;
    }
    size_t start = pos_;
    while (pos_ < s_.size() && s_[pos_] != ',' && s_[pos_] != '}' && s_[pos_] != ']') ++pos_;
    return bare(trim(s_.substr(start, pos_ - start)), schema);
  }

  // {key:value,...}; `tools`/`tool` type the top-level values of a call.
  std::optional<ordered_json> object(const ToolSet* tools, const std::string* tool) {
    if (!eat("{")) return std::nullopt;
    ordered_json obj = ordered_json::object();
    while (!eat("}")) {
      skip_space();
      std::string key;
      if (s_.substr(pos_).starts_with(quote_)) {
        key = quoted();
      } else {
        size_t colon = s_.find(':', pos_);
        if (colon == std::string_view::npos) return std::nullopt;
        key = std::string(trim(s_.substr(pos_, colon - pos_)));
        pos_ = colon;
      }
      if (!eat(":")) return std::nullopt;
      auto v = value(tools ? tools->parameter(*tool, key) : nullptr);
      if (!v) return std::nullopt;
      obj[key] = std::move(*v);
      if (!eat(",") && !next_is('}')) return std::nullopt;
    }
    return obj;
  }

 private:
  void skip_space() {
    while (pos_ < s_.size() && is_space(s_[pos_])) ++pos_;
  }

  // A string between quote marks; an unclosed one runs to the last '}' of the text.
  std::string quoted() {
    size_t start = pos_ + quote_.size();
    size_t end = s_.find(quote_, start);
    if (end == std::string_view::npos) {
      end = s_.rfind('}');
      if (end == std::string_view::npos || end < start) end = s_.size();
      pos_ = end;
    } else {
      pos_ = end + quote_.size();
    }
    return std::string(s_.substr(start, end - start));
  }

  static ordered_json bare(std::string_view word, const nlohmann::json* schema) {
    if (schema) return typed_value(word, schema, true);
    if (word == "true") return true;
    if (word == "false") return false;
    if (word == "null") return nullptr;
    if (auto number = parse_number(word)) return *number;
    return std::string(word);
  }

  std::string_view s_;
  std::string_view quote_;
  size_t pos_ = 0;
};

class GemmaFormat : public BlockFormat {
 public:
  explicit GemmaFormat(Syntax syntax) : syntax_(syntax) {}

  std::vector<std::string> start_markers() const override { return {std::string(syntax_.start)}; }

  BlockEnd find_end(std::string_view block, int, bool at_eof, ScanState& scan) const override {
    return end_at_marker(block, syntax_.start.size(), syntax_.end, false, false, at_eof, scan);
  }

  bool parse(std::string_view block, int, const ToolSet& tools, std::vector<ParsedCall>& calls) const override {
    std::string_view inner = block.substr(syntax_.start.size());
    inner.remove_suffix(syntax_.end.size());
    Reader reader(inner, syntax_.quote);
    size_t found = 0;
    while (!reader.at_end()) {
      if (!reader.eat("call:")) return false;
      ParsedCall call;
      call.name = std::string(trim(reader.rest_until('{')));
      if (call.name.empty()) return false;
      auto args = reader.object(&tools, &call.name);
      if (!args) return false;
      call.arguments = arguments_text(*args);
      calls.push_back(std::move(call));
      ++found;
    }
    return found > 0;
  }

 private:
  Syntax syntax_;
};

}  // namespace

std::unique_ptr<BlockFormat> make_gemma4_format() { return std::make_unique<GemmaFormat>(kGemma4); }
std::unique_ptr<BlockFormat> make_function_gemma_format() { return std::make_unique<GemmaFormat>(kFunctionGemma); }

}  // namespace tessera::tools
