// Starts `tessera serve` on a free loopback port for a test and stops it afterwards.
#pragma once
#include <sys/types.h>

#include <string>

namespace tessera::test {

class ServerProcess {
 public:
  // args: everything after `tessera serve` except --host/--port.
  explicit ServerProcess(const std::string& args);
  ~ServerProcess();
  int port() const { return port_; }
  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // Waits until GET /health answers 200; false after `timeout_s`.
  bool wait_healthy(double timeout_s = 30) const;
  // SIGTERM, then the exit code (-1 if it did not exit cleanly).
  int stop();
  std::string log() const;

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  std::string log_path_;
};

struct NodeResult {
  int exit_code;
  std::string output;
};
// Runs a script from tests/server/js with the given arguments; stdout and stderr together.
NodeResult run_node(const std::string& script, const std::string& args);
// tests/node_modules, or empty when `npm ci` has not been run there.
std::string node_modules_dir();

}  // namespace tessera::test
