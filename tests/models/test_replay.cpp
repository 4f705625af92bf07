// Decode steps that replay a recording (runner/model_runner.h) must give exactly the tokens and
// logprobs of steps run as they come. A CPU backend that records the way a GPU does stands in for
// CUDA graphs here; the CUDA model tests run the real ones.
#include <cstdlib>
#include <numeric>

#include "model_testutil.h"
#include "testutil.h"

using namespace tessera;
using namespace tessera::test;

namespace {

// Records like a CUDA graph. record() runs the ops' host code (which is how a capture learns
// them) but throws away what they computed, by poisoning their memory with NaN; replay() runs
// them again. What is allocated while recording or replaying comes from one arena restarted at
// each, so a replay's tensors sit where the recording's did and any recording's memory may be
// another's, as in a GPU's recording pool. The ops are the reference backend's, whose rows do not
// depend on the rest of the batch, so padded and unpadded steps agree to the bit.
class RecordingCpu final : public Backend {
 public:
  RecordingCpu()
      : cpu_(make_cpu_backend({.reference = true})),
        arena_(static_cast<std::byte*>(std::aligned_alloc(64, kArenaBytes)), std::free) {}

  int recordings = 0, replays = 0;

  std::string name() const override { return "recording-cpu"; }
  Device device() const override { return Device::CPU; }
  Tensor empty(DType dt, Shape s) override {
    if (!in_arena_) return cpu_->empty(dt, std::move(s));
    const size_t bytes = (size_t(std::max<int64_t>(1, shape_numel(s))) * dtype_size(dt) + 63) / 64 * 64;
    TESSERA_CHECK(used_ + bytes <= kArenaBytes, "recording arena full");
    used_ += bytes;
    return Tensor::view(arena_.get() + used_ - bytes, dt, std::move(s), nullptr);
  }
  Tensor upload(const Tensor& h) override { return cpu_->upload(h); }
  void download(const Tensor& s, void* d) override { cpu_->download(s, d); }
  MemoryInfo memory_info() override { return cpu_->memory_info(); }

  bool can_record() const override { return true; }
  std::unique_ptr<Recording> record(const std::function<void()>& ops) override {
    run_in_arena(ops);
    std::fill_n(reinterpret_cast<float*>(arena_.get()), kArenaBytes / sizeof(float), std::nanf(""));
    ++recordings;
    return std::make_unique<Ops>(ops);
  }
  void replay(const Recording& r) override {
    run_in_arena(static_cast<const Ops&>(r).ops);
    ++replays;
  }

  void embedding(const Tensor& t, const Tensor& i, float s, Tensor& o) override { cpu_->embedding(t, i, s, o); }
  void rms_norm(const Tensor& x, const Tensor& w, float e, float off, Tensor& o) override { cpu_->rms_norm(x, w, e, off, o); }
  void linear(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& o) override { cpu_->linear(x, w, b, o); }
  void rope(Tensor& x, const Tensor& p, const RopeParams& rp) override { cpu_->rope(x, p, rp); }
  void store_kv(const Tensor& k, const Tensor& v, const Tensor& s, Tensor& kc, Tensor& vc) override {
    cpu_->store_kv(k, v, s, kc, vc);
  }
  void attention(const Tensor& q, const Tensor& kc, const Tensor& vc, const AttentionMeta& m,
                 const AttentionParams& p, Tensor& o) override { cpu_->attention(q, kc, vc, m, p, o); }
  void glu(Glu a, const Tensor& g, const Tensor& u, Tensor& o) override { cpu_->glu(a, g, u, o); }
  void softcap(Tensor& x, float cap) override { cpu_->softcap(x, cap); }
  void add(const Tensor& a, const Tensor& b, Tensor& o) override { cpu_->add(a, b, o); }
  void gather_rows(const Tensor& x, const Tensor& r, Tensor& o) override { cpu_->gather_rows(x, r, o); }
  void scatter_add_rows(const Tensor& x, const Tensor& r, const Tensor& w, Tensor& o) override {
    cpu_->scatter_add_rows(x, r, w, o);
  }
  void moe_route(const Tensor& l, int k, bool r, Tensor& ids, Tensor& w) override { cpu_->moe_route(l, k, r, ids, w); }
  // The experts' host grouping (Backend::moe_experts) is host code that a replay runs again.
  bool moe_experts_recordable(const Experts&, int64_t) const override { return true; }
  void argmax_rows(const Tensor& x, Tensor& o) override { cpu_->argmax_rows(x, o); }
  void sample_rows(const Tensor& x, const std::vector<RowSampling>& r, Tensor& o) override { cpu_->sample_rows(x, r, o); }
  void edit_logits(Tensor& x, const std::vector<LogitEdit>& e) override { cpu_->edit_logits(x, e); }
  void logprobs(const Tensor& x, const Tensor& r, const Tensor& t, int n, Tensor& lp, Tensor& ids) override {
    cpu_->logprobs(x, r, t, n, lp, ids);
  }

 private:
  struct Ops final : Recording {
    explicit Ops(std::function<void()> f) : ops(std::move(f)) {}
    std::function<void()> ops;
  };
  void run_in_arena(const std::function<void()>& ops) {
    in_arena_ = true, used_ = 0;
    ops();
    in_arena_ = false;
  }

  static constexpr size_t kArenaBytes = size_t(16) << 20;
  std::unique_ptr<Backend> cpu_;
  std::unique_ptr<std::byte, decltype(&std::free)> arena_;
  bool in_arena_ = false;
  size_t used_ = 0;
};

struct Output {
  std::vector<int32_t> tokens;
  std::vector<std::vector<std::pair<int32_t, float>>> logprobs;  // per step, the whole vocabulary
};

// Requests of different lengths that finish at different steps, so that the decode batch shrinks
// through several padded sizes and crosses a context bucket (128); half of them sample (seeded).
std::vector<Output> generate(Backend& be, bool enforce_eager, int64_t* replayed, const std::string& model = "llama") {
  LoadedModel m = load_model(fixtures_dir() / "models" / model, be);
  const int V = m.model->vocab_size();
  EngineConfig ec;
  ec.num_blocks = 160;
  ec.enforce_eager = enforce_eager;
  Engine engine(*m.model, be, ec);
  const std::vector<int> prompt_lens = {110, 7, 35, 19, 120, 3}, max_tokens = {30, 3, 9, 17, 12, 24};
  std::vector<int64_t> ids;
  for (size_t i = 0; i < prompt_lens.size(); ++i) {
    Request r;
    for (int t = 0; t < prompt_lens[i]; ++t) r.prompt.push_back(int32_t((t * 37 + int(i) * 11 + 1) % V));
    r.max_tokens = max_tokens[i];
    r.params.temperature = i % 2 ? 0.8f : 0.0f;
    r.params.logprobs = V;
    r.seed = 1000 + i;
    ids.push_back(engine.add_request(r));
  }
  std::vector<Output> out(ids.size());
  while (engine.has_work())
    for (const TokenOutput& o : engine.step()) {
      Output& g = out[size_t(std::find(ids.begin(), ids.end(), o.seq_id) - ids.begin())];
      g.tokens.push_back(o.token);
      g.logprobs.push_back(o.sample.top);
    }
  *replayed = engine.step_times().run.replayed;
  return out;
}

TEST(Replay, RecordedDecodeStepsEqualStepsRunAsTheyCome) {
  int64_t eager_replays = -1, replays = -1;
  RecordingCpu eager_be, be;
  const std::vector<Output> eager = generate(eager_be, /*enforce_eager=*/true, &eager_replays);
  const std::vector<Output> replayed = generate(be, /*enforce_eager=*/false, &replays);
  EXPECT_EQ(eager_replays, 0);
  EXPECT_EQ(eager_be.recordings, 0);
  // Batches of 6 (padded to 8), 5, 4, 3 (4), 2, 1 sequences, two context buckets: several shapes,
  // each recorded at its second step and replayed from its third.
  EXPECT_GE(be.recordings, 4);
  EXPECT_GE(replays, 20);
  EXPECT_EQ(be.replays, replays);
  ASSERT_EQ(replayed.size(), eager.size());
  for (size_t i = 0; i < eager.size(); ++i) {
    EXPECT_EQ(replayed[i].tokens, eager[i].tokens) << "request " << i;
    EXPECT_EQ(replayed[i].logprobs, eager[i].logprobs) << "request " << i;
  }
}

// A mixture of experts: recorded where the backend runs its experts without waiting for the
// device.
TEST(Replay, RecordedStepsWithExpertsEqualStepsRunAsTheyCome) {
  int64_t eager_replays = -1, replays = -1;
  RecordingCpu eager_be, be;
  const std::vector<Output> eager = generate(eager_be, /*enforce_eager=*/true, &eager_replays, "qwen3_moe");
  const std::vector<Output> replayed = generate(be, /*enforce_eager=*/false, &replays, "qwen3_moe");
  EXPECT_EQ(eager_replays, 0);
  EXPECT_GE(replays, 20);
  for (size_t i = 0; i < eager.size(); ++i) {
    EXPECT_EQ(replayed[i].tokens, eager[i].tokens) << "request " << i;
    EXPECT_EQ(replayed[i].logprobs, eager[i].logprobs) << "request " << i;
  }
}

TEST(Replay, CpuBackendRunsStepsAsTheyCome) {
  auto cpu = make_cpu_backend({.threads = 2});
  int64_t replays = -1;
  generate(*cpu, /*enforce_eager=*/false, &replays);
  EXPECT_EQ(replays, 0);
}

}  // namespace

// Decode steps launched ahead (EngineConfig::overlap_steps, Engine::step) must give each request
// the tokens and finish it as steps launched one after another do: requests that stop at a
// token (their next step, already launched, drops their row), one aborted while a step holding
// it is launched, one arriving mid-run, and the rest finishing by length.
struct Finished {
  std::vector<std::vector<int32_t>> tokens;
  std::vector<FinishReason> reasons;
  int64_t ahead = 0, steps = 0;
};

Finished generate_overlapped(Backend& be, bool overlap, bool enforce_eager, const std::vector<int32_t>& stop_ids) {
  LoadedModel m = load_model(fixtures_dir() / "models" / "llama", be);
  const int V = m.model->vocab_size();
  EngineConfig ec;
  ec.num_blocks = 160;
  ec.enforce_eager = enforce_eager;
  ec.overlap_steps = overlap;
  Engine engine(*m.model, be, ec);
  const std::vector<int> prompt_lens = {110, 7, 35, 19, 120, 3}, max_tokens = {30, 14, 25, 17, 12, 24};
  Finished f;
  f.tokens.resize(prompt_lens.size());
  f.reasons.assign(prompt_lens.size(), FinishReason::None);
  std::vector<int64_t> ids(prompt_lens.size(), -1);
  auto add = [&](size_t i) {
    Request r;
    for (int t = 0; t < prompt_lens[i]; ++t) r.prompt.push_back(int32_t((t * 37 + int(i) * 11 + 1) % V));
    r.max_tokens = max_tokens[i];
    r.params.temperature = 0.0f;
    if (stop_ids[i] >= 0) r.stop_token_ids = {stop_ids[i]};
    ids[i] = engine.add_request(r);
  };
  for (size_t i = 0; i + 1 < prompt_lens.size(); ++i) add(i);
  for (int step = 0; engine.has_work(); ++step) {
    for (const TokenOutput& o : engine.step()) {
      const size_t i = size_t(std::find(ids.begin(), ids.end(), o.seq_id) - ids.begin());
      f.tokens[i].push_back(o.token);
      if (o.finished) f.reasons[i] = o.finish_reason, engine.release(o.seq_id);
    }
    if (step == 6) add(prompt_lens.size() - 1);
    if (step == 9 && f.reasons[3] == FinishReason::None) {
      engine.release(ids[3]);  // a client gone: aborted, its blocks freed
      f.reasons[3] = FinishReason::Abort;
    }
  }
  f.ahead = engine.step_times().run.ahead;
  f.steps = engine.step_times().steps;
  return f;
}

void expect_same_generations(Backend& a, Backend& b, bool enforce_eager) {
  // Stop tokens that some requests meet mid-run: what they generate at their 4th and 9th tokens.
  const std::vector<int32_t> none(6, -1);
  const Finished plain = generate_overlapped(a, false, enforce_eager, none);
  std::vector<int32_t> stops = none;
  stops[0] = plain.tokens[0][3], stops[2] = plain.tokens[2][8];
  const Finished want = generate_overlapped(a, false, enforce_eager, stops);
  const Finished got = generate_overlapped(b, true, enforce_eager, stops);
  EXPECT_EQ(want.ahead, 0);
  EXPECT_GT(got.ahead, 10);
  EXPECT_EQ(want.reasons[0], FinishReason::Stop);
  EXPECT_EQ(want.reasons[2], FinishReason::Stop);
  EXPECT_EQ(want.reasons[3], FinishReason::Abort);
  EXPECT_EQ(want.reasons[1], FinishReason::Length);
  for (size_t i = 0; i < want.tokens.size(); ++i) {
    EXPECT_EQ(got.tokens[i], want.tokens[i]) << "request " << i;
    EXPECT_EQ(got.reasons[i], want.reasons[i]) << "request " << i;
  }
}

TEST(Replay, StepsLaunchedAheadGiveTheSameTokens) {
  RecordingCpu a, b;
  expect_same_generations(a, b, /*enforce_eager=*/false);
  EXPECT_GT(b.replays, 10);
}

TEST(Replay, StepsLaunchedAheadGiveTheSameTokensUnrecorded) {
  auto a = make_cpu_backend({.reference = true}), b = make_cpu_backend({.reference = true});
  expect_same_generations(*a, *b, /*enforce_eager=*/true);
}

// A step launched ahead whose every sequence then stops leaves work to drain (has_work), whose
// step returns no tokens; the engine then takes new requests as usual.
TEST(Replay, AStepLaunchedAheadForSequencesThatAllStopIsDrained) {
  auto be = make_cpu_backend({.reference = true});
  LoadedModel m = load_model(fixtures_dir() / "models" / "llama", *be);
  EngineConfig ec;
  ec.num_blocks = 64;
  ec.overlap_steps = true;
  Engine engine(*m.model, *be, ec);
  auto run = [&](std::vector<int32_t> stop) {
    Request r;
    r.prompt = {5, 9, 2, 7};
    r.max_tokens = 12;
    r.params.temperature = 0.0f;
    r.stop_token_ids = std::move(stop);
    const int64_t id = engine.add_request(r);
    std::vector<int32_t> got;
    int empty_steps = 0;
    while (engine.has_work()) {
      std::vector<TokenOutput> outs = engine.step();
      empty_steps += outs.empty();
      for (const TokenOutput& o : outs) got.push_back(o.token);
    }
    engine.release(id);
    return std::make_pair(got, empty_steps);
  };
  const auto [all, none_empty] = run({});
  ASSERT_EQ(all.size(), 12u);
  EXPECT_EQ(none_empty, 0);
  const auto [stopped, drained] = run({all[4]});
  const size_t first = size_t(std::find(all.begin(), all.end(), all[4]) - all.begin());
  EXPECT_EQ(stopped, std::vector<int32_t>(all.begin(), all.begin() + long(first) + 1));
  EXPECT_EQ(drained, 1);  // the step launched after the stop token's
  EXPECT_EQ(run({}).first, all);
}

// At max_num_seqs the waiting requests cannot be seated until a running one finishes: the steps
// in between are launched ahead all the same, and each request gets the tokens it gets without.
TEST(Replay, StepsLaunchedAheadWhileRequestsWaitForASeat) {
  auto run = [](bool overlap, int64_t* ahead) {
    auto be = make_cpu_backend({.reference = true});
    LoadedModel m = load_model(fixtures_dir() / "models" / "llama", *be);
    EngineConfig ec;
    ec.num_blocks = 64;
    ec.overlap_steps = overlap;
    ec.scheduler.max_num_seqs = 2;
    Engine engine(*m.model, *be, ec);
    std::vector<int64_t> ids;
    for (int i = 0; i < 5; ++i) {
      Request r;
      for (int t = 0; t < 5 + 3 * i; ++t) r.prompt.push_back(int32_t((t * 13 + i * 7 + 2) % m.model->vocab_size()));
      r.max_tokens = 6 + 2 * i;
      r.params.temperature = 0.0f;
      ids.push_back(engine.add_request(r));
    }
    std::vector<std::vector<int32_t>> out(ids.size());
    *ahead = 0;  // steps launched ahead while a request waited
    while (engine.has_work()) {
      const bool waiting = engine.scheduler().num_waiting() > 0;
      const int64_t before = engine.step_times().run.ahead;
      for (const TokenOutput& o : engine.step()) {
        out[size_t(std::find(ids.begin(), ids.end(), o.seq_id) - ids.begin())].push_back(o.token);
        if (o.finished) engine.release(o.seq_id);
      }
      if (waiting) *ahead += engine.step_times().run.ahead - before;
    }
    return out;
  };
  int64_t ahead_off = -1, ahead_on = -1;
  const auto want = run(false, &ahead_off), got = run(true, &ahead_on);
  EXPECT_EQ(ahead_off, 0);
  EXPECT_GT(ahead_on, 5);  // 10 here; 0 where any waiting request stops launching ahead
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(want[i].size(), size_t(6 + 2 * i)) << "request " << i;
    EXPECT_EQ(got[i], want[i]) << "request " << i;
  }
}
