// The client side of `tessera run --pty`: raw mode and its restoration on a real
// pseudo-terminal, signals as bytes, and the relay against a stand-in for the shim.
#include "cli/pty_client.h"

#include <gtest/gtest.h>
#include <pty.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "base/pty_frames.h"

namespace tessera {
namespace {

TEST(PtyClientTest, RawModeTurnsOffEchoLineEditingKeySignalsAndOutputProcessing) {
  struct termios t {};
  t.c_iflag = ICRNL | IXON | BRKINT;
  t.c_oflag = OPOST | ONLCR;
  t.c_lflag = ECHO | ICANON | ISIG | IEXTEN;
  t.c_cflag = CS7 | PARENB;
  t.c_cc[VMIN] = 0;
  t.c_cc[VTIME] = 5;
  const struct termios raw = RawTermios(t);
  EXPECT_EQ(raw.c_lflag & (ECHO | ICANON | ISIG | IEXTEN), 0u);
  EXPECT_EQ(raw.c_iflag & (ICRNL | IXON | BRKINT), 0u);
  EXPECT_EQ(raw.c_oflag & OPOST, 0u);
  EXPECT_EQ(raw.c_cflag & CSIZE, static_cast<tcflag_t>(CS8));
  EXPECT_EQ(raw.c_cflag & PARENB, 0u);
  EXPECT_EQ(raw.c_cc[VMIN], 1);
  EXPECT_EQ(raw.c_cc[VTIME], 0);
}

TEST(PtyClientTest, TerminalModeRestoresWhatItFound) {
  int master = -1;
  int slave = -1;
  ASSERT_EQ(::openpty(&master, &slave, nullptr, nullptr, nullptr), 0);
  struct termios before {};
  ASSERT_EQ(::tcgetattr(slave, &before), 0);
  ASSERT_NE(before.c_lflag & ICANON, 0u);
  {
    TerminalMode mode(slave);
    EXPECT_TRUE(mode.raw());
    struct termios during {};
    ASSERT_EQ(::tcgetattr(slave, &during), 0);
    EXPECT_EQ(during.c_lflag & (ICANON | ECHO | ISIG), 0u);
  }
  struct termios after {};
  ASSERT_EQ(::tcgetattr(slave, &after), 0);
  EXPECT_EQ(after.c_lflag, before.c_lflag);
  EXPECT_EQ(after.c_iflag, before.c_iflag);
  EXPECT_EQ(after.c_oflag, before.c_oflag);
  ::close(master);
  ::close(slave);

  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  TerminalMode not_a_terminal(fds[0]);
  EXPECT_FALSE(not_a_terminal.raw());
  ::close(fds[0]);
  ::close(fds[1]);
}

TEST(PtyClientTest, SignalsArriveAsBytesAndHandlersAreRestored) {
  struct sigaction before {};
  ASSERT_EQ(::sigaction(SIGWINCH, nullptr, &before), 0);
  {
    SignalPipe signals({SIGWINCH});
    EXPECT_EQ(signals.Take(), 0);
    ASSERT_EQ(::raise(SIGWINCH), 0);
    EXPECT_EQ(signals.Wait(1000), SIGWINCH);
    EXPECT_EQ(signals.Take(), 0);
  }
  struct sigaction after {};
  ASSERT_EQ(::sigaction(SIGWINCH, nullptr, &after), 0);
  EXPECT_EQ(after.sa_handler, before.sa_handler);
}

// Reads one frame from `fd` (blocking); type 0 when the stream ends.
PtyFrame ReadFrame(int fd, std::string& buf) {
  while (true) {
    PtyFrame f;
    const long used = DecodePtyFrame(buf.data(), buf.size(), &f);
    if (used > 0) {
      static std::string payload;
      payload.assign(f.payload, f.size);
      buf.erase(0, static_cast<size_t>(used));
      return PtyFrame{f.type, payload.data(), payload.size()};
    }
    char chunk[4096];
    const ssize_t n = ::read(fd, chunk, sizeof(chunk));
    if (n <= 0) {
      return PtyFrame{};
    }
    buf.append(chunk, static_cast<size_t>(n));
  }
}

void SendFrame(int fd, char type, const std::string& payload) {
  std::string out(kPtyFrameHeader, '\0');
  EncodePtyHeader(type, payload.size(), out.data());
  out += payload;
  ASSERT_EQ(::write(fd, out.data(), out.size()), static_cast<ssize_t>(out.size()));
}

TEST(PtyClientTest, RelaySendsTheSecretAndKeysAndWritesTheOutputUntilTheExit) {
  int sock[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sock), 0);
  int keys[2];
  int screen[2];
  ASSERT_EQ(::pipe(keys), 0);
  ASSERT_EQ(::pipe(screen), 0);
  std::string hello;
  std::string typed;
  std::thread shim([&] {  // a stand-in for the task's shim
    std::string buf;
    PtyFrame f = ReadFrame(sock[1], buf);
    hello.assign(f.payload, f.size);
    f = ReadFrame(sock[1], buf);
    typed.assign(f.payload, f.size);  // no window: the output is not a terminal
    SendFrame(sock[1], kPtyData, "out\r\n");
    char status[4];
    EncodePtyExit(5, status);
    SendFrame(sock[1], kPtyExit, std::string(status, 4));
  });
  ASSERT_EQ(::write(keys[1], "ls\r", 3), 3);
  SignalPipe signals({SIGWINCH});
  StatusOr<TerminalEnd> end = RelayTerminal(sock[0], "s3cret", keys[0], screen[1], signals);
  shim.join();
  ASSERT_TRUE(end.ok()) << end.status().ToString();
  EXPECT_TRUE(end->exited);
  EXPECT_EQ(end->status, 5);
  EXPECT_EQ(hello, "s3cret");
  EXPECT_EQ(typed, "ls\r");
  char out[16] = {};
  EXPECT_EQ(::read(screen[0], out, sizeof(out)), 5);
  EXPECT_EQ(std::string(out, 5), "out\r\n");
  for (int fd : {sock[1], keys[0], keys[1], screen[0], screen[1]}) {
    ::close(fd);
  }
}

TEST(PtyClientTest, ARefusalIsReported) {
  int sock[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sock), 0);
  SendFrame(sock[1], kPtyRefused, "another client is attached to this terminal");
  int keys[2];
  ASSERT_EQ(::pipe(keys), 0);
  SignalPipe signals({SIGWINCH});
  StatusOr<TerminalEnd> end = RelayTerminal(sock[0], "s", keys[0], STDERR_FILENO, signals);
  ASSERT_TRUE(end.ok()) << end.status().ToString();
  EXPECT_FALSE(end->exited);
  EXPECT_EQ(end->refused, "another client is attached to this terminal");
  for (int fd : {sock[1], keys[0], keys[1]}) {
    ::close(fd);
  }
}

TEST(PtyClientTest, ConnectingToNothingIsUnavailable) {
  StatusOr<int> fd = ConnectTcp("127.0.0.1", 1, 1000);
  ASSERT_FALSE(fd.ok());
  EXPECT_EQ(fd.status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace tessera
