#include "cli/http_transport.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <optional>

#include "base/strings.h"

namespace tessera {
namespace {

// The wording users see after "cannot reach the controller at URL: ".
constexpr const char* kConnectFailed = "connection failed";
constexpr const char* kConnectTimeout = "timed out connecting";
constexpr const char* kReadFailed = "no answer (read failed)";
constexpr const char* kWriteFailed = "sending the request failed";
constexpr const char* kTlsFailed = "TLS handshake failed";
constexpr const char* kCaFailed = "cannot load the CA certificates";
constexpr const char* kNotTrusted =
    "the server's TLS certificate is not trusted (give --ca-cert FILE or TESSERA_CA_CERT, or "
    "--insecure to skip verification)";
constexpr const char* kBadAnswer = "the answer is not HTTP/1.1";

// A body larger than this is refused rather than read into memory.
constexpr size_t kMaxBody = size_t{1} << 30;
constexpr size_t kMaxHead = 64 << 10;

using SteadyClock = std::chrono::steady_clock;

int MillisLeft(SteadyClock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
  return static_cast<int>(std::max<int64_t>(0, left.count()));
}

// Waits for `events` on `fd` until `timeout_ms`; false on a timeout or an error.
bool WaitFor(int fd, short events, int timeout_ms) {
  pollfd p{fd, events, 0};
  while (true) {
    int rc = ::poll(&p, 1, timeout_ms);
    if (rc < 0 && errno == EINTR) {
      continue;
    }
    return rc > 0;
  }
}

std::string BareHost(const std::string& host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    return host.substr(1, host.size() - 2);
  }
  return host;
}

bool IsIpAddress(const std::string& host) {
  unsigned char buffer[sizeof(in6_addr)];
  return ::inet_pton(AF_INET, host.c_str(), buffer) == 1 ||
         ::inet_pton(AF_INET6, host.c_str(), buffer) == 1;
}

}  // namespace

// One open connection: a non-blocking socket, with TLS on it or not.
struct HttpTransport::Connection {
  int fd = -1;
  SSL_CTX* ctx = nullptr;
  SSL* ssl = nullptr;
  int io_timeout_ms = 60000;
  std::string buffered;  // read past the end of the last answer (keep-alive)

  ~Connection() {
    if (ssl != nullptr) {
      SSL_free(ssl);
    }
    if (ctx != nullptr) {
      SSL_CTX_free(ctx);
    }
    if (fd >= 0) {
      ::close(fd);
    }
  }

  // Writes all of `data`; false when it could not.
  bool WriteAll(std::string_view data) {
    while (!data.empty()) {
      ssize_t n = 0;
      if (ssl != nullptr) {
        // SSL_write writes with write(2), whose SIGPIPE would end the CLI: block it for
        // the call and take any it raised.
        sigset_t pipe_only, old;
        ::sigemptyset(&pipe_only);
        ::sigaddset(&pipe_only, SIGPIPE);
        ::pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
        int rc =
            SSL_write(ssl, data.data(), static_cast<int>(std::min<size_t>(data.size(), 1 << 20)));
        int err = rc > 0 ? SSL_ERROR_NONE : SSL_get_error(ssl, rc);
        const timespec zero{0, 0};
        while (::sigtimedwait(&pipe_only, nullptr, &zero) > 0) {
        }
        ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
        if (rc > 0) {
          n = rc;
        } else if (err == SSL_ERROR_WANT_WRITE || err == SSL_ERROR_WANT_READ) {
          if (!WaitFor(fd, err == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN, io_timeout_ms)) {
            return false;
          }
          continue;
        } else {
          return false;
        }
      } else {
        n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) {
          continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
          if (!WaitFor(fd, POLLOUT, io_timeout_ms)) {
            return false;
          }
          continue;
        }
        if (n <= 0) {
          return false;
        }
      }
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // Reads until `buffered` holds a CRLF; returns where it starts, or npos when the
  // connection ended, failed or sent a line longer than an answer's head may be.
  size_t FillLine() {
    size_t eol = buffered.find("\r\n");
    while (eol == std::string::npos) {
      if (buffered.size() > kMaxHead || ReadSome(&buffered) <= 0) {
        return std::string::npos;
      }
      eol = buffered.find("\r\n");
    }
    return eol;
  }

  // Appends what arrives next to `out`: its size, 0 at the end of the connection, -1 on
  // an error or a timeout.
  ssize_t ReadSome(std::string* out) {
    char chunk[16384];
    while (true) {
      if (ssl != nullptr) {
        int rc = SSL_read(ssl, chunk, sizeof(chunk));
        if (rc > 0) {
          out->append(chunk, static_cast<size_t>(rc));
          return rc;
        }
        int err = SSL_get_error(ssl, rc);
        if (err == SSL_ERROR_ZERO_RETURN) {
          return 0;
        }
        if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
          if (!WaitFor(fd, err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, io_timeout_ms)) {
            return -1;
          }
          continue;
        }
        // A peer that closes without close_notify ends the connection as well.
        return err == SSL_ERROR_SYSCALL && ERR_peek_error() == 0 ? 0 : -1;
      }
      ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
      if (n > 0) {
        out->append(chunk, static_cast<size_t>(n));
        return n;
      }
      if (n == 0) {
        return 0;
      }
      if (errno == EINTR) {
        continue;
      }
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        if (!WaitFor(fd, POLLIN, io_timeout_ms)) {
          return -1;
        }
        continue;
      }
      return -1;
    }
  }
};

namespace {

StatusOr<std::unique_ptr<HttpTransport::Connection>> Connect(const HttpTarget& target) {
  const std::string host = BareHost(target.host);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(target.port);
  if (int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return UnavailableError(std::string(kConnectFailed) + " (" + ::gai_strerror(rc) + ")");
  }
  const auto deadline = SteadyClock::now() + std::chrono::milliseconds(target.connect_timeout_ms);
  auto connection = std::make_unique<HttpTransport::Connection>();
  connection->io_timeout_ms = target.io_timeout_ms;
  bool timed_out = false;
  for (addrinfo* a = found; a != nullptr && connection->fd < 0; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) {
      continue;
    }
    int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      if (WaitFor(fd, POLLOUT, MillisLeft(deadline))) {
        int err = 0;
        socklen_t len = sizeof(err);
        rc = ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0 ? 0 : -1;
      } else {
        timed_out = true;
      }
    }
    if (rc != 0) {
      ::close(fd);
      continue;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    connection->fd = fd;
  }
  ::freeaddrinfo(found);
  if (connection->fd < 0) {
    return UnavailableError(timed_out ? kConnectTimeout : kConnectFailed);
  }
  if (!target.tls) {
    return connection;
  }

  connection->ctx = SSL_CTX_new(TLS_client_method());
  if (connection->ctx == nullptr) {
    return UnavailableError(kTlsFailed);
  }
  SSL_CTX_set_min_proto_version(connection->ctx, TLS1_2_VERSION);
  if (target.insecure) {
    SSL_CTX_set_verify(connection->ctx, SSL_VERIFY_NONE, nullptr);
  } else {
    int loaded = target.ca_cert.empty() ? SSL_CTX_set_default_verify_paths(connection->ctx)
                                        : SSL_CTX_load_verify_locations(
                                              connection->ctx, target.ca_cert.c_str(), nullptr);
    if (loaded != 1) {
      return UnavailableError(kCaFailed);
    }
    SSL_CTX_set_verify(connection->ctx, SSL_VERIFY_PEER, nullptr);
  }
  connection->ssl = SSL_new(connection->ctx);
  if (connection->ssl == nullptr || SSL_set_fd(connection->ssl, connection->fd) != 1) {
    return UnavailableError(kTlsFailed);
  }
  if (!IsIpAddress(host)) {
    // SSL_set_tlsext_host_name is a macro with a C cast.
    SSL_ctrl(connection->ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
             const_cast<char*>(host.c_str()));
  }
  if (!target.insecure) {
    X509_VERIFY_PARAM* param = SSL_get0_param(connection->ssl);
    int set = IsIpAddress(host) ? X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str())
                                : X509_VERIFY_PARAM_set1_host(param, host.c_str(), 0);
    if (set != 1) {
      return UnavailableError(kTlsFailed);
    }
  }
  while (true) {
    int rc = SSL_connect(connection->ssl);
    if (rc == 1) {
      break;
    }
    int err = SSL_get_error(connection->ssl, rc);
    if ((err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) &&
        WaitFor(connection->fd, err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT,
                MillisLeft(deadline))) {
      continue;
    }
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
      return UnavailableError(kConnectTimeout);
    }
    const bool untrusted = !target.insecure && SSL_get_verify_result(connection->ssl) != X509_V_OK;
    return UnavailableError(untrusted ? kNotTrusted : kTlsFailed);
  }
  return connection;
}

std::string RequestHead(std::string_view method, const std::string& path, const HttpTarget& target,
                        const HttpHeaders& headers, const std::string& body) {
  std::string head;
  head.reserve(256 + body.size());
  head.append(method).append(" ").append(path.empty() ? "/" : path).append(" HTTP/1.1\r\n");
  head.append("Host: ").append(target.host);
  if (target.port != (target.tls ? 443 : 80)) {
    head.append(":").append(std::to_string(target.port));
  }
  head.append("\r\n");
  for (const auto& [key, value] : headers) {
    head.append(key).append(": ").append(value).append("\r\n");
  }
  if (!body.empty() || method == "POST" || method == "PUT") {
    head.append("Content-Length: ").append(std::to_string(body.size())).append("\r\n");
  }
  head.append("\r\n");
  return head;
}

enum class ReadOutcome { kOk, kNothing, kFailed, kMalformed };

struct ParsedHead {
  int status = 0;
  bool http11 = false;
  HttpHeaders headers;
  size_t size = 0;  // bytes of the head, blank line included
};

// Parses the status line and headers in `text` (which holds the whole head).
bool ParseHead(std::string_view text, ParsedHead* head) {
  size_t line_end = text.find("\r\n");
  std::string_view status_line = text.substr(0, line_end);
  if (status_line.size() < 12 || status_line.substr(0, 7) != "HTTP/1." || status_line[8] != ' ') {
    return false;
  }
  head->http11 = status_line[7] == '1';
  StatusOr<int64_t> code = ParseInt64(status_line.substr(9, 3));
  if (!code.ok() || *code < 100 || *code > 999) {
    return false;
  }
  head->status = static_cast<int>(*code);
  size_t at = line_end + 2;
  while (true) {
    size_t end = text.find("\r\n", at);
    if (end == std::string_view::npos) {
      return false;
    }
    if (end == at) {
      head->size = end + 2;
      return true;
    }
    std::string_view line = text.substr(at, end - at);
    size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) {
      return false;
    }
    head->headers.emplace_back(std::string(line.substr(0, colon)),
                               std::string(Trim(line.substr(colon + 1))));
    at = end + 2;
  }
}

std::optional<std::string> HeaderValue(const HttpHeaders& headers, std::string_view name) {
  for (const auto& [key, value] : headers) {
    if (AsciiLower(key) == name) {
      return value;
    }
  }
  return std::nullopt;
}

// Reads the head of the final answer (1xx interim answers skipped) into `head`, leaving
// what follows it in `c.buffered`. kNothing: the connection ended or failed before any
// byte of an answer came, so the request may be sent again.
ReadOutcome ReadHead(HttpTransport::Connection& c, ParsedHead* head) {
  std::string& in = c.buffered;
  bool got_any = !in.empty();
  while (true) {
    size_t blank = in.find("\r\n\r\n");
    if (blank != std::string::npos) {
      if (!ParseHead(std::string_view(in).substr(0, blank + 4), head)) {
        return ReadOutcome::kMalformed;
      }
      in.erase(0, head->size);
      if (head->status >= 200) {
        return ReadOutcome::kOk;
      }
      *head = ParsedHead{};  // 1xx: an interim answer
      continue;
    }
    if (in.size() > kMaxHead) {
      return ReadOutcome::kMalformed;
    }
    if (c.ReadSome(&in) <= 0) {
      return got_any ? ReadOutcome::kFailed : ReadOutcome::kNothing;
    }
    got_any = true;
  }
}

// Skips a chunked body's trailers, up to the blank line that ends it.
Status SkipTrailers(HttpTransport::Connection& c) {
  while (true) {
    const size_t line = c.FillLine();
    if (line == std::string::npos) {
      return UnavailableError(kReadFailed);
    }
    c.buffered.erase(0, line + 2);
    if (line == 0) {
      return Status::Ok();
    }
  }
}

// Chunks: "<hex size>[;ext]\r\n<data>\r\n" ... "0\r\n" [trailers] "\r\n".
Status ReadChunkedBody(HttpTransport::Connection& c, std::string* body) {
  std::string& in = c.buffered;
  while (true) {
    const size_t eol = c.FillLine();
    if (eol == std::string::npos) {
      return UnavailableError(kReadFailed);
    }
    std::string_view size_text = std::string_view(in).substr(0, eol);
    size_text = Trim(size_text.substr(0, size_text.find(';')));
    size_t size = 0;
    const char* end = size_text.data() + size_text.size();
    auto [stop, err] = std::from_chars(size_text.data(), end, size, 16);
    if (size_text.empty() || err != std::errc() || stop != end || size > kMaxBody - body->size()) {
      return UnavailableError(kBadAnswer);
    }
    in.erase(0, eol + 2);
    if (size == 0) {
      return SkipTrailers(c);
    }
    while (in.size() < size + 2) {
      if (c.ReadSome(&in) <= 0) {
        return UnavailableError(kReadFailed);
      }
    }
    body->append(in, 0, size);
    in.erase(0, size + 2);
  }
}

// A body of `length` (the Content-Length header's value) bytes.
Status ReadSizedBody(HttpTransport::Connection& c, const std::string& length, std::string* body) {
  StatusOr<int64_t> size = ParseInt64(length);
  if (!size.ok() || *size < 0 || static_cast<uint64_t>(*size) > kMaxBody) {
    return UnavailableError(kBadAnswer);
  }
  std::string& in = c.buffered;
  while (in.size() < static_cast<size_t>(*size)) {
    if (c.ReadSome(&in) <= 0) {
      return UnavailableError(kReadFailed);
    }
  }
  *body = in.substr(0, static_cast<size_t>(*size));
  in.erase(0, static_cast<size_t>(*size));
  return Status::Ok();
}

// A body framed by the end of the connection.
Status ReadBodyToEnd(HttpTransport::Connection& c, std::string* body) {
  std::string& in = c.buffered;
  while (true) {
    ssize_t n = c.ReadSome(&in);
    if (n == 0) {
      break;
    }
    if (n < 0 || in.size() > kMaxBody) {
      return UnavailableError(kReadFailed);
    }
  }
  *body = std::move(in);
  in.clear();
  return Status::Ok();
}

// The answer whose head is `head`, its body read as the head frames it. `*keep` tells
// whether the connection may carry the next request.
StatusOr<HttpAnswer> ReadAnswer(HttpTransport::Connection& c, std::string_view method,
                                ParsedHead head, bool* keep) {
  HttpAnswer answer;
  answer.status = head.status;
  answer.headers = std::move(head.headers);
  const std::string encoding =
      AsciiLower(HeaderValue(answer.headers, "transfer-encoding").value_or(""));
  const std::optional<std::string> length = HeaderValue(answer.headers, "content-length");
  *keep =
      head.http11 && AsciiLower(HeaderValue(answer.headers, "connection").value_or("")) != "close";
  const bool no_body = answer.status == 204 || answer.status == 304 || method == "HEAD";
  Status read;
  if (no_body) {
    // Nothing follows the head.
  } else if (encoding.find("chunked") != std::string::npos) {
    read = ReadChunkedBody(c, &answer.body);
  } else if (length.has_value()) {
    read = ReadSizedBody(c, *length, &answer.body);
  } else {
    *keep = false;
    read = ReadBodyToEnd(c, &answer.body);
  }
  if (!read.ok()) {
    return read;
  }
  return answer;
}

}  // namespace

HttpTransport::HttpTransport(HttpTarget target) : target_(std::move(target)) {}

HttpTransport::~HttpTransport() = default;

StatusOr<HttpAnswer> HttpTransport::Send(std::string_view method, const std::string& path,
                                         const HttpHeaders& headers, const std::string& body,
                                         bool* maybe_taken) {
  const std::string request = RequestHead(method, path, target_, headers, body) + body;
  const bool may_resend = method == "GET" || method == "PUT";
  if (maybe_taken != nullptr) {
    *maybe_taken = false;
  }
  for (int attempt = 0;; ++attempt) {
    const bool reused = connection_ != nullptr;
    if (!reused) {
      TESSERA_ASSIGN_OR_RETURN(connection_, Connect(target_));
    }
    if (maybe_taken != nullptr) {
      *maybe_taken = true;
    }
    // Resent only on a kept connection the server had closed: nothing of it was taken.
    const bool may_retry = reused && attempt == 0 && may_resend;
    if (!connection_->WriteAll(request)) {
      connection_.reset();
      if (may_retry) {
        continue;
      }
      return UnavailableError(kWriteFailed);
    }
    ParsedHead head;
    const ReadOutcome got = ReadHead(*connection_, &head);
    if (got != ReadOutcome::kOk) {
      connection_.reset();
      if (got == ReadOutcome::kNothing && may_retry) {
        continue;  // resend on a new connection
      }
      return UnavailableError(got == ReadOutcome::kMalformed ? kBadAnswer : kReadFailed);
    }
    bool keep = false;
    StatusOr<HttpAnswer> answer = ReadAnswer(*connection_, method, std::move(head), &keep);
    if (!answer.ok() || !keep) {
      connection_.reset();
    }
    return answer;
  }
}

}  // namespace tessera
