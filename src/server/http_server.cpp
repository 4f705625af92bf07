#include "server/http_server.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

namespace tessera::server {
namespace {

thread_local int t_current_socket = -1;

bool wait_for(int fd, short events, int timeout_ms) {
  pollfd p{fd, events, 0};
  int n;
  do {
    n = ::poll(&p, 1, timeout_ms);
  } while (n < 0 && errno == EINTR);
  return n > 0;
}

void ip_and_port(const sockaddr_storage& addr, socklen_t len, std::string& ip, int& port) {
  char host[NI_MAXHOST];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, host, sizeof host, nullptr, 0,
                  NI_NUMERICHOST) == 0)
    ip = host;
  if (addr.ss_family == AF_INET)
    port = ntohs(reinterpret_cast<const sockaddr_in&>(addr).sin_port);
  else if (addr.ss_family == AF_INET6)
    port = ntohs(reinterpret_cast<const sockaddr_in6&>(addr).sin6_port);
}

int to_ms(time_t sec, time_t usec) {
  return int(sec * 1000 + usec / 1000);
}

}  // namespace

bool SocketStream::is_readable() const {
  return buffered() || wait_for(fd_, POLLIN, read_timeout_ms_);
}

bool SocketStream::is_writable() const {
  return wait_for(fd_, POLLOUT, write_timeout_ms_);
}

ssize_t SocketStream::read(char* ptr, size_t size) {
  if (!buffered()) {
    // httplib reads the request line and headers a byte at a time: read ahead.
    ssize_t n;
    while ((n = ::recv(fd_, buf_.data(), buf_.size(), MSG_DONTWAIT)) < 0 &&
           (errno == EAGAIN || errno == EINTR))
      if (errno == EAGAIN && !wait_for(fd_, POLLIN, read_timeout_ms_)) return -1;
    if (n <= 0) return n;
    pos_ = 0;
    end_ = size_t(n);
  }
  size_t n = std::min(size, end_ - pos_);
  std::memcpy(ptr, buf_.data() + pos_, n);
  pos_ += n;
  return ssize_t(n);
}

ssize_t SocketStream::write(const char* ptr, size_t size) {
  ssize_t n;
  while ((n = ::send(fd_, ptr, size, MSG_DONTWAIT | MSG_NOSIGNAL)) < 0 && (errno == EAGAIN || errno == EINTR))
    if (errno == EAGAIN && !wait_for(fd_, POLLOUT, write_timeout_ms_)) return -1;
  return n;
}

void SocketStream::get_remote_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (getpeername(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) ip_and_port(addr, len, ip, port);
}

void SocketStream::get_local_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) ip_and_port(addr, len, ip, port);
}

void HttpServer::raise_backlog(int backlog) {
  ::listen(svr_sock_, backlog);
}

bool HttpServer::process_and_close_socket(socket_t sock) {
  // Headers and body (and each SSE chunk) go out as separate writes: without TCP_NODELAY,
  // Nagle's algorithm holds the later ones until the client's delayed ACK (~40 ms).
  int one = 1;
  setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  SocketStream strm(sock, to_ms(read_timeout_sec_, read_timeout_usec_),
                    to_ms(write_timeout_sec_, write_timeout_usec_));
  t_current_socket = sock;
  bool ok = false;
  for (size_t left = keep_alive_max_count_; left > 0 && wait_for_request(strm); --left) {
    bool closed = false;
    ok = process_request(strm, /*close_connection=*/left == 1, closed, nullptr);
    if (!ok || closed) break;
  }
  t_current_socket = -1;
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ok;
}

// Waits up to the keep-alive timeout for the next request, in slices so that a stopping server
// is not held up by idle connections.
bool HttpServer::wait_for_request(const SocketStream& strm) const {
  if (strm.buffered()) return true;
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(keep_alive_timeout_sec_);
  while (svr_sock_ != INVALID_SOCKET) {
    if (wait_for(strm.socket(), POLLIN, 100)) return true;
    if (std::chrono::steady_clock::now() >= end) return false;
  }
  return false;
}

int current_socket() {
  return t_current_socket;
}

bool peer_closed(int fd) {
  pollfd p{fd, POLLRDHUP, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

}  // namespace tessera::server
