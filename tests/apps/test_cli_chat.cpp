// `tessera chat` end to end on the bundled model: each reply is what `tessera generate` makes from
// the conversation rendered by `tessera template`, turn after turn.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "testutil.h"

using namespace tessera::test;
namespace fs = std::filesystem;

namespace {

const std::string kModel = (fs::path(TESSERA_SOURCE_DIR) / "models" / "tessera-kjv").string();
const std::string kSampling = " --temperature 0 -n 12";

// The reply `generate` makes to `messages`: the template rendered, tokenized as it stands (the
// template writes the BOS), and greedy from there.
std::string expected_reply(const nlohmann::ordered_json& messages) {
  const fs::path ctx =
      fs::temp_directory_path() / ("tessera_chat_ctx_" + std::to_string(::getpid()) + ".json");
  std::ofstream(ctx)
      << nlohmann::ordered_json{{"messages", messages}, {"add_generation_prompt", true}}.dump();
  CliResult text = run_tessera("template -m " + kModel + " --context " + ctx.string());
  fs::remove(ctx);
  EXPECT_EQ(text.exit_code, 0) << text.err;
  CliResult ids = run_tessera("tokenize -m " + kModel + " --stdin --json", text.out);
  EXPECT_EQ(ids.exit_code, 0) << ids.err;
  std::string list;
  const nlohmann::json parsed = nlohmann::json::parse(ids.out);
  for (int id : parsed["ids"]) list += std::to_string(id) + " ";
  CliResult gen = run_tessera("generate -m " + kModel + " --prompt-ids \"" + list + "\"" + kSampling);
  EXPECT_EQ(gen.exit_code, 0) << gen.err;
  return gen.out.substr(0, gen.out.size() - 1);  // generate ends with a newline
}

TEST(CliChat, EachReplyIsTheConversationsGreedyContinuation) {
  CliResult r =
      run_tessera("chat -m " + kModel + " --system \"Thou art a scribe.\"" + kSampling,
                  "Tell of the beginning.\nAnd \\\nthen?\n/reset\nTell of the beginning.\n/exit\nignored\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  messages.push_back({{"role", "system"}, {"content", "Thou art a scribe."}});
  messages.push_back({{"role", "user"}, {"content", "Tell of the beginning."}});
  const std::string first = expected_reply(messages);
  messages.push_back({{"role", "assistant"}, {"content", first}});
  messages.push_back({{"role", "user"}, {"content", "And \nthen?"}});  // a line ending in '\' goes on
  const std::string second = expected_reply(messages);
  ASSERT_FALSE(first.empty());
  // After /reset the conversation starts again; /exit ends it before the last line.
  EXPECT_EQ(r.out, first + "\n" + second + "\n" + first + "\n");
  // A line of counts a reply; the later turns find the earlier ones' tokens in the prefix cache.
  std::vector<std::pair<int, int>> counts;  // prompt tokens, cached
  for (size_t at = r.err.find("[prompt "); at != std::string::npos; at = r.err.find("[prompt ", at + 1)) {
    int prompt = 0, cached = 0;
    ASSERT_EQ(std::sscanf(r.err.c_str() + at, "[prompt %d tokens (%d cached)", &prompt, &cached), 2) << r.err;
    counts.emplace_back(prompt, cached);
  }
  ASSERT_EQ(counts.size(), 3u) << r.err;
  EXPECT_EQ(counts[0].second, 0);
  EXPECT_GE(counts[1].second, counts[0].first / 16 * 16) << r.err;  // whole blocks of 16
  EXPECT_EQ(counts[2].first, counts[0].first);
  EXPECT_GT(counts[2].second, 0) << r.err;
}

TEST(CliChat, AConversationPastTheContextIsRefusedAndTheChatGoesOn) {
  CliResult r =
      run_tessera("chat -m " + kModel + " --max-model-len 24" + kSampling, std::string(200, 'a') + "\nHi\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("error: the conversation is"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("/reset"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("[prompt "), r.err.rfind("[prompt ")) << r.err;  // the second message was answered
  EXPECT_NE(r.err.find("[prompt "), std::string::npos) << r.err;
}

}  // namespace
