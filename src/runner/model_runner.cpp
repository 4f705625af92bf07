#include "runner/model_runner.h"

#include <algorithm>
#include <chrono>
#include <cstring>

namespace tessera {
namespace {

using Clock = std::chrono::steady_clock;

// Adds the seconds since `t` to `sum` and restarts `t`.
void lap(Clock::time_point& t, double& sum) {
  auto now = Clock::now();
  sum += std::chrono::duration<double>(now - t).count();
  t = now;
}

}  // namespace

Tensor ModelRunner::upload_i32(const std::vector<int32_t>& v, Shape shape) {
  Tensor host = Tensor::empty(DType::I32, std::move(shape));
  if (!v.empty()) std::memcpy(host.raw(), v.data(), v.size() * sizeof(int32_t));
  return be_.upload(host);
}

StepLogits ModelRunner::run(const std::vector<ScheduledSeq>& batch, bool all_rows,
                            const std::vector<RowSampling>* draws) {
  auto t = Clock::now();
  const int bs = cache_.block_size;
  std::vector<int32_t> ids, positions, slots, starts{0}, context_lens, rows;
  StepLogits out;
  int max_blocks = 1, max_query = 0, max_context = 0;
  for (auto& s : batch) max_blocks = std::max(max_blocks, int(s.seq->block_table.size()));

  std::vector<int32_t> tables(batch.size() * size_t(max_blocks), 0);
  for (size_t i = 0; i < batch.size(); ++i) {
    const Sequence& q = *batch[i].seq;
    int begin = q.num_computed_tokens, end = begin + batch[i].num_new_tokens;
    for (int p = begin; p < end; ++p) {
      // Sampling needs the row after the last known token; scoring wants every row.
      if (all_rows || (p == end - 1 && end == q.num_tokens())) {
        rows.push_back(int32_t(ids.size()));
        out.seq_index.push_back(int(i));
        out.position.push_back(p);
      }
      ids.push_back(q.tokens[p]);
      positions.push_back(p);
      slots.push_back(q.block_table[p / bs] * bs + p % bs);
    }
    starts.push_back(int32_t(ids.size()));
    context_lens.push_back(end);
    std::copy(q.block_table.begin(), q.block_table.end(), tables.begin() + i * max_blocks);
    max_query = std::max(max_query, end - begin);
    max_context = std::max(max_context, end);
  }

  ForwardBatch fb;
  fb.num_tokens = int(ids.size());
  fb.num_logits = int(rows.size());
  fb.max_position = max_context - 1;
  fb.token_ids = upload_i32(ids, {fb.num_tokens});
  fb.slot_mapping = upload_i32(slots, {fb.num_tokens});
  fb.logits_rows = upload_i32(rows, {fb.num_logits});
  fb.attn.positions = upload_i32(positions, {fb.num_tokens});
  fb.attn.seq_starts = upload_i32(starts, {int64_t(starts.size())});
  fb.attn.context_lens = upload_i32(context_lens, {int64_t(batch.size())});
  fb.attn.block_tables = upload_i32(tables, {int64_t(batch.size()), max_blocks});
  fb.attn.num_seqs = int(batch.size());
  fb.attn.max_blocks = max_blocks;
  fb.attn.block_size = bs;
  fb.attn.max_query_len = max_query;
  fb.attn.max_context_len = max_context;

  lap(t, times_.prepare);
  Tensor logits = model_.forward(fb, cache_);
  out.vocab = model_.vocab_size();
  if (draws) {
    TESSERA_CHECK(draws->size() == size_t(fb.num_logits), "runner: " + std::to_string(draws->size()) +
                                                              " draws for " + std::to_string(fb.num_logits) + " rows");
    out.ids.resize(size_t(fb.num_logits));
    if (fb.num_logits > 0) {
      Tensor ids = be_.empty(DType::I32, {fb.num_logits});
      const bool greedy = std::all_of(draws->begin(), draws->end(), [](const RowSampling& d) { return d.temperature <= 0; });
      if (greedy) be_.argmax_rows(logits, ids);
      else be_.sample_rows(logits, *draws, ids);
      lap(t, times_.enqueue);
      be_.download(ids, out.ids.data());
    }
    lap(t, times_.readback);
    return out;
  }
  lap(t, times_.enqueue);
  const int64_t n = int64_t(fb.num_logits) * out.vocab;
  if (!logits_host_.defined() || logits_host_.numel() < n) logits_host_ = be_.host_empty(DType::F32, {n});
  if (n > 0) be_.download(logits, logits_host_.raw());
  out.logits = {logits_host_.data<float>(), size_t(n)};
  lap(t, times_.readback);
  return out;
}

}  // namespace tessera
