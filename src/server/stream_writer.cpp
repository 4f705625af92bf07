#include "server/stream_writer.h"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

#include "core/error.h"

namespace tessera::server {
namespace {

void signal_eventfd(int fd) {
  uint64_t one = 1;
  while (::write(fd, &one, sizeof one) < 0 && errno == EINTR) {
  }
}

}  // namespace

StreamWriter::StreamWriter(std::chrono::milliseconds write_timeout)
    : write_timeout_(write_timeout), wake_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  TESSERA_CHECK(wake_fd_ >= 0, "cannot create the SSE writer's eventfd");
  thread_ = std::thread([this] { loop(); });
}

StreamWriter::~StreamWriter() {
  stop();
  ::close(wake_fd_);
}

bool StreamWriter::serve(int fd, PumpFn pump) {
  Conn c;
  c.fd = fd;
  c.pump = std::move(pump);
  std::unique_lock lk(mu_);
  if (stopping_) return false;
  joining_.push_back(&c);
  lk.unlock();
  wake();  // events may already be queued
  lk.lock();
  c.cv.wait(lk, [&] { return c.over; });
  return c.ok;
}

void StreamWriter::wake() {
  if (woken_.exchange(true)) return;  // already woken for this round
  signal_eventfd(wake_fd_);
}

void StreamWriter::stop() {
  {
    std::lock_guard lk(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  signal_eventfd(wake_fd_);
  if (thread_.joinable()) thread_.join();
}

void StreamWriter::end(Conn* c, bool ok) {
  std::lock_guard lk(mu_);
  c->over = true;
  c->ok = ok;
  c->cv.notify_one();
}

bool StreamWriter::send_out(Conn& c) {
  ssize_t n;
  while ((n = ::send(c.fd, c.out.data(), c.out.size(), MSG_DONTWAIT | MSG_NOSIGNAL)) < 0 && errno == EINTR) {
  }
  if (n < 0) return errno == EAGAIN;  // EAGAIN: no room now; anything else: the client is gone
  c.out.erase(0, size_t(n));
  if (n > 0) c.last_progress = Clock::now();
  return true;
}

bool StreamWriter::service(Conn& c) {
  if (!c.out.empty() && !send_out(c)) return false;
  if (!c.out.empty() || c.finished) return true;
  std::string& events = scratch_;
  events.clear();
  try {
    c.finished = c.pump(events) == Pump::Finished;
  } catch (const std::exception&) {
    return false;  // a response that cannot be built ends its connection, never the writer
  }
  if (events.empty()) return true;
  // One HTTP/1.1 chunk: its size in hex, CRLF, the data, CRLF.
  char head[20];
  c.out.append(head, size_t(std::snprintf(head, sizeof head, "%zx\r\n", events.size())));
  c.out += events;
  c.out += "\r\n";
  c.last_progress = Clock::now();
  return send_out(c);
}

void StreamWriter::loop() {
  pthread_setname_np(pthread_self(), "tessera-sse");
  // Below the engine's threads. When they use every core, the writer preempting one of them
  // stalls the whole step at its next barrier, while the events can wait for a gap (a step's
  // single-threaded parts, the engine thread's spin-waits). On 2 cores this took the server's
  // step-time overhead at 64 streams from ~10% to ~3% (bench/RESULTS.md).
  setpriority(PRIO_PROCESS, id_t(gettid()), 10);
  std::vector<Conn*> conns, polled;
  std::vector<pollfd> fds;
  for (;;) {
    // Sleep until woken, or until a socket with waiting output has room or times out.
    fds.assign(1, pollfd{wake_fd_, POLLIN, 0});
    polled.clear();
    auto now = Clock::now();
    int timeout_ms = -1;
    for (Conn* c : conns)
      if (!c->out.empty()) {
        fds.push_back(pollfd{c->fd, POLLOUT, 0});
        polled.push_back(c);
        auto left = std::chrono::ceil<std::chrono::milliseconds>(c->last_progress + write_timeout_ - now);
        int ms = int(std::max<int64_t>(0, left.count()));
        timeout_ms = timeout_ms < 0 ? ms : std::min(timeout_ms, ms);
      }
    ::poll(fds.data(), fds.size(), timeout_ms);
    bool woken = fds[0].revents & POLLIN;
    if (woken) {
      uint64_t n;
      ssize_t r = ::read(wake_fd_, &n, sizeof n);
      (void)r;
      woken_ = false;
    }
    for (size_t i = 0; i < polled.size(); ++i) polled[i]->room = fds[i + 1].revents != 0;
    {
      std::lock_guard lk(mu_);
      if (stopping_) break;
      conns.insert(conns.end(), joining_.begin(), joining_.end());
      joining_.clear();
    }
    now = Clock::now();
    std::erase_if(conns, [&](Conn* c) {
      bool ready = c->out.empty() ? woken : c->room;
      c->room = false;
      if (ready && !service(*c)) {
        end(c, false);
        return true;
      }
      if (c->finished && c->out.empty()) {
        end(c, true);
        return true;
      }
      if (!c->out.empty() && now - c->last_progress >= write_timeout_) {
        end(c, false);  // the client stopped reading
        return true;
      }
      return false;
    });
  }
  std::lock_guard lk(mu_);
  conns.insert(conns.end(), joining_.begin(), joining_.end());
  joining_.clear();
  for (Conn* c : conns) {
    c->over = true;
    c->cv.notify_one();
  }
}

}  // namespace tessera::server
