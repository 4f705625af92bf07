// Composition of a reasoning parser and a tool parser, and tool_choice applied to the calls.
#include "core/error.h"
#include "tools/formats.h"
#include "tools/log.h"

namespace tessera::tools {
namespace {

// Applies tool_choice and parallel_tool_calls to the call events, renumbering what is kept.
class CallFilter {
 public:
  CallFilter(const ToolChoice& choice, bool parallel) : choice_(choice), parallel_(parallel) {}

  void apply(std::vector<ToolCallDelta>& events) {
    std::vector<ToolCallDelta> kept;
    for (auto& event : events) {
      if (!event.name.empty()) {
        bool keep = true;
        if (choice_.mode == ToolChoiceMode::Named && event.name != choice_.name) {
          warn("tool call to '" + event.name + "' dropped: tool_choice names '" + choice_.name + "'");
          keep = false;
        } else if (!parallel_ && kept_count_ > 0) {
          warn("tool call to '" + event.name + "' dropped: parallel_tool_calls is false");
          keep = false;
        }
        current_ = keep ? kept_count_++ : -1;
      }
      if (current_ < 0) continue;
      event.index = current_;
      kept.push_back(std::move(event));
    }
    events = std::move(kept);
  }

  void finish() const {
    if (kept_count_ == 0 && (choice_.mode == ToolChoiceMode::Required || choice_.mode == ToolChoiceMode::Named))
      warn("tool_choice asked for a call but the output holds none");
  }

 private:
  ToolChoice choice_;
  bool parallel_;
  int kept_count_ = 0;
  int current_ = -1;
};

// Reasoning first, then tool calls in what remains content.
class ComposedParser : public StreamParser {
 public:
  ComposedParser(std::unique_ptr<StreamParser> reasoning, std::unique_ptr<StreamParser> tools, CallFilter filter)
      : reasoning_(std::move(reasoning)), tools_(std::move(tools)), filter_(std::move(filter)) {}

  Delta feed(std::string_view piece) override {
    Delta out = reasoning_ ? reasoning_->feed(piece) : Delta{std::string(piece), {}, {}};
    return route(std::move(out), false, false);
  }

  Delta finish(bool truncated) override {
    Delta out = reasoning_ ? reasoning_->finish(truncated) : Delta{};
    out = route(std::move(out), true, truncated);
    filter_.finish();
    return out;
  }

 private:
  // Calls may come from either parser (harmony's come from the first).
  Delta route(Delta in, bool at_end, bool truncated) {
    Delta out;
    if (tools_) {
      out = tools_->feed(in.content);
      if (at_end) out.append(tools_->finish(truncated));
      out.reasoning = std::move(in.reasoning);
      for (auto& call : in.tool_calls) out.tool_calls.push_back(std::move(call));
    } else {
      out = std::move(in);
    }
    filter_.apply(out.tool_calls);
    return out;
  }

  std::unique_ptr<StreamParser> reasoning_;
  std::unique_ptr<StreamParser> tools_;
  CallFilter filter_;
};

}  // namespace

ToolChoice ToolChoice::from_json(const nlohmann::json& value) {
  if (value.is_null()) return {};
  if (value.is_string()) {
    auto s = value.get<std::string>();
    if (s == "auto") return {};
    if (s == "none") return {ToolChoiceMode::None, ""};
    if (s == "required") return {ToolChoiceMode::Required, ""};
    throw Error("tool_choice: expected \"auto\", \"none\", \"required\" or a function, got \"" + s + "\"");
  }
  if (value.is_object() && value.contains("function") && value["function"].is_object() &&
      value["function"].contains("name") && value["function"]["name"].is_string())
    return {ToolChoiceMode::Named, value["function"]["name"].get<std::string>()};
  throw Error("tool_choice: expected a string or {\"type\": \"function\", \"function\": {\"name\": ...}}");
}

std::unique_ptr<StreamParser> make_composed_parser(std::unique_ptr<StreamParser> reasoning,
                                                   std::unique_ptr<StreamParser> tools, const ParserOptions& options) {
  return std::make_unique<ComposedParser>(std::move(reasoning), std::move(tools),
                                          CallFilter(options.tool_choice, options.parallel_tool_calls));
}

}  // namespace tessera::tools
