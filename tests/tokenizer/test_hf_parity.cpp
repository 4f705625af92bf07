// Tessera against Hugging Face tokenizers run live (node + npm `tokenizers`) on a corpus of our
// own (code, many scripts, emoji, whitespace runs, numbers, special-token look-alikes) plus
// random byte strings and random Unicode: ids with and without special tokens, with special
// tokens parsed and as plain text, and decodes. Also checks that streaming decode equals decode.
#include <cstdio>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"
#include "tokenizer_paths.h"

namespace tessera {
namespace {

using nlohmann::json;

std::vector<std::string> corpus_texts() {
  std::vector<std::string> out;
  std::ifstream in(std::filesystem::path(TESSERA_SOURCE_DIR) / "tests" / "tokenizer" / "corpus.jsonl");
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(json::parse(line).get<std::string>());
  return out;
}

// Random byte strings (mostly invalid UTF-8), random Unicode from a pool of troublesome code
// points, and splices of corpus texts cut at arbitrary bytes.
std::vector<std::string> random_texts(const std::vector<std::string>& corpus, uint32_t seed, int n) {
  std::mt19937 rng(seed);
  auto pick = [&](size_t k) { return size_t(rng() % k); };
  static const char32_t pool[] = {
      'a', 'Z', 'e', 's', 't', 'L', '0', '7', ' ', ' ', ' ', '\t', '\n', '\r', '\'', '"', '<', '>', '|', '_', '.', ',',
      '!', '?', '-', '/', '#', '@', 0x00, 0x07, 0x7F, 0x85, 0xA0, 0xAD, 0xE9, 0x130, 0x131, 0x17F, 0x212A, 0x2581,
      0x120, 0x10A, 0x301, 0x308, 0x200B, 0x200D, 0x2028, 0x3000, 0xFEFF, 0xFE0F, 0xFFFD, 0x4E2D, 0x6587, 0x3042,
      0x30AB, 0xAC00, 0x0627, 0x05D0, 0x0928, 0x0E01, 0x0660, 0x0966, 0xFF11, 0xFF21, 0x2167, 0x1F600, 0x1F44D,
      0x1F3FD, 0x1F468, 0x1F1EB, 0x1F1F7, 0x1D518, 0x10FFFD, 0xE000};
  static const char* pieces[] = {"<|im_start|>", "<|im_end|>", "<s>", "</s>", "<bos>", "<|endoftext|>",
                                 "<|begin_of_text|>", "<think>", "'s", "'LL", "  ", "\n\n", "123456", "▁", "<0x41>"};
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) {
    std::string s;
    switch (i % 4) {
      case 0:
        for (size_t k = pick(40); k > 0; --k) s += char(rng() & 0xFF);
        break;
      case 1:
        for (size_t k = pick(40); k > 0; --k) tok::utf8_append(s, pool[pick(std::size(pool))]);
        break;
      case 2:
        for (size_t k = pick(12); k > 0; --k) {
          if (pick(3) == 0) s += pieces[pick(std::size(pieces))];
          else tok::utf8_append(s, pool[pick(std::size(pool))]);
        }
        break;
      default: {
        const std::string& a = corpus[pick(corpus.size())];
        const std::string& b = corpus[pick(corpus.size())];
        s = a.substr(pick(a.size() + 1), 60) + b.substr(0, pick(b.size() + 1));
      }
    }
    out.push_back(s);
  }
  return out;
}

// Runs the reference on `texts` (made valid UTF-8 first, the documented input rule).
std::vector<json> reference(const std::filesystem::path& tokenizer_json, const std::vector<std::string>& texts,
                            bool plain_special) {
  auto in = std::filesystem::temp_directory_path() / ("tessera_tok_" + std::to_string(::getpid()) + ".jsonl");
  {
    std::ofstream f(in, std::ios::binary);
    for (auto& t : texts) f << json(tok::utf8_lossy(t)).dump() << "\n";
  }
  std::string cmd = "node \"" + std::string(TESSERA_SOURCE_DIR) + "/tests/tokenizer/hf_reference.js\" \"" +
                    tokenizer_json.string() + "\"" + (plain_special ? " --plain-special" : "") + " < \"" + in.string() + "\"";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[65536];
  for (size_t n; p && (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  int rc = p ? pclose(p) : -1;
  std::filesystem::remove(in);
  if (rc != 0) ADD_FAILURE() << "reference failed (" << rc << "): " << cmd;
  std::vector<json> res;
  std::istringstream ls(out);
  for (std::string l; std::getline(ls, l);)
    if (!l.empty()) res.push_back(json::parse(l));
  return res;
}

struct ParityCase {
  std::string model;
  bool plain_special;
};

class HfParity : public ::testing::TestWithParam<ParityCase> {};

TEST_P(HfParity, CorpusAndFuzz) {
  TESSERA_REQUIRE_NODE_MODULES();
  auto [name, plain] = GetParam();
  if (name == "stories260K") TESSERA_REQUIRE_REFERENCE();
  auto dir = test::model_dir(name);
  auto tok = Tokenizer::load(dir);
  auto texts = corpus_texts();
  ASSERT_GT(texts.size(), 40u);
  auto fuzz = random_texts(texts, 1234 + uint32_t(name.size()) * 7 + plain, 400);
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
