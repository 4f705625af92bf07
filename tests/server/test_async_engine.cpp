// The engine thread and the per-request Generation on a tiny fixture model: the same tokens as
// the engine run directly, concurrent clients, cancellation freeing blocks, stop strings over
// detokenized text.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "engine/async_engine.h"
#include "model_testutil.h"
#include "server/api_error.h"
#include "server/generation.h"
#include "testutil.h"

using namespace tessera;
using namespace tessera::server;

namespace {

constexpr auto kWait = std::chrono::milliseconds(100);

struct Fixture {
  test::TestModel m = test::load_test_model(test::fixtures_dir() / "models" / "llama");
  bool overlap = false;  // decode steps launched ahead, as on a GPU (EngineConfig::overlap_steps)
  EngineConfig cfg() const {
    EngineConfig ec;
    ec.num_blocks = 64;
    ec.scheduler.max_num_batched_tokens = 64;
    ec.overlap_steps = overlap;
    return ec;
  }
  std::unique_ptr<Engine> engine() { return std::make_unique<Engine>(m.model(), *m.backend, cfg()); }
};

Request greedy(std::vector<int32_t> prompt, int max_tokens) {
  Request r;
  r.prompt = std::move(prompt);
  r.params.temperature = 0;
  r.max_tokens = max_tokens;
  return r;
}

std::vector<int32_t> prompt_of(int n, int salt) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back(3 + (i * 37 + salt * 101) % 380);
  return p;
}

std::vector<int32_t> run_direct(Engine& e, const Request& r) {
  int64_t id = e.add_request(r);
  std::vector<int32_t> out;
  while (e.has_work())
    for (auto& o : e.step())
      if (o.seq_id == id) out.push_back(o.token);
  return out;
}

std::vector<int32_t> drain(RequestStream& s, int index = 0) {
  std::vector<int32_t> out;
  for (;;)
    for (auto& e : s.wait(kWait)) {
      EXPECT_EQ(e.error, "");
      if (e.index == index) out.push_back(e.token);
      if (e.finished && e.index == index) return out;
    }
}

// The engine thread finishes its bookkeeping just after delivering the last token.
void wait_idle(const AsyncEngine& a) {
  for (int i = 0; i < 200 && (a.in_flight() > 0 || a.stats().used_blocks > 0); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

// Each id reads as one letter: text and token positions are easy to relate.
class LetterCodec : public TextCodec {
 public:
  class Decoder : public TextDecoder {
   public:
    std::string push(int32_t id) override { return std::string(1, char('a' + id % 26)); }
    std::string flush() override { return ""; }
  };
  std::vector<int32_t> encode(const std::string&, bool) const override { return {}; }
  std::unique_ptr<TextDecoder> decoder(bool) const override { return std::make_unique<Decoder>(); }
  const std::vector<std::string>& special_texts() const override { return special_; }
  std::string token_text(int32_t id) const override { return std::string(1, char('a' + id % 26)); }
  std::string render_chat(const ChatInput&) const override { return ""; }

 private:
  std::vector<std::string> special_;
};

// overlap: the engine thread's steps launched ahead (the finished sequences it releases may
// still be in a launched step); some requests then stop at a token mid-run.
void expect_engine_alone_tokens(bool overlap) {
  Fixture f;
  std::vector<Request> reqs;
  for (int i = 0; i < 6; ++i) reqs.push_back(greedy(prompt_of(5 + 7 * i, i), 12));
  std::vector<std::vector<int32_t>> expected;
  {
    auto e = f.engine();
    for (auto& r : reqs) expected.push_back(run_direct(*e, r));
  }
  if (overlap) {
    for (int i : {1, 4}) {
      reqs[size_t(i)].stop_token_ids = {expected[size_t(i)][5]};
      const auto stop = std::find(expected[size_t(i)].begin(), expected[size_t(i)].end(), expected[size_t(i)][5]);
      expected[size_t(i)].erase(stop + 1, expected[size_t(i)].end());
    }
    f.overlap = true;
  }
  AsyncEngine async(f.engine());
  std::vector<std::vector<int32_t>> got(reqs.size());
  std::vector<std::thread> clients;
  for (size_t i = 0; i < reqs.size(); ++i)
    clients.emplace_back([&, i] { got[i] = drain(*async.submit({reqs[i]})); });
  for (auto& t : clients) t.join();
  EXPECT_EQ(got, expected);
  wait_idle(async);
  EXPECT_EQ(async.in_flight(), 0);
  EXPECT_EQ(async.stats().used_blocks, 0);
}

TEST(AsyncEngine, ConcurrentClientsGetTheSameTokensAsTheEngineAlone) { expect_engine_alone_tokens(false); }

TEST(AsyncEngine, ConcurrentClientsGetTheSameTokensWithStepsLaunchedAhead) { expect_engine_alone_tokens(true); }

void expect_cancel_frees_blocks(bool overlap) {
  Fixture f;
  f.overlap = overlap;
  AsyncEngine async(f.engine());
  Request r = greedy(prompt_of(40, 1), 200);
  auto s = async.submit({r});
  int tokens = 0;
  while (tokens == 0) tokens += int(s->wait(kWait).size());
  s->cancel();
  wait_idle(async);
  EXPECT_EQ(async.in_flight(), 0);
  EXPECT_EQ(async.stats().used_blocks, 0);
  EXPECT_EQ(async.stats().running, 0);
  for (auto& e : s->wait(std::chrono::milliseconds(1)))
    EXPECT_FALSE(e.finished) << "ran to the end despite cancel";
}

TEST(AsyncEngine, CancellingFreesTheBlocksAtTheNextStep) { expect_cancel_frees_blocks(false); }

TEST(AsyncEngine, CancellingFreesTheBlocksWithStepsLaunchedAhead) { expect_cancel_frees_blocks(true); }

TEST(AsyncEngine, ARequestTheEngineRefusesFailsAloneWithItsReason) {
  Fixture f;
  AsyncEngine async(f.engine());
  auto s = async.submit({greedy({1, 2, 999999}, 4), greedy(prompt_of(4, 2), 3)});
  bool failed = false, finished = false;
  while (!(failed && finished))
    for (auto& e : s->wait(kWait)) {
      if (e.index == 0) failed = e.error.find("outside the vocabulary") != std::string::npos;
      if (e.index == 1 && e.finished) finished = true;
    }
  wait_idle(async);
  EXPECT_EQ(async.in_flight(), 0);
}

TEST(Generation, StopStringsSpanTokensAndCountTheTokensUpToTheStop) {
  Fixture f;
  Request r = greedy(prompt_of(9, 3), 20);
  std::vector<int32_t> ids;
  {
    auto e = f.engine();
    r.stop_token_ids = {};
    ids = run_direct(*e, r);
  }
  std::string text;
  for (int32_t id : ids) text += char('a' + id % 26);
  std::string stop = text.substr(6, 3);  // spans tokens 6..8
  size_t at = text.find(stop);
  LetterCodec codec;
  AsyncEngine async(f.engine());
  Metrics metrics;
  Generation g(async, &codec, {{r, 0}}, TextOptions{{stop}}, metrics, Generation::Clock::now());
  ChoiceDelta all;
  while (!g.done())
    for (auto& d : g.next(kWait)) all.append(d);
  EXPECT_EQ(all.text, text.substr(0, at));
  EXPECT_EQ(all.finish_reason, "stop");
  EXPECT_EQ(g.usage().completion_tokens, int64_t(at + stop.size()));
  EXPECT_EQ(g.usage().prompt_tokens, 9);
  wait_idle(async);
  EXPECT_EQ(async.in_flight(), 0);
}

TEST(Generation, EngineErrorsBecomeApiErrors) {
  Fixture f;
  AsyncEngine async(f.engine());
  Metrics metrics;
  Generation g(async, nullptr, {{greedy({1, 999999}, 2), 0}}, {}, metrics, Generation::Clock::now());
  EXPECT_THROW(while (!g.done()) g.next(kWait), ApiError);
}

}  // namespace
