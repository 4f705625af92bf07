// DeepSeek V3 / V3.1: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{json}<｜tool▁call▁end｜>…
// <｜tool▁calls▁end｜> (V3.1), where V3 wrote "function<｜tool▁sep｜>NAME\n```json\n{json}\n```".
#include "tools/formats.h"
#include "tools/scan.h"

namespace tessera::tools {
namespace {

constexpr std::string_view kStart = "<｜tool▁calls▁begin｜>";
constexpr std::string_view kEnd = "<｜tool▁calls▁end｜>";
constexpr std::string_view kCallBegin = "<｜tool▁call▁begin｜>";
constexpr std::string_view kCallEnd = "<｜tool▁call▁end｜>";
constexpr std::string_view kSep = "<｜tool▁sep｜>";

bool parse_call(std::string_view text, ParsedCall& call) {
  size_t sep = text.find(kSep);
  if (sep == std::string_view::npos) return false;
  std::string_view head = trim(text.substr(0, sep));
  std::string_view body = trim(text.substr(sep + kSep.size()));
  if (head == "function") {
    size_t newline = body.find('\n');
    if (newline == std::string_view::npos) return false;
    head = trim(body.substr(0, newline));
    body = trim(body.substr(newline + 1));
    if (body.starts_with("```json")) body.remove_prefix(7);
    if (body.ends_with("```")) body.remove_suffix(3);
  }
  auto args = ordered_json::parse(body, nullptr, false);
  if (head.empty() || args.is_discarded()) return false;
  call.name = std::string(head);
  call.arguments = arguments_text(args);
  return true;
}

class DeepseekFormat : public BlockFormat {
 public:
  std::vector<std::string> start_markers() const override { return {std::string(kStart)}; }

  // The closing marker may be missing when the model ends right after its last call.
  BlockEnd find_end(std::string_view block, int, bool at_eof, ScanState& scan) const override {
    BlockEnd end = end_at_marker(block, kStart.size(), kEnd, false, false, at_eof, scan);
    if (end.kind == BlockEnd::Kind::Incomplete && at_eof && trim(block).ends_with(kCallEnd))
      return {BlockEnd::Kind::Complete, block.size()};
    return end;
  }

  size_t call_end_after(std::string_view block, int, size_t from) const override {
    return marker_end_after(block, kCallEnd, from);
  }

  bool parse(std::string_view block, int, const ToolSet&, std::vector<ParsedCall>& calls) const override {
    return for_each_call(block, kStart.size(), kCallBegin, kCallEnd, kEnd, [&](std::string_view text) {
      ParsedCall call;
      if (!parse_call(text, call)) return false;
      calls.push_back(std::move(call));
      return true;
    });
  }
};

}  // namespace

std::unique_ptr<BlockFormat> make_deepseek_v3_format() { return std::make_unique<DeepseekFormat>(); }

}  // namespace tessera::tools
