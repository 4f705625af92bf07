// Reasoning between an open and a close tag: <think>…</think> (Qwen3, DeepSeek R1, GLM, MiniMax,
// Kimi), <|channel>thought…<channel|> (Gemma 4), [THINK]…[/THINK] (Magistral). Whitespace
// right after either tag, and at the end of the reasoning, is formatting and is dropped.
// Kimi K2 may begin its tool-call section without closing its reasoning: that ends it too.
#include "tools/formats.h"
#include "tools/scan.h"

namespace tessera::tools {
namespace {

class ThinkParser : public StreamParser {
 public:
  ThinkParser(const ThinkTags& tags, bool starts_in_reasoning)
      : open_(tags.open), close_(tags.close), in_reasoning_(starts_in_reasoning), skip_space_(starts_in_reasoning) {
    // Implicit closers are searched with the close tags but left in the text.
    implicit_from_ = close_.size();
    close_.insert(close_.end(), tags.implicit_close.begin(), tags.implicit_close.end());
  }

  Delta feed(std::string_view piece) override {
    Delta out;
    buffer_ += piece;
    scan(out, false);
    return out;
  }

  // Output that ends inside reasoning (a stop string, max_tokens) stays reasoning.
  Delta finish(bool) override {
    Delta out;
    scan(out, true);
    return out;
  }

 private:
  void scan(Delta& out, bool at_eof) {
    while (true) {
      MarkerHit hit = find_marker(buffer_, in_reasoning_ ? close_ : open_, at_eof);
      size_t plain = hit.marker < 0 ? buffer_.size() : hit.pos;
      size_t from = 0;
      if (skip_space_) {
        while (from < plain && is_space(buffer_[from])) ++from;
        if (from < plain) skip_space_ = false;
      }
      std::string_view text = std::string_view(buffer_).substr(from, plain - from);
      if (in_reasoning_) {
        emit_reasoning(text, out);
      } else {
        out.content += text;
      }
      buffer_.erase(0, plain);
      if (hit.marker < 0 || hit.partial) return;
      held_space_.clear();
      bool implicit = in_reasoning_ && static_cast<size_t>(hit.marker) >= implicit_from_;
      if (!implicit) buffer_.erase(0, (in_reasoning_ ? close_ : open_)[hit.marker].size());
      in_reasoning_ = !in_reasoning_;
      skip_space_ = true;
    }
  }

  // Trailing whitespace is held until more reasoning shows it was inside.
  void emit_reasoning(std::string_view text, Delta& out) {
    size_t last = text.size();
    while (last > 0 && is_space(text[last - 1])) --last;
    if (last == 0) {
      held_space_ += text;
      return;
    }
    out.reasoning += held_space_;
    out.reasoning += text.substr(0, last);
    held_space_ = text.substr(last);
  }

  std::vector<std::string> open_, close_;
  size_t implicit_from_;  // close_[implicit_from_..] end reasoning but stay in the text
  std::string held_space_;
  bool in_reasoning_;
  bool skip_space_;
  std::string buffer_;
};

}  // namespace

std::unique_ptr<StreamParser> make_think_parser(const ThinkTags& tags, bool starts_in_reasoning) {
  return std::make_unique<ThinkParser>(tags, starts_in_reasoning);
}

}  // namespace tessera::tools
