#include "server/generation.h"

#include <algorithm>
#include <set>

#include "server/api_error.h"

namespace tessera::server {

void ChoiceDelta::append(const ChoiceDelta& d) {
  text += d.text;
  token_ids.insert(token_ids.end(), d.token_ids.begin(), d.token_ids.end());
  logprobs.insert(logprobs.end(), d.logprobs.begin(), d.logprobs.end());
  parsed.append(tools::Delta(d.parsed));
  if (!d.finish_reason.empty()) finish_reason = d.finish_reason;
}

Generation::Generation(AsyncEngine& engine, const TextCodec* codec, std::vector<ChoiceSpec> specs,
                       TextOptions text, Metrics& metrics, Clock::time_point arrival,
                       std::function<void()> on_event, const tools::ParserOptions* parser)
    : engine_(engine),
      codec_(codec),
      metrics_(metrics),
      include_stop_(text.include_stop),
      skip_special_(text.skip_special),
      arrival_(arrival) {
  std::vector<Request> reqs;
  for (auto& s : specs) {
    Choice& c = choices_.emplace_back(text.stop);
    c.prompt_index = s.prompt_index;
    c.num_prompt_tokens = int(s.request.prompt.size());
    c.min_tokens = s.request.min_tokens;
    c.logprobs = s.request.params.logprobs >= 0;
    c.echo = s.echo, c.prompt_only = s.prompt_only;
    if (c.echo) c.echo_text = s.echo_text;
    // The prompt's tokens, where they are decoded or scored (a chat's echo needs neither).
    if (c.echo && (!c.echo_text || s.request.prompt_logprobs >= 0)) c.prompt = s.request.prompt;
    if (codec) c.decoder = codec->decoder(/*keep_special=*/parser != nullptr || !text.skip_special);
    if (codec && parser) {
      tools::ParserOptions o = *parser;
      o.call_id_prefix += std::to_string(choices_.size() - 1) + "_";
      c.parser = tools::make_parser(o);
      if (text.skip_special) c.content_filter = std::make_unique<SpecialTextFilter>(codec->special_texts());
    }
    reqs.push_back(std::move(s.request));
  }
  stream_ = engine_.submit(std::move(reqs), std::move(on_event));
}

Generation::~Generation() {
  if (!done()) stream_->cancel();
}

std::vector<ChoiceDelta> Generation::next(std::chrono::milliseconds timeout) {
  std::vector<ChoiceDelta> deltas(choices_.size());
  for (size_t i = 0; i < deltas.size(); ++i) deltas[i].index = int(i);
  for (StreamEvent& e : stream_->wait(timeout)) consume(e, deltas[size_t(e.index)]);
  deltas.erase(std::remove_if(deltas.begin(), deltas.end(), [](const ChoiceDelta& d) { return d.empty(); }),
               deltas.end());
  return deltas;
}

void Generation::consume(StreamEvent& e, ChoiceDelta& d) {
  Choice& c = choices_[size_t(e.index)];
  if (c.finished) return;  // tokens made before a stop string's cancellation reached the engine
  if (!e.error.empty()) {
    c.finished = true;
    ++num_done_;
    stream_->cancel();
    throw ApiError(e.input_error ? 400 : 500, e.error);
  }
  auto now = Clock::now();
  if (c.generated == 0) {
    c.first_token = now;
    c.cached_tokens = e.num_cached_tokens;
    metrics_.observe_ttft(std::chrono::duration<double>(now - arrival_).count());
    if (c.echo) echo_prompt(c, d, e.prompt_scores);
  } else {
    metrics_.observe_itl(std::chrono::duration<double>(now - c.last_token).count());
  }
  if (c.prompt_only) {  // the engine's one token stays unseen and uncounted
    if (!e.finished) stream_->cancel(e.index);
    finish(c, d, "length");
    return;
  }
  c.last_token = now;
  if (e.token >= 0) ++c.generated;

  // A stop token (EOS or a stop id) ends the text without being part of it.
  bool stop_token = e.finished && e.finish_reason == FinishReason::Stop;
  if (!stop_token) {
    std::string piece = c.decoder ? c.decoder->push(e.token) : std::string();
    if (e.finished && c.decoder) piece += c.decoder->flush();
    StopMatcher::Result r = c.stop.push(piece, /*may_stop=*/c.generated >= c.min_tokens);
    d.token_ids.push_back(e.token);
    if (c.logprobs) d.logprobs.push_back({e.token, true, e.sample.logprob, std::move(e.sample.top), c.text_len});
    emit(c, d, r.stopped && include_stop_ ? r.text + r.stop : r.text);
    if (r.stopped) {
      stream_->cancel(e.index);
      finish(c, d, "stop");
      return;
    }
  } else if (c.decoder) {
    emit(c, d, c.stop.push(c.decoder->flush()).text);
  }
  if (e.finished) {
    emit(c, d, c.stop.flush());
    finish(c, d, e.finish_reason == FinishReason::Length ? "length" : "stop");
  }
}

void Generation::echo_prompt(Choice& c, ChoiceDelta& d, std::vector<SampleResult>& scores) {
  const size_t start = c.text_len;
  std::string text;
  if (c.echo_text) {
    text = *c.echo_text;
  } else if (codec_) {
    std::unique_ptr<TextDecoder> decoder = codec_->decoder(/*keep_special=*/!skip_special_);
    for (int32_t id : c.prompt) text += decoder->push(id);
    text += decoder->flush();
  }
  if (c.parser)
    d.parsed.content += text;
  else
    d.text += text;
  c.text_len += text.size();

  if (!c.logprobs || c.prompt.empty() || scores.size() + 1 != c.prompt.size()) return;
  // Each token's offset: its text (special tokens' kept) where the echoed text holds it there; a
  // special token it does not hold (a BOS the tokenizer added) takes no room.
  std::unique_ptr<TextDecoder> decoder = codec_ ? codec_->decoder(/*keep_special=*/true) : nullptr;
  const std::vector<std::string> none;
  const std::vector<std::string>& specials = codec_ ? codec_->special_texts() : none;
  size_t pos = 0;
  for (size_t i = 0; i < c.prompt.size(); ++i) {
    TokenLogprob lp{c.prompt[i], i > 0, 0.0f, {}, start + pos};
    if (i > 0) lp.logprob = scores[i - 1].logprob, lp.top = std::move(scores[i - 1].top);
    d.logprobs.push_back(std::move(lp));
    std::string piece = decoder ? decoder->push(c.prompt[i]) : std::string();
    if (text.compare(pos, piece.size(), piece) == 0)
      pos += piece.size();
    else if (std::find(specials.begin(), specials.end(), piece) == specials.end())
      pos = std::min(pos + piece.size(), text.size());
  }
}

// Visible text (stop strings already applied) goes to the response, through the parser if any.
void Generation::emit(Choice& c, ChoiceDelta& d, const std::string& text) {
  d.text += text;
  c.text_len += text.size();
  if (!c.parser || text.empty()) return;
  add_parsed(c, d, c.parser->feed(text), false);
}

// Parser output into the delta; its content without special tokens' text (`last` flushes).
void Generation::add_parsed(Choice& c, ChoiceDelta& d, tools::Delta p, bool last) {
  c.has_calls = c.has_calls || !p.tool_calls.empty();
  if (c.content_filter) {
    p.content = c.content_filter->push(p.content);
    if (last) p.content += c.content_filter->flush();
  }
  d.parsed.append(std::move(p));
}

void Generation::finish(Choice& c, ChoiceDelta& d, const std::string& reason) {
  std::string r = reason;
  if (c.parser) {
    // A call cut by max_tokens is dropped with a warning; the reason stays "length".
    add_parsed(c, d, c.parser->finish(reason == "length"), true);
    if (c.has_calls && reason == "stop") r = "tool_calls";
  }
  c.finished = true;
  c.finish_reason = r;
  d.finish_reason = r;
  ++num_done_;
  metrics_.observe_latency(std::chrono::duration<double>(Clock::now() - arrival_).count());
}

Usage Generation::usage() const {
  Usage u;
  std::set<int> counted;
  for (const Choice& c : choices_) {
    u.completion_tokens += c.generated;
    if (counted.insert(c.prompt_index).second) u.prompt_tokens += c.num_prompt_tokens;
  }
  // A prompt's cached tokens: the best its choices found (they run side by side).
  std::vector<int> best;
  for (const Choice& c : choices_) {
    if (size_t(c.prompt_index) >= best.size()) best.resize(size_t(c.prompt_index) + 1, 0);
    best[size_t(c.prompt_index)] = std::max(best[size_t(c.prompt_index)], c.cached_tokens);
  }
  for (int b : best) u.cached_tokens += b;
  return u;
}

double Generation::ttft() const {
  if (choices_.empty() || choices_[0].generated == 0) return 0;
  return std::chrono::duration<double>(choices_[0].first_token - arrival_).count();
}

std::string Generation::finish_reasons() const {
  std::string out;
  for (const Choice& c : choices_) out += (out.empty() ? "" : ",") + (c.finished ? c.finish_reason : "abort");
  return out;
}

}  // namespace tessera::server
