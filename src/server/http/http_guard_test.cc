// The HTTP layer's limits (server/http/http_guard.h) on loopback: a small fixed pool, slow
// header clients that outnumber it, the header deadline, the per-source cap (plain and
// TLS), and the two options through the controller's Server. Every wait is bounded.
#include "server/http/http_guard.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/testing/self_signed_cert.h"
#include "server/http/server_fixture.h"

namespace tessera {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds kTrickleEvery{200};

// A guarded server on 127.0.0.1 (a free port) with a fixed pool of `threads` workers:
// GET /ok answers "ok"; POST /echo answers its body after 300 ms.
class TestServer {
 public:
  explicit TestServer(const HttpGuardOptions& options, size_t threads = 16,
                      const std::string& cert = "", const std::string& key = "") {
    StatusOr<std::unique_ptr<httplib::Server>> made = NewGuardedHttpServer(
        options, cert, key, [threads] { return new httplib::ThreadPool(threads); });
    EXPECT_TRUE(made.ok()) << made.status().ToString();
    if (!made.ok()) {
      return;
    }
    http_ = std::move(made).value();
    http_->Get("/ok", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("ok", "text/plain");
    });
    http_->Post("/echo", [](const httplib::Request& req, httplib::Response& res) {
      std::this_thread::sleep_for(milliseconds(300));
      res.set_content(req.body, "text/plain");
    });
    http_->set_read_timeout(5, 0);
    http_->set_keep_alive_timeout(5);
    int listen_fd = -1;  // the library listens with a backlog of 5: 40 connects overflow it
    http_->set_socket_options([&listen_fd](socket_t fd) {
      int yes = 1;
      ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
      listen_fd = fd;
    });
    port_ = http_->bind_to_any_port("127.0.0.1");
    if (listen_fd >= 0) {
      ::listen(listen_fd, 128);
    }
    thread_ = std::thread([this] { http_->listen_after_bind(); });
    for (int i = 0; i < 2000 && !http_->is_running(); ++i) {
      std::this_thread::sleep_for(milliseconds(1));
    }
  }
  ~TestServer() {
    if (http_ != nullptr) {
      http_->stop();
    }
    if (thread_.joinable()) {
      thread_.join();
    }
  }

  int port() const { return port_; }

 private:
  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  int port_ = -1;
};

int Connect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool Send(int fd, const std::string& bytes) {
  return ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
}

// What the server did with a connection within `limit`: the bytes it sent, and whether
// it closed the connection (EOF or reset). Stops early once `enough` has been read.
struct Seen {
  std::string bytes;
  bool closed = false;
};
Seen Watch(int fd, milliseconds limit, const std::string& enough = "") {
  Seen seen;
  const Clock::time_point until = Clock::now() + limit;
  while (Clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    const auto left = std::chrono::duration_cast<milliseconds>(until - Clock::now());
    if (::poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 0))) <= 0) {
      break;
    }
    char buf[4096];
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) {
      seen.closed = true;
      break;
    }
    seen.bytes.append(buf, static_cast<size_t>(n));
    if (!enough.empty() && seen.bytes.find(enough) != std::string::npos) {
      break;
    }
  }
  return seen;
}

// A whole GET /ok on its own connection: the status line's code, or 0.
int GetOk(int port) {
  const int fd = Connect(port);
  if (fd < 0) {
    return 0;
  }
  Send(fd, "GET /ok HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
  const Seen seen = Watch(fd, milliseconds(2000));
  ::close(fd);
  return seen.bytes.rfind("HTTP/1.1 ", 0) == 0 ? std::atoi(seen.bytes.c_str() + 9) : 0;
}

// Connections from 127.0.0.1 that each send the start of a request, then one more
// header byte every 200 ms, never ending the headers; each notes when the server
// closed it (EOF or reset, not a mere answer) and what it answered. With
// one_request_first, each first makes a whole request on the connection (keep-alive)
// and reads its answer.
class Tricklers {
 public:
  Tricklers(int port, int n, bool one_request_first = false) {
    for (int i = 0; i < n; ++i) {
      Conn c;
      c.fd = Connect(port);
      if (c.fd >= 0 && one_request_first) {
        Send(c.fd, "GET /ok HTTP/1.1\r\nHost: t\r\n\r\n");
        c.first_answer = Watch(c.fd, milliseconds(2000), "\r\n\r\nok").bytes;
      }
      conns_.push_back(std::move(c));
    }
    start_ = Clock::now();
    for (Conn& c : conns_) {
      Send(c.fd, "GET /ok HTTP/1.1\r\nHost: t\r\nX-Slow: ");
    }
    thread_ = std::thread([this] { Run(); });
  }
  ~Tricklers() {
    stop_ = true;
    thread_.join();
    for (Conn& c : conns_) {
      ::close(c.fd);
    }
  }

  size_t size() const { return conns_.size(); }
  int connected() const {
    int n = 0;
    for (const Conn& c : conns_) {
      n += c.fd >= 0 ? 1 : 0;
    }
    return n;
  }
  std::string first_answer(size_t i) const { return conns_[i].first_answer; }
  // The time from the trickle's start until the server closed connection i; nullopt
  // while it is open.
  std::optional<Clock::duration> closed_after(size_t i) const {
    std::lock_guard<std::mutex> lock(mu_);
    return conns_[i].closed_after;
  }
  std::string answer(size_t i) const {
    std::lock_guard<std::mutex> lock(mu_);
    return conns_[i].answer;
  }
  size_t closed() const {
    size_t n = 0;
    for (size_t i = 0; i < conns_.size(); ++i) {
      n += closed_after(i).has_value() ? 1 : 0;
    }
    return n;
  }

 private:
  struct Conn {
    int fd = -1;
    std::string first_answer;
    std::string answer;
    std::optional<Clock::duration> closed_after;
  };

  void Run() {
    while (!stop_) {
      for (Conn& c : conns_) {
        std::lock_guard<std::mutex> lock(mu_);
        if (c.fd < 0 || c.closed_after) {
          continue;
        }
        pollfd p{c.fd, POLLIN, 0};
        if (::poll(&p, 1, 0) > 0) {
          const Seen seen = Watch(c.fd, milliseconds(100));
          c.answer += seen.bytes;
          if (seen.closed) {
            c.closed_after = Clock::now() - start_;
          }
        }
        if (!c.closed_after && !Send(c.fd, "a")) {
          c.closed_after = Clock::now() - start_;
        }
      }
      std::this_thread::sleep_for(kTrickleEvery);
    }
  }

  std::vector<Conn> conns_;
  Clock::time_point start_;
  mutable std::mutex mu_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Waits (bounded) until `done`; true if it came.
template <typename F>
bool WaitFor(F done, milliseconds limit) {
  const Clock::time_point until = Clock::now() + limit;
  while (!done()) {
    if (Clock::now() >= until) {
      return false;
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
  return true;
}

TEST(HttpGuardTest, GoodRequestIsAnsweredWhileSlowHeadersOutnumberThePool) {
  HttpGuardOptions options;
  options.header_timeout_ms = 10'000;         // the tricklers stay for the whole test
  options.max_connections_per_source = 1000;  // all 41 connections come from 127.0.0.1
  TestServer server(options, 16);
  Tricklers slow(server.port(), 40);
  ASSERT_EQ(slow.connected(), 40);
  std::this_thread::sleep_for(3 * kTrickleEvery);  // every one has reached the server

  httplib::Client client("127.0.0.1", server.port());
  client.set_connection_timeout(2, 0);
  client.set_read_timeout(2, 0);
  const Clock::time_point start = Clock::now();
  httplib::Result res = client.Get("/ok");
  const Clock::duration took = Clock::now() - start;
  ASSERT_TRUE(res) << "no answer in 2 s: " << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, "ok");
  EXPECT_LT(took, milliseconds(1000));
  EXPECT_EQ(slow.closed(), 0u);  // nothing was closed early
}

TEST(HttpGuardTest, TricklingConnectionsAreClosedAtTheDeadline) {
  HttpGuardOptions options;
  options.header_timeout_ms = 1000;
  TestServer server(options, 16);
  Tricklers slow(server.port(), 3);
  ASSERT_EQ(slow.connected(), 3);
  EXPECT_TRUE(WaitFor([&] { return slow.closed() == slow.size(); }, milliseconds(4000)))
      << "trickling connections outlived a 1 s header deadline by 3 s";
  for (size_t i = 0; i < slow.size(); ++i) {
    const std::optional<Clock::duration> after = slow.closed_after(i);
    if (!after) {
      continue;
    }
    EXPECT_GE(*after, milliseconds(800)) << "connection " << i;
    EXPECT_LE(*after, milliseconds(2000)) << "connection " << i;
    const std::string answer = slow.answer(i);
    EXPECT_TRUE(answer.empty() || answer.rfind("HTTP/1.1 408", 0) == 0) << answer;
  }
  EXPECT_EQ(GetOk(server.port()), 200);
}

TEST(HttpGuardTest, LaterRequestOnKeepAliveConnectionHasTheDeadlineToo) {
  HttpGuardOptions options;
  options.header_timeout_ms = 1000;
  TestServer server(options, 16);
  Tricklers slow(server.port(), 2, /*one_request_first=*/true);
  ASSERT_EQ(slow.connected(), 2);
  for (size_t i = 0; i < slow.size(); ++i) {
    EXPECT_EQ(slow.first_answer(i).rfind("HTTP/1.1 200", 0), 0u) << slow.first_answer(i);
  }
  EXPECT_TRUE(WaitFor([&] { return slow.closed() == slow.size(); }, milliseconds(4000)))
      << "a keep-alive connection trickling its second request outlived the deadline";
  for (size_t i = 0; i < slow.size(); ++i) {
    const std::optional<Clock::duration> after = slow.closed_after(i);
    if (after) {
      EXPECT_GE(*after, milliseconds(800)) << "connection " << i;
      EXPECT_LE(*after, milliseconds(2000)) << "connection " << i;
    }
  }
}

TEST(HttpGuardTest, DeadlineSparesBodiesSlowHandlersAndIdleKeepAlive) {
  HttpGuardOptions options;
  options.header_timeout_ms = 250;
  TestServer server(options, 4);
  const int fd = Connect(server.port());
  ASSERT_GE(fd, 0);
  for (int round = 0; round < 2; ++round) {
    // Headers at once; the body 400 ms later; a handler of 300 ms; then 400 ms idle.
    ASSERT_TRUE(Send(fd, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\n"));
    std::this_thread::sleep_for(milliseconds(400));
    ASSERT_TRUE(Send(fd, "hello"));
    const Seen seen = Watch(fd, milliseconds(3000), "\r\n\r\nhello");
    EXPECT_EQ(seen.bytes.rfind("HTTP/1.1 200", 0), 0u) << "round " << round << ": " << seen.bytes;
    EXPECT_NE(seen.bytes.find("\r\n\r\nhello"), std::string::npos) << seen.bytes;
    ASSERT_FALSE(seen.closed) << "round " << round;
    std::this_thread::sleep_for(milliseconds(400));
  }
  ::close(fd);
}

TEST(HttpGuardTest, ConnectionBeyondThePerSourceCapIsAnswered429AndClosed) {
  HttpGuardOptions options;
  options.max_connections_per_source = 4;
  TestServer server(options, 16);
  std::vector<int> held;
  for (int i = 0; i < 4; ++i) {
    held.push_back(Connect(server.port()));
    ASSERT_GE(held.back(), 0);
  }
  std::this_thread::sleep_for(milliseconds(200));  // all four were taken

  const int fifth = Connect(server.port());
  ASSERT_GE(fifth, 0);
  const Clock::time_point start = Clock::now();
  const Seen refused = Watch(fifth, milliseconds(1000));
  EXPECT_TRUE(refused.closed) << "the fifth connection stayed open";
  EXPECT_LT(Clock::now() - start, milliseconds(500));
  EXPECT_EQ(refused.bytes.rfind("HTTP/1.1 429", 0), 0u) << refused.bytes;
  ::close(fifth);

  for (int fd : held) {  // the first four are still open and unanswered
    pollfd p{fd, POLLIN, 0};
    EXPECT_EQ(::poll(&p, 1, 0), 0);
  }
  // One of them goes: a new connection is let in again.
  ::close(held.back());
  held.pop_back();
  EXPECT_TRUE(WaitFor([&] { return GetOk(server.port()) == 200; }, milliseconds(2000)));
  for (int fd : held) {
    ::close(fd);
  }
}

class HttpGuardTlsTest : public ScratchDirTest {
 protected:
  HttpGuardTlsTest() : ScratchDirTest("http-guard") {}
};

TEST_F(HttpGuardTlsTest, ConnectionBeyondThePerSourceCapFailsItsHandshakeAtOnce) {
  const std::string cert = dir_ + "/cert.pem", key = dir_ + "/key.pem";
  ASSERT_TRUE(testing::WriteSelfSignedCert(cert, key));
  HttpGuardOptions options;
  options.max_connections_per_source = 2;
  TestServer server(options, 16, cert, key);
  // Two connections that never send their ClientHello: each holds a worker, counted.
  std::vector<int> held = {Connect(server.port()), Connect(server.port())};
  ASSERT_GE(held[0], 0);
  ASSERT_GE(held[1], 0);
  std::this_thread::sleep_for(milliseconds(200));

  const int third = Connect(server.port());
  ASSERT_GE(third, 0);
  const Clock::time_point start = Clock::now();
  const Seen refused = Watch(third, milliseconds(1000));
  EXPECT_TRUE(refused.closed) << "the third TLS connection stayed open";
  EXPECT_LT(Clock::now() - start, milliseconds(500));
  ::close(third);
  for (int fd : held) {
    pollfd p{fd, POLLIN, 0};
    EXPECT_EQ(::poll(&p, 1, 0), 0);
  }

  // One goes (its handshake fails, its SSL object is freed): HTTPS works again.
  ::close(held.back());
  held.pop_back();
  httplib::SSLClient client("127.0.0.1", server.port());
  client.enable_server_certificate_verification(false);
  client.set_connection_timeout(1, 0);
  client.set_read_timeout(1, 0);
  EXPECT_TRUE(WaitFor(
      [&] {
        httplib::Result res = client.Get("/ok");
        return res && res->status == 200;
      },
      milliseconds(3000)));
  ::close(held[0]);
}

// The two ServerOptions reach the controller's HTTP server.
class ServerHttpLimitsTest : public ServerFixture {
 protected:
  ServerHttpLimitsTest() : ServerFixture("http-limits") {}
  void Tune(ServerOptions& options) override {
    options.max_connections_per_source = 2;
    options.header_timeout_ms = 1000;
  }
};

TEST_F(ServerHttpLimitsTest, CapAndHeaderDeadlineApply) {
  Tricklers slow(server_->port(), 2);
  ASSERT_EQ(slow.connected(), 2);
  std::this_thread::sleep_for(milliseconds(200));
  const int third = Connect(server_->port());
  ASSERT_GE(third, 0);
  // (It sends a request: the server's TCP_DEFER_ACCEPT keeps silent ones from accept.)
  ASSERT_TRUE(Send(third, "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n"));
  const Seen refused = Watch(third, milliseconds(1000));
  EXPECT_TRUE(refused.closed);
  EXPECT_EQ(refused.bytes.rfind("HTTP/1.1 429", 0), 0u) << refused.bytes;
  ::close(third);
  EXPECT_TRUE(WaitFor([&] { return slow.closed() == 2; }, milliseconds(4000)));
  EXPECT_TRUE(WaitFor(
      [&] {
        httplib::Result res = Client("").Get("/healthz");
        return res && res->status == 200;
      },
      milliseconds(2000)));
}

}  // namespace
}  // namespace tessera
