#include "cli_util.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "testutil.h"

namespace tessera::test {

CliResult run_tessera(const std::string& args, const std::string& stdin_text) {
  auto tmp = std::filesystem::temp_directory_path() / ("tessera_cli_" + std::to_string(::getpid()));
  std::filesystem::create_directories(tmp);
  auto in = tmp / "stdin", err = tmp / "stderr";
  std::ofstream(in, std::ios::binary) << stdin_text;
  std::string cmd = (binary_dir() / "tessera").string() + " " + args + " <" + in.string() + " 2>" + err.string();
  CliResult r{};
  FILE* p = popen(cmd.c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = read_file(err);
  std::filesystem::remove_all(tmp);
  return r;
}

}  // namespace tessera::test
