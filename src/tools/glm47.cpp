// GLM 4.5–4.7: <tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>…</tool_call>, values
// typed by the tool's schema (JSON when it has none). LongCat writes the same with longcat_
// tags. Both also accept a JSON call or "NAME k=v k=v" between the tags.
#include "tools/formats.h"
#include "tools/scan.h"

namespace tessera::tools {
namespace {

struct Syntax {
  std::string start, end, key_open, key_close, value_open, value_close;
};

const Syntax kGlm{"<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"};
const Syntax kLongcat{"<longcat_tool_call>", "</longcat_tool_call>", "<longcat_arg_key>", "</longcat_arg_key>",
                      "<longcat_arg_value>", "</longcat_arg_value>"};

class GlmFormat : public BlockFormat {
 public:
  explicit GlmFormat(const Syntax& syntax) : s_(syntax) {}

  std::vector<std::string> start_markers() const override { return {s_.start}; }

  BlockEnd find_end(std::string_view block, int, bool at_eof, ScanState& scan) const override {
    return end_at_marker(block, s_.start.size(), s_.end, false, false, at_eof, scan);
  }

  bool parse(std::string_view block, int, const ToolSet& tools, std::vector<ParsedCall>& calls) const override {
    std::string_view inner = block.substr(s_.start.size());
    inner = trim(inner.substr(0, inner.size() - s_.end.size()));
    if (inner.starts_with("{")) return parse_json_calls(inner, calls);
    ParsedCall call;
    size_t name_end = 0;
    while (name_end < inner.size() && !is_space(inner[name_end]) && inner[name_end] != '<') ++name_end;
    call.name = std::string(inner.substr(0, name_end));
    if (call.name.empty()) return false;
    ordered_json args = ordered_json::object();
    auto add = [&](std::string_view key, std::string_view value) {
      std::string k(trim(key));
      args[k] = typed_value(trim(value), tools.parameter(call.name, k), true);
    };
    std::string_view rest = inner.substr(name_end);
    if (rest.find(s_.key_open) != std::string_view::npos) {
      size_t pos = 0;
      while ((pos = rest.find(s_.key_open, pos)) != std::string_view::npos) {
        size_t key_start = pos + s_.key_open.size();
        size_t key_end = rest.find(s_.key_close, key_start);
        if (key_end == std::string_view::npos) return false;
        size_t value_open = rest.find(s_.value_open, key_end);
        if (value_open == std::string_view::npos) return false;
        size_t value_start = value_open + s_.value_open.size();
        size_t value_end = rest.find(s_.value_close, value_start);
        if (value_end == std::string_view::npos) return false;
        add(rest.substr(key_start, key_end - key_start), rest.substr(value_start, value_end - value_start));
        pos = value_end;
      }
    } else {
      // "k=v k=v": values without spaces.
      size_t pos = 0;
      while (pos < rest.size()) {
        while (pos < rest.size() && is_space(rest[pos])) ++pos;
        if (pos == rest.size()) break;
        size_t end = pos;
        while (end < rest.size() && !is_space(rest[end])) ++end;
        std::string_view pair = rest.substr(pos, end - pos);
        size_t eq = pair.find('=');
        if (eq == std::string_view::npos) return false;
        add(pair.substr(0, eq), pair.substr(eq + 1));
        pos = end;
      }
    }
    call.arguments = arguments_text(args);
    calls.push_back(std::move(call));
    return true;
  }

 private:
  Syntax s_;
};

}  // namespace

std::unique_ptr<BlockFormat> make_glm47_format() { return std::make_unique<GlmFormat>(kGlm); }
std::unique_ptr<BlockFormat> make_longcat_format() { return std::make_unique<GlmFormat>(kLongcat); }

}  // namespace tessera::tools
