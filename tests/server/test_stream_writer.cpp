// The single SSE writer thread: responses are pumped when woken, end when finished or gone,
// and a stopping server releases every connection still waiting.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "server/stream_writer.h"

using tessera::server::StreamWriter;
using Pump = StreamWriter::Pump;

namespace {

struct FakeSink {
  httplib::DataSink sink;
  std::string written;
  bool done = false;
  bool fail_writes = false;
  FakeSink() {
    sink.write = [this](const char* d, size_t n) {
      if (fail_writes) return false;
      written.append(d, n);
      return true;
    };
    sink.done = [this] { done = true; };
  }
};

TEST(StreamWriter, PumpsOnEveryWakeUntilFinished) {
  StreamWriter w;
  FakeSink fs;
  std::atomic<int> ready{0};
  int sent = 0;
  std::thread producer([&] {
    for (int i = 0; i < 5; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      ++ready;
      w.wake();
    }
  });
  bool ok = w.serve(
      [&](httplib::DataSink& sink) {
        for (; sent < ready; ++sent) sink.write("x", 1);
        if (sent < 5) return Pump::More;
        sink.done();
        return Pump::Finished;
      },
      fs.sink);
  producer.join();
  EXPECT_TRUE(ok);
  EXPECT_EQ(fs.written, "xxxxx");
  EXPECT_TRUE(fs.done);
}

TEST(StreamWriter, AFailedWriteEndsOnlyThatResponse) {
  StreamWriter w;
  FakeSink gone, alive;
  gone.fail_writes = true;
  std::atomic<bool> release{false};
  bool gone_ok = true, alive_ok = false;
  std::thread t([&] {
    gone_ok =
        w.serve([](httplib::DataSink& s) { return s.write("x", 1) ? Pump::More : Pump::Gone; }, gone.sink);
  });
  std::thread u([&] {
    alive_ok = w.serve(
        [&](httplib::DataSink& s) {
          if (!release) return Pump::More;
          s.done();
          return Pump::Finished;
        },
        alive.sink);
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
  FakeSink fs;
  bool ok = true;
  std::thread t([&] { ok = w.serve([](httplib::DataSink&) { return Pump::More; }, fs.sink); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  w.stop();
  t.join();
  EXPECT_FALSE(ok);
  EXPECT_FALSE(w.serve([](httplib::DataSink&) { return Pump::More; }, fs.sink));  // refused after stop
}

TEST(StreamWriter, AThrowingResponseEndsItsConnectionNotTheWriter) {
  StreamWriter w;
  FakeSink a, b;
  EXPECT_FALSE(w.serve([](httplib::DataSink&) -> Pump { throw std::runtime_error("bad chunk"); }, a.sink));
  EXPECT_TRUE(w.serve(
      [](httplib::DataSink& s) {
        s.done();
        return Pump::Finished;
      },
      b.sink));
}

}  // namespace
