// GBNF, llama.cpp's grammar notation, to a byte grammar: the `grammar` field of llama.cpp's
// server (and vLLM's structured_outputs.grammar in this notation).
//
//   root   ::= answer ("," ws answer)*
//   answer ::= "yes" | "no" | [0-9]{1,3}
//   ws     ::= [ \t]*      # comments run to the end of the line
//
// Rules are `name ::= alternatives`; a sequence holds string literals ("..." with \n \t \r \\ \"
// \xHH \uHHHH \UHHHHHHHH escapes), character classes ([a-z], [^"\\], over code points), `.`
// (any character), rule names and parenthesised groups, each optionally repeated by *, +, ?,
// {m}, {m,} or {m,n}. The text must match rule `root`. Characters are written in UTF-8.
// Errors (a syntax error, an undefined rule, no root, left recursion) throw tessera::Error
// naming the line and column.
#pragma once
#include <memory>
#include <string_view>

#include "grammar/grammar.h"

namespace tessera::grammar {

std::shared_ptr<const Grammar> gbnf_grammar(std::string_view text);

}  // namespace tessera::grammar
