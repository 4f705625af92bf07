// One API request in flight: its sequences in the engine, turned into text pieces per choice.
// Detokenization, stop strings and timing happen here, on the client's thread; the streaming
// and the non-streaming responses are built from the same pieces, so they are identical.
#pragma once
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/async_engine.h"
#include "server/metrics.h"
#include "server/special_text.h"
#include "server/stop_strings.h"
#include "server/text_codec.h"
#include "tools/parser.h"

namespace tessera::server {

struct TokenLogprob {
  int32_t id = 0;
  bool has_logprob = true;  // false: an echoed prompt's first token, which nothing precedes
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;
  size_t text_offset = 0;  // where the token's text starts in the choice's text so far
};

// What one choice gained since the last call (or, accumulated, all of it).
struct ChoiceDelta {
  int index = 0;
  std::string text;
  std::vector<int32_t> token_ids;
  std::vector<TokenLogprob> logprobs;
  // With a parser, the text split into content, reasoning and tool calls (`text` stays raw).
  tools::Delta parsed;
  std::string finish_reason;  // "" while running; "stop", "length" or "tool_calls" at the end

  bool empty() const {
    return text.empty() && token_ids.empty() && logprobs.empty() && finish_reason.empty() && parsed.empty();
  }
  void append(const ChoiceDelta& d);
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;
};

// How each choice's tokens become text: its stop strings, and vLLM's two switches.
struct TextOptions {
  std::vector<std::string> stop;
  bool include_stop = false;  // a stop string found stays at the end of the text
  bool skip_special = true;   // special tokens' text is left out (with a parser: of the content)
};

// One sequence to run: the engine request and the choice it answers.
struct ChoiceSpec {
  Request request;
  int prompt_index = 0;  // which prompt (choices of one prompt share its usage)
  // The prompt's text (and, where request.prompt_logprobs is set, its tokens' logprobs) comes
  // first in the choice; with prompt_only (max_tokens 0) nothing else does: the one token the
  // engine generates is not shown or counted.
  bool echo = false;
  bool prompt_only = false;
  // With echo, the text echoed: a text prompt as sent, or a chat's final message (vLLM's chat
  // echo; no prompt tokens then). Unset: the prompt's tokens decoded.
  std::optional<std::string> echo_text = std::nullopt;
};

class Generation {
 public:
  using Clock = std::chrono::steady_clock;
  // on_event: see RequestStream (a StreamWriter's wake-up). parser: when set (and a codec is),
  // each choice's text, detokenized with special tokens kept, after stop strings, goes through
  // its own tools::StreamParser (call ids get the choice index added to the prefix).
  Generation(AsyncEngine& engine, const TextCodec* codec, std::vector<ChoiceSpec> choices,
             TextOptions text, Metrics& metrics, Clock::time_point arrival,
             std::function<void()> on_event = {}, const tools::ParserOptions* parser = nullptr);
  ~Generation();  // cancels whatever still runs (the client left)
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  // Waits up to `timeout` for tokens and returns the non-empty deltas. Throws ApiError when
  // the engine failed a request.
  std::vector<ChoiceDelta> next(std::chrono::milliseconds timeout);
  bool done() const { return num_done_ == int(choices_.size()); }
  Usage usage() const;
  // Seconds from arrival to the first token of choice 0 (0 if none yet).
  double ttft() const;
  // The reasons choices finished, comma-separated, for the request log.
  std::string finish_reasons() const;

 private:
  struct Choice {
    explicit Choice(std::vector<std::string> stops) : stop(std::move(stops)) {}
    int prompt_index = 0;
    int num_prompt_tokens = 0;
    int cached_tokens = 0;
    int generated = 0;
    int min_tokens = 0;  // stop strings count from this many tokens on
    bool logprobs = false;
    bool echo = false, prompt_only = false;
    std::vector<int32_t> prompt;  // with echo, unless a chat's
    std::optional<std::string> echo_text;
    std::unique_ptr<TextDecoder> decoder;
    StopMatcher stop;
    std::unique_ptr<tools::StreamParser> parser;
    std::unique_ptr<SpecialTextFilter> content_filter;  // with a parser, unless special text is kept
    bool has_calls = false;
    size_t text_len = 0;
    bool finished = false;
    std::string finish_reason;
    Clock::time_point first_token, last_token;
  };
  void consume(StreamEvent& e, ChoiceDelta& d);
  // The echoed prompt: its text and, with logprobs, its tokens' (the first has none); a chat's
  // echo goes to the content.
  void echo_prompt(Choice& c, ChoiceDelta& d, std::vector<SampleResult>& scores);
  void finish(Choice& c, ChoiceDelta& d, const std::string& reason);
  void emit(Choice& c, ChoiceDelta& d, const std::string& text);
  void add_parsed(Choice& c, ChoiceDelta& d, tools::Delta p, bool last);

  AsyncEngine& engine_;
  const TextCodec* codec_;
  Metrics& metrics_;
  bool include_stop_ = false;
  bool skip_special_ = true;
  Clock::time_point arrival_;
  std::vector<Choice> choices_;
  std::shared_ptr<RequestStream> stream_;
  int num_done_ = 0;
};

}  // namespace tessera::server
