// A task on a pseudo-terminal (agent/pty_relay.h): real shells driven through the shim's
// listener with the frames of base/pty_frames.h.
#include "agent/pty_relay.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>

#include "agent/task_launcher.h"
#include "agent/task_launcher_test_util.h"
#include "base/pty_frames.h"

namespace tessera {
namespace {

using launcher_testing::Clock;
using launcher_testing::kDeadline;
using launcher_testing::ReadAll;
using launcher_testing::TestLauncher;

// A client of a task's terminal on loopback.
class PtyClient {
 public:
  explicit PtyClient(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~PtyClient() { ::close(fd_); }
  bool connected() const { return connected_; }

  void Send(char type, const std::string& payload) {
    std::string out(kPtyFrameHeader, '\0');
    EncodePtyHeader(type, payload.size(), out.data());
    out += payload;
    ASSERT_EQ(::send(fd_, out.data(), out.size(), MSG_NOSIGNAL), static_cast<ssize_t>(out.size()));
  }
  void Window(uint16_t rows, uint16_t cols) {
    char w[4];
    EncodePtyWindow(rows, cols, w);
    Send(kPtyWindow, std::string(w, 4));
  }

  // Reads frames until one of `type` arrives (its payload), the output holds `text` (""),
  // the connection closes or the deadline passes (nullopt). Data frames are collected in
  // output().
  std::optional<std::string> Until(char type, const std::string& text = "") {
    const auto end = Clock::now() + kDeadline;
    while (true) {
      PtyFrame f;
      const long used = DecodePtyFrame(in_.data(), in_.size(), &f);
      if (used < 0) {
        return std::nullopt;
      }
      if (used > 0) {
        std::string payload(f.payload, f.size);
        const char got = f.type;
        in_.erase(0, static_cast<size_t>(used));
        if (got == kPtyData) {
          output_ += payload;
        }
        if (got == type) {
          return payload;
        }
        if (!text.empty() && output_.find(text) != std::string::npos) {
          return "";
        }
        continue;
      }
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
      pollfd p{fd_, POLLIN, 0};
      if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0) {
        return std::nullopt;
      }
      char buf[4096];
      const ssize_t n = ::read(fd_, buf, sizeof(buf));
      if (n <= 0) {
        return std::nullopt;
      }
      in_.append(buf, static_cast<size_t>(n));
    }
  }
  // Reads until the output holds `text`.
  bool UntilOutput(const std::string& text) {
    return output_.find(text) != std::string::npos || Until(kPtyExit, text).has_value();
  }
  const std::string& output() const { return output_; }

 private:
  int fd_ = -1;
  bool connected_ = false;
  std::string in_;
  std::string output_;
};

int32_t ExitStatus(const std::optional<std::string>& payload) {
  if (!payload.has_value() || payload->size() != 4) {
    return -1;
  }
  PtyFrame f{kPtyExit, payload->data(), payload->size()};
  int32_t status = -1;
  return DecodePtyExit(f, &status) ? status : -1;
}

class PtyLauncherTest : public launcher_testing::LauncherTest {};

TEST_F(PtyLauncherTest, AnAttachedClientDrivesAShellOnItsOwnTerminal) {
  TestLauncher launcher(NoCgroups());
  LaunchSpec spec = Shell("7.0.0", "");
  spec.argv = {"/bin/sh"};
  spec.pty_secret = "s3cret";
  ASSERT_TRUE(launcher.Start(spec).ok());
  const int port = launcher.PtyPort("7.0.0");
  ASSERT_GT(port, 0);

  PtyClient client(port);
  ASSERT_TRUE(client.connected());
  client.Send(kPtyHello, "s3cret");
  client.Window(40, 123);
  client.Send(kPtyData, "stty size; echo $((6*7)); tty; exit 5\n");
  const int32_t status = ExitStatus(client.Until(kPtyExit));
  EXPECT_EQ(status, 5) << client.output();
  EXPECT_NE(client.output().find("40 123"), std::string::npos) << client.output();
  EXPECT_NE(client.output().find("42"), std::string::npos) << client.output();
  EXPECT_NE(client.output().find("/dev/pts/"), std::string::npos) << client.output();

  std::optional<TaskExit> exit = WaitExit(launcher, "7.0.0");
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->exit_code, 5);
  // The terminal's output is the task's log too.
  EXPECT_NE(ReadAll(spec.log_path).find("42"), std::string::npos);
  EXPECT_EQ(launcher.PtyPort("7.0.0"), 0);  // reaped
}

TEST_F(PtyLauncherTest, WrongSecretsAndSecondClientsAreRefusedAndOutputWaitsForTheClient) {
  TestLauncher launcher(NoCgroups());
  LaunchSpec spec = Shell("8.0.0", "echo early; read line; echo got $line; exit 0");
  spec.pty_secret = "right";
  ASSERT_TRUE(launcher.Start(spec).ok());
  const int port = launcher.PtyPort("8.0.0");
  ASSERT_GT(port, 0);
  ASSERT_TRUE(launcher_testing::LauncherTest::WaitForText(spec.log_path, "early"));

  PtyClient wrong(port);
  wrong.Send(kPtyHello, "wrong");
  std::optional<std::string> why = wrong.Until(kPtyRefused);
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("secret"), std::string::npos);

  PtyClient client(port);
  client.Send(kPtyHello, "right");
  ASSERT_TRUE(client.UntilOutput("early"));  // written before anyone attached

  PtyClient second(port);
  second.Send(kPtyHello, "right");
  why = second.Until(kPtyRefused);
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("another client"), std::string::npos);

  client.Send(kPtyData, "hi\n");
  EXPECT_EQ(ExitStatus(client.Until(kPtyExit)), 0) << client.output();
  EXPECT_NE(client.output().find("got hi"), std::string::npos) << client.output();
  std::optional<TaskExit> exit = WaitExit(launcher, "8.0.0");
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->exit_code, 0);
}

TEST_F(PtyLauncherTest, ATaskWithoutATerminalHasNoPort) {
  TestLauncher launcher(NoCgroups());
  ASSERT_TRUE(launcher.Start(Shell("9.0.0", "sleep 5")).ok());
  EXPECT_EQ(launcher.PtyPort("9.0.0"), 0);
  EXPECT_EQ(launcher.PtyPort("nope"), 0);
}

}  // namespace
}  // namespace tessera
