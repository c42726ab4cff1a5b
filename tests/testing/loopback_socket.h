// Raw TCP connections to a server on 127.0.0.1, for tests that must send what an HTTP
// client library would not (partial headers, ambiguous framing, pipelined requests).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdint>
#include <string>

namespace crossreg::testing {

// A blocking connection whose reads give up after `read_timeout_s`; -1 when refused.
inline int ConnectLoopback(int port, double read_timeout_s = 10) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(read_timeout_s);
  tv.tv_usec = static_cast<suseconds_t>((read_timeout_s - static_cast<double>(tv.tv_sec)) * 1e6);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

// False when the peer is gone (no SIGPIPE).
inline bool SendAll(int fd, const std::string& bytes) {
  return send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
}

}  // namespace crossreg::testing
