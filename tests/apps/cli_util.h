// Runs the `tessera` binary as a user would and captures what it prints.
#pragma once
#include <string>

namespace tessera::test {

struct CliResult {
  int exit_code;
  std::string out;  // stdout
  std::string err;  // stderr
};
// args are passed through the shell; quote accordingly.
CliResult run_tessera(const std::string& args, const std::string& stdin_text = "");

}  // namespace tessera::test
