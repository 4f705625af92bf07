#include <gtest/gtest.h>

#include "server/stop_strings.h"

using tessera::server::StopMatcher;

namespace {

// Feeds the pieces and returns everything released, and whether a stop was found.
std::pair<std::string, bool> feed(StopMatcher& m, const std::vector<std::string>& pieces) {
  std::string out;
  for (const auto& p : pieces) {
    auto r = m.push(p);
    out += r.text;
    if (r.stopped) return {out, true};
  }
  return {out + m.flush(), false};
}

TEST(StopMatcher, PassesTextThroughWithoutStops) {
  StopMatcher m({});
  EXPECT_EQ(m.push("abc").text, "abc");
  EXPECT_EQ(feed(m, {"d", "e"}), std::make_pair(std::string("de"), false));
}

TEST(StopMatcher, FindsAStopSpanningSeveralPieces) {
  StopMatcher m({"STOP"});
  EXPECT_EQ(feed(m, {"Hel", "lo wo", "rld ST", "O", "P and more"}),
            std::make_pair(std::string("Hello world "), true));
}

TEST(StopMatcher, HoldsBackOnlyWhatCouldStillMatchAndReleasesItWhenItCannot) {
  StopMatcher m({"</end>"});
  EXPECT_EQ(m.push("a<").text, "a");
  EXPECT_EQ(m.push("/e").text, "");
  EXPECT_EQ(m.push("x").text, "</ex");
  EXPECT_EQ(m.push("<").text, "");
  EXPECT_EQ(m.flush(), "<");
}

TEST(StopMatcher, EarliestOfSeveralStopsWins) {
  StopMatcher m({"world", "lo"});
  EXPECT_EQ(feed(m, {"hello world"}), std::make_pair(std::string("hel"), true));
}

TEST(StopMatcher, OverlappingPartialMatches) {
  StopMatcher m({"aab"});
  EXPECT_EQ(feed(m, {"a", "a", "a", "b", "c"}), std::make_pair(std::string("a"), true));
}

TEST(StopMatcher, NothingAfterAStop) {
  StopMatcher m({"x"});
  EXPECT_TRUE(m.push("abxcd").stopped);
  EXPECT_EQ(m.push("more").text, "");
  EXPECT_EQ(m.flush(), "");
}

// The stop string found: the earliest, and the longest of those starting there.
TEST(StopMatcher, NamesTheStopFound) {
  StopMatcher m({"cd", "b", "bc"});
  auto r = m.push("abcd");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "a");
  EXPECT_EQ(r.stop, "bc");
}

// Before a request's min_tokens the text goes out whole and matches nothing; a stop string in
// the text after it still ends the text.
TEST(StopMatcher, PiecesThatMayNotStop) {
  StopMatcher m({"ab"});
  auto r = m.push("xab", /*may_stop=*/false);
  EXPECT_EQ(r.text, "xab");
  EXPECT_FALSE(r.stopped);
  r = m.push("a", /*may_stop=*/false);
  EXPECT_EQ(r.text, "a");  // not held back: it cannot start a match
  r = m.push("cab");
  EXPECT_EQ(r.text, "c");
  EXPECT_TRUE(r.stopped);
}

TEST(StopMatcher, MultiByteCharactersAreNeverSplit) {
  StopMatcher m({"é!"});  // the held tail is a whole prefix of the stop, bytes included
  EXPECT_EQ(feed(m, {"caf", "é", " ok é", "!"}), std::make_pair(std::string("café ok "), true));
}

}  // namespace
