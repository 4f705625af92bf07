// Whole models on the GPU against the CPU backend, on the fixture models: the logits after every
// token of a prompt (one prefill step) and greedy generations of several prompts batched
// through the engine (prefill, then decode steps). f32 models must generate exactly what the CPU
// generates; 16-bit models round the activations before each product, so they are held to a
// logits error and to the first token of each generation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "cuda_testutil.h"
#include "engine/engine.h"
#include "model_testutil.h"
#include "models/model.h"
#include "testutil.h"

namespace tessera {
namespace {

struct Limits {
  double logits_nmse;
  bool exact_greedy;
};

Limits limits_for(const LoadedModel& m) {
  std::string dtype = m.config.get_or<std::string>("dtype", m.config.get_or<std::string>("torch_dtype", "float32"));
  if (dtype == "bfloat16") return {1e-3, false};
  if (dtype == "float16") return {1e-4, false};
  return {1e-9, true};
}

// replayed: decode steps that replayed a CUDA graph.
// params: one per prompt, greedy unless given (penalties and bias go through the GPU's
// edit_logits).
std::vector<std::vector<int32_t>> greedy(Model& model, Backend& be, const std::vector<std::vector<int32_t>>& prompts,
                                         int max_tokens, bool enforce_eager = false, int64_t* replayed = nullptr,
                                         const std::vector<SamplingParams>* params = nullptr) {
  EngineConfig cfg;
  cfg.num_blocks = 64;
  cfg.enforce_eager = enforce_eager;
  Engine engine(model, be, cfg);
  std::vector<int64_t> ids;
  for (auto& p : prompts) {
    Request r;
    r.prompt = p;
    r.max_tokens = max_tokens;
    r.params.temperature = 0;
    if (params) r.params = (*params)[ids.size()];
    ids.push_back(engine.add_request(r));
  }
  std::vector<std::vector<int32_t>> out(prompts.size());
  while (engine.has_work())
    for (auto& o : engine.step()) out[std::find(ids.begin(), ids.end(), o.seq_id) - ids.begin()].push_back(o.token);
  if (replayed) *replayed = engine.step_times().run.replayed;
  return out;
}

// Each prompt's draws with their logprobs, through the engine.
std::vector<std::vector<SampleResult>> draws_with_logprobs(Model& model, Backend& be,
                                                           const std::vector<std::vector<int32_t>>& prompts,
                                                           const std::vector<SamplingParams>& params, int max_tokens) {
  EngineConfig cfg;
  cfg.num_blocks = 64;
  Engine engine(model, be, cfg);
  std::vector<int64_t> ids;
  for (size_t i = 0; i < prompts.size(); ++i) {
    Request r;
    r.prompt = prompts[i];
    r.max_tokens = max_tokens;
    r.params = params[i];
    ids.push_back(engine.add_request(r));
  }
  std::vector<std::vector<SampleResult>> out(prompts.size());
  while (engine.has_work())
    for (auto& o : engine.step()) out[std::find(ids.begin(), ids.end(), o.seq_id) - ids.begin()].push_back(o.sample);
  return out;
}

// A prompt's scores (Request::prompt_logprobs), through the engine, its prompt in chunks of 16.
std::vector<SampleResult> prompt_scores(Model& model, Backend& be, const std::vector<int32_t>& prompt, int top) {
  EngineConfig cfg;
  cfg.num_blocks = 64;
  cfg.scheduler.max_num_batched_tokens = 16;
  Engine engine(model, be, cfg);
  Request r;
  r.prompt = prompt;
  r.max_tokens = 1;
  r.params.temperature = 0;
  r.prompt_logprobs = top;
  engine.add_request(r);
  std::vector<SampleResult> out;
  while (engine.has_work())
    for (auto& o : engine.step())
      if (!o.prompt_scores.empty()) out = std::move(o.prompt_scores);
  return out;
}

class CudaModels : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaModels, MatchCpuBackend) {
  TESSERA_REQUIRE_CUDA(gpu);
  auto dir = test::fixtures_dir() / "models" / GetParam();
  ASSERT_TRUE(std::filesystem::exists(dir)) << dir;
  auto cpu = make_cpu_backend({.threads = 2});
  LoadedModel on_cpu = load_model(dir, *cpu), on_gpu = load_model(dir, *gpu);
  Limits lim = limits_for(on_cpu);
  int vocab = on_cpu.model->vocab_size();

  std::vector<int32_t> prompt;
  for (int i = 0; i < 70; ++i) prompt.push_back(int32_t((i * 37 + 11) % vocab));
  std::vector<float> want = test::logits_all_rows(*on_cpu.model, *cpu, prompt);
  std::vector<float> got = test::logits_all_rows(*on_gpu.model, *gpu, prompt);
  ASSERT_EQ(got.size(), want.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i])) << "logit " << i;
    num += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    den += double(want[i]) * want[i];
  }
  std::printf("MODEL %-14s prompt logits NMSE %.3e (limit %.0e)\n", GetParam().c_str(), num / den, lim.logits_nmse);
  EXPECT_LE(num / den, lim.logits_nmse);

  std::vector<std::vector<int32_t>> prompts = {{1, 17, 200, 45, 99}, {5}, {}};
  for (int i = 0; i < 40; ++i) prompts[2].push_back(int32_t((i * 13 + 3) % vocab));
  // The GPU's decode steps replay CUDA graphs (not with dynamic rope scaling, whose frequencies
  // change with the length); eager steps must choose the same tokens.
  int64_t replayed = 0;
  auto a = greedy(*on_cpu.model, *cpu, prompts, 24), b = greedy(*on_gpu.model, *gpu, prompts, 24, false, &replayed);
  auto eager = greedy(*on_gpu.model, *gpu, prompts, 24, /*enforce_eager=*/true);
  if (on_gpu.model->replayable(ModelRunner::kMaxReplayedSeqs)) EXPECT_GE(replayed, 15);
  else EXPECT_EQ(replayed, 0);
  int same = 0, total = 0;
  for (size_t p = 0; p < prompts.size(); ++p) {
    for (size_t i = 0; i < std::min(a[p].size(), b[p].size()); ++i) same += a[p][i] == b[p][i], ++total;
    if (lim.exact_greedy) EXPECT_EQ(a[p], b[p]) << "prompt " << p;
    else EXPECT_EQ(a[p].at(0), b[p].at(0)) << "prompt " << p;
    if (lim.exact_greedy) EXPECT_EQ(eager[p], b[p]) << "prompt " << p;
    else EXPECT_EQ(eager[p].at(0), b[p].at(0)) << "prompt " << p;
  }
  std::printf("MODEL %-14s greedy ids equal to the CPU's: %d / %d; %lld decode steps replayed\n", GetParam().c_str(),
              same, total, static_cast<long long>(replayed));

  // One sequence alone, so that every decode step has one token: on the GPU the products that
  // normalise their own input, over the folded norms (Backend::normalises_inputs). f32 models
  // must match exactly (their f32 weights take the normed ops' default path); for 16-bit models
  // the first token (the prompt's) is asserted and the rest counted, as above, and their GEMV
  // kernels are held to the CPU's by the harness's normed_* and linear_add cases.
  const std::vector<std::vector<int32_t>> alone = {prompts[0]};
  auto oa = greedy(*on_cpu.model, *cpu, alone, 24), ob = greedy(*on_gpu.model, *gpu, alone, 24);
  int same_alone = 0;
  for (size_t i = 0; i < std::min(oa[0].size(), ob[0].size()); ++i) same_alone += oa[0][i] == ob[0][i];
  std::printf("MODEL %-14s one sequence: greedy ids equal to the CPU's: %d / %zu\n", GetParam().c_str(),
              same_alone, oa[0].size());
  if (lim.exact_greedy)
    EXPECT_EQ(oa[0], ob[0]) << "one sequence";
  else
    EXPECT_EQ(oa[0].at(0), ob[0].at(0)) << "one sequence";

  // Penalties and a bias: edited on the GPU, on the host for the CPU; the row with logprobs too
  // (its logprobs from a copy of the logits made before the edits).
  SamplingParams penalised;
  penalised.temperature = 0;
  penalised.repetition_penalty = 1.3f, penalised.frequency_penalty = 0.4f, penalised.presence_penalty = 0.2f;
  penalised.logit_bias = {{1, 2.0f}, {int32_t(vocab - 1), -1.5f}};
  SamplingParams with_logprobs = penalised;
  with_logprobs.logprobs = 3;
  const std::vector<SamplingParams> mixed = {penalised, with_logprobs, penalised};
  auto pa = greedy(*on_cpu.model, *cpu, prompts, 24, false, nullptr, &mixed);
  auto pb = greedy(*on_gpu.model, *gpu, prompts, 24, false, nullptr, &mixed);
  for (size_t p = 0; p < prompts.size(); ++p) {
    if (lim.exact_greedy) EXPECT_EQ(pa[p], pb[p]) << "penalised, prompt " << p;
    else EXPECT_EQ(pa[p].at(0), pb[p].at(0)) << "penalised, prompt " << p;
  }

  // Logprobs where the logits are (Backend::logprobs): greedy with 5, penalised greedy with 3
  // (logprobs of the model's own row), 20; the CPU computes them on the host from its logits. f32 models: the logits agree to ~1e-6, so the
  // logprobs to 1e-4, and the top lists' ids wherever neighbours are further apart than that;
  // 16-bit models (logits NMSE up to 1e-3): the first step's token and its logprob to 0.1.
  std::vector<SamplingParams> lp_params(3);
  for (auto& q : lp_params) q.temperature = 0;
  lp_params[0].logprobs = 5, lp_params[2].logprobs = 20;
  lp_params[1].logprobs = 3, lp_params[1].repetition_penalty = 1.3f, lp_params[1].logit_bias = {{1, 2.0f}};
  auto la = draws_with_logprobs(*on_cpu.model, *cpu, prompts, lp_params, 12);
  auto lb = draws_with_logprobs(*on_gpu.model, *gpu, prompts, lp_params, 12);
  double worst = 0;
  for (size_t p = 0; p < prompts.size(); ++p) {
    const size_t steps = lim.exact_greedy ? la[p].size() : 1;
    ASSERT_EQ(la[p].size(), lb[p].size());
    for (size_t i = 0; i < steps; ++i) {
      const SampleResult &want_s = la[p][i], &got_s = lb[p][i];
      ASSERT_EQ(want_s.token, got_s.token) << "logprobs, prompt " << p << " step " << i;
      ASSERT_EQ(want_s.top.size(), got_s.top.size());
      worst = std::max(worst, double(std::abs(want_s.logprob - got_s.logprob)));
      EXPECT_NEAR(want_s.logprob, got_s.logprob, lim.exact_greedy ? 1e-4 : 0.1) << "prompt " << p << " step " << i;
      if (!lim.exact_greedy) continue;
      for (size_t k = 0; k < want_s.top.size(); ++k) {
        EXPECT_NEAR(want_s.top[k].second, got_s.top[k].second, 1e-4);
        const bool apart = (k == 0 || want_s.top[k - 1].second - want_s.top[k].second > 1e-4) &&
                           (k + 1 == want_s.top.size() || want_s.top[k].second - want_s.top[k + 1].second > 1e-4);
        if (apart) {
          EXPECT_EQ(want_s.top[k].first, got_s.top[k].first) << "prompt " << p << " step " << i << " top " << k;
        }
      }
    }
  }
  std::printf("MODEL %-14s logprobs on the GPU vs the host's: largest difference %.2e\n", GetParam().c_str(), worst);

  // A prompt's scores, computed where the logits are on both: the same limits.
  auto sa = prompt_scores(*on_cpu.model, *cpu, prompts[2], 3), sb = prompt_scores(*on_gpu.model, *gpu, prompts[2], 3);
  ASSERT_EQ(sa.size(), prompts[2].size() - 1);
  ASSERT_EQ(sb.size(), sa.size());
  double worst_score = 0;
  for (size_t i = 0; i < sa.size(); ++i) {
    EXPECT_EQ(sb[i].token, prompts[2][i + 1]);
    ASSERT_EQ(sb[i].top.size(), size_t(3));
    worst_score = std::max(worst_score, double(std::abs(sa[i].logprob - sb[i].logprob)));
    EXPECT_NEAR(sa[i].logprob, sb[i].logprob, lim.exact_greedy ? 1e-4 : 0.1) << "prompt score " << i;
    EXPECT_NEAR(sa[i].top[0].second, sb[i].top[0].second, lim.exact_greedy ? 1e-4 : 0.1) << "prompt score " << i;
  }
  std::printf("MODEL %-14s prompt scores on the GPU vs the CPU: largest difference %.2e\n", GetParam().c_str(),
              worst_score);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaModels,
                         ::testing::Values("llama", "llama_bf16", "llama_f16", "llama_dynamic", "mistral",
                                           "qwen2", "qwen3", "gemma2", "gemma3", "phi3", "qwen3_moe",
                                           "qwen3_moe_bf16", "mixtral"),
                         // Named by fixture, so that --gtest_filter='*qwen3*' picks models by name.
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace tessera
