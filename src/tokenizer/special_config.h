// bos/eos/pad/unk from tokenizer_config.json, generation_config.json and config.json.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::tok {

struct SpecialConfig {
  std::string bos_token, eos_token, pad_token, unk_token;
  int32_t bos_id = -1, pad_id = -1, unk_id = -1;
  std::vector<int32_t> eos_ids;  // tokenizer_config's eos first, then generation_config's list
  bool add_bos = false, add_eos = false;
};

// Reads the optional config files of `dir`; `resolve` maps a token string to its id (-1: none).
// tokenizer_config.json tokens may be plain strings or {"__type": "AddedToken", "content": ...}.
SpecialConfig load_special_config(const std::filesystem::path& dir, const std::function<int32_t(std::string_view)>& resolve);

}  // namespace tessera::tok
