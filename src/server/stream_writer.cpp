#include "server/stream_writer.h"

#include <algorithm>

namespace tessera::server {

StreamWriter::StreamWriter() : thread_([this] { loop(); }) {}

StreamWriter::~StreamWriter() {
  stop();
}

bool StreamWriter::serve(PumpFn pump, httplib::DataSink& sink) {
  Entry e;
  e.pump = std::move(pump);
  e.sink = &sink;
  std::unique_lock lk(mu_);
  if (stopping_) return false;
  entries_.push_back(&e);
  pending_ = true;  // events may already be queued
  cv_.notify_one();
  e.cv.wait(lk, [&] { return e.over; });
  return e.ok;
}

void StreamWriter::wake() {
  if (pending_.exchange(true)) return;  // already woken for this round
  std::lock_guard lk(mu_);
  cv_.notify_one();
}

void StreamWriter::stop() {
  {
    std::lock_guard lk(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void StreamWriter::loop() {
  std::unique_lock lk(mu_);
  for (;;) {
    // The timeout also catches a response whose events raced with its registration.
    cv_.wait_for(lk, std::chrono::milliseconds(100), [&] { return stopping_ || pending_.load(); });
    if (stopping_) break;
    pending_ = false;
    std::vector<Entry*> round = entries_;
    lk.unlock();
    std::vector<std::pair<Entry*, bool>> over;
    for (Entry* e : round) {
      Pump p = Pump::Gone;
      try {
        p = e->pump(*e->sink);
      } catch (const std::exception&) {
        // A response that cannot be built ends its connection, never the writer.
      }
      if (p != Pump::More) over.emplace_back(e, p == Pump::Finished);
    }
    lk.lock();
    for (auto [e, ok] : over) {
      entries_.erase(std::find(entries_.begin(), entries_.end(), e));
      e->over = true;
      e->ok = ok;
      e->cv.notify_one();
    }
  }
  for (Entry* e : entries_) {
    e->over = true;
    e->cv.notify_one();
  }
  entries_.clear();
}

}  // namespace tessera::server
