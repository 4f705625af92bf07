#include "tokenizer/pattern.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace tessera::tok {

Pattern::Pattern(const nlohmann::json& j, const std::string& where) {
  if (j.is_object() && j.contains("String")) {
    literal_ = j["String"].get<std::string>();
  } else if (j.is_object() && j.contains("Regex")) {
    regex_ = std::make_unique<Regex>(j["Regex"].get<std::string>(), where);
  } else {
    throw Error(where + ": pattern must be {\"String\": ...} or {\"Regex\": ...}");
  }
}

void Pattern::find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const {
  if (regex_) return regex_->find_all(text, out);
  if (literal_.empty()) return;  // an empty literal matches nothing useful; the reference splits nothing
  for (size_t pos = text.find(literal_); pos != std::string_view::npos; pos = text.find(literal_, pos + literal_.size()))
    out.emplace_back(pos, pos + literal_.size());
}

}  // namespace tessera::tok
