// Token ids given on the command line ("1 403 407"), as --prompt-ids and --decode take them.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tessera::app {

// Space-separated non-negative ids; throws tessera::Error naming `flag` and the bad word.
std::vector<int32_t> parse_token_ids(const std::string& text, const std::string& flag);

}  // namespace tessera::app
