#include "base/mutex.h"
#include "server/http/http_guard.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace tessera {
namespace {

using SteadyClock = std::chrono::steady_clock;
using TimePoint = SteadyClock::time_point;
using PoolFactory = std::function<httplib::TaskQueue*()>;

constexpr TimePoint kNoDeadline = TimePoint::max();
// Bytes peeked at for the end of the headers; a connection with more waiting and no end
// yet goes to a worker, whose reads stop at the deadline all the same.
constexpr size_t kPeekBytes = 32 * 1024;
// A keep-alive wait looks this often whether the server was stopped.
constexpr int kIdleSliceMs = 50;

// A complete answer that closes the connection.
std::string Answer(std::string_view status, std::string_view body) {
  return "HTTP/1.1 " + std::string(status) +
         "\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + std::string(body);
}

const std::string& TooManyConnections() {
  static const std::string answer =
      Answer("429 Too Many Requests", "too many concurrent connections from this address");
  return answer;
}

const std::string& RequestTimeout() {
  static const std::string answer =
      Answer("408 Request Timeout", "the request's headers took too long to arrive");
  return answer;
}

TimePoint DeadlineFrom(TimePoint start, int timeout_ms) {
  return timeout_ms > 0 ? start + std::chrono::milliseconds(timeout_ms) : kNoDeadline;
}

// Milliseconds until `t` (rounded up, at least 0), for poll and epoll_wait.
int MillisUntil(TimePoint t, TimePoint now) {
  if (t <= now) {
    return 0;
  }
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(t - now).count();
  return static_cast<int>(std::min<int64_t>((us + 999) / 1000, 1 << 30));
}

// The client's IP address, the key of the per-source cap ("" when the peer is gone).
std::string PeerAddress(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return "";
  }
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&addr);
    return ::inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text)) ? text : "";
  }
  if (addr.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&addr);
    if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
      return ::inet_ntop(AF_INET, &in6->sin6_addr.s6_addr[12], text, sizeof(text)) ? text : "";
    }
    return ::inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text)) ? text : "";
  }
  return "";
}

// What httplib's own stream reports (getnameinfo, numeric), so that req.remote_addr and
// the auth throttle's keys are as before.
void SocketName(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  auto* sa = reinterpret_cast<sockaddr*>(&addr);
  if ((peer ? ::getpeername(fd, sa, &len) : ::getsockname(fd, sa, &len)) != 0) {
    return;
  }
  if (addr.ss_family == AF_INET) {
    port = ntohs(reinterpret_cast<const sockaddr_in*>(&addr)->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    port = ntohs(reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_port);
  } else {
    return;
  }
  std::array<char, NI_MAXHOST> host{};
  if (::getnameinfo(sa, len, host.data(), host.size(), nullptr, 0, NI_NUMERICHOST) == 0) {
    ip = host.data();
  }
}

// Answers (best effort, never blocking) and closes. What the client sent is read first,
// so that the close sends FIN rather than a reset that could destroy the answer.
void AnswerAndClose(int fd, std::string_view answer) {
  std::array<char, 4096> sink;
  for (size_t drained = 0; drained < kPeekBytes;) {
    const ssize_t n = ::recv(fd, sink.data(), sink.size(), MSG_DONTWAIT);
    if (n <= 0) {
      break;
    }
    drained += static_cast<size_t>(n);
  }
  if (!answer.empty()) {
    (void)::send(fd, answer.data(), answer.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  }
  ::shutdown(fd, SHUT_WR);
  ::close(fd);
}

// Finds the blank line that ends a request's headers, fed byte by byte: a line with
// nothing but its CR before LF, after the request line. ("\r\n" before the request
// line ends nothing useful: the library then answers 400.)
class HeaderEnd {
 public:
  void Reset() { line_ = lines_ = 0; }
  bool Feed(char c) {
    if (c == '\n') {
      if (line_ == 0 && lines_ > 0) {
        return true;
      }
      ++lines_;
      line_ = 0;
    } else if (c != '\r') {
      ++line_;
    }
    return false;
  }

 private:
  size_t line_ = 0;
  size_t lines_ = 0;
};

enum class Peeked { kComplete, kIncomplete, kClosed };

// Whether the connection's received bytes hold a whole request line and headers; a
// full peek buffer counts as complete (the worker's reads still stop at the deadline).
Peeked PeekHeaders(int fd) {
  std::array<char, kPeekBytes> buf;
  const ssize_t n = ::recv(fd, buf.data(), buf.size(), MSG_PEEK | MSG_DONTWAIT);
  if (n == 0) {
    return Peeked::kClosed;
  }
  if (n < 0) {
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? Peeked::kIncomplete
                                                                     : Peeked::kClosed;
  }
  if (static_cast<size_t>(n) == buf.size()) {
    return Peeked::kComplete;
  }
  HeaderEnd end;
  for (ssize_t i = 0; i < n; ++i) {
    if (end.Feed(buf[static_cast<size_t>(i)])) {
      return Peeked::kComplete;
    }
  }
  return Peeked::kIncomplete;
}

// Connections per client address. Thread-safe.
class SourceCounts {
 public:
  explicit SourceCounts(int cap) : cap_(cap) {}

  // Counts a connection from `source`; false (nothing counted) when it is at the cap.
  bool Admit(const std::string& source) {
    MutexLock lock(mu_);
    int& n = counts_[source];
    if (cap_ > 0 && n >= cap_) {
      return false;
    }
    ++n;
    return true;
  }
  void Release(const std::string& source) {
    MutexLock lock(mu_);
    auto it = counts_.find(source);
    if (it != counts_.end() && --it->second <= 0) {
      counts_.erase(it);
    }
  }

 private:
  const int cap_;
  Mutex mu_;
  std::map<std::string, int> counts_ GUARDED_BY(mu_);
};

// A plain connection's stream for the library: buffered reads that, while a request's
// headers are expected, wait no later than their deadline, and writes with
// MSG_NOSIGNAL. Used by one worker at a time.
class ConnStream final : public httplib::Stream {
 public:
  ConnStream(int fd, std::chrono::microseconds read_timeout,
             std::chrono::microseconds write_timeout)
      : fd_(fd), read_timeout_(read_timeout), write_timeout_(write_timeout) {}

  // The next bytes read are a request's line and headers, due by `deadline`.
  void ExpectHeaders(TimePoint deadline) {
    deadline_ = deadline;
    end_.Reset();
  }
  bool HasBuffered() const { return off_ < len_; }
  // A read failed (its timeout or the headers' deadline passed, the client closed or
  // reset): the connection is done, whatever the library answered.
  bool failed() const { return failed_; }

  bool is_readable() const override { return HasBuffered() || Wait(POLLIN); }
  bool is_writable() const override { return Wait(POLLOUT); }

  ssize_t read(char* ptr, size_t size) override {
    if (!HasBuffered()) {
      if (!Wait(POLLIN)) {
        failed_ = true;
        return -1;
      }
      ssize_t n;
      do {
        n = ::recv(fd_, buf_.data(), buf_.size(), 0);
      } while (n < 0 && errno == EINTR);
      if (n <= 0) {
        failed_ = true;
        return n;
      }
      off_ = 0;
      len_ = static_cast<size_t>(n);
    }
    const size_t n = std::min(size, len_ - off_);
    std::memcpy(ptr, buf_.data() + off_, n);
    off_ += n;
    for (size_t i = 0; i < n && deadline_ != kNoDeadline; ++i) {
      if (end_.Feed(ptr[i])) {
        deadline_ = kNoDeadline;  // the body, if any, is bounded per read only
      }
    }
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) {
      return -1;
    }
    ssize_t n;
    do {
      n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    SocketName(fd_, true, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    SocketName(fd_, false, ip, port);
  }
  socket_t socket() const override { return fd_; }

 private:
  // Polls for `events` up to the timeout (reads: and the headers' deadline).
  bool Wait(short events) const {
    const TimePoint now = SteadyClock::now();
    TimePoint until = now + (events == POLLIN ? read_timeout_ : write_timeout_);
    if (events == POLLIN) {
      if (now >= deadline_) {
        return false;  // late headers: not even bytes already there are taken
      }
      until = std::min(until, deadline_);
    }
    for (;;) {
      pollfd p{fd_, events, 0};
      const int r = ::poll(&p, 1, MillisUntil(until, SteadyClock::now()));
      if (r > 0) {
        return true;
      }
      if (r == 0 || errno != EINTR) {
        return false;
      }
    }
  }

  const int fd_;
  const std::chrono::microseconds read_timeout_;
  const std::chrono::microseconds write_timeout_;
  TimePoint deadline_ = kNoDeadline;
  bool failed_ = false;
  HeaderEnd end_;
  std::array<char, 4096> buf_;
  size_t off_ = 0;
  size_t len_ = 0;
};

// One thread that holds the plain connections whose first request's headers have not
// all arrived (epoll, edge-triggered, peeking at each arrival), hands each one to the
// worker pool once they have, and answers 408 and closes it at its deadline. Add and
// Stop are thread-safe; Start and Stop come from the listening thread.
class HeaderWaiter {
 public:
  using ServeFn = std::function<void(int fd, const std::string& source, TimePoint deadline)>;

  HeaderWaiter(SourceCounts* sources, ServeFn serve)
      : sources_(sources), serve_(std::move(serve)) {}
  ~HeaderWaiter() { Stop(); }
  HeaderWaiter(const HeaderWaiter&) = delete;
  HeaderWaiter& operator=(const HeaderWaiter&) = delete;

  // Starts handing connections to `queue`; without epoll, Add refuses all.
  void Start(httplib::TaskQueue* queue) {
    Stop();
    const int epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
    const int wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = wake_fd;
    if (epoll_fd < 0 || wake_fd < 0 || ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, wake_fd, &ev) != 0) {
      for (int fd : {epoll_fd, wake_fd}) {
        if (fd >= 0) {
          ::close(fd);
        }
      }
      return;
    }
    MutexLock lock(mu_);
    epoll_fd_ = epoll_fd;
    wake_fd_ = wake_fd;
    queue_ = queue;
    stopping_ = false;
    thread_ = std::thread([this] { Loop(); });
  }

  // Closes the connections still waiting; no hand-off to the pool after it returns.
  void Stop() {
    {
      MutexLock lock(mu_);
      if (!thread_.joinable()) {
        return;
      }
      stopping_ = true;
    }
    Wake();
    thread_.join();
    std::map<int, Waiting> left;
    {
      MutexLock lock(mu_);
      left.swap(waiting_);
      deadlines_.clear();
      queue_ = nullptr;
      ::close(epoll_fd_);
      ::close(wake_fd_);
      epoll_fd_ = wake_fd_ = -1;
    }
    for (const auto& [fd, w] : left) {
      ::close(fd);
      sources_->Release(w.source);
    }
  }

  // Takes `fd` until its headers are complete or `deadline`; false when not running
  // (the caller keeps the connection).
  bool Add(int fd, const std::string& source, TimePoint deadline) {
    MutexLock lock(mu_);
    if (queue_ == nullptr || stopping_) {
      return false;
    }
    waiting_[fd] = Waiting{source, deadline};
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP | EPOLLET;
    ev.data.fd = fd;
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      waiting_.erase(fd);
      return false;
    }
    deadlines_.emplace(deadline, fd);
    if (deadlines_.begin()->second == fd) {
      Wake();  // the loop sleeps until its earliest deadline
    }
    return true;
  }

 private:
  struct Waiting {
    std::string source;
    TimePoint deadline;
  };

  // mu_ held, or by Stop before it closes wake_fd_.
  void Wake() {
    const uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof(one));
  }

  void Loop() {
    std::array<epoll_event, 64> events;
    for (;;) {
      int timeout_ms = -1;
      {
        MutexLock lock(mu_);
        if (stopping_) {
          return;
        }
        if (!deadlines_.empty()) {
          timeout_ms = MillisUntil(deadlines_.begin()->first, SteadyClock::now());
        }
      }
      const int n =
          ::epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), timeout_ms);
      for (int i = 0; i < n; ++i) {
        if (events[static_cast<size_t>(i)].data.fd == wake_fd_) {
          uint64_t count;
          (void)!::read(wake_fd_, &count, sizeof(count));
        } else {
          OnEvent(events[static_cast<size_t>(i)].data.fd, events[static_cast<size_t>(i)].events);
        }
      }
      Expire(SteadyClock::now());
    }
  }

  // New bytes (or a hang-up) on a waiting connection.
  void OnEvent(int fd, uint32_t events) {
    const Peeked peeked = PeekHeaders(fd);  // the fd is ours until taken out below
    if (peeked == Peeked::kIncomplete && (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) == 0) {
      return;
    }
    Waiting w;
    httplib::TaskQueue* queue = nullptr;
    {
      MutexLock lock(mu_);
      auto it = waiting_.find(fd);
      if (it == waiting_.end()) {
        return;
      }
      w = std::move(it->second);
      waiting_.erase(it);
      deadlines_.erase({w.deadline, fd});
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
      queue = queue_;
    }
    if (peeked == Peeked::kComplete) {
      // Stop joins this thread before the pool shuts down: the queue is alive.
      queue->enqueue([serve = serve_, fd, w] { serve(fd, w.source, w.deadline); });
    } else {
      ::close(fd);  // gone before its headers were complete
      sources_->Release(w.source);
    }
  }

  // Answers 408 to, and closes, the connections whose deadline has passed.
  void Expire(TimePoint now) {
    std::vector<std::pair<int, std::string>> expired;
    {
      MutexLock lock(mu_);
      while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
        const int fd = deadlines_.begin()->second;
        deadlines_.erase(deadlines_.begin());
        auto it = waiting_.find(fd);
        if (it != waiting_.end()) {
          expired.emplace_back(fd, std::move(it->second.source));
          waiting_.erase(it);
          ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
        }
      }
    }
    for (const auto& [fd, source] : expired) {
      AnswerAndClose(fd, RequestTimeout());
      sources_->Release(source);
    }
  }

  SourceCounts* const sources_;
  const ServeFn serve_;
  Mutex mu_;
  std::thread thread_;
  httplib::TaskQueue* queue_ GUARDED_BY(mu_) = nullptr;  // null: not running
  bool stopping_ GUARDED_BY(mu_) = false;
  // Set by Start before the loop's thread starts and closed by Stop after it ended: the
  // loop reads them without mu_.
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  std::map<int, Waiting> waiting_ GUARDED_BY(mu_);                 // by socket
  std::set<std::pair<TimePoint, int>> deadlines_ GUARDED_BY(mu_);  // of waiting_
};

// The server's pool, with the waiter running while it does (one listen).
class GuardedQueue final : public httplib::TaskQueue {
 public:
  GuardedQueue(httplib::TaskQueue* inner, HeaderWaiter* waiter) : inner_(inner), waiter_(waiter) {
    waiter_->Start(inner_.get());
  }
  void enqueue(std::function<void()> fn) override { inner_->enqueue(std::move(fn)); }
  void shutdown() override {
    waiter_->Stop();  // before the pool: the waiter hands connections to it
    inner_->shutdown();
  }
  void on_idle() override { inner_->on_idle(); }

 private:
  std::unique_ptr<httplib::TaskQueue> inner_;
  HeaderWaiter* const waiter_;
};

// Plain HTTP: the cap when a worker takes a connection, the wait for its headers on the
// waiter, then the connection's keep-alive loop on a worker (the library's, with
// ConnStream and the header deadline).
class GuardedServer final : public httplib::Server {
 public:
  GuardedServer(const HttpGuardOptions& options, PoolFactory pool)
      : options_(options),
        sources_(options.max_connections_per_source),
        waiter_(&sources_, [this](int fd, const std::string& source, TimePoint deadline) {
          Serve(fd, source, deadline);
        }) {
    new_task_queue = [this, pool = std::move(pool)] { return new GuardedQueue(pool(), &waiter_); };
  }
  ~GuardedServer() override { waiter_.Stop(); }

 private:
  bool process_and_close_socket(socket_t sock) override {
    const TimePoint start = SteadyClock::now();
    const std::string source = PeerAddress(sock);
    if (source.empty()) {
      ::close(sock);  // the client has gone already
      return false;
    }
    if (!sources_.Admit(source)) {
      AnswerAndClose(sock, TooManyConnections());
      return false;
    }
    const TimePoint deadline = DeadlineFrom(start, options_.header_timeout_ms);
    if (deadline != kNoDeadline && PeekHeaders(sock) == Peeked::kIncomplete &&
        waiter_.Add(sock, source, deadline)) {
      return true;
    }
    Serve(sock, source, deadline);
    return true;
  }

  // The library's keep-alive loop, with the header deadline: the first request's from
  // `deadline`, each later one's from its first byte. Closes `sock`.
  void Serve(socket_t sock, const std::string& source, TimePoint deadline) {
    ConnStream strm(
        sock,
        std::chrono::seconds(read_timeout_sec_) + std::chrono::microseconds(read_timeout_usec_),
        std::chrono::seconds(write_timeout_sec_) + std::chrono::microseconds(write_timeout_usec_));
    strm.ExpectHeaders(deadline);
    const size_t max_requests = std::max<size_t>(keep_alive_max_count_, 1);
    for (size_t left = max_requests; left > 0 && svr_sock_ != INVALID_SOCKET; --left) {
      if (left != max_requests) {
        if (!AwaitNextRequest(strm)) {
          break;
        }
        strm.ExpectHeaders(DeadlineFrom(SteadyClock::now(), options_.header_timeout_ms));
      }
      bool connection_closed = false;
      // (After a failed read the library may still answer 400 and go on: not here.)
      if (!process_request(strm, left == 1, connection_closed, nullptr) || connection_closed ||
          strm.failed()) {
        break;
      }
    }
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
    sources_.Release(source);
  }

  // Waits up to the keep-alive timeout for the next request's first byte (or the
  // client's close); false on timeout or when the server stops.
  bool AwaitNextRequest(const ConnStream& strm) {
    if (strm.HasBuffered()) {
      return true;
    }
    const TimePoint until = SteadyClock::now() + std::chrono::seconds(keep_alive_timeout_sec_);
    while (svr_sock_ != INVALID_SOCKET) {
      const TimePoint now = SteadyClock::now();
      if (now >= until) {
        return false;
      }
      pollfd p{strm.socket(), POLLIN, 0};
      const int r = ::poll(&p, 1, std::min(kIdleSliceMs, MillisUntil(until, now)));
      if (r > 0) {
        return true;
      }
      if (r < 0 && errno != EINTR) {
        return false;
      }
    }
    return false;
  }

  const HttpGuardOptions options_;
  SourceCounts sources_;
  HeaderWaiter waiter_;
};

// TLS: the cap through OpenSSL (see the header). A connection's count is held by a
// ticket in its SSL object's ex_data, released when the library frees the object.
struct TlsTicket {
  SourceCounts* sources;
  std::string source;
};

void FreeTlsTicket(void* /*parent*/, void* ptr, CRYPTO_EX_DATA* /*ad*/, int /*idx*/, long /*argl*/,
                   void* /*argp*/) {
  auto* ticket = static_cast<TlsTicket*>(ptr);
  if (ticket != nullptr) {
    ticket->sources->Release(ticket->source);
    delete ticket;
  }
}

struct TlsIndexes {
  int ssl = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, &FreeTlsTicket);
  int ctx = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
};

const TlsIndexes& Indexes() {
  static const TlsIndexes indexes;
  return indexes;
}

// At a handshake's start (on the worker, inside SSL_accept): counts the connection, or
// shuts it down for reading so that the handshake fails at once.
void OnTlsInfo(const SSL* ssl, int where, int /*ret*/) {
  if ((where & SSL_CB_HANDSHAKE_START) == 0 || SSL_get_ex_data(ssl, Indexes().ssl) != nullptr) {
    return;
  }
  auto* sources =
      static_cast<SourceCounts*>(SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), Indexes().ctx));
  const int fd = SSL_get_fd(ssl);
  if (sources == nullptr || fd < 0) {
    return;
  }
  std::string source = PeerAddress(fd);
  if (!sources->Admit(source)) {
    ::shutdown(fd, SHUT_RD);
    return;
  }
  auto* ticket = new TlsTicket{sources, std::move(source)};
  if (SSL_set_ex_data(const_cast<SSL*>(ssl), Indexes().ssl, ticket) != 1) {
    FreeTlsTicket(nullptr, ticket, nullptr, 0, 0, nullptr);
  }
}

class GuardedSslServer final : public httplib::SSLServer {
 public:
  GuardedSslServer(const HttpGuardOptions& options, const std::string& cert, const std::string& key)
      : httplib::SSLServer(cert.c_str(), key.c_str()),
        sources_(options.max_connections_per_source) {
    SSL_CTX* ctx = ssl_context();
    if (ctx != nullptr && options.max_connections_per_source > 0) {
      SSL_CTX_set_ex_data(ctx, Indexes().ctx, &sources_);
      SSL_CTX_set_info_callback(ctx, &OnTlsInfo);
    }
  }

 private:
  SourceCounts sources_;
};

}  // namespace

StatusOr<std::unique_ptr<httplib::Server>> NewGuardedHttpServer(
    const HttpGuardOptions& options, const std::string& tls_cert, const std::string& tls_key,
    std::function<httplib::TaskQueue*()> pool) {
  const bool off = options.header_timeout_ms <= 0 && options.max_connections_per_source <= 0;
  if (tls_cert.empty() && tls_key.empty()) {
    if (off) {  // the library's own connection handling, untouched
      auto plain = std::make_unique<httplib::Server>();
      plain->new_task_queue = std::move(pool);
      return std::unique_ptr<httplib::Server>(std::move(plain));
    }
    return std::unique_ptr<httplib::Server>(new GuardedServer(options, std::move(pool)));
  }
  auto ssl = std::make_unique<GuardedSslServer>(options, tls_cert, tls_key);
  if (!ssl->is_valid()) {
    return InvalidArgumentError("cannot load the TLS certificate " + tls_cert + " and key " +
                                tls_key);
  }
  ssl->new_task_queue = std::move(pool);
  return std::unique_ptr<httplib::Server>(std::move(ssl));
}

}  // namespace tessera
