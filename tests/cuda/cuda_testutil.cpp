#include "cuda_testutil.h"

#include <memory>

#include "backend/cuda_loader.h"

namespace tessera::test {

Backend* cuda_backend(std::string* why) {
  static std::string error;
  static std::unique_ptr<Backend> be = load_cuda_backend(0, &error);
  if (!be && why) *why = error;
  return be.get();
}

}  // namespace tessera::test
