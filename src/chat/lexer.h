// Template source -> tokens, with jinja2's whitespace control as transformers configures it:
// trim_blocks (drop the newline after a block or comment tag), lstrip_blocks (drop spaces and tabs
// before a block or comment tag on its own line), `-`/`+` modifiers, raw blocks, and
// keep_trailing_newline=False (one trailing newline of the source is dropped).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tessera::chat {

enum class Tok : uint8_t { Text, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, Eof };

struct Token {
  Tok type;
  std::string value;  // text, name, operator, or the unescaped string literal
  int line = 0, column = 0;
  int64_t ival = 0;
  double fval = 0;
};

struct LexerOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
};

// Throws TemplateError("TemplateSyntaxError", ...) with the position of the fault.
std::vector<Token> tokenize(const std::string& source, const LexerOptions& opts = {});

}  // namespace tessera::chat
