// Template errors: a Python-style exception type (TemplateSyntaxError, UndefinedError, TypeError,
// SecurityError, TemplateError from raise_exception, ...) plus the template line and column.
#pragma once
#include <string>

#include "core/error.h"

namespace tessera::chat {

class TemplateError : public tessera::Error {
 public:
  TemplateError(std::string type, std::string message, int line = 0, int column = 0)
      : tessera::Error(""), type_(std::move(type)), message_(std::move(message)) {
    locate(line, column);
  }
  const char* what() const noexcept override { return full_.c_str(); }
  const std::string& type() const { return type_; }
  const std::string& message() const { return message_; }
  int line() const { return line_; }
  int column() const { return column_; }
  bool located() const { return line_ > 0; }
  void locate(int line, int column) {
    line_ = line;
    column_ = column;
    full_ = (line > 0 ? "line " + std::to_string(line) + ", column " + std::to_string(column) + ": " : "") +
            type_ + ": " + message_;
  }

 private:
  std::string type_, message_, full_;
  int line_ = 0, column_ = 0;
};

}  // namespace tessera::chat
