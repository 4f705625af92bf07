// Ids, token strings and decodes against the goldens of Hugging Face tokenizers 0.23.2 and
// llama.cpp's tokenizer test vectors (shared reference data).
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"
#include "tokenizer_paths.h"

namespace tessera {
namespace {

using nlohmann::json;

class Goldens : public ::testing::TestWithParam<std::string> {};

TEST_P(Goldens, MatchHuggingFace) {
  TESSERA_REQUIRE_REFERENCE();
  TESSERA_REQUIRE_NODE_MODULES();
  const std::string name = GetParam();
  auto tok = Tokenizer::load(test::model_dir(name));
  std::ifstream in(test::reference_dir() / "tokenizers" / "goldens" / (name + ".jsonl"));
  ASSERT_TRUE(in) << "golden file missing for " << name;
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    json g = json::parse(line);
    std::string text = g["text"], id = g["id"];
    auto ids = tok.encode(text, false);
    EXPECT_EQ(ids, g["ids"].get<std::vector<int32_t>>()) << name << " " << id << " text=" << json(text).dump();
    EXPECT_EQ(tok.encode(text, true), g["ids_with_special"].get<std::vector<int32_t>>()) << name << " " << id;
    std::vector<std::string> tokens;
    for (int32_t t : ids) tokens.push_back(tok.id_to_token(t));
    EXPECT_EQ(tokens, g["tokens"].get<std::vector<std::string>>()) << name << " " << id;
    auto with_special = g["ids_with_special"].get<std::vector<int32_t>>();
    EXPECT_EQ(tok.decode(ids, false), g["decoded"].get<std::string>()) << name << " " << id;
    EXPECT_EQ(tok.decode(with_special, true), g["decoded_skip_special"].get<std::string>()) << name << " " << id;
    ++n;
  }
  EXPECT_GT(n, 50);
}

INSTANTIATE_TEST_SUITE_P(Tokenizer, Goldens, ::testing::ValuesIn(test::golden_models()));

// llama.cpp's vocab tests: texts separated by "\n__ggml_vocab_test__\n", one line of ids each.
struct VocabCase {
  std::string vocab, model;
};

void PrintTo(const VocabCase& c, std::ostream* os) { *os << c.vocab << " on " << c.model; }

class VocabTests : public ::testing::TestWithParam<VocabCase> {};

TEST_P(VocabTests, MatchLlamaCppVectors) {
  TESSERA_REQUIRE_REFERENCE();
  TESSERA_REQUIRE_NODE_MODULES();
  auto [vocab, model] = GetParam();
  auto dir = test::reference_dir() / "tokenizers" / "vocab-tests";
  std::string inp = test::read_file(dir / ("ggml-vocab-" + vocab + ".gguf.inp"));
  std::string out = test::read_file(dir / ("ggml-vocab-" + vocab + ".gguf.out"));
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  for (size_t p = 0;;) {
    size_t q = inp.find(sep, p);
    if (q == std::string::npos) {
      if (p < inp.size()) texts.push_back(inp.substr(p));
      break;
    }
    texts.push_back(inp.substr(p, q - p));
    p = q + sep.size();
  }
  std::vector<std::string> lines;
  std::istringstream os(out);
  for (std::string l; std::getline(os, l);) lines.push_back(l);
  ASSERT_EQ(texts.size(), lines.size());
  auto tok = Tokenizer::load(test::model_dir(model));
  for (size_t i = 0; i < texts.size(); ++i) {
    std::vector<int32_t> want;
    std::istringstream ls(lines[i]);
    for (int32_t v; ls >> v;) want.push_back(v);
    EXPECT_EQ(tok.encode(texts[i], false), want) << vocab << " #" << i << " text=" << json(texts[i]).dump();
  }
}

INSTANTIATE_TEST_SUITE_P(Tokenizer, VocabTests,
                         ::testing::Values(VocabCase{"llama-bpe", "llama3"}, VocabCase{"qwen2", "qwen3"},
                                           VocabCase{"gemma-4", "gemma3"}),
                         [](const auto& info) {
                           std::string n = info.param.vocab;
                           for (auto& c : n)
                             if (!isalnum((unsigned char)c)) c = '_';
                           return n;
                         });

}  // namespace
}  // namespace tessera
