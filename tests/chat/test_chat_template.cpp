// Loading templates from model directories, the `tessera template` command, and concurrent renders.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <thread>

#include "chat/chat_template.h"
#include "golden_util.h"

namespace tessera::test {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() / ("tessera_chat_" + std::to_string(std::random_device{}()));
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }
  fs::path write(const std::string& name, const std::string& text) const {
    std::ofstream(path_ / name, std::ios::binary) << text;
    return path_ / name;
  }

 private:
  fs::path path_;
};

const nlohmann::ordered_json kHello =
    nlohmann::ordered_json::parse(R"({"messages": [{"role": "user", "content": "hi"}]})");

TEST(ChatTemplateLoading, TokenizerConfigStringAndSpecialTokens) {
  TempDir d;
  d.write("tokenizer_config.json",
          R"({"bos_token": {"content": "<s>", "__type": "AddedToken"}, "eos_token": "</s>",
    "chat_template": "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}{{ eos_token }}"})");
  auto t = ChatTemplate::from_model_dir(d.path());
  EXPECT_EQ(t.render(kHello), "<s>hi</s>");
  // Context values win over the model's defaults.
  auto ctx = kHello;
  ctx["bos_token"] = "[B]";
  EXPECT_EQ(t.render(ctx), "[B]hi</s>");
}

TEST(ChatTemplateLoading, NamedTemplatesPickToolUseWhenToolsArePassed) {
  TempDir d;
  d.write("tokenizer_config.json", R"({"chat_template": [
    {"name": "default", "template": "plain"}, {"name": "tool_use", "template": "tools:{{ tools | length }}"}]})");
  auto t = ChatTemplate::from_model_dir(d.path());
  EXPECT_EQ(t.render(kHello), "plain");
  auto ctx = kHello;
  ctx["tools"] = nlohmann::ordered_json::array({{{"type", "function"}}});
  EXPECT_EQ(t.render(ctx), "tools:1");
  ctx["tools"] = nullptr;
  EXPECT_EQ(t.render(ctx), "plain");
  EXPECT_EQ(t.names(), (std::vector<std::string>{"default", "tool_use"}));
  EXPECT_EQ(t.source_named("tool_use"), "tools:{{ tools | length }}");
}

TEST(ChatTemplateLoading, JinjaFileThenJsonFileThenOverride) {
  TempDir d;
  d.write("tokenizer_config.json", R"({"chat_template": "from config"})");
  EXPECT_EQ(ChatTemplate::from_model_dir(d.path()).render(kHello), "from config");
  d.write("chat_template.json", R"({"chat_template": "from json"})");
  EXPECT_EQ(ChatTemplate::from_model_dir(d.path()).render(kHello), "from json");
  d.write("chat_template.jinja", "from jinja\n");
  auto t = ChatTemplate::from_model_dir(d.path());
  EXPECT_EQ(t.render(kHello), "from jinja");
  EXPECT_EQ(t.source(), "from jinja\n");
  auto over = d.write("override.jinja", "override");
  EXPECT_EQ(ChatTemplate::from_model_dir(d.path(), over).render(kHello), "override");
}

TEST(ChatTemplateLoading, MissingOrBrokenTemplatesNameTheFile) {
  TempDir d;
  d.write("tokenizer_config.json", R"({"eos_token": "</s>"})");
  try {
    ChatTemplate::from_model_dir(d.path());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(d.path().string()), std::string::npos) << e.what();
  }
  d.write("chat_template.jinja", "ok\n{% if x %}");
  try {
    ChatTemplate::from_model_dir(d.path());
    FAIL() << "expected a syntax error";
  } catch (const chat::TemplateError& e) {
    EXPECT_EQ(e.type(), "TemplateSyntaxError");
    EXPECT_NE(e.message().find("chat_template.jinja"), std::string::npos) << e.what();
  }
}

TEST(ChatTemplateLoading, ParsedOncePerSource) {
  auto a = ChatTemplate::from_string("{{ 1 }}");
  auto b = ChatTemplate::from_string("{{ 1 }}");
  EXPECT_EQ(&a.source(), &b.source());  // one shared parse
}

// transformers' apply_chat_template(continue_final_message=True): the render ends where the final
// message's text does, whitespace after it kept only where the template kept it.
TEST(ChatTemplateContinue, EndsWhereTheFinalMessageDoes) {
  auto t = ChatTemplate::from_string(
      "{% if continue_final_message is defined %}[defined]{% endif %}"
      "{% for m in messages %}<{{ m.role }}>{{ m.content }}</{{ m.role }}>{% endfor %}"
      "{% if add_generation_prompt %}<assistant>{% endif %}");
  auto ctx = [](const std::string& content_json) {
    auto c = nlohmann::ordered_json::parse(R"({"messages": [{"role": "user", "content": "Say 7 words"},
      {"role": "assistant", "content": )" + content_json +
                                           "}], \"continue_final_message\": true}");
    return c;
  };
  // Not a template variable; the closing tag is cut.
  EXPECT_EQ(t.render(ctx(R"("Seven")")), "<user>Say 7 words</user><assistant>Seven");
  // Trailing whitespace the template kept stays; leading whitespace never decides the cut.
  EXPECT_EQ(t.render(ctx(R"("Seven ")")), "<user>Say 7 words</user><assistant>Seven ");
  EXPECT_EQ(t.render(ctx(R"(" Seven ")")), "<user>Say 7 words</user><assistant> Seven");
  // The last occurrence: "7" also appears in the user's message.
  EXPECT_EQ(t.render(ctx(R"("7")")), "<user>Say 7 words</user><assistant>7");
  // Parts: the last text part is the one continued (this template prints the list itself).
  EXPECT_EQ(t.render(ctx(
                R"([{"type": "text", "text": "One"}, {"type": "image"}, {"type": "text", "text": "Two"}])")),
            "<user>Say 7 words</user><assistant>[{'type': 'text', 'text': 'One'}, {'type': 'image'}, "
            "{'type': 'text', 'text': 'Two");
  // A template that trims: the message's trailing space is not in the render, so it is not kept.
  auto trims = ChatTemplate::from_string("{% for m in messages %}[{{ m.content | trim }}]{% endfor %}");
  EXPECT_EQ(trims.render(ctx(R"("Seven  ")")), "[Say 7 words][Seven");

  // Errors, as transformers raises them: no text, text the template drops, a generation prompt too.
  EXPECT_THROW(t.render(ctx("null")), Error);
  EXPECT_THROW(t.render(ctx(R"([{"type": "image"}])")), Error);
  auto drops = ChatTemplate::from_string(
      "{% for m in messages %}{% if m.role == 'user' %}{{ m.content }}{% endif %}{% endfor %}");
  EXPECT_THROW(drops.render(ctx(R"("Seven")")), Error);
  auto both = ctx(R"("Seven")");
  both["add_generation_prompt"] = true;
  EXPECT_THROW(t.render(both), Error);
  both["add_generation_prompt"] = false;
  EXPECT_EQ(t.render(both), "<user>Say 7 words</user><assistant>Seven");
  both["continue_final_message"] = "yes";
  EXPECT_THROW(t.render(both), Error);
}

// On the real templates: a conversation ending in the assistant's message, continued, renders as
// the whole conversation cut right after that message's text (no end of turn, no new header).
TEST(ChatTemplateContinue, RealTemplatesStopInsideTheFinalMessage) {
  TESSERA_REQUIRE_REFERENCE();
  const fs::path dir = reference_dir() / "chat-templates";
  nlohmann::ordered_json ctx =
      nlohmann::ordered_json::parse(read_file(dir / "contexts" / "minja-simple.json"));
  ctx["add_generation_prompt"] = false;
  const std::string final_text = ctx["messages"].back()["content"];
  int checked = 0;
  for (const auto& entry : fs::directory_iterator(dir / "templates")) {
    std::string whole;
    ChatTemplate t = ChatTemplate::from_string(read_file(entry.path()));
    try {
      whole = t.render(ctx, frozen_clock_options());
    } catch (const std::exception&) {
      continue;  // templates that refuse this conversation, or read what only transformers passes
    }
    if (whole.find(final_text) == std::string::npos) continue;  // templates that rewrite the answer
    auto continued = ctx;
    continued["continue_final_message"] = true;
    const std::string cut = t.render(continued, frozen_clock_options());
    EXPECT_EQ(cut, whole.substr(0, whole.rfind(final_text) + final_text.size())) << entry.path().filename();
    ++checked;
  }
  EXPECT_GE(checked, 50);
}

TEST(ChatTemplateThreads, ConcurrentRendersOfOneTemplate) {
  TESSERA_REQUIRE_REFERENCE();
  auto dir = reference_dir() / "chat-templates";
  const auto t = ChatTemplate::from_string(read_file(dir / "templates/Qwen-Qwen3-0.6B.jinja"));
  auto ctx = nlohmann::ordered_json::parse(read_file(dir / "contexts/minja-tool_use.json"));
  auto opts = frozen_clock_options();
  std::string want = t.render(ctx, opts);
  std::vector<std::thread> threads;
  std::vector<int> mismatches(8, 0);
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&, i] {
      for (int k = 0; k < 50; ++k) mismatches[static_cast<size_t>(i)] += t.render(ctx, opts) != want;
    });
  for (auto& th : threads) th.join();
  for (int m : mismatches) EXPECT_EQ(m, 0);
}

struct Run {
  int code;
  std::string out;
};

Run run_cli(const std::string& args) {
  std::string cmd = (binary_dir() / "tessera").string() + " template " + args;
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

TEST(ChatTemplateCli, RendersExactlyAndFailsWithCode2) {
  if (!fs::exists(binary_dir() / "tessera")) GTEST_SKIP() << "the tessera binary is not built";
  TempDir d;
  d.write("tokenizer_config.json",
          R"({"bos_token": "<s>", "chat_template": "{{ bos_token }}{{ messages[0].content }}|{{ flag }}"})");
  auto ctx = d.write("ctx.json", R"({"messages": [{"role": "user", "content": "hi\n"}], "flag": 3})");
  auto r = run_cli("-m " + d.path().string() + " --context " + ctx.string());
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, "<s>hi\n|3");  // nothing appended

  auto tmpl = d.write("t.jinja", "{{ messages | length }}{% if true %}\n{% endif %}");
  r = run_cli("--template " + tmpl.string() + " --context " + ctx.string());
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, "1");

  auto bad = d.write("bad.jinja", "x\n{{ raise_exception('nope') }}");
  auto err = d.path() / "err.txt";
  r = run_cli("--template " + bad.string() + " --context " + ctx.string() + " 2>" + err.string());
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  std::string msg = read_file(err);
  EXPECT_NE(msg.find("nope"), std::string::npos) << msg;
  EXPECT_NE(msg.find("line 2"), std::string::npos) << msg;
}

TEST(ChatTemplateCli, MatchesTheReferenceRender) {
  TESSERA_REQUIRE_REFERENCE();
  if (!fs::exists(binary_dir() / "tessera")) GTEST_SKIP() << "the tessera binary is not built";
  auto dir = reference_dir() / "chat-templates";
  // Qwen2.5's template does not read the clock, so the CLI's real time does not matter.
  int checked = 0;
  for (auto& row : read_jsonl(dir / "transformers_renders.jsonl")) {
    if (row["template"] != "templates/Qwen-Qwen2.5-7B-Instruct.jinja" || !row["ok"].get<bool>()) continue;
    auto r = run_cli("--template " + (dir / row["template"].get<std::string>()).string() + " --context " +
                     (dir / row["context"].get<std::string>()).string());
    EXPECT_EQ(r.code, 0);
    EXPECT_EQ(r.out, row["output"].get<std::string>()) << row["context"];
    ++checked;
  }
  EXPECT_EQ(checked, 5);
}

}  // namespace
}  // namespace tessera::test
