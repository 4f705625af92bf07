// Shared by the CUDA tests: the backend loaded once per process (or the reason it is absent).
#pragma once
#include <gtest/gtest.h>

#include <string>

#include "backend/backend.h"

namespace tessera::test {

// Null when the plugin or a GPU is missing; *why then says what.
Backend* cuda_backend(std::string* why);

}  // namespace tessera::test

#define TESSERA_REQUIRE_CUDA(be)                                                          \
  std::string cuda_skip_reason_;                                                          \
  ::tessera::Backend* be = ::tessera::test::cuda_backend(&cuda_skip_reason_);             \
  if (!be) GTEST_SKIP() << cuda_skip_reason_ << " (GPU tests need a GPU and the plugin)"
