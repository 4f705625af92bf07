// jinja2's variable scoping, worked out once after parsing. In jinja2 a name whose first use in a
// scope (template top level, loop body, macro body, block) is an unconditional assignment, and
// that no enclosing scope uses, is a local of that scope from its very start: reads before the
// assignment (e.g. in a loop body that runs earlier) see it undefined, not a context variable of
// the same name. This pass lists those names per scope; the interpreter binds them as undefined
// when it enters the scope.
#pragma once
#include "chat/ast.h"

namespace tessera::chat {

void resolve_scopes(Program& program);

}  // namespace tessera::chat
