#include "agent/launch/pty_relay.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>

#include "agent/launch/task_launcher.h"
#include "agent/launch/task_shim.h"
#include "base/clock.h"
#include "base/file_util.h"
#include "base/status.h"

namespace tessera {

namespace {


// A listening socket on `address` alone ("": 127.0.0.1), port chosen by the kernel.
StatusOr<UniqueFd> Listen(const std::string& address, int* port) {
  sockaddr_storage addr{};
  socklen_t addr_len = 0;
  const std::string host = address.empty() ? "127.0.0.1" : address;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&addr);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&addr);
  if (::inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    addr_len = sizeof(*v4);
    if (v4->sin_addr.s_addr == htonl(INADDR_ANY)) {
      addr_len = 0;
    }
  } else if (::inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    addr_len = sizeof(*v6);
    if (IN6_IS_ADDR_UNSPECIFIED(&v6->sin6_addr)) {
      addr_len = 0;
    }
  } else {
    return InvalidArgumentError("terminal address '" + host + "' is not a numeric IP address");
  }
  if (addr_len == 0) {
    return InvalidArgumentError("terminal address '" + host +
                                "' is every address of the node; give the one clients reach");
  }
  UniqueFd fd(::socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (fd.get() < 0 || ::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), addr_len) != 0) {
    return InternalError("cannot bind a socket for the task's terminal on " + host + ": " +
                         ErrnoText(errno));
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  // Room for a burst of connections between two turns of the relay's loop.
  if (::listen(fd.get(), static_cast<int>(kPtyMaxPending) * 2) != 0 ||
      ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
    return InternalError("cannot listen for the task's terminal: " + ErrnoText(errno));
  }
  *port = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                      : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  return fd;
}

}  // namespace

Status OpenPtyEndpoint(const LaunchSpec& spec, ShimPlan* plan, int* port) {
  if (spec.pty_secret.size() > kMaxPtySecret) {
    return InvalidArgumentError("task " + spec.id + ": the terminal's secret is longer than " +
                                std::to_string(kMaxPtySecret) + " bytes");
  }
  UniqueFd master(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (master.get() < 0 || ::unlockpt(master.get()) != 0) {
    return InternalError("task " + spec.id + ": no pseudo-terminal: " + ErrnoText(errno));
  }
  int slave = -1;
#ifdef TIOCGPTPEER
  slave = ::ioctl(master.get(), TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
#endif
  if (slave < 0) {  // kernels before 4.13: by its name
    std::array<char, 64> name{};
    if (::ptsname_r(master.get(), name.data(), name.size()) == 0) {
      slave = ::open(name.data(), O_RDWR | O_NOCTTY | O_CLOEXEC);
    }
  }
  UniqueFd slave_fd(slave);
  if (slave_fd.get() < 0) {
    return InternalError("task " + spec.id + ": cannot open its terminal: " + ErrnoText(errno));
  }
  // The task owns its terminal, as a login's user does (programs reopen it by name).
  if (spec.uid >= 0 && ::geteuid() == 0) {
    (void)::fchown(slave_fd.get(), static_cast<uid_t>(spec.uid), static_cast<gid_t>(-1));
  }
  struct winsize size {};
  size.ws_row = 24;  // until the client says
  size.ws_col = 80;
  (void)::ioctl(master.get(), TIOCSWINSZ, &size);
  if (::fcntl(master.get(), F_SETFL, O_NONBLOCK) != 0) {
    return InternalError("task " + spec.id + ": fcntl: " + ErrnoText(errno));
  }
  TESSERA_ASSIGN_OR_RETURN(UniqueFd listener, Listen(spec.pty_address, port));
  plan->pty_master_fd = std::move(master);
  plan->pty_slave_fd = std::move(slave_fd);
  plan->pty_listen_fd = std::move(listener);
  plan->pty_secret = spec.pty_secret;
  return Status::Ok();
}

PtyRelay::PtyRelay(int master, int listener, int log_fd, const char* secret, size_t secret_size)
    : master_(master),
      listener_(listener),
      log_fd_(log_fd),
      secret_(secret),
      secret_size_(secret_size) {}

siginfo_t PtyRelay::Run(const ShimPlan& plan, pid_t leader, pid_t self, bool* fenced) {
  const bool leased = plan.lease_ns > 0 && !plan.lease_file.empty();
  // Every signal is blocked in the shim: a child's end is read here.
  sigset_t chld;
  ::sigemptyset(&chld);
  ::sigaddset(&chld, SIGCHLD);
  const int child_fd = ::signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
  while (true) {
    // Whatever ended: the leader returns, the task's orphans are reaped.
    bool leader_gone = false;
    siginfo_t info;
    while (true) {
      std::memset(&info, 0, sizeof(info));
      if (::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
        if (errno == EINTR) {
          continue;
        }
        std::memset(&info, 0, sizeof(info));  // ECHILD: cannot happen while the leader is ours
        leader_gone = true;
        break;
      }
      if (info.si_pid == 0) {
        break;
      }
      if (info.si_pid == leader) {
        leader_gone = true;
        break;
      }
      int status = 0;
      ::waitpid(info.si_pid, &status, 0);
    }
    if (leader_gone) {
      if (child_fd >= 0) {
        ::close(child_fd);
      }
      return info;
    }
    if (leased && !*fenced && LeaseExpired(plan)) {
      *fenced = true;
      ::kill(-leader, SIGKILL);
      (void)KillTaskProcesses(self, self, self, nullptr, nullptr);
    }

    enum { kChild, kMaster, kListener, kClient, kPending, kFds = kPending + kPtyMaxPending };
    struct pollfd fds[kFds];
    fds[kChild] = {child_fd, POLLIN, 0};
    short master_events = 0;
    if (master_open_) {
      master_events |= POLLIN;
    }
    if (input_size_ > 0) {
      master_events |= POLLOUT;
    }
    fds[kMaster] = {master_events != 0 ? master_ : -1, master_events, 0};
    fds[kListener] = {listener_, POLLIN, 0};
    // Keystrokes are taken only as fast as the task reads them.
    fds[kClient] = {client_ >= 0 && input_size_ == 0 ? client_ : -1, POLLIN, 0};
    int timeout = -1;
    if (child_fd < 0 || leased) {
      timeout = 100;  // look at the children and the lease at least this often
    }
    const int64_t now = MonotonicMillis();
    for (size_t i = 0; i < kPtyMaxPending; ++i) {
      fds[kPending + i] = {pending_[i].fd, POLLIN, 0};
      if (pending_[i].fd >= 0) {
        const int64_t left = pending_[i].until_ms - now;
        timeout =
            left <= 0 ? 0 : (timeout < 0 || left < timeout ? static_cast<int>(left) : timeout);
      }
    }
    const int ready = ::poll(fds, kFds, timeout);
    if (ready < 0) {
      continue;  // EINTR
    }
    if ((fds[kChild].revents & POLLIN) != 0) {
      struct signalfd_siginfo drained[8];
      while (::read(child_fd, drained, sizeof(drained)) > 0) {
      }
    }
    if ((fds[kMaster].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      (void)ReadMaster();
    }
    if ((fds[kMaster].revents & POLLOUT) != 0) {
      WriteMaster();
    }
    if ((fds[kClient].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      ReadClient();
    }
    const int64_t after = MonotonicMillis();
    for (size_t i = 0; i < kPtyMaxPending; ++i) {
      Pending& p = pending_[i];
      if ((fds[kPending + i].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
        ReadHello(p);
      }
      if (p.fd >= 0 && after >= p.until_ms) {
        ClosePending(p);  // no hello in time
      }
    }
    if ((fds[kListener].revents & POLLIN) != 0) {
      Accept();
    }
  }
}

void PtyRelay::Finish(int32_t status) {
  // The task is gone: what it wrote is still in the master, then EIO.
  for (int rounds = 0; master_open_ && rounds < 1024 && ReadMaster(); ++rounds) {
  }
  char payload[4];
  EncodePtyExit(status, payload);
  (void)Send(kPtyExit, payload, sizeof(payload));
  DropClient();
  for (Pending& p : pending_) {
    ClosePending(p);
  }
  for (int* fd : {&listener_, &master_}) {
    if (*fd >= 0) {
      ::close(*fd);
      *fd = -1;
    }
  }
}

void PtyRelay::Accept() {
  while (true) {
    const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      return;  // EAGAIN: no more
    }
    if (client_ >= 0) {
      Refuse(fd, "another client is attached to this terminal");
      continue;
    }
    // A free slot, else the one that has waited longest: a client that sends its hello
    // right behind its connect is checked before a flood of newer connections evicts it.
    Pending* slot = &pending_[0];
    for (Pending& p : pending_) {
      if (p.fd < 0) {
        slot = &p;
        break;
      }
      if (p.until_ms < slot->until_ms) {
        slot = &p;
      }
    }
    ClosePending(*slot);
    slot->fd = fd;
    slot->until_ms = MonotonicMillis() + kPtyHelloMs;
    slot->size = 0;
  }
}

void PtyRelay::ClosePending(Pending& p) {
  if (p.fd >= 0) {
    ::close(p.fd);
    p.fd = -1;
  }
  p.size = 0;
}

void PtyRelay::Refuse(int fd, const char* why) {
  const size_t size = std::strlen(why);
  char out[kPtyFrameHeader + 128];
  const size_t n = size < 128 ? size : 128;
  EncodePtyHeader(kPtyRefused, n, out);
  std::memcpy(out + kPtyFrameHeader, why, n);
  (void)::send(fd, out, kPtyFrameHeader + n, MSG_NOSIGNAL | MSG_DONTWAIT);
  // What it sent and was not read would make the close a reset, which may discard the
  // reason before the peer reads it.
  char sink[512];
  for (int i = 0; i < 4 && ::recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0; ++i) {
  }
  ::close(fd);
}

void PtyRelay::ReadHello(Pending& p) {
  // Exactly the hello's bytes: what follows it (the window size) is the client's, read
  // once it is attached. The header first, which says whether it can hold the secret.
  const size_t want = p.size < kPtyFrameHeader ? kPtyFrameHeader : kPtyFrameHeader + secret_size_;
  const ssize_t n = ::recv(p.fd, p.hello + p.size, want - p.size, MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
    return;
  }
  if (n <= 0) {
    ClosePending(p);
    return;
  }
  p.size += static_cast<size_t>(n);
  if (p.size == kPtyFrameHeader) {
    const size_t length = (static_cast<size_t>(static_cast<unsigned char>(p.hello[1])) << 8) |
                          static_cast<unsigned char>(p.hello[2]);
    // The secret's length is no secret: the controller makes them all alike.
    if (p.hello[0] != kPtyHello || length != secret_size_ || secret_size_ == 0 ||
        secret_size_ > kMaxPtySecret) {
      const int fd = p.fd;
      p.fd = -1;
      p.size = 0;
      Refuse(fd, "wrong secret: ask GET /v1/jobs/{id}/attach for this attempt's");
    }
    return;
  }
  if (p.size < kPtyFrameHeader + secret_size_) {
    return;
  }
  const int fd = p.fd;
  p.fd = -1;
  p.size = 0;
  if (!PtySecretEquals(p.hello + kPtyFrameHeader, secret_size_, secret_, secret_size_)) {
    Refuse(fd, "wrong secret: ask GET /v1/jobs/{id}/attach for this attempt's");
    return;
  }
  if (client_ >= 0) {  // another pending client's hello came first
    Refuse(fd, "another client is attached to this terminal");
    return;
  }
  Attach(fd);
}

void PtyRelay::Attach(int fd) {
  client_ = fd;
  from_client_size_ = 0;
  // Blocking from here, with a bound: output waits for a slow client, never forever.
  (void)::fcntl(client_, F_SETFL, 0);
  struct timeval tv {
    kPtySendTimeoutMs / 1000, 0
  };
  (void)::setsockopt(client_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  // What the task wrote while no one was attached.
  while (backlog_size_ > 0 && client_ >= 0) {
    size_t n = kPtyBacklog - backlog_start_;
    n = n < backlog_size_ ? n : backlog_size_;
    n = n < kMaxPtyPayload ? n : kMaxPtyPayload;
    if (!Send(kPtyData, backlog_ + backlog_start_, n)) {
      break;
    }
    backlog_start_ = (backlog_start_ + n) % kPtyBacklog;
    backlog_size_ -= n;
  }
}

void PtyRelay::DropClient() {
  if (client_ >= 0) {
    ::close(client_);
    client_ = -1;
  }
  from_client_size_ = 0;
}

void PtyRelay::ReadClient() {
  if (from_client_size_ < sizeof(from_client_) && client_ >= 0) {
    const ssize_t n = ::recv(client_, from_client_ + from_client_size_,
                             sizeof(from_client_) - from_client_size_, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
      DropClient();  // gone: it may attach again
      return;
    }
    if (n > 0) {
      from_client_size_ += static_cast<size_t>(n);
    }
  }
  size_t at = 0;
  while (at < from_client_size_) {
    PtyFrame frame;
    const long used = DecodePtyFrame(from_client_ + at, from_client_size_ - at, &frame);
    if (used < 0) {
      DropClient();
      return;
    }
    if (used == 0) {
      break;
    }
    if (frame.type == kPtyData) {
      if (frame.size > sizeof(input_) - input_size_) {
        break;  // after the task has read what came before
      }
      std::memcpy(input_ + input_size_, frame.payload, frame.size);
      input_size_ += frame.size;
    } else if (frame.type == kPtyWindow) {
      struct winsize size {};
      if (DecodePtyWindow(frame, &size.ws_row, &size.ws_col) && size.ws_row > 0 &&
          size.ws_col > 0) {
        (void)::ioctl(master_, TIOCSWINSZ, &size);
      }
    }
    at += static_cast<size_t>(used);
  }
  std::memmove(from_client_, from_client_ + at, from_client_size_ - at);
  from_client_size_ -= at;
  WriteMaster();
}

void PtyRelay::WriteMaster() {
  while (input_size_ > 0) {
    const ssize_t n = ::write(master_, input_, input_size_);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      if (errno != EAGAIN) {
        input_size_ = 0;  // no one reads the terminal any more
      }
      return;
    }
    std::memmove(input_, input_ + n, input_size_ - static_cast<size_t>(n));
    input_size_ -= static_cast<size_t>(n);
  }
}

bool PtyRelay::ReadMaster() {
  char buf[kMaxPtyPayload];
  const ssize_t n = ::read(master_, buf, sizeof(buf));
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
    return false;
  }
  if (n <= 0) {
    master_open_ = false;  // EIO: no process holds the terminal open
    return false;
  }
  Output(buf, static_cast<size_t>(n));
  return true;
}

void PtyRelay::Output(const char* data, size_t size) {
  (void)WriteAllFd(log_fd_, data, size);
  if (client_ >= 0 && Send(kPtyData, data, size)) {
    return;
  }
  // Kept for the next client: the ring drops the oldest bytes.
  for (size_t i = 0; i < size; ++i) {
    if (backlog_size_ == kPtyBacklog) {
      backlog_start_ = (backlog_start_ + 1) % kPtyBacklog;
      --backlog_size_;
    }
    backlog_[(backlog_start_ + backlog_size_) % kPtyBacklog] = data[i];
    ++backlog_size_;
  }
}

bool PtyRelay::Send(char type, const char* payload, size_t size) {
  if (client_ < 0) {
    return false;
  }
  EncodePtyHeader(type, size, frame_);
  std::memcpy(frame_ + kPtyFrameHeader, payload, size);
  size_t done = 0;
  const size_t total = kPtyFrameHeader + size;
  while (done < total) {
    const ssize_t n = ::send(client_, frame_ + done, total - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      DropClient();  // gone, or stopped reading for kPtySendTimeoutMs
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace tessera
