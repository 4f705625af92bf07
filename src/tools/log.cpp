#include "tools/log.h"

#include <cstdio>

namespace tessera::tools {
namespace {
thread_local WarningSink sink;
}

void warn(std::string_view message) {
  if (sink) return sink(message);
  std::fprintf(stderr, "tessera tools: warning: %.*s\n", static_cast<int>(message.size()), message.data());
}

WarningSink set_warning_sink(WarningSink new_sink) {
  std::swap(sink, new_sink);
  return new_sink;
}

}  // namespace tessera::tools
