#include <gtest/gtest.h>

#include "server/special_text.h"

using tessera::server::SpecialTextFilter;

namespace {

std::string run(SpecialTextFilter& f, const std::vector<std::string>& pieces) {
  std::string out;
  for (const auto& p : pieces) out += f.push(p);
  return out + f.flush();
}

TEST(SpecialTextFilter, RemovesSpecialTokensEvenWhenSplitAcrossPieces) {
  std::vector<std::string> special = {"<|im_end|>", "<tool_call>", "<|im"};
  SpecialTextFilter f(special);
  EXPECT_EQ(run(f, {"a<|im_end|>b", "<tool_", "call>c<|im", "_end|>d"}), "abcd");
  EXPECT_EQ(f.push("x<|i"), "x");  // held: may begin a special token
  EXPECT_EQ(f.push("m"), "");      // "<|im" is one, but a longer one may follow
  EXPECT_EQ(f.push("!"), "!");     // it was "<|im" after all
  EXPECT_EQ(f.push("<|im"), "");
  EXPECT_EQ(f.flush(), "");  // the output ended on "<|im"
}

TEST(SpecialTextFilter, ATailThatBeganNoSpecialTokenIsKept) {
  std::vector<std::string> special = {"<tool_call>"};
  SpecialTextFilter f(special);
  EXPECT_EQ(f.push("1 <to"), "1 ");
  EXPECT_EQ(f.push("p> 2 <"), "<top> 2 ");
  EXPECT_EQ(f.flush(), "<");
  std::vector<std::string> none;
  SpecialTextFilter g(none);
  EXPECT_EQ(run(g, {"<tool_call>", "x"}), "<tool_call>x");
}

}  // namespace
