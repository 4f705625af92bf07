#include "testutil.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace tessera::test {

std::filesystem::path reference_dir() { return TESSERA_REFERENCE_DIR; }
// TESSERA_FIXTURES_DIR overrides the build-time path, for runs from a copied build (a GPU machine).
std::filesystem::path fixtures_dir() {
  if (const char* env = std::getenv("TESSERA_FIXTURES_DIR"); env && *env) return env;
  return std::filesystem::path(TESSERA_SOURCE_DIR) / "tests" / "fixtures";
}
std::filesystem::path binary_dir() { return TESSERA_BINARY_DIR; }

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace tessera::test
