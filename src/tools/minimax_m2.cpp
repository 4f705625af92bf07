// MiniMax-M2: <minimax:tool_call><invoke name="NAME"><parameter name="KEY">VALUE</parameter>…
// </invoke>…</minimax:tool_call>; several invokes per block, values typed by the tool's schema.
#include "tools/formats.h"
#include "tools/scan.h"

namespace tessera::tools {
namespace {

constexpr std::string_view kStart = "<minimax:tool_call>";
constexpr std::string_view kEnd = "</minimax:tool_call>";
constexpr std::string_view kInvoke = "<invoke";
constexpr std::string_view kInvokeEnd = "</invoke>";

// The value of name="…" (quotes optional) in a tag's text.
std::string tag_name(std::string_view tag) {
  size_t eq = tag.find("name=");
  if (eq == std::string_view::npos) return {};
  std::string_view v = trim(tag.substr(eq + 5));
  if (!v.empty() && (v.front() == '"' || v.front() == '\'')) {
    size_t close = v.find(v.front(), 1);
    return std::string(v.substr(1, close == std::string_view::npos ? v.size() - 1 : close - 1));
  }
  return std::string(v);
}

bool parse_invoke(std::string_view text, const ToolSet& tools, ParsedCall& call) {
  size_t tag_end = text.find('>');
  if (tag_end == std::string_view::npos) return false;
  call.name = tag_name(text.substr(0, tag_end));
  if (call.name.empty()) return false;
  ordered_json args = ordered_json::object();
  size_t pos = tag_end + 1;
  while ((pos = text.find("<parameter", pos)) != std::string_view::npos) {
    size_t open_end = text.find('>', pos);
    if (open_end == std::string_view::npos) return false;
    std::string key = tag_name(text.substr(pos, open_end - pos));
    size_t close = text.find("</parameter>", open_end);
    if (close == std::string_view::npos) return false;
    std::string_view value = trim(text.substr(open_end + 1, close - open_end - 1));
    args[key] = typed_value(value, tools.parameter(call.name, key), false);
    pos = close;
  }
  call.arguments = arguments_text(args);
  return true;
}

class MinimaxFormat : public BlockFormat {
 public:
  std::vector<std::string> start_markers() const override { return {std::string(kStart)}; }

  BlockEnd find_end(std::string_view block, int, bool at_eof, ScanState& scan) const override {
    return end_at_marker(block, kStart.size(), kEnd, false, false, at_eof, scan);
  }

  size_t call_end_after(std::string_view block, int, size_t from) const override {
    return marker_end_after(block, kInvokeEnd, from);
  }

  bool parse(std::string_view block, int, const ToolSet& tools, std::vector<ParsedCall>& calls) const override {
    return for_each_call(block, kStart.size(), kInvoke, kInvokeEnd, kEnd, [&](std::string_view text) {
      ParsedCall call;
      if (!parse_invoke(text, tools, call)) return false;
      calls.push_back(std::move(call));
      return true;
    });
  }
};

}  // namespace

std::unique_ptr<BlockFormat> make_minimax_m2_format() { return std::make_unique<MinimaxFormat>(); }

}  // namespace tessera::tools
