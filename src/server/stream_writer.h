// Writes the server-sent events of every streaming response from one thread. With a thread per
// connection, each engine step would wake every streaming connection's thread (one context
// switch per stream per token); here a step wakes this one thread, which sends each connection
// its ready events as one HTTP chunk in one non-blocking send. What a socket cannot take waits
// in that connection's buffer until poll says there is room, so a client that stops reading
// delays only itself, and is dropped once it has taken nothing for the write timeout. The
// connection's thread just waits until its response is over.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tessera::server {

class StreamWriter {
 public:
  enum class Pump { More, Finished };
  // Appends the response's ready SSE events to `out` without blocking; Finished once its last
  // event is in. A pump that throws ends its connection.
  using PumpFn = std::function<Pump(std::string& out)>;

  explicit StreamWriter(std::chrono::milliseconds write_timeout = std::chrono::seconds(5));
  ~StreamWriter();
  StreamWriter(const StreamWriter&) = delete;
  StreamWriter& operator=(const StreamWriter&) = delete;

  // On the connection's thread, once the headers of a chunked response are out: the writer
  // sends the response's events to socket `fd` as chunks. Blocks until the last one is sent
  // (true: the caller ends the body), or the client left or stopped reading for the write
  // timeout, or the server stops (false).
  bool serve(int fd, PumpFn pump);
  // Some response has new events. Cheap when called for many streams in one engine step.
  void wake();
  // Ends every response still being served (false to their serve()) and joins the thread.
  void stop();

 private:
  using Clock = std::chrono::steady_clock;
  struct Conn {
    int fd;
    PumpFn pump;
    std::string out;    // chunks not yet taken by the socket
    bool room = false;  // poll found the socket writable (or failed: the send tells which)
    bool finished = false;
    Clock::time_point last_progress;
    bool over = false;  // guarded by mu_, like ok
    bool ok = false;
    std::condition_variable cv;
  };
  void loop();
  // Sends what it can of c.out, then, with nothing left, pumps the response and sends its new
  // chunk. False when the connection failed.
  bool service(Conn& c);
  bool send_out(Conn& c);
  void end(Conn* c, bool ok);

  const std::chrono::milliseconds write_timeout_;
  int wake_fd_;  // eventfd: wake() writes, the writer's poll reads
  std::atomic<bool> woken_{false};
  std::mutex mu_;
  std::vector<Conn*> joining_;  // registered by serve(), taken by the writer
  std::string scratch_;         // the writer thread's: one pump's events
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace tessera::server
