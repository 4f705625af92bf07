#include "runner/model_runner.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <numeric>

namespace tessera {
namespace {

using Clock = std::chrono::steady_clock;

// Adds the seconds since `t` to `sum` and restarts `t`.
void lap(Clock::time_point& t, double& sum) {
  auto now = Clock::now();
  sum += std::chrono::duration<double>(now - t).count();
  t = now;
}

// Contexts up to this share a recording (their attention is short either way).
constexpr int kMinContextBucket = 128;

// The context a recording is made for, which its attention's form (its key splits) is chosen
// for: the longest context rounded up to a quarter octave (640, 768, 896, 1024, 1280, ...), so
// within 25% of every context that replays it. Measured on the H200 (8B shape, batch 32, contexts
// 513-640): the octave's end (1024) chose three key splits and their combine pass where one split
// in the deep register form runs (31.0 against 24.6 µs a layer, ncu), 5% of the step.
int context_bucket(int longest) {
  if (longest <= kMinContextBucket) return kMinContextBucket;
  const int step = int(std::bit_ceil(unsigned(longest))) / 8;
  return (longest + step - 1) / step * step;
}

}  // namespace

struct ModelRunner::Replay {
  // The padded inputs where the recording reads them, and two page-locked host buffers that
  // consecutive replayed steps take in turn: a step launched ahead (launch_next) must not
  // overwrite the inputs of the one before it, whose upload may still be waiting in the queue.
  Tensor inputs, host[2];
  ForwardBatch fb;      // views of `inputs`
  std::unique_ptr<Recording> recording;
  Tensor logits;        // where the recording writes its logits
  int runs = 0;
  bool failed = false;  // recording failed (say, out of memory): this shape runs unrecorded
};

ModelRunner::ModelRunner(Model& model, Backend& be, KvCache& cache, bool replay)
    : model_(model), be_(be), cache_(cache), replay_(replay && be.can_record() && model.replayable(kMaxReplayedSeqs)) {}

ModelRunner::~ModelRunner() = default;

Tensor ModelRunner::upload_i32(const std::vector<int32_t>& v, Shape shape) {
  Tensor host = Tensor::empty(DType::I32, std::move(shape));
  if (!v.empty()) std::memcpy(host.raw(), v.data(), v.size() * sizeof(int32_t));
  return be_.upload(host);
}

ModelRunner::Inputs ModelRunner::flatten(const std::vector<ScheduledSeq>& batch, bool all_rows, int table_width,
                                         int ahead, StepLogits& out) const {
  const int bs = cache_.block_size;
  Inputs in;
  in.table_width = table_width;
  if (table_width == 0)
    for (auto& s : batch) in.table_width = std::max({in.table_width, 1, int(s.seq->block_table.size())});
  in.tables.assign(batch.size() * size_t(in.table_width), 0);
  std::vector<int32_t> score_rows;  // after the sampling rows
  for (size_t i = 0; i < batch.size(); ++i) {
    const Sequence& q = *batch[i].seq;
    const int known = q.num_tokens() + ahead;  // tokens once the drawn step's are in
    int begin = q.num_computed_tokens + ahead, end = begin + batch[i].num_new_tokens;
    const bool scores_prompt = !all_rows && q.scores_prompt();
    for (int p = begin; p < end; ++p) {
      // Sampling needs the row after the last known token; scoring wants every row.
      if (all_rows || (p == end - 1 && end == known)) {
        in.rows.push_back(int32_t(in.ids.size()));
        out.seq_index.push_back(int(i));
        out.position.push_back(p);
      }
      if (scores_prompt && p + 1 < q.num_prompt_tokens) {
        score_rows.push_back(int32_t(in.ids.size()));
        out.score_seq_index.push_back(int(i));
        out.score_position.push_back(p);
        out.score_token.push_back(q.tokens[size_t(p) + 1]);
        in.score_top.push_back(q.prompt_logprobs);
      }
      in.ids.push_back(p < q.num_tokens() ? q.tokens[p] : 0);
      in.positions.push_back(p);
      in.slots.push_back(q.block_table[p / bs] * bs + p % bs);
    }
    in.starts.push_back(int32_t(in.ids.size()));
    in.context_lens.push_back(end);
    // Blocks beyond the context (none are read) may not fit a recorded shape's width.
    const size_t n = std::min(q.block_table.size(), size_t(in.table_width));
    std::copy_n(q.block_table.begin(), n, in.tables.begin() + i * in.table_width);
    in.max_query = std::max(in.max_query, end - begin);
    in.max_context = std::max(in.max_context, end);
  }
  in.rows.insert(in.rows.end(), score_rows.begin(), score_rows.end());
  return in;
}

bool ModelRunner::replayable(const std::vector<ScheduledSeq>& batch, bool all_rows) const {
  if (!replay_ || all_rows || batch.empty() || batch.size() > size_t(kMaxReplayedSeqs)) return false;
  return std::all_of(batch.begin(), batch.end(), [](const ScheduledSeq& s) {
    return s.num_new_tokens == 1 && s.seq->num_computed_tokens + 1 == s.seq->num_tokens();
  });
}

void ModelRunner::take_drawn_ids(const Tensor& ids, const Tensor& token_ids) {
  if (!ids.defined()) return;
  Tensor head = token_ids.slice_rows(0, ids.numel());
  be_.copy(ids, head);
}

Tensor ModelRunner::forward(const Inputs& in, const Tensor& ids) {
  ForwardBatch fb;
  fb.num_tokens = int(in.ids.size());
  fb.num_logits = int(in.rows.size());
  fb.max_position = in.max_context - 1;
  fb.token_ids = upload_i32(in.ids, {fb.num_tokens});
  fb.slot_mapping = upload_i32(in.slots, {fb.num_tokens});
  fb.logits_rows = upload_i32(in.rows, {fb.num_logits});
  fb.attn.positions = upload_i32(in.positions, {fb.num_tokens});
  fb.attn.seq_starts = upload_i32(in.starts, {int64_t(in.starts.size())});
  fb.attn.context_lens = upload_i32(in.context_lens, {int64_t(in.context_lens.size())});
  fb.attn.block_tables = upload_i32(in.tables, {int64_t(in.context_lens.size()), in.table_width});
  fb.attn.num_seqs = int(in.context_lens.size());
  fb.attn.max_blocks = in.table_width;
  fb.attn.block_size = cache_.block_size;
  fb.attn.max_query_len = in.max_query;
  fb.attn.max_context_len = in.max_context;
  take_drawn_ids(ids, fb.token_ids);
  return model_.forward(fb, cache_);
}

Tensor ModelRunner::forward_replayed(Inputs in, int seqs, int context, const Tensor& ids) {
  Replay& r = replays_[{seqs, context}];
  const int width = in.table_width;
  if (!r.inputs.defined()) {
    // One i32 buffer: ids, slots, logits rows, positions [seqs]; starts [seqs + 1]; context
    // lengths [seqs]; block tables [seqs, width].
    const int64_t total = 6 * int64_t(seqs) + 1 + int64_t(seqs) * width;
    for (Tensor& h : r.host) h = be_.host_empty(DType::I32, {total});
    r.inputs = be_.empty(DType::I32, {total});
    int64_t at = 0;
    auto part = [&](int64_t n) {
      at += n;
      return r.inputs.slice_rows(at - n, at);
    };
    ForwardBatch& fb = r.fb;
    fb.token_ids = part(seqs), fb.slot_mapping = part(seqs), fb.logits_rows = part(seqs);
    fb.attn.positions = part(seqs), fb.attn.seq_starts = part(seqs + 1), fb.attn.context_lens = part(seqs);
    fb.attn.block_tables = part(int64_t(seqs) * width).reshape({seqs, width});
    fb.num_tokens = fb.num_logits = fb.attn.num_seqs = seqs;
    fb.max_position = context - 1;
    fb.attn.max_blocks = width;
    fb.attn.block_size = cache_.block_size;
    fb.attn.max_query_len = 1;
    fb.attn.max_context_len = context;
  }
  // Empty sequences fill the batch: token 0 at position 0, not stored, attending to nothing.
  for (int i = int(in.ids.size()); i < seqs; ++i) {
    in.ids.push_back(0), in.slots.push_back(-1), in.rows.push_back(i), in.positions.push_back(0);
    in.starts.push_back(i + 1), in.context_lens.push_back(0);
  }
  in.tables.resize(size_t(seqs) * size_t(width), 0);
  Tensor& host = r.host[replayed_uploads_++ % 2];  // next written two steps on, after this one's results
  int32_t* h = host.data<int32_t>();
  for (const auto* v : {&in.ids, &in.slots, &in.rows, &in.positions, &in.starts, &in.context_lens, &in.tables})
    h = std::copy(v->begin(), v->end(), h);
  be_.upload_to(host, r.inputs);
  take_drawn_ids(ids, r.fb.token_ids);

  if (!r.recording && !r.failed && r.runs++ > 0) {
    try {
      r.recording = be_.record([this, &r] { r.logits = model_.forward(r.fb, cache_); });
      // Only the address is kept: the block stays in the backend's recording pool, where other
      // recordings may use it too (backend.h), and it holds these logits until one replays.
      r.logits = Tensor::view(r.logits.raw(), r.logits.dtype(), r.logits.shape(), nullptr, r.logits.device());
    } catch (const Error& e) {
      r.failed = true;
      std::fprintf(stderr, "tessera: decode steps of %d sequences run unrecorded: %s\n", seqs, e.what());
    }
  }
  if (!r.recording) return model_.forward(r.fb, cache_);
  be_.replay(*r.recording);
  ++times_.replayed;
  return r.logits;
}

StepLogits ModelRunner::run(const std::vector<ScheduledSeq>& batch, bool all_rows, const Draws* draws) {
  launch(batch, all_rows);
  return finish(draws);
}

void ModelRunner::launch(const std::vector<ScheduledSeq>& batch, bool all_rows) { start(batch, all_rows, 0, Tensor()); }

void ModelRunner::launch_next(const std::vector<ScheduledSeq>& batch) {
  TESSERA_CHECK(drawn_.has_value() && drawn_->ids.defined() && !launched_.has_value(),
                "runner: launch_next() needs a drawn step whose rows the backend drew, and none launched");
  TESSERA_CHECK(drawn_->out.seq_index.size() == batch.size() && drawn_->host_logits == 0,
                "runner: launch_next() follows a step of one drawn row per sequence");
  start(batch, false, 1, drawn_->ids);
  ++times_.ahead;
}

void ModelRunner::start(const std::vector<ScheduledSeq>& batch, bool all_rows, int ahead, const Tensor& ids) {
  TESSERA_CHECK(!launched_.has_value(), "runner: a launched step was never drawn");
  auto t = Clock::now();
  StepLogits out;
  Tensor logits;
  std::vector<int> score_top;
  if (replayable(batch, all_rows)) {
    int longest = 0;
    for (auto& s : batch) longest = std::max(longest, s.seq->num_tokens() + ahead);
    const int seqs = int(std::bit_ceil(unsigned(batch.size())));
    const int context = context_bucket(longest);
    const int width = (context + cache_.block_size - 1) / cache_.block_size;
    Inputs in = flatten(batch, false, width, ahead, out);
    score_top = std::move(in.score_top);
    lap(t, times_.prepare);
    logits = forward_replayed(std::move(in), seqs, context, ids).slice_rows(0, int64_t(batch.size()));
  } else {
    Inputs in = flatten(batch, all_rows, 0, ahead, out);
    score_top = std::move(in.score_top);
    lap(t, times_.prepare);
    logits = forward(in, ids);
  }
  lap(t, times_.enqueue);
  launched_ = Launched{logits, std::move(out), std::move(score_top)};
}

StepLogits ModelRunner::finish(const Draws* draws) {
  draw(draws);
  return collect();
}

void* ModelRunner::host_buffer(Tensor& buf, DType dtype, int64_t n) {
  if (!buf.defined() || buf.numel() < n) buf = be_.host_empty(dtype, {std::max<int64_t>(n, 1)});
  return buf.raw();
}

void ModelRunner::draw(const Draws* draws) {
  TESSERA_CHECK(launched_.has_value(), "runner: draw() without a launched step");
  TESSERA_CHECK(!drawn_.has_value(), "runner: a drawn step was never collected");
  auto t = Clock::now();
  Tensor logits = std::move(launched_->logits);
  Drawn d;
  d.out = std::move(launched_->out);
  const std::vector<int> score_top = std::move(launched_->score_top);
  launched_.reset();
  StepLogits& out = d.out;
  const int num_logits = int(out.seq_index.size());
  out.vocab = model_.vocab_size();
  if (!score_top.empty()) {  // the prompt scores' rows follow the sampling rows
    draw_scores(logits, num_logits, score_top, d);
    logits = logits.slice_rows(0, num_logits);
  }
  int64_t host_rows = num_logits;  // rows whose logits come back
  if (draws) {
    const std::vector<RowSampling>& rows = draws->rows;
    TESSERA_CHECK(rows.size() == size_t(num_logits), "runner: " + std::to_string(rows.size()) + " draws for " +
                                                         std::to_string(num_logits) + " rows");
    host_rows = int64_t(draws->host_rows.size());
    out.ids.assign(size_t(num_logits), -1);
    if (host_rows < num_logits) {
      // The edits touch only the backend's rows, so the host's rows come back as the model made them.
      d.ids = be_.empty(DType::I32, {num_logits});
      for (size_t r = 0; r < draws->logprobs.size(); ++r)
        if (draws->logprobs[r] >= 0 && !std::binary_search(draws->host_rows.begin(), draws->host_rows.end(), int32_t(r)))
          d.lp_rows.push_back(int32_t(r)), d.top = std::max(d.top, draws->logprobs[r]);
      d.top = std::min(d.top, out.vocab);
      const int64_t nl = int64_t(d.lp_rows.size());
      // Logprobs are of the model's own logits: where penalties edit such a row, a copy of the
      // logits before the edits gives them.
      Tensor lp_source = logits;
      if (std::any_of(draws->edits.begin(), draws->edits.end(), [&](const LogitEdit& e) {
            return std::binary_search(d.lp_rows.begin(), d.lp_rows.end(), e.row);
          })) {
        std::vector<int32_t> all(static_cast<size_t>(num_logits));
        std::iota(all.begin(), all.end(), 0);
        lp_source = be_.empty(DType::F32, {num_logits, out.vocab});
        be_.gather_rows(logits, upload_i32(all, {num_logits}), lp_source);
      }
      if (!draws->edits.empty()) be_.edit_logits(logits, draws->edits);
      const bool greedy = std::all_of(rows.begin(), rows.end(), [](const RowSampling& r) { return r.temperature <= 0; });
      if (greedy) be_.argmax_rows(logits, d.ids);
      else be_.sample_rows(logits, rows, d.ids);
      be_.download_async(d.ids, host_buffer(ids_host_, DType::I32, num_logits));
      if (nl > 0) {
        Tensor lp = be_.empty(DType::F32, {nl, 1 + d.top}), lp_ids = be_.empty(DType::I32, {nl, std::max(d.top, 1)});
        be_.logprobs(lp_source, upload_i32(d.lp_rows, {nl}), d.ids, d.top, lp, lp_ids);
        be_.download_async(lp, host_buffer(lp_host_, DType::F32, lp.numel()));
        if (d.top > 0) be_.download_async(lp_ids, host_buffer(best_host_, DType::I32, lp_ids.numel()));
        for (int32_t r : d.lp_rows) d.lp_counts.push_back(std::min(draws->logprobs[size_t(r)], d.top));
      }
    }
    if (host_rows > 0 && host_rows < num_logits) {
      Tensor picked = be_.empty(DType::F32, {host_rows, out.vocab});
      be_.gather_rows(logits, upload_i32(draws->host_rows, {host_rows}), picked);
      logits = picked;
    }
  }
  d.host_logits = host_rows * out.vocab;
  if (d.host_logits > 0) be_.download_async(logits, host_buffer(logits_host_, DType::F32, d.host_logits));
  lap(t, times_.enqueue);
  drawn_ = std::move(d);
}

void ModelRunner::draw_scores(const Tensor& logits, int64_t first, const std::vector<int>& top, Drawn& d) {
  const StepLogits& out = d.out;
  const int64_t n = int64_t(top.size());
  std::vector<int32_t> rows(static_cast<size_t>(n)), tokens(static_cast<size_t>(first + n), 0);
  for (int64_t i = 0; i < n; ++i) rows[size_t(i)] = int32_t(first + i), tokens[size_t(first + i)] = out.score_token[size_t(i)];
  d.score_top = std::min(*std::max_element(top.begin(), top.end()), out.vocab);
  for (int k : top) d.score_counts.push_back(std::min(k, d.score_top));
  Tensor lp = be_.empty(DType::F32, {n, 1 + d.score_top}), ids = be_.empty(DType::I32, {n, std::max(d.score_top, 1)});
  be_.logprobs(logits, upload_i32(rows, {n}), upload_i32(tokens, {first + n}), d.score_top, lp, ids);
  be_.download_async(lp, host_buffer(score_lp_host_, DType::F32, lp.numel()));
  if (d.score_top > 0) be_.download_async(ids, host_buffer(score_best_host_, DType::I32, ids.numel()));
}

StepLogits ModelRunner::collect() {
  TESSERA_CHECK(drawn_.has_value(), "runner: collect() without a drawn step");
  auto t = Clock::now();
  Drawn d = std::move(*drawn_);
  drawn_.reset();
  be_.wait_downloads();
  StepLogits& out = d.out;
  if (d.ids.defined()) std::copy_n(ids_host_.data<int32_t>(), out.ids.size(), out.ids.begin());
  if (!d.lp_rows.empty()) {
    const int top = d.top;
    out.token_logprob.assign(out.ids.size(), 0.0f);
    out.top_logprobs.resize(out.ids.size());
    for (size_t i = 0; i < d.lp_rows.size(); ++i) {
      const size_t r = size_t(d.lp_rows[i]);
      const float* v = lp_host_.data<float>() + i * size_t(1 + top);
      const int32_t* best = top > 0 ? best_host_.data<int32_t>() + i * size_t(top) : nullptr;
      out.token_logprob[r] = v[0];
      for (int k = 0; k < d.lp_counts[i]; ++k) out.top_logprobs[r].emplace_back(best[k], v[1 + k]);
    }
  }
  if (!d.score_counts.empty()) {
    const size_t n = d.score_counts.size(), top = size_t(d.score_top);
    out.score_logprob.resize(n);
    out.score_top.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const float* v = score_lp_host_.data<float>() + i * (1 + top);
      out.score_logprob[i] = v[0];
      for (int k = 0; k < d.score_counts[i]; ++k)
        out.score_top[i].emplace_back(score_best_host_.data<int32_t>()[i * top + size_t(k)], v[1 + k]);
    }
  }
  out.logits = {d.host_logits > 0 ? logits_host_.data<float>() : nullptr, size_t(d.host_logits)};
  lap(t, times_.readback);
  return std::move(out);
}

std::vector<float> ModelRunner::score(const std::vector<ScheduledSeq>& batch) {
  launch(batch, /*all_rows=*/true);
  auto t = Clock::now();
  const Tensor logits = std::move(launched_->logits);
  const StepLogits rows = std::move(launched_->out);
  launched_.reset();
  const int64_t R = int64_t(rows.seq_index.size());
  std::vector<int32_t> tokens(static_cast<size_t>(R)), index(static_cast<size_t>(R));
  for (int64_t r = 0; r < R; ++r) {
    const Sequence& s = *batch[size_t(rows.seq_index[size_t(r)])].seq;
    const size_t at = size_t(rows.position[size_t(r)]) + 1;
    TESSERA_CHECK(at < s.tokens.size(), "runner: scoring needs the token after position " + std::to_string(at - 1));
    tokens[size_t(r)] = s.tokens[at];
    index[size_t(r)] = int32_t(r);
  }
  Tensor lp = be_.empty(DType::F32, {R, 1}), none;
  be_.logprobs(logits, upload_i32(index, {R}), upload_i32(tokens, {R}), 0, lp, none);
  lap(t, times_.enqueue);
  std::vector<float> out(static_cast<size_t>(R));
  if (R > 0) be_.download(lp, out.data());
  lap(t, times_.readback);
  return out;
}

}  // namespace tessera
