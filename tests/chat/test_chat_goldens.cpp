// Real chat templates rendered byte-for-byte as transformers renders them (or raising where it raises).
#include <gtest/gtest.h>

#include <map>

#include "chat/chat_template.h"
#include "golden_util.h"
#include "../testutil.h"

namespace tessera::test {
namespace {

struct Outcome {
  int passed = 0, total = 0;
  std::vector<std::string> failures;
};

std::string first_difference(const std::string& got, const std::string& want) {
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  size_t from = i > 60 ? i - 60 : 0;
  return "first difference at byte " + std::to_string(i) + "\n    got:  " +
         nlohmann::json(got.substr(from, 140)).dump() + "\n    want: " + nlohmann::json(want.substr(from, 140)).dump();
}

// Checks every row of a renders jsonl: template and context paths are resolved against the folders given.
Outcome check_renders(const std::vector<nlohmann::ordered_json>& rows, const std::filesystem::path& template_dir,
                      const std::filesystem::path& context_dir) {
  Outcome r;
  std::map<std::string, std::string> sources;
  auto opts = frozen_clock_options();
  for (auto& row : rows) {
    ++r.total;
    auto tpath = template_dir / std::filesystem::path(row["template"].get<std::string>()).filename();
    auto cpath = context_dir / std::filesystem::path(row["context"].get<std::string>()).filename();
    std::string label = tpath.filename().string() + " x " + cpath.filename().string();
    bool want_ok = row["ok"].get<bool>();
    std::string got;
    std::string error;
    try {
      auto context = nlohmann::ordered_json::parse(read_file(cpath));
      got = ChatTemplate::from_string(read_file(tpath)).render(context, opts);
    } catch (const chat::TemplateError& e) {
      error = e.what();
    }
    if (want_ok && error.empty() && got == row["output"].get<std::string>()) {
      ++r.passed;
    } else if (!want_ok && !error.empty()) {
      ++r.passed;
    } else if (want_ok && !error.empty()) {
      r.failures.push_back(label + ": raised " + error);
    } else if (!want_ok) {
      r.failures.push_back(label + ": rendered, but transformers raised " + row["error"].get<std::string>());
    } else {
      r.failures.push_back(label + ": " + first_difference(got, row["output"].get<std::string>()));
    }
  }
  return r;
}

TEST(ChatGoldens, TransformersRenders) {
  TESSERA_REQUIRE_REFERENCE();
  auto dir = reference_dir() / "chat-templates";
  auto rows = read_jsonl(dir / "transformers_renders.jsonl");
  ASSERT_EQ(rows.size(), 345u);
  auto r = check_renders(rows, dir / "templates", dir / "contexts");
  for (auto& f : r.failures) ADD_FAILURE() << f;
  EXPECT_EQ(r.passed, r.total);
  std::printf("transformers renders: %d of %d match\n", r.passed, r.total);
}

TEST(ChatGoldens, OwnContexts) {
  TESSERA_REQUIRE_REFERENCE();
  auto goldens = std::filesystem::path(TESSERA_SOURCE_DIR) / "tests/chat/goldens/own_renders.jsonl";
  if (!std::filesystem::exists(goldens))
    GTEST_SKIP() << goldens << " is absent: generate it with scripts/make_chat_goldens.py where transformers is installed";
  auto rows = read_jsonl(goldens);
  auto r = check_renders(rows, reference_dir() / "chat-templates/templates",
                         std::filesystem::path(TESSERA_SOURCE_DIR) / "tests/chat/contexts");
  for (auto& f : r.failures) ADD_FAILURE() << f;
  EXPECT_EQ(r.passed, r.total);
  std::printf("own contexts: %d of %d match\n", r.passed, r.total);
}

// Random templates from a grammar of the language (scripts/make_chat_goldens.py --fuzz), rendered by
// Jinja2 as transformers sets it up: the engine must agree on every output and every error.
TEST(ChatGoldens, RandomTemplatesAgreeWithJinja2) {
  auto goldens = std::filesystem::path(TESSERA_SOURCE_DIR) / "tests/chat/goldens/jinja2_fuzz_renders.jsonl";
  if (!std::filesystem::exists(goldens))
    GTEST_SKIP() << goldens << " is absent: generate it with scripts/make_chat_goldens.py --fuzz";
  auto opts = frozen_clock_options();
  int passed = 0, total = 0;
  for (auto& row : read_jsonl(goldens)) {
    ++total;
    std::string src = row["src"].get<std::string>(), got, error;
    try {
      got = ChatTemplate::from_string(src).render(row["context"], opts);
    } catch (const chat::TemplateError& e) {
      error = e.what();
    }
    bool want_ok = row["ok"].get<bool>();
    if (want_ok && error.empty() && got == row["output"].get<std::string>()) {
      ++passed;
    } else if (!want_ok && !error.empty()) {
      ++passed;
    } else if (want_ok && !error.empty()) {
      ADD_FAILURE() << src << "\n  raised " << error;
    } else if (!want_ok) {
      ADD_FAILURE() << src << "\n  rendered, but Jinja2 raised " << row["error"].get<std::string>();
    } else {
      ADD_FAILURE() << src << "\n  " << first_difference(got, row["output"].get<std::string>());
    }
  }
  EXPECT_EQ(passed, total);
  std::printf("random templates: %d of %d agree with Jinja2\n", passed, total);
}

}  // namespace
}  // namespace tessera::test
