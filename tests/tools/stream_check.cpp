#include "stream_check.h"

#include <random>

namespace tessera::tools::test {

Message parse_pieces(std::string_view text, const std::vector<size_t>& cuts, const ParserOptions& options,
                     bool truncated) {
  auto parser = make_parser(options);
  MessageBuilder builder;
  std::vector<bool> started;
  auto add = [&](const Delta& d) {
    for (const auto& event : d.tool_calls) {
      if (event.index == static_cast<int>(started.size())) {
        // A call opens with id and name and no arguments yet.
        EXPECT_FALSE(event.id.empty());
        EXPECT_FALSE(event.name.empty());
        EXPECT_TRUE(event.arguments.empty());
        started.push_back(true);
      } else {
        EXPECT_LT(event.index, static_cast<int>(started.size()));
        EXPECT_TRUE(event.id.empty() && event.name.empty()) << "only a call's first delta names it";
      }
    }
    builder.add(d);
  };
  size_t prev = 0;
  for (size_t cut : cuts) {
    add(parser->feed(text.substr(prev, cut - prev)));
    prev = cut;
  }
  add(parser->feed(text.substr(prev)));
  add(parser->finish(truncated));
  return builder.result();
}

void expect_same(const Message& a, const Message& b, const std::string& what) {
  EXPECT_EQ(a.content, b.content) << what;
  EXPECT_EQ(a.reasoning.has_value(), b.reasoning.has_value()) << what;
  if (a.reasoning && b.reasoning) {
    EXPECT_EQ(*a.reasoning, *b.reasoning) << what;
  }
  ASSERT_EQ(a.tool_calls.size(), b.tool_calls.size()) << what;
  for (size_t i = 0; i < a.tool_calls.size(); ++i) {
    EXPECT_EQ(a.tool_calls[i].id, b.tool_calls[i].id) << what;
    EXPECT_EQ(a.tool_calls[i].name, b.tool_calls[i].name) << what;
    EXPECT_EQ(a.tool_calls[i].arguments, b.tool_calls[i].arguments) << what;
  }
}

void expect_stream_matches(std::string_view text, const Message& whole, const ParserOptions& options,
                           bool truncated) {
  for (size_t cut = 1; cut < text.size(); ++cut)
    expect_same(parse_pieces(text, {cut}, options, truncated), whole, "cut at " + std::to_string(cut));
  std::vector<size_t> every;
  for (size_t i = 1; i < text.size(); ++i) every.push_back(i);
  expect_same(parse_pieces(text, every, options, truncated), whole, "byte by byte");
  std::mt19937 rng(7);
  for (int round = 0; round < 20; ++round) {
    std::vector<size_t> cuts;
    for (size_t i = 1; i < text.size(); ++i)
      if (rng() % 4 == 0) cuts.push_back(i);
    expect_same(parse_pieces(text, cuts, options, truncated), whole, "random cuts, round " + std::to_string(round));
  }
}

void expect_mangled_stream_matches(const std::string& original, const ParserOptions& options, int rounds,
                                   unsigned seed) {
  std::mt19937 rng(seed);
  const std::vector<std::string> splices = {"<tool_call>", "</tool_call>", "{", "}", "\"", "<|\"|>", "<think>",
                                            "</think>", "[ARGS]", "<|message|>", "<|end|>", "\\", "é", "call:",
                                            "</invoke>", "<|tool_call_end|>", "to=functions.", "["};
  WarningCounter quiet;
  for (int round = 0; round < rounds; ++round) {
    std::string text = original;
    for (int edit = 0; edit < 3 && !text.empty(); ++edit) {
      size_t at = rng() % text.size();
      switch (rng() % 3) {
        case 0: text.erase(at, 1 + rng() % 8); break;
        case 1: text.insert(at, text.substr(rng() % text.size(), 1 + rng() % 12)); break;
        default: text.insert(at, splices[rng() % splices.size()]);
      }
    }
    for (bool truncated : {false, true}) {
      Message whole;
      ASSERT_NO_THROW(whole = parse_text(text, options, truncated)) << text;
      std::vector<size_t> cuts;
      for (size_t i = 1; i < text.size(); ++i)
        if (rng() % 3 == 0) cuts.push_back(i);
      expect_same(parse_pieces(text, cuts, options, truncated), whole, text);
    }
  }
}

WarningCounter::WarningCounter() {
  previous_ = set_warning_sink([this](std::string_view m) {
    ++count_;
    last_ = std::string(m);
  });
}

WarningCounter::~WarningCounter() { set_warning_sink(std::move(previous_)); }

}  // namespace tessera::tools::test
