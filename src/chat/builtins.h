// jinja2's filters, tests and globals, and the methods of Python's str/list/dict that templates call.
#pragma once
#include <string>
#include <string_view>

#include "chat/interpreter.h"
#include "chat/value.h"

namespace tessera::chat {

using FilterFn = Value (*)(Interpreter&, const Value&, CallArgs&);
using TestFn = bool (*)(Interpreter&, const Value&, CallArgs&);

FilterFn find_filter(std::string_view name);  // nullptr when unknown
TestFn find_test(std::string_view name);
// Raises TypeError when a test gets more arguments than it takes (as calling the Python test would).
void check_test_arity(std::string_view name, const CallArgs& args);

// Whether `obj.name` is a method: Safe (callable), Unsafe (mutates: the sandbox blocks it), or None.
enum class MethodAccess { None, Safe, Unsafe };
MethodAccess method_access(const Value& obj, std::string_view name);
Value call_method(Interpreter& in, const Value& obj, const std::string& name, CallArgs& args);

// range, dict, namespace, cycler, joiner, raise_exception, strftime_now.
void install_globals(Frame& frame, const RenderOptions& opts);

// Python's `fmt % args` (escape: fmt is Markup, so %s/%r arguments get HTML-escaped) and
// str.format(*args, **kwargs).
std::string percent_format(const std::string& fmt, const Value& args, bool escape = false);
std::string str_format(const std::string& fmt, const CallArgs& args);

// Argument helpers shared by the builtins.
int64_t to_int(const Value& v, const char* what);
// Refuses paddings and widths that would build strings beyond any sane prompt (MemoryError).
void check_width(int64_t width);
[[noreturn]] void type_error(const std::string& msg);

}  // namespace tessera::chat
