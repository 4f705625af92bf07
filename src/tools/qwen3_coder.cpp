// Qwen3-Coder: <tool_call><function=NAME><parameter=KEY>\nVALUE\n</parameter></function></tool_call>,
// values typed by the tool's schema (strings when it has none). A <function=…> block without
// the <tool_call> wrapper is accepted too, and so is Hermes JSON inside <tool_call>.
#include "tools/formats.h"
#include "tools/scan.h"

namespace tessera::tools {
namespace {

constexpr std::string_view kStart = "<tool_call>";
constexpr std::string_view kEnd = "</tool_call>";
constexpr std::string_view kFunction = "<function=";
constexpr std::string_view kFunctionEnd = "</function>";
constexpr std::string_view kParameter = "<parameter=";
constexpr std::string_view kParameterEnd = "</parameter>";

// One newline of formatting on each side of a value is not part of it.
std::string_view strip_newline(std::string_view v) {
  if (v.starts_with("\n")) v.remove_prefix(1);
  if (v.ends_with("\n")) v.remove_suffix(1);
  return v;
}

bool parse_function(std::string_view text, const ToolSet& tools, ParsedCall& call) {
  size_t close = text.find('>');
  if (close == std::string_view::npos) return false;
  call.name = std::string(trim(text.substr(0, close)));
  if (call.name.empty()) return false;
  ordered_json args = ordered_json::object();
  size_t pos = close + 1;
  while ((pos = text.find(kParameter, pos)) != std::string_view::npos) {
    size_t key_end = text.find('>', pos);
    if (key_end == std::string_view::npos) return false;
    std::string key(trim(text.substr(pos + kParameter.size(), key_end - pos - kParameter.size())));
    size_t value_start = key_end + 1;
    size_t value_end = text.find(kParameterEnd, value_start);
    // A missing </parameter> ends the value at the next parameter.
    size_t next = text.find(kParameter, value_start);
    if (value_end == std::string_view::npos || (next != std::string_view::npos && next < value_end))
      value_end = next == std::string_view::npos ? text.size() : next;
    std::string_view value = strip_newline(text.substr(value_start, value_end - value_start));
    args[key] = typed_value(value, tools.parameter(call.name, key), false);
    pos = value_end;
  }
  call.arguments = arguments_text(args);
  return true;
}

class Qwen3CoderFormat : public BlockFormat {
 public:
  std::vector<std::string> start_markers() const override { return {std::string(kStart), std::string(kFunction)}; }

  BlockEnd find_end(std::string_view block, int marker, bool at_eof, ScanState& scan) const override {
    if (marker == 0) return end_at_marker(block, kStart.size(), kEnd, false, false, at_eof, scan);
    return end_at_marker(block, kFunction.size(), kFunctionEnd, false, false, at_eof, scan);
  }

  bool parse(std::string_view block, int marker, const ToolSet& tools, std::vector<ParsedCall>& calls) const override {
    // The model sometimes falls back to Hermes JSON inside <tool_call>.
    if (marker == 0) {
      std::string_view inner = trim(block.substr(kStart.size(), block.size() - kStart.size() - kEnd.size()));
      if (inner.starts_with("{")) return parse_json_calls(inner, calls);
    }
    size_t pos = 0;
    size_t found = 0;
    while ((pos = block.find(kFunction, pos)) != std::string_view::npos) {
      size_t start = pos + kFunction.size();
      size_t end = block.find(kFunctionEnd, start);
      if (end == std::string_view::npos) return false;
      ParsedCall call;
      if (!parse_function(block.substr(start, end - start), tools, call)) return false;
      calls.push_back(std::move(call));
      ++found;
      pos = end + kFunctionEnd.size();
    }
    return found > 0;
  }
};

}  // namespace

std::unique_ptr<BlockFormat> make_qwen3_coder_format() { return std::make_unique<Qwen3CoderFormat>(); }

}  // namespace tessera::tools
