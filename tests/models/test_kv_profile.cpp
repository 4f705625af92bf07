// The profiled KV budget (vLLM's rule, the GPU default), run on the CPU backend where memory
// info is the machine's: a step runs, and what the fraction leaves is what the device has free.
#include "core/error.h"
#include "model_testutil.h"
#include "testutil.h"

using namespace tessera;
using namespace tessera::test;

TEST(KvProfile, BudgetIsTheFractionLessWhatIsInUse) {
  TestModel m = load_test_model(fixtures_dir() / "models" / "llama");
  SchedulerConfig sc;
  sc.max_num_batched_tokens = 300;
  sc.max_num_seqs = 7;
  ProfiledBudget b = profile_kv_budget(m.model(), *m.backend, m.model().kv_spec(), 16, sc, 1.0f);
  EXPECT_EQ(b.step_tokens, 300);
  EXPECT_GT(b.total, 0u);
  EXPECT_LT(b.in_use, b.total);
  EXPECT_EQ(b.kv_bytes, b.total - b.in_use);
}

TEST(KvProfile, NoRoomLeftIsAClearError) {
  TestModel m = load_test_model(fixtures_dir() / "models" / "llama");
  try {
    profile_kv_budget(m.model(), *m.backend, m.model().kv_spec(), 16, SchedulerConfig{}, 1e-6f);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no memory left for the KV cache"), std::string::npos) << e.what();
  }
}
