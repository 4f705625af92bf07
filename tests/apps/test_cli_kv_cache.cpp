// --kv-cache-dtype on the command line: auto picks the cache that the weights' dtype implies.
#include <gtest/gtest.h>

#include "cli_util.h"
#include "testutil.h"

using namespace tessera::test;

namespace {

std::string json_run(const std::string& model, const std::string& kv) {
  auto r = run_tessera("generate -m " + (fixtures_dir() / "models" / model).string() +
                       " --prompt-ids \"1 17 200 45\" -n 6 --temperature 0 --ignore-eos --logprobs 3 --json"
                       " --device cpu --kv-cache-dtype " + kv);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.out;
}

}  // namespace

TEST(CliKvCache, AutoIsBf16ForBf16WeightsAndF32ForF32Weights) {
  EXPECT_EQ(json_run("llama_bf16", "auto"), json_run("llama_bf16", "bf16"));
  EXPECT_NE(json_run("llama_bf16", "auto"), json_run("llama_bf16", "f32"));
  EXPECT_EQ(json_run("llama", "auto"), json_run("llama", "f32"));
  EXPECT_EQ(json_run("llama_f16", "auto"), json_run("llama_f16", "f16"));
}

TEST(CliKvCache, RejectsUnknownDtype) {
  auto r = run_tessera("generate --prompt-ids 1 -n 1 --kv-cache-dtype fp8");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--kv-cache-dtype"), std::string::npos) << r.err;
}
