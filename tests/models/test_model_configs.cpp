// Configs read as transformers reads them, seen through the logits of the gemma2, gemma3 and phi3
// fixtures with their config.json edited.
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

// A fixture's logits after a prompt, with its config edited.
std::vector<float> logits_with(const std::function<void(nlohmann::json&)>& edit,
                               const std::string& fixture = "gemma2") {
  static int n = 0;
  fs::path dir =
      fs::temp_directory_path() / ("tessera_config_" + std::to_string(::getpid()) + "_" + std::to_string(n++));
  fs::remove_all(dir);
  fs::copy(fixtures_dir() / "models" / fixture, dir);
  auto cfg = nlohmann::json::parse(read_file(dir / "config.json"));
  edit(cfg);
  std::ofstream(dir / "config.json") << cfg.dump();
  struct Remove {
    fs::path dir;
    ~Remove() { fs::remove_all(dir); }
  } remove{dir};  // also when the load throws
  TestModel m = load_test_model(dir);
  return logits_all_rows(m, {1, 17, 200, 45, 99, 7, 300, 12, 5, 64, 33});
}

// Gemma 2: a soft cap the config leaves out takes the default (attention 50, logits 30), one set
// to null is off.
TEST(ModelConfigs, Gemma2OmittedCapsAreTransformersDefaults) {
  auto omitted = logits_with(
      [](nlohmann::json& j) { j.erase("attn_logit_softcapping"), j.erase("final_logit_softcapping"); });
  auto explicit_defaults = logits_with(
      [](nlohmann::json& j) { j["attn_logit_softcapping"] = 50.0, j["final_logit_softcapping"] = 30.0; });
  auto off = logits_with([](nlohmann::json& j) {
    j["attn_logit_softcapping"] = nullptr, j["final_logit_softcapping"] = nullptr;
  });
  auto fixture = logits_with([](nlohmann::json&) {});
  EXPECT_EQ(max_abs_diff(omitted, explicit_defaults), 0.0);
  EXPECT_GT(max_abs_diff(omitted, off), 1e-2);     // caps of 50 / 30 still bend the largest (0.063)
  EXPECT_GT(max_abs_diff(fixture, omitted), 0.5);  // the fixture's caps (6 / 4) are not the defaults (1.97)
}

// Gemma 3 configs written before transformers 5: the full layers' rope_theta and rope_scaling at
// the top, the sliding layers' rope_local_base_freq, the layer types from sliding_window_pattern.
TEST(ModelConfigs, Gemma3OlderConfigEqualsPerLayerTypeForm) {
  auto current = logits_with([](nlohmann::json&) {}, "gemma3");
  auto older = logits_with(
      [](nlohmann::json& j) {
        j["rope_theta"] = j["rope_parameters"]["full_attention"]["rope_theta"];
        j["rope_scaling"] = {{"rope_type", "linear"},
                             {"factor", j["rope_parameters"]["full_attention"]["factor"]}};
        j["rope_local_base_freq"] = j["rope_parameters"]["sliding_attention"]["rope_theta"];
        j["sliding_window_pattern"] = 2;  // layers 0 and 2 slide, as the fixture's layer_types say
        j.erase("rope_parameters"), j.erase("layer_types"), j.erase("_sliding_window_pattern");
      },
      "gemma3");
  auto one_rope =
      logits_with([](nlohmann::json& j) { j["rope_parameters"].erase("sliding_attention"); }, "gemma3");
  EXPECT_EQ(max_abs_diff(current, older), 0.0);
  EXPECT_GT(max_abs_diff(current, one_rope), 0.5);  // the sliding layers' own RoPE matters (2.04)
}

// A sliding_window_pattern of 0 (every 0th layer full) is refused with a clear error, not a
// division by zero.
TEST(ModelConfigs, Gemma3ZeroSlidingWindowPatternIsAnError) {
  try {
    logits_with([](nlohmann::json& j) { j.erase("layer_types"), j["sliding_window_pattern"] = 0; }, "gemma3");
    FAIL() << "loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sliding_window_pattern must be positive"), std::string::npos)
        << e.what();
  }
}

// Phi-3 configs from the hub (transformers 4): rope_theta, partial_rotary_factor and
// original_max_position_embeddings at the top, the factors under rope_scaling with type "su" or
// "longrope". They read as the fixture's transformers 5 form does.
TEST(ModelConfigs, Phi3HubConfigEqualsRopeParametersForm) {
  auto current = logits_with([](nlohmann::json&) {}, "phi3");
  for (const char* type : {"longrope", "su"}) {
    auto hub = logits_with(
        [&](nlohmann::json& j) {
          nlohmann::json rp = j["rope_parameters"];
          j["rope_theta"] = rp["rope_theta"];
          j["rope_scaling"] = {{"type", type}, {"short_factor", rp["short_factor"]}, {"long_factor", rp["long_factor"]}};
          j.erase("rope_parameters");
        },
        "phi3");
    EXPECT_EQ(max_abs_diff(current, hub), 0.0) << type;
  }
  // The factors matter: the fixture's short ones are not 1.
  auto plain = logits_with(
      [](nlohmann::json& j) {
        for (auto& f : j["rope_parameters"]["short_factor"]) f = 1.0;
      },
      "phi3");
  EXPECT_GT(max_abs_diff(current, plain), 1e-3);
}

TEST(ModelConfigs, Phi3LongropeFactorsOfTheWrongLengthAreRefused) {
  try {
    logits_with([](nlohmann::json& j) { j["rope_parameters"]["long_factor"].erase(0); }, "phi3");
    FAIL() << "loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("longrope needs long_factor of 6 numbers"), std::string::npos) << e.what();
  }
}

}  // namespace
