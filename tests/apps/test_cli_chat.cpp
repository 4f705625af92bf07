// `tessera chat` end to end on the bundled model: each reply is what `tessera generate` makes from
// the conversation rendered by `tessera template`, turn after turn.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <csignal>
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

// Ctrl-C (SIGINT) in the middle of a reply stops it there; the chat goes on to the next message,
// whose prompt holds what the interrupted reply said (found in the prefix cache). The replies run
// past end-of-turn to 1000 tokens, so that the interrupt lands in the first.
TEST(CliChat, AnInterruptStopsTheReplyAndTheChatGoesOn) {
  int in[2], out[2];
  ASSERT_EQ(::pipe(in), 0);
  ASSERT_EQ(::pipe(out), 0);
  const fs::path err = fs::temp_directory_path() / ("tessera_chat_err_" + std::to_string(::getpid()));
  const std::string bin = (binary_dir() / "tessera").string();
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(in[0], 0), ::dup2(out[1], 1), ::dup2(fd, 2);
    ::close(in[1]), ::close(out[0]);
    ::execl(bin.c_str(), "tessera", "chat", "-m", kModel.c_str(), "--temperature", "0", "-n", "1000",
            "--ignore-eos", nullptr);
    ::_exit(127);
  }
  ::close(in[0]), ::close(out[1]);
  auto send = [&](const std::string& text) {
    ASSERT_EQ(::write(in[1], text.data(), text.size()), ssize_t(text.size()));
  };
  std::string said;
  char buf[256];
  send("Tell of the beginning.\n");
  while (said.size() < 4) {  // the reply has begun
    const ssize_t n = ::read(out[0], buf, sizeof buf);
    ASSERT_GT(n, 0) << "chat ended before replying";
    said.append(buf, size_t(n));
  }
  ::kill(pid, SIGINT);
  send("Tell of the beginning.\n");
  ::close(in[1]);
  for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) > 0;) said.append(buf, size_t(n));
  ::close(out[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  const std::string log = read_file(err);
  fs::remove(err);
  ASSERT_TRUE(WIFEXITED(status)) << log;
  EXPECT_EQ(WEXITSTATUS(status), 0) << log;
  EXPECT_EQ(log.find("[interrupted]"), log.rfind("[interrupted]")) << log;
  ASSERT_NE(log.find("[interrupted]"), std::string::npos) << log;
  std::vector<std::array<int, 3>> counts;  // prompt tokens, cached, reply tokens
  for (size_t at = log.find("[prompt "); at != std::string::npos; at = log.find("[prompt ", at + 1)) {
    std::array<int, 3> c{};
    ASSERT_EQ(std::sscanf(log.c_str() + at, "[prompt %d tokens (%d cached), reply %d", &c[0], &c[1], &c[2]),
              3)
        << log;
    counts.push_back(c);
  }
  ASSERT_EQ(counts.size(), 2u) << log;
  EXPECT_LT(counts[0][2], 1000) << log;  // stopped before its most tokens
  // The second prompt is the first, the partial reply and the same message again.
  EXPECT_GT(counts[1][0], counts[0][0] + counts[0][2]) << log;
  EXPECT_GE(counts[1][1], counts[0][0] / 16 * 16) << log;
  EXPECT_EQ(said.back(), '\n') << said;
}

}  // namespace
