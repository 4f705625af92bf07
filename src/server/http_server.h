// The server's connections, run by the server itself under httplib's request parsing and routing.
// Debian's cpp-httplib 0.11 never shows a handler its socket, and its writes block with a
// select per call; here each connection's thread reads and writes the socket through
// SocketStream and publishes it (current_socket) while a request is handled, so that a handler
// can tell whether its client is still there and the SSE writer can write without blocking.
#pragma once
#include <httplib.h>

#include <array>
#include <string>

namespace tessera::server {

// A connected socket as an httplib stream: buffered reads, and writes that wait for room up to
// the write timeout. Both timeouts are in milliseconds.
class SocketStream final : public httplib::Stream {
 public:
  SocketStream(int fd, int read_timeout_ms, int write_timeout_ms)
      : fd_(fd), read_timeout_ms_(read_timeout_ms), write_timeout_ms_(write_timeout_ms) {}
  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override { return fd_; }
  bool buffered() const { return pos_ < end_; }

 private:
  int fd_;
  int read_timeout_ms_, write_timeout_ms_;
  std::array<char, 4096> buf_;
  size_t pos_ = 0, end_ = 0;
};

class HttpServer : public httplib::Server {
 public:
  // Debian's build listens with a backlog of 5, which drops the SYNs of a burst of clients and
  // delays them by whole seconds; listening again on the bound socket raises it.
  void raise_backlog(int backlog);

 private:
  // Overrides httplib's per-connection loop (a private virtual, which SSLServer overrides too):
  // keep-alive requests are read and answered through one SocketStream.
  bool process_and_close_socket(socket_t sock) override;
  bool wait_for_request(const SocketStream& strm) const;
};

// The socket of the connection whose request this thread is handling; -1 outside a handler.
int current_socket();
// Whether the peer closed the connection (or it failed), checked without blocking. A client
// that has sent its request and waits for the answer keeps its side open.
bool peer_closed(int fd);

}  // namespace tessera::server
