// tessera: one binary, one subcommand per job (generate, tokenize, template, parse, serve, ...).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>

#include "command.h"

int main(int argc, char** argv) {
  auto& cmds = tessera::app::commands();
  std::sort(cmds.begin(), cmds.end(), [](auto& a, auto& b) { return a.name < b.name; });
  auto usage = [&](FILE* out) {
    std::fprintf(out, "usage: tessera <command> [options]\n\ncommands:\n");
    for (auto& c : cmds) std::fprintf(out, "  %-12s %s\n", c.name.c_str(), c.summary.c_str());
    std::fprintf(out, "\nRun 'tessera <command> --help' for a command's options.\n");
  };
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  if (!std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
    usage(stdout);
    return 0;
  }
  for (auto& c : cmds) {
    if (c.name != argv[1]) continue;
    try {
      return c.run(argc - 1, argv + 1);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tessera %s: error: %s\n", argv[1], e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "tessera: unknown command '%s'\n\n", argv[1]);
  usage(stderr);
  return 2;
}
