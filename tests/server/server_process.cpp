#include "server_process.h"

#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <regex>
#include <thread>

#include "testutil.h"

namespace tessera::test {

ServerProcess::ServerProcess(const std::string& args) {
  static int counter = 0;
  log_path_ = (std::filesystem::temp_directory_path() /
               ("tessera_serve_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + ".log"))
                  .string();
  std::string cmd = "exec " + (binary_dir() / "tessera").string() + " serve --host 127.0.0.1 --port 0 " +
                    args + " >" + log_path_ + " 2>&1";
  pid_ = ::fork();
  if (pid_ == 0) {
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), (char*)nullptr);
    ::_exit(127);
  }
  // The server prints its bound port first.
  std::regex re("listening on http://127\\.0\\.0\\.1:([0-9]+)");
  for (int i = 0; i < 300 && port_ == 0; ++i) {
    std::smatch m;
    std::string text = log();
    if (std::regex_search(text, m, re))
      port_ = std::stoi(m[1]);
    else
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    int status;
    if (port_ == 0 && ::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      break;
    }
  }
}

ServerProcess::~ServerProcess() {
  stop();
  std::filesystem::remove(log_path_);
}

bool ServerProcess::wait_healthy(double timeout_s) const {
  if (port_ == 0) return false;
  httplib::Client cli("127.0.0.1", port_);
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < end) {
    if (auto r = cli.Get("/health"); r && r->status == 200) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

int ServerProcess::stop() {
  if (pid_ <= 0) return -1;
  ::kill(pid_, SIGTERM);
  int status = 0;
  for (int i = 0; i < 500; ++i) {
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
  return -1;
}

std::string ServerProcess::log() const {
  return std::filesystem::exists(log_path_) ? read_file(log_path_) : "";
}

std::string node_modules_dir() {
  auto dir = std::filesystem::path(TESSERA_SOURCE_DIR) / "tests" / "node_modules";
  return std::filesystem::exists(dir / "openai") ? dir.string() : "";
}

NodeResult run_node(const std::string& script, const std::string& args) {
  auto path = std::filesystem::path(TESSERA_SOURCE_DIR) / "tests" / "server" / "js" / script;
  std::string cmd = "NODE_PATH=" + node_modules_dir() + " node " + path.string() + " " + args + " 2>&1";
  NodeResult r{-1, ""};
  FILE* p = ::popen(cmd.c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace tessera::test
