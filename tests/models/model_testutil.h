// Running fixture models in tests: load a directory, generate through the engine, and compute
// the logits after every token of a sequence in one pass.
#pragma once
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <vector>

#include "engine/engine.h"

namespace tessera::test {

struct TestModel {
  std::unique_ptr<Backend> backend;
  LoadedModel loaded;
  Model& model() { return *loaded.model; }
};
TestModel load_test_model(const std::filesystem::path& dir, bool reference_backend = false);

// Logits after each token of `tokens` ([tokens.size(), vocab]), from a fresh cache in one step.
std::vector<float> logits_all_rows(Model& model, Backend& be, const std::vector<int32_t>& tokens);
inline std::vector<float> logits_all_rows(TestModel& m, const std::vector<int32_t>& tokens) {
  return logits_all_rows(m.model(), *m.backend, tokens);
}

// Log-probabilities over the whole vocabulary at each generated step.
struct Generation {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logprobs;  // [steps][vocab]
  int cached_tokens = 0;
};
// Runs several requests together through one engine (greedy, all logprobs).
std::vector<Generation> generate_greedy(Engine& engine, int vocab, const std::vector<std::vector<int32_t>>& prompts,
                                        int max_tokens, const std::vector<int32_t>& stop_ids = {});

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b);

}  // namespace tessera::test
