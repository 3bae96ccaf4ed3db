// Test-only stand-ins for unreachable controllers on loopback: a listener that accepts
// connections into the kernel's backlog and never answers (a stopped, SIGSTOP'd
// controller), and a port that nothing listens on (a dead one).
// Thread safety: one owner per HungListener.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

namespace tessera::testing {

class HungListener {
 public:
  HungListener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    socklen_t len = sizeof(addr);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    EXPECT_EQ(::listen(fd_, 16), 0);
  }
  ~HungListener() { ::close(fd_); }
  HungListener(const HungListener&) = delete;
  HungListener& operator=(const HungListener&) = delete;

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// http://127.0.0.1:PORT of a port that was free a moment ago; nothing listens on it.
inline std::string DeadUrl() {
  HungListener bound;
  return bound.url();
}

}  // namespace tessera::testing
