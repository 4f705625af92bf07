// `tessera tokenize`, the public command line, on the stories260K tokenizer.
#include <cstdio>

#include "tokenizer_paths.h"

namespace tessera {
namespace {

struct Result {
  int rc;
  std::string out;
};

// `input`, when given, is piped to standard input (it must not hold single quotes).
Result run(const std::string& args, const std::string& input = "") {
  std::string cmd = (test::binary_dir() / "tessera").string() + " tokenize " + args + " 2>&1";
  if (!input.empty()) cmd = "printf '%s' '" + input + "' | " + cmd;
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  for (size_t n; p && (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  int status = p ? pclose(p) : -1;
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    TESSERA_REQUIRE_REFERENCE();
    if (!std::filesystem::exists(test::binary_dir() / "tessera")) GTEST_SKIP() << "the tessera binary is not built";
    model_ = "-m " + test::stories_model().string();
  }
  std::string model_;
};

TEST_F(Cli, EncodeDecode) {
  // transformers gives [1, 403, 407, 261, 378] with BOS (shared reference README).
  EXPECT_EQ(run(model_ + " --special 'Once upon a time'").out, "1 403 407 261 378\n");
  EXPECT_EQ(run(model_ + " 'Once upon a time'").out, "403 407 261 378\n");
  EXPECT_EQ(run(model_ + "/tokenizer.json --special --json 'Once upon'").out,
            "{\"ids\":[1,403,407],\"tokens\":[\"<s>\",\"▁Once\",\"▁upon\"]}\n");
  EXPECT_EQ(run(model_ + " --decode '1 403 407 261 378'").out, "<s> Once upon a time\n");
  EXPECT_EQ(run(model_ + " --decode '1 403 407 261 378' --skip-special").out, "Once upon a time\n");
  EXPECT_EQ(run("--stdin " + model_, "Once upon").out, "403 407\n");
}

TEST_F(Cli, Errors) {
  auto missing = run("-m /nonexistent/model 'x'");
  EXPECT_EQ(missing.rc, 1);
  EXPECT_NE(missing.out.find("tokenizer not found"), std::string::npos) << missing.out;
  auto bad_ids = run(model_ + " --decode '1 two 3'");
  EXPECT_EQ(bad_ids.rc, 1);
  EXPECT_NE(bad_ids.out.find("'two' is not a token id"), std::string::npos) << bad_ids.out;
  EXPECT_NE(run(model_).rc, 0);  // no text
}

}  // namespace
}  // namespace tessera
