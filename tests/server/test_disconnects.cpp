// Clients that leave or stop reading, against the server in-process on the bundled model: a
// non-streaming request whose client leaves is cancelled and its KV blocks freed; a streaming
// client that stops reading does not slow the other streams.
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "model_testutil.h"
#include "server/server.h"

using namespace tessera;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct KjvServer {
  test::TestModel m =
      test::load_test_model(std::filesystem::path(TESSERA_SOURCE_DIR) / "models" / "tessera-kjv");
  std::unique_ptr<AsyncEngine> engine;
  std::unique_ptr<server::Server> srv;
  int port = 0;

  explicit KjvServer(std::chrono::seconds write_timeout = std::chrono::seconds(5)) {
    EngineConfig ec;
    ec.num_blocks = 2200;  // 64 sequences of 503 tokens and 4 of 103, or 16 of 1003
    engine = std::make_unique<AsyncEngine>(std::make_unique<Engine>(m.model(), *m.backend, ec));
    server::ServerConfig sc;
    sc.port = 0;
    sc.served_model_name = "kjv";
    sc.log_requests = false;
    sc.write_timeout = write_timeout;
    srv = std::make_unique<server::Server>(sc);
    port = srv->start();
    server::ModelInfo info;
    info.vocab_size = m.model().vocab_size();
    info.max_model_len = m.model().max_context();
    info.kv_capacity_tokens = int64_t(ec.num_blocks) * ec.block_size;
    info.max_num_seqs = ec.scheduler.max_num_seqs;
    srv->set_model(*engine, nullptr, info);
  }
  ~KjvServer() { srv->stop(); }

  double metric(const std::string& name) const {
    httplib::Client cli("127.0.0.1", port);
    auto r = cli.Get("/metrics");
    if (!r) return -1;
    size_t at = r->body.find("\n" + name + " ");
    return at == std::string::npos ? -1 : std::stod(r->body.substr(at + name.size() + 2));
  }
  bool idle() const {
    return metric("tessera_kv_blocks_used") == 0 && metric("tessera_num_requests_running") == 0;
  }
};

bool wait_until(const std::function<bool()>& done, double timeout_s) {
  auto t0 = Clock::now();
  while (!done()) {
    if (seconds_since(t0) > timeout_s) return false;
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

// A raw client socket that sends one POST /v1/completions; `rcvbuf` > 0 shrinks its receive
// buffer so that a client that does not read fills it quickly.
int send_completion(int port, const std::string& body, int rcvbuf = 0) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (rcvbuf > 0) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  std::string req =
      "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
      "Content-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  EXPECT_EQ(send(fd, req.data(), req.size(), MSG_NOSIGNAL), ssize_t(req.size()));
  return fd;
}

// Bytes the server's end of client socket `fd` has queued and not yet sent (/proc/net/tcp).
long server_send_queue(int server_port, int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  char local[16], remote[16];
  std::snprintf(local, sizeof local, ":%04X", server_port);
  std::snprintf(remote, sizeof remote, ":%04X", ntohs(addr.sin_port));
  std::ifstream f("/proc/net/tcp");
  std::string line;
  while (std::getline(f, line)) {
    std::istringstream in(line);
    std::string sl, l, r, st, queues;
    in >> sl >> l >> r >> st >> queues;
    if (l.ends_with(local) && r.ends_with(remote))
      return std::stol(queues.substr(0, queues.find(':')), nullptr, 16);
  }
  return -1;
}

TEST(ServerDisconnects, ANonStreamingRequestWhoseClientLeavesIsCancelled) {
  KjvServer s;
  // 16 x 1000 tokens: seconds of work, so the client leaves long before the end.
  int fd =
      send_completion(s.port, R"({"prompt": [1, 2, 3], "max_tokens": 1000, "n": 16, "ignore_eos": true})");
  ASSERT_TRUE(wait_until([&] { return s.metric("tessera_num_requests_running") > 0; }, 30));
  close(fd);
  ASSERT_TRUE(wait_until([&] { return s.idle(); }, 30)) << "the KV blocks never returned";
  EXPECT_LT(s.metric("tessera_generation_tokens_total"), 16 * 1000) << "the request ran to its end";
}

// One streaming client takes nothing while four others stream: they must finish as if it were
// not there, not after the write timeout that finally drops it.
TEST(ServerDisconnects, AStreamingClientThatStopsReadingDoesNotSlowTheOthers) {
  KjvServer s(/*write_timeout=*/std::chrono::seconds(60));
  // 64 choices with logprobs: ~40 KB of events per step, enough to fill the ~4 MB that
  // loopback lets a socket's send buffer grow to within a second.
  int stalled = send_completion(s.port,
                                R"({"prompt": [1, 2, 3], "max_tokens": 500, "n": 64, "stream": true,)"
                                R"( "ignore_eos": true, "logprobs": 5})",
                                4096);
  // Full: the socket's send queue stops growing although the sequences keep generating.
  long queued = -1;
  bool full = wait_until(
      [&] {
        long before = queued;
        std::this_thread::sleep_for(300ms);
        queued = server_send_queue(s.port, stalled);
        return queued > 0 && queued == before;
      },
      60);
  ASSERT_TRUE(full) << "the stalled client's socket never filled (" << queued << " bytes queued)";

  const int others = 4, tokens = 100;
  std::vector<double> took(others, 0), longest_gap(others, 0);
  std::vector<std::string> bodies(others);
  std::vector<std::thread> threads;
  for (int i = 0; i < others; ++i)
    threads.emplace_back([&, i] {
      httplib::Client cli("127.0.0.1", s.port);
      cli.set_read_timeout(120);
      httplib::Request req;
      req.method = "POST";
      req.path = "/v1/completions";
      req.body = R"({"prompt": [4, 5, 6], "max_tokens": )" + std::to_string(tokens) +
                 R"(, "stream": true, "ignore_eos": true, "return_token_ids": true})";
      req.set_header("Content-Type", "application/json");
      auto t0 = Clock::now(), last = t0;
      req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
        longest_gap[size_t(i)] = std::max(longest_gap[size_t(i)], seconds_since(last));
        last = Clock::now();
        bodies[size_t(i)].append(data, n);
        return true;
      };
      httplib::Response res;
      httplib::Error err;
      EXPECT_TRUE(cli.send(req, res, err)) << httplib::to_string(err);
      took[size_t(i)] = seconds_since(t0);
    });
  for (auto& t : threads) t.join();
  for (int i = 0; i < others; ++i) {
    EXPECT_NE(bodies[size_t(i)].find(R"("finish_reason":"length")"), std::string::npos) << bodies[size_t(i)];
    // Unhindered, 100 tokens take well under a second; held behind the stalled socket, they
    // would wait for the 60 s write timeout.
    EXPECT_LT(took[size_t(i)], 20.0) << "client " << i;
    EXPECT_LT(longest_gap[size_t(i)], 10.0) << "client " << i;
  }
  close(stalled);  // its pending output fails, the writer drops it and its sequence is cancelled
  EXPECT_TRUE(wait_until([&] { return s.idle(); }, 30)) << "the KV blocks never returned";
}

}  // namespace
