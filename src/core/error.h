// Errors: every failure the user can cause (bad file, bad config, bad input) is a tessera::Error
// with a message that names the file, tensor or field at fault.
#pragma once
#include <stdexcept>
#include <string>

namespace tessera {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace tessera

// TESSERA_CHECK(cond, "message " + detail): throws tessera::Error when cond is false.
#define TESSERA_CHECK(cond, msg)                     \
  do {                                               \
    if (!(cond)) throw ::tessera::Error(msg);        \
  } while (0)
