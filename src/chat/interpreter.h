// Evaluates a parsed Program against a context, with jinja2's semantics under transformers'
// ImmutableSandboxedEnvironment. One Interpreter per render: it holds all per-render state, so a
// shared Program can be rendered from many threads at once.
#pragma once
#include <ctime>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "chat/ast.h"
#include "chat/value.h"

namespace tessera::chat {

struct RenderOptions {
  // The clock behind strftime_now (local time); unset means the real clock.
  std::function<std::tm()> now;
  int max_call_depth = 200;             // nested macro calls
  int64_t max_loop_iterations = 1'000'000;  // all loops of one render together
  size_t max_output_bytes = 64u << 20;  // the output and any one string built by the template
};

struct Frame {
  std::shared_ptr<Frame> parent;
  std::vector<std::pair<std::string, Value>> vars;
  const Value* lookup(std::string_view name) const;
  void set(std::string_view name, Value v);
};
using FramePtr = std::shared_ptr<Frame>;

class Interpreter {
 public:
  explicit Interpreter(const RenderOptions& opts);

  // Renders `program` with the variables of `context` (a dict) over jinja2's globals.
  std::string render(const Program& program, const Value& context);

  Value eval(const Expr& e, const FramePtr& f);
  Value call(const Value& callee, CallArgs& args);
  Value getattr(const Value& obj, const std::string& name);
  Value getitem(const Value& obj, const Value& key);
  Value filter(const std::string& name, const Value& input, CallArgs& args);
  bool test(const std::string& name, const Value& input, CallArgs& args);
  // Python iteration: list items, dict keys, string characters; Undefined iterates as empty.
  std::vector<Value> iterate(const Value& v);
  void count_iterations(int64_t n);
  void check_size(size_t bytes) const;

 private:
  enum class Flow { Normal, Break, Continue };
  const RenderOptions& opts_;
  int call_depth_ = 0;
  int eval_depth_ = 0;  // nested expression evaluations, bounded to protect the native stack
  int64_t iterations_ = 0;
  std::vector<Value> block_inputs_;  // the body text of the innermost {% filter %} / {% set %} block

  Flow exec(const Body& body, const FramePtr& f, std::string& out);
  Flow exec_stmt(const Stmt& s, const FramePtr& f, std::string& out);
  Flow exec_for(const Stmt& s, const FramePtr& f, std::string& out);
  void exec_set(const Stmt& s, const FramePtr& f);
  Value eval_inner(const Expr& e, const FramePtr& f);
  Value eval_call(const Expr& e, const FramePtr& f);
  Value eval_compare(const Expr& e, const FramePtr& f);
  void eval_args(const Expr& e, size_t first, const FramePtr& f, CallArgs& args);
  Value make_macro(const Stmt& s, const FramePtr& f, bool is_caller);
  Value render_block(const Stmt& block, const FramePtr& parent);
  void bind_locals(Frame& frame, const std::vector<std::string>& names);
};

// Python binary operators (+ - * / // % ** ~) and the `in` test.
Value binary_op(Interpreter& in, const std::string& op, const Value& a, const Value& b);
bool contains(const Value& container, const Value& item);
Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

}  // namespace tessera::chat
