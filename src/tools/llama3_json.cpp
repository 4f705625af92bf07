// Llama 3.x: a bare JSON object {"name": ..., "parameters": {...}} in the text (several may be
// separated by ';'), optionally after <|python_tag|>. An object that is not such a call stays
// content; so does a '{' not followed by a key.
#include "tools/formats.h"
#include "tools/scan.h"

namespace tessera::tools {
namespace {

constexpr std::string_view kPythonTag = "<|python_tag|>";

class Llama3JsonFormat : public BlockFormat {
 public:
  std::vector<std::string> start_markers() const override { return {"{", std::string(kPythonTag)}; }

  std::string_view separators() const override { return ";"; }

  BlockEnd find_end(std::string_view block, int marker, bool at_eof, ScanState& scan) const override {
    // The tag only announces calls; it is a block of none.
    if (marker == 1) return {BlockEnd::Kind::Complete, kPythonTag.size()};
    size_t key = 1;
    while (key < block.size() && is_space(block[key])) ++key;
    if (key < block.size() && block[key] != '"') return {BlockEnd::Kind::NotACall, 1};
    auto end = json_value_end(block, scan);
    if (!end) return at_eof ? BlockEnd{BlockEnd::Kind::NotACall, 1} : BlockEnd{};
    ParsedCall call;
    if (!parse_json_call(block.substr(0, *end), true, call)) return {BlockEnd::Kind::NotACall, *end};
    return {BlockEnd::Kind::Complete, *end};
  }

  bool parse(std::string_view block, int marker, const ToolSet&, std::vector<ParsedCall>& calls) const override {
    if (marker == 1) return true;
    ParsedCall call;
    if (!parse_json_call(block, true, call)) return false;
    calls.push_back(std::move(call));
    return true;
  }
};

}  // namespace

std::unique_ptr<BlockFormat> make_llama3_json_format() { return std::make_unique<Llama3JsonFormat>(); }

}  // namespace tessera::tools
