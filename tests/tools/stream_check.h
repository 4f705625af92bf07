// Test helpers: run a parser over a text whole and in pieces, and check that streaming gives
// the same message in OpenAI's delta shape.
#pragma once
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "tools/log.h"
#include "tools/parser.h"

namespace tessera::tools::test {

// Feeds `text` cut at `cuts` (ascending byte offsets), checking each call's delta shape.
Message parse_pieces(std::string_view text, const std::vector<size_t>& cuts, const ParserOptions& options,
                     bool truncated = false);

// Checks that every way of cutting `text` tested (each single cut, byte by byte, a few random
// cuttings) gives `whole`.
void expect_stream_matches(std::string_view text, const Message& whole, const ParserOptions& options,
                           bool truncated = false);

void expect_same(const Message& a, const Message& b, const std::string& what);

// Checks, for `rounds` mangled copies of `text` (bytes dropped, slices repeated, marker pieces
// spliced in), that parsing never throws and streaming at random cuts agrees with whole.
void expect_mangled_stream_matches(const std::string& text, const ParserOptions& options, int rounds, unsigned seed);

// Counts warnings while alive, silencing stderr.
class WarningCounter {
 public:
  WarningCounter();
  ~WarningCounter();
  int count() const { return count_; }
  const std::string& last() const { return last_; }

 private:
  WarningSink previous_;
  int count_ = 0;
  std::string last_;
};

}  // namespace tessera::tools::test
