#include "cuda_testutil.h"

#include <cstdlib>
#include <memory>

#include "backend/cuda_loader.h"
#include "testutil.h"

namespace tessera::test {

Backend* cuda_backend(std::string* why) {
  static std::string error;
  static std::unique_ptr<Backend> be = load_cuda_backend(0, &error);
  if (!be && why) *why = error;
  return be.get();
}

std::filesystem::path cuda_fixtures_dir() {
  if (const char* env = std::getenv("TESSERA_FIXTURES_DIR"); env && *env) return env;
  return fixtures_dir();
}

}  // namespace tessera::test
