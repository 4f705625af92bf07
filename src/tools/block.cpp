#include "tools/block.h"

#include <algorithm>

#include "tools/log.h"
#include "tools/scan.h"

namespace tessera::tools {

BlockEnd end_at_marker(std::string_view block, size_t marker_len, std::string_view end, bool json_aware,
                       bool eof_completes, bool at_eof, ScanState& scan) {
  scan.pos = std::max(scan.pos, marker_len);
  size_t pos = std::string_view::npos;
  if (json_aware) {
    pos = find_outside_strings(block, end, scan);
  } else {
    pos = block.find(end, scan.pos);
    // Next time, look again only where the end marker could still begin.
    if (pos == std::string_view::npos && block.size() >= end.size()) scan.pos = block.size() - end.size() + 1;
  }
  if (pos != std::string_view::npos) return {BlockEnd::Kind::Complete, pos + end.size()};
  if (at_eof && eof_completes) return {BlockEnd::Kind::Complete, block.size()};
  return {};
}

size_t marker_end_after(std::string_view block, std::string_view call_end, size_t from) {
  size_t pos = block.find(call_end, from >= call_end.size() ? from - call_end.size() + 1 : 0);
  return pos == std::string_view::npos ? 0 : pos + call_end.size();
}

namespace {

class BlockParser : public StreamParser {
 public:
  BlockParser(std::unique_ptr<BlockFormat> format, const ParserOptions& options)
      : format_(std::move(format)), markers_(format_->start_markers()), tools_(options.tools),
        id_prefix_(options.call_id_prefix) {}

  Delta feed(std::string_view piece) override {
    Delta out;
    buffer_ += piece;
    scan(out, false, false);
    return out;
  }

  Delta finish(bool truncated) override {
    Delta out;
    scan(out, true, truncated);
    if (!last_was_block_) out.content += held_space_;
    held_space_.clear();
    return out;
  }

 private:
  void scan(Delta& out, bool at_eof, bool truncated) {
    while (true) {
      if (marker_ < 0) {
        MarkerHit hit = find_marker(buffer_, markers_, at_eof);
        size_t plain = hit.marker < 0 ? buffer_.size() : hit.pos;
        emit_text(std::string_view(buffer_).substr(0, plain), out);
        buffer_.erase(0, plain);
        if (hit.marker < 0 || hit.partial) return;
        marker_ = hit.marker;
      }
      BlockEnd end = format_->find_end(buffer_, marker_, at_eof, scan_);
      if (end.kind == BlockEnd::Kind::Incomplete) {
        if (!at_eof) return emit_finished_calls(buffer_, out);
        if (truncated) {
          warn("tool call cut off by max_tokens dropped: " + buffer_.substr(finished_len_));
          held_space_.clear();
          last_was_block_ = true;
        } else {
          // Calls already sent stay; the rest of the block is text.
          warn("unterminated tool call returned as text: " + buffer_.substr(finished_len_));
          emit_text(std::string_view(buffer_).substr(finished_len_), out);
        }
        buffer_.clear();
        end_block();
        return;
      }
      std::string_view text = std::string_view(buffer_).substr(0, end.length);
      if (end.kind == BlockEnd::Kind::NotACall) {
        emit_text(text, out);
      } else {
        held_space_.clear();
        close_block(text, out);
        last_was_block_ = true;
      }
      buffer_.erase(0, end.length);
      end_block();
    }
  }

  void end_block() {
    marker_ = -1;
    scan_ = {};
    finished_len_ = 0;
    block_calls_ = 0;
    checked_len_ = 0;
    failed_ = false;
  }

  void close_block(std::string_view text, Delta& out) {
    std::vector<ParsedCall> calls;
    if (!failed_ && format_->parse(text, marker_, tools_, calls)) {
      for (size_t i = block_calls_; i < calls.size(); ++i) emit_call(std::move(calls[i]), out);
      return;
    }
    // The calls before the malformed one stand, as they would have gone out while streaming.
    emit_finished_calls(text, out);
    warn("malformed tool call dropped: " + std::string(text.substr(finished_len_)));
  }

  // Sends the calls of the open block that are finished, one at a time, up to the first that
  // does not parse: which calls go out does not depend on how the text was cut.
  void emit_finished_calls(std::string_view block, Delta& out) {
    size_t from = std::max(finished_len_, checked_len_);
    checked_len_ = std::max(checked_len_, block.size());
    while (!failed_) {
      size_t end = format_->call_end_after(block, marker_, from);
      if (end == 0) return;
      std::vector<ParsedCall> calls;
      if (!format_->parse(block.substr(0, end), marker_, tools_, calls)) {
        failed_ = true;
        return;
      }
      held_space_.clear();
      last_was_block_ = true;
      for (size_t i = block_calls_; i < calls.size(); ++i) emit_call(std::move(calls[i]), out);
      block_calls_ = calls.size();
      finished_len_ = from = end;
    }
  }

  // Content, with whitespace next to a block held back so that it can be dropped.
  void emit_text(std::string_view text, Delta& out) {
    std::string_view seps = format_->separators();
    auto is_sep = [&](char c) { return is_space(c) || seps.find(c) != std::string_view::npos; };
    size_t first = 0;
    while (first < text.size() && is_sep(text[first])) ++first;
    held_space_ += text.substr(0, first);
    text.remove_prefix(first);
    if (text.empty()) return;
    size_t last = text.size();
    while (is_sep(text[last - 1])) --last;
    // Whitespace between a leading call and the text after it is formatting too.
    if (content_started_ || !last_was_block_) out.content += held_space_;
    out.content += text.substr(0, last);
    held_space_ = text.substr(last);
    last_was_block_ = false;
    content_started_ = true;
  }

  void emit_call(ParsedCall call, Delta& out) {
    if (call.name.empty()) return warn("tool call without a name dropped: " + call.arguments);
    int index = next_index_++;
    std::string id = call.id.empty() ? id_prefix_ + std::to_string(index) : call.id;
    out.tool_calls.push_back({index, std::move(id), std::move(call.name), ""});
    out.tool_calls.push_back({index, "", "", std::move(call.arguments)});
  }

  std::unique_ptr<BlockFormat> format_;
  std::vector<std::string> markers_;
  ToolSet tools_;
  std::string id_prefix_;
  std::string buffer_;      // text not yet released
  int marker_ = -1;         // the start marker of the open block, -1 in content
  ScanState scan_;          // how far the open block's end has been looked for
  size_t finished_len_ = 0; // the open block's text whose calls have been sent
  size_t block_calls_ = 0;  // how many calls of the open block have been sent
  size_t checked_len_ = 0;  // the open block's text already searched for finished calls
  bool failed_ = false;     // a call of the open block did not parse: no more go out early
  std::string held_space_;  // whitespace that a following block would drop
  bool last_was_block_ = false;
  bool content_started_ = false;
  int next_index_ = 0;
};

}  // namespace

std::unique_ptr<StreamParser> make_block_parser(std::unique_ptr<BlockFormat> format, const ParserOptions& options) {
  return std::make_unique<BlockParser>(std::move(format), options);
}

}  // namespace tessera::tools

namespace tessera::tools {

bool for_each_call(std::string_view block, size_t start_len, std::string_view call_begin, std::string_view call_end,
                   std::string_view block_end, const std::function<bool(std::string_view)>& each) {
  size_t pos = start_len;
  size_t found = 0;
  while (true) {
    while (pos < block.size() && is_space(block[pos])) ++pos;
    std::string_view rest = block.substr(pos);
    if (rest.empty() || rest == block_end) return found > 0;
    if (!rest.starts_with(call_begin)) return false;
    size_t end = rest.find(call_end, call_begin.size());
    if (end == std::string_view::npos || !each(rest.substr(call_begin.size(), end - call_begin.size()))) return false;
    ++found;
    pos += end + call_end.size();
  }
}

bool parse_json_call(std::string_view text, bool require_arguments, ParsedCall& call) {
  auto value = ordered_json::parse(text, nullptr, false);
  if (value.is_discarded() || !value.is_object()) return false;
  auto name = value.find("name");
  if (name == value.end() || !name->is_string()) return false;
  auto args = value.find("arguments");
  if (args == value.end()) args = value.find("parameters");
  ordered_json arguments = ordered_json::object();
  if (args != value.end()) {
    arguments = *args;
    if (arguments.is_string()) {
      auto decoded = ordered_json::parse(arguments.get<std::string>(), nullptr, false);
      if (!decoded.is_discarded()) arguments = std::move(decoded);
    }
  } else if (require_arguments) {
    return false;
  }
  call.name = name->get<std::string>();
  call.arguments = arguments_text(arguments);
  return true;
}

bool parse_json_calls(std::string_view text, std::vector<ParsedCall>& calls) {
  size_t pos = 0;
  size_t found = 0;
  while (true) {
    while (pos < text.size() && is_space(text[pos])) ++pos;
    if (pos == text.size()) return found > 0;
    auto len = json_value_end(text, pos);
    ParsedCall call;
    if (!len || !parse_json_call(text.substr(pos, *len), false, call)) return false;
    calls.push_back(std::move(call));
    ++found;
    pos += *len;
  }
}

}  // namespace tessera::tools
