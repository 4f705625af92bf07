// `tessera perplexity` equals the training script's held-out perplexity (transformers, f32).
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "testutil.h"

using namespace tessera::test;

TEST(CliPerplexity, MatchesTheTrainingScriptWithinOnePercent) {
  auto ref = nlohmann::json::parse(read_file(fixtures_dir() / "tessera-kjv" / "perplexity.json"));
  auto file = (fixtures_dir() / "tessera-kjv" / "heldout.txt").string();
  for (auto& r : ref["results"]) {
    int context = r["context"], stride = r["stride"];
    if (context != 512) continue;  // one setting keeps the test short; both agree to 4 digits
    auto out = run_tessera("perplexity -f " + file + " --context " + std::to_string(context) + " --stride " +
                           std::to_string(stride));
    ASSERT_EQ(out.exit_code, 0) << out.err;
    double got = std::stod(out.out.substr(out.out.find(':') + 1));
    double want = r["perplexity"];
    EXPECT_NEAR(got, want, want * 0.01);
    EXPECT_NEAR(got, want, 1e-3);  // in fact f32 agrees to far better than 1%
    EXPECT_NE(out.err.find("scored: " + std::to_string(r["scored_tokens"].get<int>())), std::string::npos) << out.err;
  }
}

TEST(CliPerplexity, RejectsBadWindows) {
  auto file = (fixtures_dir() / "tessera-kjv" / "heldout.txt").string();
  auto out = run_tessera("perplexity -f " + file + " --context 64 --stride 128");
  EXPECT_NE(out.exit_code, 0);
  EXPECT_NE(out.err.find("--stride must not exceed --context"), std::string::npos) << out.err;
}
