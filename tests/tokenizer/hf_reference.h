// Shared by the tests that compare with Hugging Face tokenizers run live (node + npm `tokenizers`).
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tessera::test {

// tests/tokenizer/corpus.jsonl: code, many scripts, emoji, whitespace runs, numbers,
// special-token look-alikes.
std::vector<std::string> corpus_texts();

// Random byte strings (mostly invalid UTF-8), random Unicode from a pool of troublesome code
// points (short, and long enough to make paragraph-sized words), and splices of corpus texts
// cut at arbitrary bytes.
std::vector<std::string> random_texts(const std::vector<std::string>& corpus, uint32_t seed, int n);

// TESSERA_TOKENIZER_FUZZ=N raises the number of random texts per model (default 400).
int fuzz_count();

// Runs tests/tokenizer/hf_reference.js on `texts` (made valid UTF-8 first, the documented input
// rule): per text {"ids", "ids_special", "decoded", "decoded_special", "decoded_skip"}.
std::vector<nlohmann::json> reference(const std::filesystem::path& tokenizer_json, const std::vector<std::string>& texts,
                                      bool plain_special);

}  // namespace tessera::test
