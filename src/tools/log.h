// Warnings of the parsers (a dropped or malformed call): one line on stderr, or to a sink the
// caller installs (the server, to tag them with the request; tests, to count them).
#pragma once
#include <functional>
#include <string_view>

namespace tessera::tools {

using WarningSink = std::function<void(std::string_view message)>;

void warn(std::string_view message);

// Installs a sink for this thread's warnings; an empty one restores stderr. Returns the old one.
WarningSink set_warning_sink(WarningSink sink);

}  // namespace tessera::tools
