// Hermes / Qwen 2.5–3: <tool_call>{"name": ..., "arguments": {...}}</tool_call>. The closing tag
// may be missing at the end of the output when the JSON is complete.
#include "tools/formats.h"
#include "tools/scan.h"

namespace tessera::tools {
namespace {

constexpr std::string_view kStart = "<tool_call>";
constexpr std::string_view kEnd = "</tool_call>";

class HermesFormat : public BlockFormat {
 public:
  std::vector<std::string> start_markers() const override { return {std::string(kStart)}; }

  BlockEnd find_end(std::string_view block, int, bool at_eof, ScanState& scan) const override {
    return end_at_marker(block, kStart.size(), kEnd, true, true, at_eof, scan);
  }

  bool parse(std::string_view block, int, const ToolSet&, std::vector<ParsedCall>& calls) const override {
    std::string_view inner = block.substr(kStart.size());
    // An output cut inside the closing tag still holds a whole call.
    for (size_t n = kEnd.size(); n > 0; --n) {
      if (inner.ends_with(kEnd.substr(0, n))) {
        inner.remove_suffix(n);
        break;
      }
    }
    return parse_json_calls(inner, calls);
  }
};

}  // namespace

std::unique_ptr<BlockFormat> make_hermes_format() { return std::make_unique<HermesFormat>(); }

}  // namespace tessera::tools
