// Gemma 2's soft caps as transformers reads them: a cap the config leaves out takes the default
// (attention 50, logits 30), one set to null is off. Seen through the logits of the gemma2 fixture.
#include <unistd.h>

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "model_testutil.h"
#include "testutil.h"

using namespace tessera;
using namespace tessera::test;
namespace fs = std::filesystem;

namespace {

// The fixture's logits after a prompt, with its config edited.
std::vector<float> logits_with(const std::function<void(nlohmann::json&)>& edit) {
  static int n = 0;
  fs::path dir = fs::temp_directory_path() /
                 ("tessera_gemma2_" + std::to_string(::getpid()) + "_" + std::to_string(n++));
  fs::remove_all(dir);
  fs::copy(fixtures_dir() / "models" / "gemma2", dir);
  auto cfg = nlohmann::json::parse(read_file(dir / "config.json"));
  edit(cfg);
  std::ofstream(dir / "config.json") << cfg.dump();
  TestModel m = load_test_model(dir);
  std::vector<float> logits = logits_all_rows(m, {1, 17, 200, 45, 99, 7, 300, 12, 5, 64, 33});
  fs::remove_all(dir);
  return logits;
}

TEST(Gemma2Config, OmittedCapsAreTransformersDefaults) {
  auto omitted = logits_with(
      [](nlohmann::json& j) { j.erase("attn_logit_softcapping"), j.erase("final_logit_softcapping"); });
  auto explicit_defaults = logits_with(
      [](nlohmann::json& j) { j["attn_logit_softcapping"] = 50.0, j["final_logit_softcapping"] = 30.0; });
  auto off = logits_with([](nlohmann::json& j) {
    j["attn_logit_softcapping"] = nullptr, j["final_logit_softcapping"] = nullptr;
  });
  auto fixture = logits_with([](nlohmann::json&) {});
  EXPECT_EQ(max_abs_diff(omitted, explicit_defaults), 0.0);
  EXPECT_GT(max_abs_diff(omitted, off), 1e-4);      // caps of 50 / 30 still bend the largest values
  EXPECT_GT(max_abs_diff(fixture, omitted), 1e-2);  // the fixture's own caps (6 / 4) are not the defaults
}

}  // namespace
