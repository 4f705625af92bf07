// Helpers shared by the tests: where reference data and fixtures live, and file reading.
#pragma once
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace tessera::test {

// ../shared/reference beside the repository; absent on a user's fresh clone.
std::filesystem::path reference_dir();
// The repository's own fixtures (tests/fixtures).
std::filesystem::path fixtures_dir();
// The build directory (holds the `tessera` binary).
std::filesystem::path binary_dir();
std::string read_file(const std::filesystem::path& path);

}  // namespace tessera::test

// Skips the current test when the shared reference folder is absent.
#define TESSERA_REQUIRE_REFERENCE()                                                          \
  do {                                                                                       \
    if (!std::filesystem::exists(::tessera::test::reference_dir()))                          \
      GTEST_SKIP() << "reference data not found at " << ::tessera::test::reference_dir()     \
                   << " (../shared/reference is only present in the project's workspace)";   \
  } while (0)
