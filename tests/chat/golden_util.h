// Shared by the chat template tests: the frozen clock of the reference renders and jsonl reading.
#pragma once
#include <ctime>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../testutil.h"
#include "chat/interpreter.h"

namespace tessera::test {

// The reference renders froze strftime_now at 2024-09-03 12:00:00.
inline chat::RenderOptions frozen_clock_options() {
  chat::RenderOptions o;
  o.now = [] {
    std::tm tm{};
    tm.tm_year = 2024 - 1900;
    tm.tm_mon = 8;
    tm.tm_mday = 3;
    tm.tm_hour = 12;
    std::time_t t = timegm(&tm);
    std::tm out{};
    gmtime_r(&t, &out);
    return out;
  };
  return o;
}

inline std::vector<nlohmann::ordered_json> read_jsonl(const std::filesystem::path& p) {
  std::vector<nlohmann::ordered_json> rows;
  std::string text = read_file(p);
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    if (end > start) rows.push_back(nlohmann::ordered_json::parse(text.substr(start, end - start)));
    start = end + 1;
  }
  return rows;
}

}  // namespace tessera::test
