#include "cli/pty_client.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <system_error>

#include "base/pty_frames.h"
#include "base/status.h"

namespace tessera {

namespace {


// The pipe the handlers write to: a handler can reach no object.
int g_signal_pipe[2] = {-1, -1};

void OnSignal(int sig) {
  const int saved = errno;
  const auto byte = static_cast<unsigned char>(sig);
  (void)!::write(g_signal_pipe[1], &byte, 1);
  errno = saved;
}

bool WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0 && errno == EAGAIN) {
      pollfd p{fd, POLLOUT, 0};
      (void)::poll(&p, 1, 1000);
      continue;
    }
    if (n <= 0) {
      return false;
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool SendFrame(int sock, char type, const char* payload, size_t size) {
  char frame[kMaxPtyFrame];
  EncodePtyHeader(type, size, frame);
  std::memcpy(frame + kPtyFrameHeader, payload, size);
  size_t done = 0;
  while (done < kPtyFrameHeader + size) {
    const ssize_t n = ::send(sock, frame + done, kPtyFrameHeader + size - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

bool SendWindow(int sock, int tty_fd) {
  uint16_t rows = 0;
  uint16_t cols = 0;
  if (!WindowSize(tty_fd, &rows, &cols)) {
    return true;  // not a terminal: the task keeps 24x80
  }
  char payload[4];
  EncodePtyWindow(rows, cols, payload);
  return SendFrame(sock, kPtyWindow, payload, sizeof(payload));
}

}  // namespace

struct termios RawTermios(const struct termios& t) {
  struct termios raw = t;
  raw.c_iflag &=
      ~static_cast<tcflag_t>(IGNBRK | BRKINT | PARMRK | ISTRIP | INLCR | IGNCR | ICRNL | IXON);
  raw.c_oflag &= ~static_cast<tcflag_t>(OPOST);
  raw.c_lflag &= ~static_cast<tcflag_t>(ECHO | ECHONL | ICANON | ISIG | IEXTEN);
  raw.c_cflag &= ~static_cast<tcflag_t>(CSIZE | PARENB);
  raw.c_cflag |= CS8;
  raw.c_cc[VMIN] = 1;
  raw.c_cc[VTIME] = 0;
  return raw;
}

TerminalMode::TerminalMode(int fd) : fd_(fd) {
  if (::isatty(fd_) == 1 && ::tcgetattr(fd_, &saved_) == 0) {
    const struct termios raw = RawTermios(saved_);
    raw_ = ::tcsetattr(fd_, TCSANOW, &raw) == 0;  // typed-ahead keys are kept
  }
}

void TerminalMode::Restore() {
  if (raw_) {
    (void)::tcsetattr(fd_, TCSAFLUSH, &saved_);
    raw_ = false;
  }
}

SignalPipe::SignalPipe(std::initializer_list<int> signals) {
  if (g_signal_pipe[0] < 0 && ::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    g_signal_pipe[0] = g_signal_pipe[1] = -1;
  }
  for (int sig : signals) {
    struct sigaction action {};
    action.sa_handler = OnSignal;
    ::sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    struct sigaction old {};
    if (::sigaction(sig, &action, &old) == 0) {
      saved_[sig] = old;
    }
  }
}

SignalPipe::~SignalPipe() {
  for (const auto& [sig, old] : saved_) {
    (void)::sigaction(sig, &old, nullptr);
  }
}

int SignalPipe::fd() const { return g_signal_pipe[0]; }

int SignalPipe::Take() {
  unsigned char byte = 0;
  return g_signal_pipe[0] >= 0 && ::read(g_signal_pipe[0], &byte, 1) == 1 ? byte : 0;
}

int SignalPipe::Wait(int ms) {
  if (int sig = Take(); sig != 0) {
    return sig;
  }
  pollfd p{g_signal_pipe[0], POLLIN, 0};
  (void)::poll(&p, 1, ms);
  return Take();
}

StatusOr<int> ConnectTcp(const std::string& host, int port, int timeout_ms) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    return UnavailableError("cannot resolve " + host + ": " + ::gai_strerror(rc));
  }
  std::string why = "no address";
  int connected = -1;
  for (addrinfo* a = found; a != nullptr && connected < 0; a = a->ai_next) {
    const int fd =
        ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) {
      why = ErrnoText(errno);
      continue;
    }
    int err = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      socklen_t len = sizeof(err);
      err =
          ::poll(&p, 1, timeout_ms) == 1 && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0
              ? err
              : ETIMEDOUT;
    }
    if (err != 0) {
      why = ErrnoText(err);
      ::close(fd);
      continue;
    }
    (void)::fcntl(fd, F_SETFL, 0);  // blocking from here
    connected = fd;
  }
  ::freeaddrinfo(found);
  if (connected < 0) {
    return UnavailableError("cannot reach the task's terminal at " + host + " port " + service +
                            ": " + why);
  }
  return connected;
}

bool WindowSize(int fd, uint16_t* rows, uint16_t* cols) {
  struct winsize size {};
  if (::ioctl(fd, TIOCGWINSZ, &size) != 0 || size.ws_row == 0 || size.ws_col == 0) {
    return false;
  }
  *rows = size.ws_row;
  *cols = size.ws_col;
  return true;
}

StatusOr<TerminalEnd> RelayTerminal(int sock, const std::string& secret, int in_fd, int out_fd,
                                    SignalPipe& signals) {
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{sock};
  if (secret.size() > kMaxPtyPayload || !SendFrame(sock, kPtyHello, secret.data(), secret.size()) ||
      !SendWindow(sock, out_fd)) {
    return UnavailableError("the task's terminal closed the connection: " + ErrnoText(errno));
  }
  TerminalEnd end;
  std::string in;  // from the shim, not yet decoded
  bool stdin_open = true;
  char buf[kMaxPtyPayload];
  while (true) {
    pollfd fds[3] = {
        {sock, POLLIN, 0}, {signals.fd(), POLLIN, 0}, {stdin_open ? in_fd : -1, POLLIN, 0}};
    if (::poll(fds, 3, -1) < 0) {
      continue;  // EINTR: the signal's byte is in the pipe
    }
    if ((fds[1].revents & POLLIN) != 0) {
      for (int sig = signals.Take(); sig != 0; sig = signals.Take()) {
        if (sig == SIGWINCH) {
          (void)SendWindow(sock, out_fd);
        } else {
          end.signal = sig;
          return end;
        }
      }
    }
    if ((fds[2].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      const ssize_t n = ::read(in_fd, buf, sizeof(buf));
      if (n > 0) {
        if (!SendFrame(sock, kPtyData, buf, static_cast<size_t>(n))) {
          return UnavailableError("the connection to the task's terminal broke");
        }
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        stdin_open = false;  // the task's terminal stays; it sees no more input
      }
    }
    if ((fds[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      const ssize_t n = ::read(sock, buf, sizeof(buf));
      if (n <= 0) {
        if (n < 0 && errno == EINTR) {
          continue;
        }
        return UnavailableError("the connection to the task's terminal broke");
      }
      in.append(buf, static_cast<size_t>(n));
      size_t at = 0;
      while (true) {
        PtyFrame frame;
        const long used = DecodePtyFrame(in.data() + at, in.size() - at, &frame);
        if (used < 0) {
          return InternalError("the task's terminal sent a malformed stream");
        }
        if (used == 0) {
          break;
        }
        at += static_cast<size_t>(used);
        if (frame.type == kPtyData) {
          if (!WriteAll(out_fd, frame.payload, frame.size)) {
            return UnavailableError("cannot write the task's output: " + ErrnoText(errno));
          }
        } else if (frame.type == kPtyExit) {
          end.exited = DecodePtyExit(frame, &end.status);
          return end;
        } else if (frame.type == kPtyRefused) {
          end.refused.assign(frame.payload, frame.size);
          return end;
        }
      }
      in.erase(0, at);
    }
  }
}

}  // namespace tessera
