// The engine most tool formats share: content text, interrupted by call blocks that open with
// a start marker. A format says where its blocks end and how a block becomes calls; the engine
// does the streaming (holding back cut markers), the call deltas and the failure rules:
// - a block's calls go out when it closes, or each as it finishes (formats that say where);
// - a block whose text does not parse is dropped with a warning (calls before the bad one
//   stand);
// - a block still open at the end is parsed if the format accepts an unterminated one, else
//   dropped with a warning when max_tokens cut it, else returned as content;
// - whitespace (and the format's separators) next to a block is formatting: dropped before a
//   block, at the end after one, and between a leading block and the text after it; kept
//   between two pieces of text ("See {call} below" gives "See below").
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tools/parser.h"
#include "tools/scan.h"
#include "tools/values.h"

namespace tessera::tools {

struct BlockEnd {
  enum class Kind { Incomplete, Complete, NotACall };
  Kind kind = Kind::Incomplete;
  size_t length = 0;  // bytes of the block (Complete) or of plain text to release (NotACall)
};

struct ParsedCall {
  std::string name;
  std::string arguments;  // JSON text
  std::string id;         // empty: the engine numbers it
};

class BlockFormat {
 public:
  virtual ~BlockFormat() = default;
  virtual std::vector<std::string> start_markers() const = 0;
  // `block` starts with start marker `marker` and holds all text seen since. `at_eof`: no
  // more text will come. `scan` starts zeroed for each block and keeps what the format needs
  // to go on where its last look stopped.
  virtual BlockEnd find_end(std::string_view block, int marker, bool at_eof, ScanState& scan) const = 0;
  // Appends the calls of a complete block; false when it is malformed.
  virtual bool parse(std::string_view block, int marker, const ToolSet& tools, std::vector<ParsedCall>& calls) const = 0;
  // For blocks holding several calls, so that each goes out as soon as it is finished: where
  // the first call that ends after `from` ends (0: none yet). parse() must accept a block cut
  // there, give the same first calls as for the whole block, and fail on any longer cut once
  // it has failed on a shorter one.
  virtual size_t call_end_after(std::string_view block, int marker, size_t from) const { return 0; }
  // Characters besides whitespace that separate consecutive blocks.
  virtual std::string_view separators() const { return {}; }
};

// The end of the first `call_end` in `block` that ends after `from`; 0 when there is none.
size_t marker_end_after(std::string_view block, std::string_view call_end, size_t from);

// Ends a block at `end` (searched after the start marker), JSON strings skipped when
// `json_aware`; optionally accepts an unterminated block at the end of the output.
BlockEnd end_at_marker(std::string_view block, size_t marker_len, std::string_view end, bool json_aware,
                       bool eof_completes, bool at_eof, ScanState& scan);

std::unique_ptr<StreamParser> make_block_parser(std::unique_ptr<BlockFormat> format, const ParserOptions& options);

// The calls of a block written as call_begin…call_end pieces after its start marker
// (`start_len` bytes), with only whitespace between them and up to `block_end` or the end of
// the text. `each` gets a call's text between its markers and returns false when it is
// malformed. False on anything else between calls, or when there is no call.
bool for_each_call(std::string_view block, size_t start_len, std::string_view call_begin, std::string_view call_end,
                   std::string_view block_end, const std::function<bool(std::string_view)>& each);

// A call written as JSON: {"name": ..., "arguments" | "parameters": {...}}. Arguments given as a
// JSON-encoded string are decoded once. `require_arguments`: an object without them is no call.
bool parse_json_call(std::string_view text, bool require_arguments, ParsedCall& call);

// Every JSON call object in `text` (whitespace-separated); false if anything else is there.
bool parse_json_calls(std::string_view text, std::vector<ParsedCall>& calls);

}  // namespace tessera::tools
