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
std::vector<Output> generate(Backend& be, bool enforce_eager, int64_t* replayed) {
  LoadedModel m = load_model(fixtures_dir() / "models" / "llama", be);
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

TEST(Replay, CpuBackendRunsStepsAsTheyCome) {
  auto cpu = make_cpu_backend({.threads = 2});
  int64_t replays = -1;
  generate(*cpu, /*enforce_eager=*/false, &replays);
  EXPECT_EQ(replays, 0);
}

}  // namespace
