#include "command.h"

#include <fstream>
#include <iterator>

#include "core/error.h"

namespace tessera::app {

std::vector<Command>& commands() {
  static std::vector<Command> all;
  return all;
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TESSERA_CHECK(in, "cannot read " + path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace tessera::app
