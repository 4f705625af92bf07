#include "command.h"

namespace tessera::app {

std::vector<Command>& commands() {
  static std::vector<Command> all;
  return all;
}

}  // namespace tessera::app
