#include "hf_reference.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

#include <gtest/gtest.h>

#include "tokenizer/unicode.h"

namespace tessera::test {

using nlohmann::json;

std::vector<std::string> corpus_texts() {
  std::vector<std::string> out;
  std::ifstream in(std::filesystem::path(TESSERA_SOURCE_DIR) / "tests" / "tokenizer" / "corpus.jsonl");
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(json::parse(line).get<std::string>());
  return out;
}

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
    switch (i % 5) {
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
      case 3:  // long runs: whole-paragraph words and the long-word merge path
        for (size_t k = pick(1500); k > 0; --k) {
          if (pick(8) == 0) s += pieces[pick(std::size(pieces))];
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

int fuzz_count() {
  const char* v = std::getenv("TESSERA_TOKENIZER_FUZZ");
  return v ? std::max(1, std::atoi(v)) : 400;
}

}  // namespace tessera::test
