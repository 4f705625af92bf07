// Tokens -> Program (jinja2's grammar as used by chat templates).
#pragma once
#include <memory>
#include <string>

#include "chat/ast.h"

namespace tessera::chat {

// Throws TemplateError("TemplateSyntaxError", ...) with the line and column of the fault.
std::shared_ptr<const Program> parse(const std::string& source);

}  // namespace tessera::chat
