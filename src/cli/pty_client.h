// The client side of a task's terminal (`tessera run --pty`; the shim's side is
// agent/launch/pty_relay.h, the frames base/pty_frames.h): the user's terminal in raw mode,
// signals as bytes on a pipe, a TCP connection to the node and the relay loop.
// Thread safety: TerminalMode and SignalPipe change process-wide state (the terminal's
// mode, signal dispositions): one of each at a time, on the main thread.
#pragma once

#include <signal.h>
#include <termios.h>

#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>

#include "base/status.h"

namespace tessera {

// `t` with input, output and line discipline raw (cfmakeraw's changes): no echo, no
// line editing, no signals from keys (Ctrl-C is a byte for the task), no output
// processing; reads return each byte as it comes (VMIN 1, VTIME 0).
struct termios RawTermios(const struct termios& t);

// Puts the terminal on `fd` in raw mode and restores the mode it found, at Restore or
// destruction, on every path out. A no-op when `fd` is not a terminal.
class TerminalMode {
 public:
  explicit TerminalMode(int fd);
  ~TerminalMode() { Restore(); }
  TerminalMode(const TerminalMode&) = delete;
  TerminalMode& operator=(const TerminalMode&) = delete;
  bool raw() const { return raw_; }
  void Restore();

 private:
  int fd_;
  bool raw_ = false;
  struct termios saved_ {};
};

// Catches `signals` for as long as it lives: each one delivered is written as a byte to
// a pipe (fd()), which the loops poll; the dispositions found are put back after.
class SignalPipe {
 public:
  explicit SignalPipe(std::initializer_list<int> signals);
  ~SignalPipe();
  SignalPipe(const SignalPipe&) = delete;
  SignalPipe& operator=(const SignalPipe&) = delete;
  int fd() const;
  // The next signal caught, 0 when none is waiting.
  int Take();
  // Waits up to `ms` for a signal; the signal, or 0.
  int Wait(int ms);

 private:
  std::map<int, struct sigaction> saved_;
};

// A TCP connection to host:port (a name, IPv4 or IPv6 address), within `timeout_ms`.
StatusOr<int> ConnectTcp(const std::string& host, int port, int timeout_ms);

// The window size of the terminal on `fd`; false when it is not one.
bool WindowSize(int fd, uint16_t* rows, uint16_t* cols);

struct TerminalEnd {
  bool exited = false;  // the shim sent the task's status
  int32_t status = 0;   // its exit code, or 128 + signal
  std::string refused;  // the shim's reason for refusing us; "" if it did not
  int signal = 0;       // a signal other than SIGWINCH ended the relay
};

// Attaches with `secret` on connection `sock` (which it closes) and relays until the
// task's end, the connection's, or a signal from `signals` other than SIGWINCH (which
// sends the window size of `out_fd`'s terminal): bytes from `in_fd` go to the task, its
// output to `out_fd`. Unavailable when the connection breaks before the end.
StatusOr<TerminalEnd> RelayTerminal(int sock, const std::string& secret, int in_fd, int out_fd,
                                    SignalPipe& signals);

}  // namespace tessera
