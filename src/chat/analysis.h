// Passes over a parsed template, run once by parse().
//
// check_names: jinja2 resolves filters and tests when it compiles, so an unknown one fails the whole
// template, except inside if statements and inline ifs (where it fails only when evaluated).
//
// resolve_scopes: jinja2's variable scoping (and which macros read varargs/kwargs). In jinja2 a name whose first use in a
// scope (template top level, loop body, macro body, block) is an unconditional assignment, and
// that no enclosing scope uses, is a local of that scope from its very start: reads before the
// assignment (e.g. in a loop body that runs earlier) see it undefined, not a context variable of
// the same name. This pass lists those names per scope; the interpreter binds them as undefined
// when it enters the scope.
#pragma once
#include "chat/ast.h"

namespace tessera::chat {

void check_names(const Program& program);  // throws TemplateError("TemplateAssertionError")
void resolve_scopes(Program& program);

}  // namespace tessera::chat
