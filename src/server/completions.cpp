// POST /v1/chat/completions and /v1/completions: prepare the prompts on this HTTP thread,
// run them through the engine, answer as one JSON body or as server-sent events.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>

#include "core/error.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"
#include "grammar/vocab.h"
#include "server/api_error.h"
#include "server/generation.h"
#include "server/http_server.h"
#include "server/openai_response.h"
#include "server/server_state.h"
#include "server/stream_writer.h"
#include "tools/formats.h"
#include "tools/log.h"
#include "tools/registry.h"

namespace tessera::server {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
constexpr std::chrono::milliseconds kPoll{100};
constexpr int kClientClosed = 499;  // nginx's status for a client that left before the answer

// `rendered`: the chat prompt as text (whether it opens a reasoning block matters to parsing).
std::vector<std::vector<int32_t>> tokenize_prompts(const Server::State& st, const GenerationRequest& r,
                                                   std::string& rendered) {
  std::vector<std::vector<int32_t>> out;
  const TextCodec* codec = st.codec;
  try {
    if (r.endpoint == Endpoint::Chat) {
      if (!codec)
        throw ApiError(400,
                       "this model has no tokenizer or chat template; use /v1/completions with token ids");
      // The template writes any BOS itself, so special tokens are not added a second time.
      rendered = codec->render_chat(r.chat);
      out.push_back(codec->encode(rendered, false));
    } else {
      for (const auto& p : r.prompts) {
        if (!p.is_text)
          out.push_back(p.ids);
        else if (!codec)
          throw ApiError(400, "this model has no tokenizer; send 'prompt' as token ids", "prompt");
        else
          out.push_back(codec->encode(p.text, true));
      }
    }
  } catch (const Error& e) {
    throw ApiError(400, e.what(), r.endpoint == Endpoint::Chat ? "messages" : "prompt");
  }
  // vLLM's truncate_prompt_tokens: the last k tokens (-1: the context length).
  if (r.truncate_prompt_tokens) {
    const int64_t k = *r.truncate_prompt_tokens < 0 ? st.info.max_model_len : *r.truncate_prompt_tokens;
    for (auto& ids : out)
      if (int64_t(ids.size()) > k) ids.erase(ids.begin(), ids.end() - k);
  }
  return out;
}

// What an echoing choice opens with: a text prompt as sent (token ids, and prompts that may have
// been truncated, are decoded later), or a chat's final message where it has the answer's role
// (vLLM's: the assistant's, or any with no generation prompt), its text parts joined by newlines.
std::optional<std::string> echo_text(const GenerationRequest& r, size_t prompt) {
  if (r.endpoint != Endpoint::Chat)
    return r.prompts[prompt].is_text && !r.truncate_prompt_tokens ? std::optional(r.prompts[prompt].text)
                                                                  : std::nullopt;
  const auto& last = r.chat.messages.back();
  if (r.chat.add_generation_prompt && last.value("role", "") != "assistant") return std::string();
  return content_text(last.value("content", nlohmann::ordered_json()));  // rendered already: parts are text
}

// Builds the engine requests, one per (prompt, choice), enforcing the context length.
std::vector<ChoiceSpec> build_choices(const Server::State& st, const GenerationRequest& r,
                                      const std::vector<std::vector<int32_t>>& prompts) {
  for (auto [id, bias] : r.params.logit_bias) check_token(st, id, "logit_bias");
  for (int32_t id : r.stop_token_ids) check_token(st, id, "stop_token_ids");
  std::vector<int32_t> stop_ids = r.ignore_eos ? std::vector<int32_t>{} : st.info.eos_ids;
  stop_ids.insert(stop_ids.end(), r.stop_token_ids.begin(), r.stop_token_ids.end());

  int64_t limit = std::min<int64_t>(st.info.max_model_len, st.info.kv_capacity_tokens);
  std::vector<ChoiceSpec> out;
  for (size_t p = 0; p < prompts.size(); ++p) {
    const auto& ids = prompts[p];
    const char* field = r.endpoint == Endpoint::Chat ? "messages" : "prompt";
    if (ids.empty()) throw ApiError(400, "the prompt is empty", field);
    for (int32_t id : ids) check_token(st, id, field);
    int64_t n = int64_t(ids.size());
    int64_t max_tokens = r.max_tokens ? *r.max_tokens : limit - n;
    // An echoed prompt alone (max_tokens 0): the engine still makes one token, never shown.
    const bool prompt_only = r.echo && max_tokens == 0;
    if (prompt_only) max_tokens = 1;
    if (n + max_tokens > limit || max_tokens < 1)
      throw ApiError(
          400,
          "this model's maximum context length is " + std::to_string(limit) + " tokens; the request needs " +
              std::to_string(n + std::max<int64_t>(max_tokens, 1)) + " (" + std::to_string(n) +
              " in the prompt, " + std::to_string(std::max<int64_t>(max_tokens, 1)) + " to generate)",
          r.max_tokens ? "max_tokens" : field);
    if (const int64_t most = prompt_only ? 0 : max_tokens; r.min_tokens > most)
      throw ApiError(400,
                     "min_tokens (" + std::to_string(r.min_tokens) + ") exceeds " +
                         (r.max_tokens ? "max_tokens (" + std::to_string(most) + ")"
                                       : "the " + std::to_string(most) + " tokens left in the context"),
                     "min_tokens");
    for (int j = 0; j < r.n; ++j) {
      Request q;
      q.prompt = ids;
      q.params = r.params;
      q.max_tokens = int(max_tokens);
      q.min_tokens = r.min_tokens;
      q.stop_token_ids = stop_ids;
      if (r.seed) q.seed = *r.seed + uint64_t(j);
      if (r.echo && r.endpoint == Endpoint::Completion) q.prompt_logprobs = r.params.logprobs;  // -1: none
      out.push_back({std::move(q), int(p), r.echo, prompt_only, r.echo ? echo_text(r, p) : std::nullopt});
    }
  }
  return out;
}

// tool_choice "required" or a named function: a grammar holds the model to calling, in JSON
// whatever its own tool format (vLLM's way), except for harmony models, whose parser applies the
// choice to the calls they write. The schema's keywords a grammar cannot hold are left out.
void force_calls(const Server::State& st, GenerationRequest& r) {
  if (r.endpoint != Endpoint::Chat || !st.codec) return;
  const tools::ToolChoice& choice = r.tool_choice;
  if (choice.mode != tools::ToolChoiceMode::Required && choice.mode != tools::ToolChoiceMode::Named) return;
  if (!tools::calls_can_be_forced(st.info.tool_format, st.info.reasoning_format)) return;
  if (!r.output_param.empty())
    throw ApiError(400, "tool_choice \"required\" or a named function cannot be combined with " + r.output_param,
                   "tool_choice");
  try {
    r.json_schema = tools::forced_calls_schema(r.chat.tools, choice, r.parallel_tool_calls);
  } catch (const Error& e) {
    throw ApiError(400, e.what(), "tool_choice");
  }
  r.output_param = "tool_choice";
  r.forced_calls = true;
}

// The grammar of a request's structured output, read through the model's tokens. A chat with a
// reasoning model reasons first: its reasoning block (one the prompt leaves open, or one the
// first token opens) is left free, and the grammar holds what follows the close tag.
std::shared_ptr<const grammar::Constraint> output_constraint(const Server::State& st, const GenerationRequest& r,
                                                             const std::string& rendered) {
  grammar::Constraint c;
  try {
    c.grammar = !r.gbnf.empty()      ? grammar::gbnf_grammar(r.gbnf)
                : !r.regex.empty()   ? grammar::regex_grammar(r.regex)
                : !r.choices.empty() ? grammar::choice_grammar(r.choices)
                                     : grammar::json_schema_grammar(r.json_schema, /*loose=*/r.forced_calls);
  } catch (const Error& e) {
    throw ApiError(400, e.what(), r.output_param);
  }
  c.vocab = st.codec ? st.codec->grammar_vocab() : nullptr;
  if (!c.vocab) throw ApiError(400, "structured output needs the model's tokenizer", r.output_param);
  const tools::ThinkTags* tags = tools::find_think_tags(st.info.reasoning_format);
  if (r.endpoint == Endpoint::Chat && tags) {
    // Each tag as the model's tokens; an open tag only where its first token is a special one
    // (no text of its own), which output the grammar holds cannot begin with.
    auto special = [&](int32_t id) { return id < c.vocab->size() && c.vocab->bytes(id).empty(); };
    auto tag_tokens = [&](const std::vector<std::string>& texts, bool open) {
      std::vector<std::vector<int32_t>> seqs;
      for (const auto& t : texts)
        if (auto e = st.codec->encode(t, false); !e.empty() && (!open || special(e[0]))) seqs.push_back(std::move(e));
      return seqs;
    };
    c.reasoning_open = tag_tokens(tags->open, true);
    c.reasoning_close = tag_tokens(tags->close, false);
    c.starts_in_reasoning = tools::prompt_opens_reasoning(rendered, st.info.reasoning_format);
  }
  return std::make_shared<const grammar::Constraint>(std::move(c));
}

// Chat output is parsed when the model has a tool-call or reasoning format.
std::optional<tools::ParserOptions> parser_options(const Server::State& st, const GenerationRequest& r,
                                                   const std::string& rendered, const std::string& id) {
  if (r.endpoint != Endpoint::Chat || !st.codec) return std::nullopt;
  if (st.info.tool_format.empty() && st.info.reasoning_format.empty() && !r.forced_calls) return std::nullopt;
  tools::ParserOptions o;
  o.tool_format = st.info.tool_format;
  o.reasoning_format = st.info.reasoning_format;
  if (!r.chat.tools.is_null()) o.tools = json::parse(r.chat.tools.dump());
  o.tool_choice = r.tool_choice;
  o.parallel_tool_calls = r.parallel_tool_calls;
  o.forced_calls = r.forced_calls;
  o.starts_in_reasoning = tools::prompt_opens_reasoning(rendered, o.reasoning_format);
  o.call_id_prefix = "call_" + id + "_";  // ids unique across requests
  return o;
}

void log_request(const Server::State& st, const ResponseContext& ctx, const Generation& g,
                 Clock::time_point t0) {
  if (!st.cfg.log_requests) return;
  Usage u = g.usage();
  double total = std::chrono::duration<double>(Clock::now() - t0).count();
  double ttft = g.ttft();
  double decode = total - ttft;
  std::fprintf(
      stderr, "%s: prompt %lld tokens (%lld cached), generated %lld, TTFT %.1f ms, %.1f tok/s, finish %s\n",
      ctx.id.c_str(), (long long)u.prompt_tokens, (long long)u.cached_tokens, (long long)u.completion_tokens,
      ttft * 1e3, u.completion_tokens > 1 && decode > 0 ? double(u.completion_tokens - 1) / decode : 0.0,
      g.finish_reasons().c_str());
}

// Parser warnings (a dropped call) raised on this thread name the response they belong to.
class WarningTag {
 public:
  explicit WarningTag(const std::string& id)
      : old_(tools::set_warning_sink([id](std::string_view m) {
          std::fprintf(stderr, "%s: warning: %.*s\n", id.c_str(), int(m.size()), m.data());
        })) {}
  ~WarningTag() { tools::set_warning_sink(std::move(old_)); }
  WarningTag(const WarningTag&) = delete;
  WarningTag& operator=(const WarningTag&) = delete;

 private:
  tools::WarningSink old_;
};

// The client left: what it was given counts, and the log says so (the caller's Generation
// cancels the sequences).
void client_left(Server::State& st, const ResponseContext& ctx, const Generation& g) {
  Usage u = g.usage();
  st.metrics.add_tokens(u.prompt_tokens, u.cached_tokens, u.completion_tokens);
  if (st.cfg.log_requests)
    std::fprintf(stderr, "%s: client disconnected after %lld tokens; sequences cancelled\n", ctx.id.c_str(),
                 (long long)u.completion_tokens);
}

void respond_whole(Server::State& st, const ResponseContext& ctx, Generation& g, httplib::Response& res,
                   Clock::time_point t0) {
  std::vector<ChoiceDelta> acc;
  WarningTag tag(ctx.id);
  int fd = current_socket();
  auto next_check = Clock::now() + kPoll;
  while (!g.done()) {
    for (const ChoiceDelta& d : g.next(kPoll)) {
      if (size_t(d.index) >= acc.size()) acc.resize(size_t(d.index) + 1);
      acc[size_t(d.index)].index = d.index;
      acc[size_t(d.index)].append(d);
    }
    // Nothing is written until the end, so only the socket tells that a client gave up.
    if (Clock::now() < next_check) continue;
    next_check = Clock::now() + kPoll;
    if (fd >= 0 && peer_closed(fd)) {
      st.metrics.count_request(kClientClosed);
      client_left(st, ctx, g);
      res.status = kClientClosed;
      return;
    }
  }
  Usage u = g.usage();
  st.metrics.add_tokens(u.prompt_tokens, u.cached_tokens, u.completion_tokens);
  res.set_content(full_response(ctx, acc, u).dump(-1, ' ', false, json::error_handler_t::replace),
                  "application/json");
  st.metrics.count_request(200);
  log_request(st, ctx, g, t0);
}

struct StreamState {
  Server::State* st;
  ResponseContext ctx;
  ChunkFrame frame;
  // Set (by the engine thread) when the Generation has new events: the writer pumps only
  // the responses that have some.
  std::shared_ptr<std::atomic<bool>> ready = std::make_shared<std::atomic<bool>>(false);
  std::unique_ptr<Generation> gen;
  bool include_usage = false, continuous_usage = false;
  std::vector<bool> started;
  Clock::time_point t0;
  bool finished = false;
};

// Run by the StreamWriter's thread whenever events may be ready: appends them without waiting.
StreamWriter::Pump stream_some(StreamState& s, std::string& out) {
  using Pump = StreamWriter::Pump;
  if (!s.ready->exchange(false)) return Pump::More;
  std::vector<ChoiceDelta> deltas;
  WarningTag tag(s.ctx.id);
  try {
    deltas = s.gen->next(std::chrono::milliseconds(0));
  } catch (const ApiError& e) {
    out += sse_event(e.to_json());
    out += "data: [DONE]\n\n";
    s.finished = true;
    return Pump::Finished;
  }
  for (const ChoiceDelta& d : deltas) {
    // Nothing the client asked to see (text held back for a stop string, ids not requested).
    bool visible = (s.ctx.parsed ? !d.parsed.empty() : !d.text.empty()) || !d.finish_reason.empty() ||
                   (s.ctx.logprobs && !d.logprobs.empty()) ||
                   (s.ctx.return_token_ids && !d.token_ids.empty());
    if (!visible) continue;
    bool first = !s.started[size_t(d.index)];
    s.started[size_t(d.index)] = true;
    const Usage so_far = s.continuous_usage ? s.gen->usage() : Usage{};
    append_chunk_event(out, s.frame, s.ctx, d, first, s.continuous_usage ? &so_far : nullptr);
  }
  if (!s.gen->done()) return Pump::More;
  Usage u = s.gen->usage();
  s.st->metrics.add_tokens(u.prompt_tokens, u.cached_tokens, u.completion_tokens);
  if (s.include_usage) out += sse_event(usage_chunk(s.ctx, u));
  out += "data: [DONE]\n\n";
  s.finished = true;
  log_request(*s.st, s.ctx, *s.gen, s.t0);
  return Pump::Finished;
}

}  // namespace

void handle_generation(Server::State& st, Endpoint endpoint, const httplib::Request& req,
                       httplib::Response& res) {
  Clock::time_point t0 = Clock::now();
  try {
    json body = request_json(req.body);
    GenerationRequest r = endpoint == Endpoint::Chat ? parse_chat_request(body, st.info.defaults, req.body)
                                                     : parse_completion_request(body, st.info.defaults, req.body);
    check_served_model(st, r.model);
    std::string rendered;
    std::vector<std::vector<int32_t>> prompts = tokenize_prompts(st, r, rendered);
    force_calls(st, r);
    if (!r.output_param.empty()) r.params.constraint = output_constraint(st, r, rendered);
    std::vector<ChoiceSpec> choices = build_choices(st, r, prompts);
    int capacity = st.info.max_num_seqs + st.cfg.max_queue;
    if (int(choices.size()) > capacity)
      throw ApiError(400,
                     std::to_string(choices.size()) +
                         " sequences (prompts x n) exceed what the server admits at once (" +
                         std::to_string(capacity) + ")",
                     "n");
    if (st.engine->in_flight() + int(choices.size()) > capacity)
      throw ApiError(429, "the server is busy (" + std::to_string(st.engine->in_flight()) +
                              " sequences running or waiting); retry later");

    ResponseContext ctx;
    ctx.endpoint = endpoint;
    ctx.id = (endpoint == Endpoint::Chat ? "chatcmpl-" : "cmpl-") + std::to_string(st.next_id++);
    ctx.created = unix_seconds();
    ctx.model = st.cfg.served_model_name;
    ctx.codec = st.codec;
    ctx.logprobs = r.params.logprobs >= 0;
    ctx.return_token_ids = r.return_token_ids;
    if (r.return_token_ids) ctx.prompt_ids = prompts;

    std::optional<tools::ParserOptions> parser = parser_options(st, r, rendered, ctx.id);
    ctx.parsed = parser.has_value();

    auto s = r.stream ? std::make_shared<StreamState>() : nullptr;
    std::function<void()> on_event;
    if (s)
      on_event = [ready = s->ready, w = st.writer.get()] {
        ready->store(true);
        w->wake();
      };
    TextOptions text{r.stop, r.include_stop_str_in_output, r.skip_special_tokens};
    auto gen = std::make_unique<Generation>(*st.engine, st.codec, std::move(choices), std::move(text), st.metrics,
                                            t0, std::move(on_event), parser ? &*parser : nullptr);
    if (!s) {
      respond_whole(st, ctx, *gen, res, t0);
      return;
    }
    s->st = &st;
    s->frame = chunk_frame(ctx);
    s->ctx = std::move(ctx);
    s->include_usage = r.include_usage;
    s->continuous_usage = r.continuous_usage;
    s->started.assign(prompts.size() * size_t(r.n), false);
    s->t0 = t0;
    s->gen = std::move(gen);
    st.metrics.count_request(200);
    res.set_header("Cache-Control", "no-cache");
    // The writer thread sends the events; this thread ends the body once they are all out. A
    // failed send means the client is gone: the response is dropped, and with it the
    // Generation, which cancels its sequences.
    res.set_chunked_content_provider(
        "text/event-stream",
        [s](size_t, httplib::DataSink& sink) {
          if (!s->st->writer->serve(current_socket(), [s](std::string& out) { return stream_some(*s, out); }))
            return false;
          sink.done();
          return true;
        },
        [s](bool) {
          if (!s->finished) client_left(*s->st, s->ctx, *s->gen);
          s->gen.reset();  // cancels what still runs
        });
  } catch (const ApiError& e) {
    st.metrics.count_request(e.status());
    set_error(res, e);
  }
}

}  // namespace tessera::server
