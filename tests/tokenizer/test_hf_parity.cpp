// Tessera against Hugging Face tokenizers run live (node + npm `tokenizers`) on a corpus of our
// own (code, many scripts, emoji, whitespace runs, numbers, special-token look-alikes) plus
// random byte strings and random Unicode: ids with and without special tokens, with special
// tokens parsed and as plain text, and decodes. Also checks that streaming decode equals decode.
#include "hf_reference.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"
#include "tokenizer_paths.h"

namespace tessera {
namespace {

using nlohmann::json;
using test::corpus_texts;
using test::fuzz_count;
using test::random_texts;
using test::reference;

struct ParityCase {
  std::string model;
  bool plain_special;
};

void PrintTo(const ParityCase& c, std::ostream* os) { *os << c.model << (c.plain_special ? " (plain special)" : ""); }

class HfParity : public ::testing::TestWithParam<ParityCase> {};

TEST_P(HfParity, CorpusAndFuzz) {
  TESSERA_REQUIRE_NODE_MODULES();
  auto [name, plain] = GetParam();
  if (name == "stories260K") TESSERA_REQUIRE_REFERENCE();
  auto dir = test::model_dir(name);
  auto tok = Tokenizer::load(dir);
  auto texts = corpus_texts();
  ASSERT_GT(texts.size(), 40u);
  auto fuzz = random_texts(texts, 1234 + uint32_t(name.size()) * 7 + plain, fuzz_count());
  texts.insert(texts.end(), fuzz.begin(), fuzz.end());
  auto ref = reference(dir / "tokenizer.json", texts, plain);
  ASSERT_EQ(ref.size(), texts.size());
  int failures = 0;
  for (size_t i = 0; i < texts.size() && failures < 10; ++i) {
    const std::string& t = texts[i];
    auto ids = tok.encode(t, false, !plain);
    auto ids_special = tok.encode(t, true, !plain);
    std::string ctx = name + " #" + std::to_string(i) + " text=" + json(tok::utf8_lossy(t)).dump();
    bool ok = true;
    ok &= ids == ref[i]["ids"].get<std::vector<int32_t>>();
    ok &= ids_special == ref[i]["ids_special"].get<std::vector<int32_t>>();
    EXPECT_EQ(ids, ref[i]["ids"].get<std::vector<int32_t>>()) << ctx;
    EXPECT_EQ(ids_special, ref[i]["ids_special"].get<std::vector<int32_t>>()) << ctx;
    EXPECT_EQ(tok.decode(ids), ref[i]["decoded"].get<std::string>()) << ctx;
    // In plain mode the reference's special tokens carry stand-in text (see hf_reference.js).
    if (!plain) {
      EXPECT_EQ(tok.decode(ids_special), ref[i]["decoded_special"].get<std::string>()) << ctx;
    }
    EXPECT_EQ(tok.decode(ids_special, true), ref[i]["decoded_skip"].get<std::string>()) << ctx;
    // Streaming decode equals decode, and never emits a partial UTF-8 character.
    for (bool skip : {false, true}) {
      StreamDecoder sd(tok, skip);
      std::string streamed;
      for (int32_t id : ids_special) {
        std::string piece = sd.push(id);
        EXPECT_EQ(tok::utf8_valid_prefix(piece), piece.size()) << ctx;
        streamed += piece;
      }
      streamed += sd.flush();
      EXPECT_EQ(streamed, tok.decode(ids_special, skip)) << ctx << " skip=" << skip;
    }
    if (!ok) ++failures;
  }
}

std::vector<ParityCase> parity_cases() {
  std::vector<ParityCase> out;
  for (auto& m : test::golden_models()) out.push_back({m, false});
  for (auto m : {"llama3", "qwen3", "deepseek_v3", "gemma3", "gptoss"}) out.push_back({m, true});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Tokenizer, HfParity, ::testing::ValuesIn(parity_cases()), [](const auto& info) {
  return info.param.model + (info.param.plain_special ? "_plain_special" : "");
});

}  // namespace
}  // namespace tessera
