// Subcommands of the `tessera` binary. Each cmd_<name>.cpp defines one and registers it with
//   static const tessera::app::Register reg{"name", "one-line summary", run};
// where run(argc, argv) gets the arguments after the subcommand name and returns the exit code.
#pragma once
#include <string>
#include <vector>

namespace tessera::app {

using CommandFn = int (*)(int argc, char** argv);

struct Command {
  std::string name;
  std::string summary;
  CommandFn run;
};

std::vector<Command>& commands();

// The whole of a file a flag names; tessera::Error when it cannot be read.
std::string read_text_file(const std::string& path);

struct Register {
  Register(std::string name, std::string summary, CommandFn run) {
    commands().push_back({std::move(name), std::move(summary), run});
  }
};

}  // namespace tessera::app
