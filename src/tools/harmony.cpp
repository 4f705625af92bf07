// gpt-oss harmony: messages "[<|start|>assistant]<|channel|>CHANNEL[ to=RECIPIENT][ <|constrain|>json]
// <|message|>BODY" ended by <|end|>, <|call|> or <|return|>. The analysis channel is reasoning,
// final (and commentary without a recipient) is content, a body addressed to=functions.NAME is
// a call with JSON arguments.
#include <algorithm>

#include "tools/formats.h"
#include "tools/log.h"
#include "tools/scan.h"

namespace tessera::tools {
namespace {

const std::vector<std::string> kHeaderEnd = {"<|message|>"};
const std::vector<std::string> kBodyEnd = {"<|end|>", "<|call|>", "<|return|>", "<|start|>"};

enum class Route { Content, Reasoning, Call };

class HarmonyParser : public StreamParser {
 public:
  HarmonyParser(const ParserOptions& options, bool parse_tools)
      : parse_tools_(parse_tools), id_prefix_(options.call_id_prefix) {}

  Delta feed(std::string_view piece) override {
    Delta out;
    buffer_ += piece;
    scan(out, false);
    return out;
  }

  Delta finish(bool truncated) override {
    Delta out;
    scan(out, true);
    if (in_body_ && route_ == Route::Call) {
      if (truncated) warn("tool call cut off by max_tokens dropped: " + body_);
      else end_call(out);
    } else if (!in_body_ && !buffer_.empty()) {
      warn("unfinished harmony header dropped: " + buffer_);
    }
    buffer_.clear();
    return out;
  }

 private:
  void scan(Delta& out, bool at_eof) {
    while (true) {
      MarkerHit hit = find_marker(buffer_, in_body_ ? kBodyEnd : kHeaderEnd, at_eof);
      if (!in_body_) {
        // Text outside any message (a model that skips the headers) is content.
        if (!buffer_.starts_with("<|")) {
          size_t plain = std::min(buffer_.find("<|"), buffer_.size());
          if (plain == buffer_.size() && !at_eof && buffer_.ends_with("<")) --plain;
          if (plain == 0) return;
          out.content += std::string_view(buffer_).substr(0, plain);
          buffer_.erase(0, plain);
          continue;
        }
        if (hit.marker < 0 || hit.partial) return;
        start_body(std::string_view(buffer_).substr(0, hit.pos));
        buffer_.erase(0, hit.pos + kHeaderEnd[0].size());
        continue;
      }
      size_t plain = hit.marker < 0 ? buffer_.size() : hit.pos;
      std::string_view text = std::string_view(buffer_).substr(0, plain);
      if (route_ == Route::Reasoning) out.reasoning += text;
      else if (route_ == Route::Content) out.content += text;
      else body_ += text;
      buffer_.erase(0, plain);
      if (hit.marker < 0 || hit.partial) return;
      if (route_ == Route::Call) end_call(out);
      buffer_.erase(0, kBodyEnd[hit.marker].size());
      in_body_ = false;
    }
  }

  void start_body(std::string_view header) {
    std::string_view channel;
    if (size_t c = header.find("<|channel|>"); c != std::string_view::npos) {
      channel = header.substr(c + 11);
      size_t end = 0;
      while (end < channel.size() && !is_space(channel[end]) && channel[end] != '<') ++end;
      channel = channel.substr(0, end);
    }
    recipient_.clear();
    if (size_t to = header.find("to="); to != std::string_view::npos) {
      size_t end = to + 3;
      while (end < header.size() && !is_space(header[end]) && header[end] != '<') ++end;
      recipient_ = std::string(header.substr(to + 3, end - to - 3));
    }
    in_body_ = true;
    body_.clear();
    if (!recipient_.empty() && recipient_ != "assistant" && parse_tools_) route_ = Route::Call;
    else if (channel == "analysis") route_ = Route::Reasoning;
    else route_ = Route::Content;
  }

  void end_call(Delta& out) {
    auto args = ordered_json::parse(body_, nullptr, false);
    // Arguments are sometimes written as a JSON string holding the JSON.
    if (!args.is_discarded() && args.is_string()) {
      auto inner = ordered_json::parse(args.get<std::string>(), nullptr, false);
      if (!inner.is_discarded()) args = std::move(inner);
    }
    std::string name = recipient_.starts_with("functions.") ? recipient_.substr(10) : recipient_;
    if (args.is_discarded() || name.empty()) {
      warn("malformed tool call to '" + recipient_ + "' dropped: " + body_);
      return;
    }
    int index = next_index_++;
    out.tool_calls.push_back({index, id_prefix_ + std::to_string(index), name, ""});
    out.tool_calls.push_back({index, "", "", arguments_text(args)});
  }

  bool parse_tools_;
  std::string id_prefix_;
  std::string buffer_;
  bool in_body_ = false;
  Route route_ = Route::Content;
  std::string recipient_;
  std::string body_;  // arguments of the call being read
  int next_index_ = 0;
};

}  // namespace

std::unique_ptr<StreamParser> make_harmony_parser(const ParserOptions& options, bool parse_tools) {
  return std::make_unique<HarmonyParser>(options, parse_tools);
}

}  // namespace tessera::tools
