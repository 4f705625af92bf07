// Kimi K2: <|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:IDX
// <|tool_call_argument_begin|>{json}<|tool_call_end|>…<|tool_calls_section_end|>. The id
// (functions.NAME:IDX) is the call's id; arguments pass through as the model wrote them.
#include <cctype>

#include "tools/formats.h"
#include "tools/log.h"
#include "tools/scan.h"

namespace tessera::tools {
namespace {

const std::string kSections[2][2] = {{"<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"},
                                     {"<|tool_call_section_begin|>", "<|tool_call_section_end|>"}};
constexpr std::string_view kCallBegin = "<|tool_call_begin|>";
constexpr std::string_view kArgBegin = "<|tool_call_argument_begin|>";
constexpr std::string_view kCallEnd = "<|tool_call_end|>";

// NAME from "functions.NAME:IDX" or "NAME:IDX"; empty when the id has no ":digits" suffix.
std::string name_from_id(std::string_view id) {
  size_t colon = id.rfind(':');
  if (colon == std::string_view::npos || colon + 1 == id.size()) return {};
  for (char c : id.substr(colon + 1))
    if (!std::isdigit(static_cast<unsigned char>(c))) return {};
  std::string_view name = id.substr(0, colon);
  if (name.starts_with("functions.")) name.remove_prefix(10);
  return std::string(name);
}

class KimiFormat : public BlockFormat {
 public:
  // Both spellings of the section markers occur in Kimi checkpoints.
  std::vector<std::string> start_markers() const override { return {kSections[0][0], kSections[1][0]}; }

  BlockEnd find_end(std::string_view block, int marker, bool at_eof, ScanState& scan) const override {
    const auto& section = kSections[marker];
    return end_at_marker(block, section[0].size(), section[1], false, false, at_eof, scan);
  }

  size_t call_end_after(std::string_view block, int, size_t from) const override {
    return marker_end_after(block, kCallEnd, from);
  }

  bool parse(std::string_view block, int marker, const ToolSet&, std::vector<ParsedCall>& calls) const override {
    const auto& section = kSections[marker];
    return for_each_call(block, section[0].size(), kCallBegin, kCallEnd, section[1], [&](std::string_view text) {
      size_t arg = text.find(kArgBegin);
      if (arg == std::string_view::npos) return false;
      std::string_view id = trim(text.substr(0, arg));
      std::string name = name_from_id(id);
      if (name.empty()) {
        warn("tool call with malformed id '" + std::string(id) + "' skipped");
        return true;
      }
      calls.push_back({name, std::string(trim(text.substr(arg + kArgBegin.size()))), std::string(id)});
      return true;
    });
  }
};

}  // namespace

std::unique_ptr<BlockFormat> make_kimi_k2_format() { return std::make_unique<KimiFormat>(); }

}  // namespace tessera::tools
