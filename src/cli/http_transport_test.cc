// HttpTransport against a scripted server on 127.0.0.1: each accepted connection gets
// the next script's answers byte for byte, so framing, keep-alive and a server that
// closes a kept connection are exercised exactly.
#include "cli/http_transport.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tessera {
namespace {

// Per connection: a list of answers, each sent once a whole request head (and its
// Content-Length body) has arrived; after the list, the connection is closed.
class ScriptedServer {
 public:
  using Script = std::vector<std::vector<std::string>>;
  explicit ScriptedServer(Script connections) : scripts_(std::move(connections)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    socklen_t len = sizeof(addr);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    EXPECT_EQ(::listen(fd_, 8), 0);
    thread_ = std::thread([this] { Serve(); });
  }
  ~ScriptedServer() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  int port() const { return port_; }
  int connections() const { return accepted_.load(); }
  std::vector<std::string> requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

 private:
  void Serve() {
    for (const std::vector<std::string>& answers : scripts_) {
      int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) {
        return;
      }
      ++accepted_;
      std::string in;
      for (const std::string& answer : answers) {
        if (!ReadRequest(c, &in)) {
          break;
        }
        (void)!::write(c, answer.data(), answer.size());
      }
      ::close(c);
    }
  }

  bool ReadRequest(int c, std::string* in) {
    while (true) {
      size_t blank = in->find("\r\n\r\n");
      if (blank != std::string::npos) {
        size_t body = 0;
        size_t at = in->find("Content-Length: ");
        if (at != std::string::npos && at < blank) {
          body = std::stoul(in->substr(at + 16));
        }
        if (in->size() >= blank + 4 + body) {
          std::lock_guard<std::mutex> lock(mu_);
          requests_.push_back(in->substr(0, blank + 4 + body));
          in->erase(0, blank + 4 + body);
          return true;
        }
      }
      char buffer[4096];
      ssize_t n = ::read(c, buffer, sizeof(buffer));
      if (n <= 0) {
        return false;
      }
      in->append(buffer, static_cast<size_t>(n));
    }
  }

  std::vector<std::vector<std::string>> scripts_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<int> accepted_{0};
  std::mutex mu_;
  std::vector<std::string> requests_;
  std::thread thread_;
};

HttpTarget Local(int port) {
  HttpTarget t;
  t.host = "127.0.0.1";
  t.port = port;
  t.connect_timeout_ms = 2000;
  t.io_timeout_ms = 2000;
  return t;
}

const char* kOk = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

TEST(HttpTransportTest, ContentLengthAnswersShareOneKeptConnection) {
  ScriptedServer server(ScriptedServer::Script{std::vector<std::string>{
      kOk, "HTTP/1.1 201 Created\r\nX-Id: 7\r\nContent-Length: 5\r\n\r\nhello"}});
  HttpTransport t(Local(server.port()));
  StatusOr<HttpAnswer> a = t.Send("GET", "/a?x=1", {{"Accept", "application/json"}}, "");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->status, 200);
  EXPECT_EQ(a->body, "ok");
  StatusOr<HttpAnswer> b = t.Send("POST", "/b", {{"Content-Type", "text/plain"}}, "body!");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->status, 201);
  EXPECT_EQ(b->body, "hello");
  ASSERT_EQ(b->headers.size(), 2u);
  EXPECT_EQ(b->headers[0].first, "X-Id");
  EXPECT_EQ(b->headers[0].second, "7");
  EXPECT_EQ(server.connections(), 1);
  std::vector<std::string> seen = server.requests();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].rfind("GET /a?x=1 HTTP/1.1\r\nHost: 127.0.0.1:", 0), 0u) << seen[0];
  EXPECT_NE(seen[1].find("Content-Length: 5\r\n\r\nbody!"), std::string::npos) << seen[1];
}

TEST(HttpTransportTest, ChunkedAndCloseFramedBodiesAreReadWhole) {
  ScriptedServer server(ScriptedServer::Script{
      std::vector<std::string>{"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: "
                               "chunked\r\n\r\n4;ext=1\r\nabcd\r\nA\r\n0123456789\r\n0\r\nTrailer: "
                               "x\r\n\r\n",
                               kOk},
      {"HTTP/1.0 200 OK\r\n\r\nuntil the end"}});
  HttpTransport t(Local(server.port()));
  StatusOr<HttpAnswer> a = t.Send("GET", "/chunked", {}, "");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->body, "abcd0123456789");
  StatusOr<HttpAnswer> b = t.Send("GET", "/after-chunks", {}, "");  // same connection
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->body, "ok");
  // The first connection is closed by the server after its script: a new one answers.
  StatusOr<HttpAnswer> c = t.Send("GET", "/close", {}, "");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->body, "until the end");
  EXPECT_EQ(server.connections(), 2);
}

// The server closes a kept connection without saying so: a GET is sent again on a new
// one; a POST is not (the server may have taken it), and says why.
TEST(HttpTransportTest, AGetIsResentOnAClosedKeptConnectionAndAPostIsNot) {
  ScriptedServer server(ScriptedServer::Script{{kOk}, {kOk}, {kOk}});
  HttpTransport t(Local(server.port()));
  ASSERT_TRUE(t.Send("GET", "/1", {}, "").ok());
  StatusOr<HttpAnswer> again = t.Send("GET", "/2", {}, "");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->body, "ok");
  EXPECT_EQ(server.connections(), 2);
  StatusOr<HttpAnswer> post = t.Send("POST", "/3", {}, "x");
  ASSERT_FALSE(post.ok());
  EXPECT_EQ(post.status().code(), StatusCode::kUnavailable);
  // Depending on when the server's close arrives, the write or the read fails.
  EXPECT_TRUE(post.status().message().find("read failed") != std::string::npos ||
              post.status().message().find("sending the request failed") != std::string::npos)
      << post.status().message();
  for (const std::string& request : server.requests()) {
    EXPECT_EQ(request.find("POST /3"), std::string::npos);
  }
  // The next request opens the third connection.
  ASSERT_TRUE(t.Send("POST", "/4", {}, "y").ok());
  EXPECT_EQ(server.connections(), 3);
}

TEST(HttpTransportTest, MalformedAnswersAndRefusedConnectionsAreUnavailable) {
  {
    ScriptedServer server(ScriptedServer::Script{{"SMTP ready\r\n\r\n"}});
    HttpTransport t(Local(server.port()));
    StatusOr<HttpAnswer> a = t.Send("GET", "/", {}, "");
    ASSERT_FALSE(a.ok());
    EXPECT_EQ(a.status().code(), StatusCode::kUnavailable);
    EXPECT_NE(a.status().message().find("not HTTP"), std::string::npos);
  }
  {
    ScriptedServer server(
        ScriptedServer::Script{{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"}});
    HttpTransport t(Local(server.port()));
    EXPECT_FALSE(t.Send("GET", "/", {}, "").ok());
  }
  {
    ScriptedServer server(
        ScriptedServer::Script{{"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort"}});
    HttpTransport t(Local(server.port()));
    StatusOr<HttpAnswer> a = t.Send("GET", "/", {}, "");
    ASSERT_FALSE(a.ok());
    EXPECT_NE(a.status().message().find("read failed"), std::string::npos);
  }
  int port = 0;
  {
    ScriptedServer server(ScriptedServer::Script{});
    port = server.port();
  }
  HttpTransport t(Local(port));  // nothing listens there any more
  StatusOr<HttpAnswer> a = t.Send("GET", "/", {}, "");
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().message(), "connection failed");
}

}  // namespace
}  // namespace tessera
