#include <gtest/gtest.h>

#include "io/hf_config.h"

using namespace tessera;
using nlohmann::json;

TEST(HfConfig, TypedLookupsNameTheField) {
  auto c = HfConfig::from_json(json{{"hidden_size", 64}, {"model_type", "llama"}, {"rms_norm_eps", "x"}});
  EXPECT_EQ(c.get<int>("hidden_size"), 64);
  EXPECT_EQ(c.get_or<int>("num_hidden_layers", 3), 3);
  try {
    c.get<int>("num_hidden_layers");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "config.json: missing field \"num_hidden_layers\"");
  }
  EXPECT_THROW(c.get<float>("rms_norm_eps"), Error);
}

TEST(HfConfig, EosIdsPreferGenerationConfigAndAcceptLists) {
  auto c = HfConfig::from_json(json{{"eos_token_id", 2}}, json{{"eos_token_id", json::array({128001, 128009})}});
  EXPECT_EQ(c.eos_token_ids(), (std::vector<int32_t>{128001, 128009}));
  auto d = HfConfig::from_json(json{{"eos_token_id", 2}});
  EXPECT_EQ(d.eos_token_ids(), (std::vector<int32_t>{2}));
  auto e = HfConfig::from_json(json{{"eos_token_id", nullptr}});
  EXPECT_TRUE(e.eos_token_ids().empty());
}
