// The single SSE writer thread, over socket pairs: responses are pumped when woken and sent as
// HTTP chunks; a failed send, a throwing pump or a reader that stops ends only that connection;
// a stopping server releases every connection still waiting.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "server/stream_writer.h"

using tessera::server::StreamWriter;
using Pump = StreamWriter::Pump;
using namespace std::chrono_literals;

namespace {

// A connected pair: the server's end for the writer, the client's end for the test.
struct Pair {
  int server = -1, client = -1;
  Pair() {
    int fds[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    server = fds[0];
    client = fds[1];
  }
  ~Pair() {
    if (server >= 0) close(server);
    if (client >= 0) close(client);
  }
  // Reads `bytes` bytes (all until EOF when 0) and joins the payloads of the chunks in them.
  std::string read_payload(size_t bytes = 0) const {
    std::string raw;
    char buf[4096];
    while (bytes == 0 || raw.size() < bytes) {
      ssize_t n = read(client, buf, bytes ? std::min(sizeof buf, bytes - raw.size()) : sizeof buf);
      if (n <= 0) break;
      raw.append(buf, size_t(n));
    }
    std::string payload;
    for (size_t at = 0; at < raw.size();) {
      size_t eol = raw.find("\r\n", at);
      size_t len = std::stoul(raw.substr(at, eol - at), nullptr, 16);
      payload += raw.substr(eol + 2, len);
      at = eol + 2 + len + 2;
    }
    return payload;
  }
  void close_server() {
    close(server);
    server = -1;
  }
};

TEST(StreamWriter, SendsEachWakesEventsAsOneChunkUntilFinished) {
  StreamWriter w;
  Pair p;
  std::atomic<int> ready{0};
  int sent = 0;
  std::thread producer([&] {
    for (int i = 0; i < 5; ++i) {
      std::this_thread::sleep_for(5ms);
      ready += 2;
      w.wake();
    }
  });
  bool ok = w.serve(p.server, [&](std::string& out) {
    for (; sent < ready; ++sent) out += "x";
    return sent < 10 ? Pump::More : Pump::Finished;
  });
  producer.join();
  EXPECT_TRUE(ok);
  p.close_server();
  EXPECT_EQ(p.read_payload(), "xxxxxxxxxx");
}

TEST(StreamWriter, AFailedSendEndsOnlyThatConnection) {
  StreamWriter w;
  Pair gone, alive;
  close(gone.client);
  gone.client = -1;
  std::atomic<bool> release{false};
  bool gone_ok = true, alive_ok = false;
  std::thread t([&] {
    gone_ok = w.serve(gone.server, [](std::string& out) {
      out += "x";
      return Pump::More;
    });
  });
  std::thread u([&] {
    alive_ok = w.serve(alive.server, [&](std::string&) { return release ? Pump::Finished : Pump::More; });
  });
  t.join();
  EXPECT_FALSE(gone_ok);
  release = true;
  w.wake();
  u.join();
  EXPECT_TRUE(alive_ok);
}

TEST(StreamWriter, StoppingReleasesWaitingConnections) {
  StreamWriter w;
  Pair p;
  bool ok = true;
  std::thread t([&] { ok = w.serve(p.server, [](std::string&) { return Pump::More; }); });
  std::this_thread::sleep_for(20ms);
  w.stop();
  t.join();
  EXPECT_FALSE(ok);
  EXPECT_FALSE(w.serve(p.server, [](std::string&) { return Pump::More; }));  // refused after stop
}

TEST(StreamWriter, AThrowingPumpEndsItsConnectionNotTheWriter) {
  StreamWriter w;
  Pair a, b;
  EXPECT_FALSE(w.serve(a.server, [](std::string&) -> Pump { throw std::runtime_error("bad chunk"); }));
  EXPECT_TRUE(w.serve(b.server, [](std::string&) { return Pump::Finished; }));
}

// A reader that stops leaves its chunks waiting in the writer: the others keep streaming, and
// it is dropped once it has taken nothing for the write timeout.
TEST(StreamWriter, AReaderThatStopsDelaysOnlyItself) {
  StreamWriter w(2s);
  Pair stalled, reader;
  int small = 4096;
  setsockopt(stalled.server, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
  std::atomic<int> step{0};
  const std::string big(16384, 's');
  bool stalled_ok = true, reader_ok = false;
  std::thread s([&] {
    int sent = 0;
    stalled_ok = w.serve(stalled.server, [&](std::string& out) {
      for (; sent < step; ++sent) out += big;
      return Pump::More;
    });
  });
  const int steps = 50;
  std::thread r([&] {
    int sent = 0;
    reader_ok = w.serve(reader.server, [&](std::string& out) {
      for (; sent < step; ++sent) out += "r";
      return sent < steps ? Pump::More : Pump::Finished;
    });
  });
  // Each "engine step" waits until the reader got the previous one: any stall shows directly.
  auto t0 = std::chrono::steady_clock::now();
  std::string got;
  for (int i = 1; i <= steps; ++i) {
    step = i;
    w.wake();
    got += reader.read_payload(6);  // "1\r\nr\r\n"
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.join();
  EXPECT_TRUE(reader_ok);
  EXPECT_EQ(got, std::string(steps, 'r'));
  EXPECT_LT(seconds, 1.0) << "the reader waited on the stalled connection";
  s.join();
  EXPECT_FALSE(stalled_ok);  // dropped after the write timeout
}

}  // namespace
