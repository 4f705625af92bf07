// Mistral: [TOOL_CALLS]NAME[ARGS]{json} (one call per marker; [CALL_ID]id may precede [ARGS]),
// and the older [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...].
#include "tools/formats.h"
#include "tools/scan.h"

namespace tessera::tools {
namespace {

constexpr std::string_view kStart = "[TOOL_CALLS]";
constexpr std::string_view kArgs = "[ARGS]";
constexpr std::string_view kCallId = "[CALL_ID]";

size_t skip_space(std::string_view s, size_t pos) {
  while (pos < s.size() && is_space(s[pos])) ++pos;
  return pos;
}

class MistralFormat : public BlockFormat {
 public:
  std::vector<std::string> start_markers() const override { return {std::string(kStart)}; }

  BlockEnd find_end(std::string_view block, int, bool, ScanState& scan) const override {
    if (scan.pos == 0) {
      size_t p = skip_space(block, kStart.size());
      if (p == block.size()) return {};
      if (block[p] != '[' && block[p] != '{') {
        size_t args = block.find(kArgs, p);
        if (args == std::string_view::npos) return {};
        p = skip_space(block, args + kArgs.size());
        if (p == block.size()) return {};
      }
      scan.pos = p;  // where the JSON starts
    }
    auto end = json_value_end(block, scan);
    if (!end) return {};
    return {BlockEnd::Kind::Complete, *end};
  }

  bool parse(std::string_view block, int, const ToolSet&, std::vector<ParsedCall>& calls) const override {
    size_t p = skip_space(block, kStart.size());
    if (block[p] == '{') return parse_json_calls(block.substr(p), calls);
    if (block[p] == '[') {
      auto list = ordered_json::parse(block.substr(p), nullptr, false);
      if (list.is_discarded() || !list.is_array() || list.empty()) return false;
      for (const auto& item : list) {
        ParsedCall call;
        if (!parse_json_call(item.dump(), false, call)) return false;
        calls.push_back(std::move(call));
      }
      return true;
    }
    size_t args = block.find(kArgs, p);
    std::string_view head = block.substr(p, args - p);
    ParsedCall call;
    if (size_t id = head.find(kCallId); id != std::string_view::npos) {
      call.id = std::string(trim(head.substr(id + kCallId.size())));
      head = head.substr(0, id);
    }
    call.name = std::string(trim(head));
    auto value = ordered_json::parse(block.substr(args + kArgs.size()), nullptr, false);
    if (call.name.empty() || value.is_discarded()) return false;
    call.arguments = arguments_text(value);
    calls.push_back(std::move(call));
    return true;
  }
};

}  // namespace

std::unique_ptr<BlockFormat> make_mistral_format() { return std::make_unique<MistralFormat>(); }

}  // namespace tessera::tools
