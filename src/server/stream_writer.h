// Writes the server-sent events of every streaming response from one thread. With a thread per
// connection, each engine step would wake every streaming connection's thread (one context
// switch per stream per token); here a step wakes this one thread, which writes all the ready
// events. The connection's thread just waits until its response is over.
#pragma once
#include <httplib.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tessera::server {

class StreamWriter {
 public:
  enum class Pump { More, Finished, Gone };
  // Writes whatever the response has ready without blocking; Finished once it called
  // sink.done(), Gone when a write failed (the client left).
  using PumpFn = std::function<Pump(httplib::DataSink&)>;

  StreamWriter();
  ~StreamWriter();
  StreamWriter(const StreamWriter&) = delete;
  StreamWriter& operator=(const StreamWriter&) = delete;

  // On the connection's thread (inside httplib's content provider): hands the response to the
  // writer thread and blocks until it is finished (true) or the client left or the server
  // stops (false).
  bool serve(PumpFn pump, httplib::DataSink& sink);
  // Some response has new events. Cheap when called for many streams in one engine step.
  void wake();
  // Ends every response still being served (false to their serve()) and joins the thread.
  void stop();

 private:
  struct Entry {
    PumpFn pump;
    httplib::DataSink* sink;
    bool over = false;
    bool ok = false;
    std::condition_variable cv;
  };
  void loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Entry*> entries_;
  std::atomic<bool> pending_{false};
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace tessera::server
