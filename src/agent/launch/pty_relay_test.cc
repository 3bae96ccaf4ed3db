// A task on a pseudo-terminal (agent/launch/pty_relay.h): real shells driven through the shim's
// listener with the frames of base/pty_frames.h.
#include "agent/launch/pty_relay.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/launch/task_launcher.h"
#include "agent/launch/task_launcher_test_util.h"
#include "agent/launch/task_shim.h"
#include "base/pty_frames.h"

namespace tessera {
namespace {

using launcher_testing::Clock;
using launcher_testing::kDeadline;
using launcher_testing::ReadAll;
using launcher_testing::TestLauncher;
using std::chrono::milliseconds;

// How soon "at once" is: well under any deadline of the relay.
constexpr milliseconds kPrompt{500};

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
    connected_at_ = Clock::now();
  }
  ~PtyClient() { ::close(fd_); }
  bool connected() const { return connected_; }

  void Send(char type, const std::string& payload) {
    std::string out(kPtyFrameHeader, '\0');
    EncodePtyHeader(type, payload.size(), out.data());
    SendRaw(out + payload);
  }
  void SendRaw(const std::string& out) {
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
  std::optional<std::string> Until(char type, const std::string& text = "",
                                   milliseconds limit = kDeadline) {
    const auto end = Clock::now() + limit;
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
  bool UntilOutput(const std::string& text, milliseconds limit = kDeadline) {
    return output_.find(text) != std::string::npos || Until(kPtyExit, text, limit).has_value();
  }
  const std::string& output() const { return output_; }

  // Reads (and drops) until the shim ends the connection: the time from the connect to
  // then, or nullopt when it is still open `limit` after the connect (or now, if later).
  std::optional<milliseconds> ClosedAfter(milliseconds limit) {
    const auto end = connected_at_ + limit;
    while (true) {
      const auto left = std::chrono::duration_cast<milliseconds>(end - Clock::now()).count();
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, left > 0 ? static_cast<int>(left) : 0) <= 0) {
        return std::nullopt;
      }
      char buf[4096];
      if (::read(fd_, buf, sizeof(buf)) <= 0) {
        return std::chrono::duration_cast<milliseconds>(Clock::now() - connected_at_);
      }
    }
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
  Clock::time_point connected_at_;
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

// Connections that send nothing: they wait for their hellos beside the owner's.
std::vector<std::unique_ptr<PtyClient>> Idle(int port, size_t count) {
  std::vector<std::unique_ptr<PtyClient>> idle;
  for (size_t i = 0; i < count; ++i) {
    idle.push_back(std::make_unique<PtyClient>(port));
    EXPECT_TRUE(idle.back()->connected());
  }
  return idle;
}

// Attaches with `secret` while `idle` connections wait; the task has written "early".
void ExpectOwnerAttachesPromptly(int port, const std::string& secret) {
  const auto start = Clock::now();
  PtyClient owner(port);
  ASSERT_TRUE(owner.connected());
  owner.Send(kPtyHello, secret);
  ASSERT_TRUE(owner.UntilOutput("early", milliseconds(900))) << owner.output();
  EXPECT_LT(Clock::now() - start, milliseconds(900));
  owner.Send(kPtyData, "hi\n");
  EXPECT_EQ(ExitStatus(owner.Until(kPtyExit)), 0) << owner.output();
  EXPECT_NE(owner.output().find("got hi"), std::string::npos) << owner.output();
}

TEST_F(PtyLauncherTest, IdleConnectionsDoNotKeepTheOwnerOut) {
  TestLauncher launcher(NoCgroups());
  LaunchSpec spec = Shell("10.0.0", "echo early; read line; echo got $line; exit 0");
  spec.pty_secret = "owner-secret";
  ASSERT_TRUE(launcher.Start(spec).ok());
  const int port = launcher.PtyPort("10.0.0");
  ASSERT_GT(port, 0);
  ASSERT_TRUE(launcher_testing::LauncherTest::WaitForText(spec.log_path, "early"));

  std::vector<std::unique_ptr<PtyClient>> idle = Idle(port, 8);
  ExpectOwnerAttachesPromptly(port, "owner-secret");
  ASSERT_TRUE(WaitExit(launcher, "10.0.0").has_value());
}

TEST_F(PtyLauncherTest, MoreIdleConnectionsThanPendingSlotsDoNotKeepTheOwnerOut) {
  TestLauncher launcher(NoCgroups());
  LaunchSpec spec = Shell("11.0.0", "echo early; read line; echo got $line; exit 0");
  spec.pty_secret = "owner-secret";
  ASSERT_TRUE(launcher.Start(spec).ok());
  const int port = launcher.PtyPort("11.0.0");
  ASSERT_GT(port, 0);
  ASSERT_TRUE(launcher_testing::LauncherTest::WaitForText(spec.log_path, "early"));

  // The oldest give way to the newest, the owner's among them.
  std::vector<std::unique_ptr<PtyClient>> idle = Idle(port, kPtyMaxPending + 8);
  ExpectOwnerAttachesPromptly(port, "owner-secret");
  ASSERT_TRUE(WaitExit(launcher, "11.0.0").has_value());
}

TEST_F(PtyLauncherTest, AnythingButTheSecretIsDroppedAtOnce) {
  TestLauncher launcher(NoCgroups());
  LaunchSpec spec = Shell("12.0.0", "echo early; read line; echo got $line; exit 0");
  spec.pty_secret = "owner-secret";
  ASSERT_TRUE(launcher.Start(spec).ok());
  const int port = launcher.PtyPort("12.0.0");
  ASSERT_GT(port, 0);
  ASSERT_TRUE(launcher_testing::LauncherTest::WaitForText(spec.log_path, "early"));

  // A wrong secret of the right length: refused, then closed.
  PtyClient wrong(port);
  wrong.Send(kPtyHello, "owner-secreT");
  EXPECT_TRUE(wrong.Until(kPtyRefused, "", kPrompt).has_value());
  EXPECT_TRUE(wrong.ClosedAfter(kPrompt).has_value());
  // A hello that cannot hold the secret, half sent: dropped on its header.
  PtyClient longer(port);
  std::string header(kPtyFrameHeader, '\0');
  EncodePtyHeader(kPtyHello, 100, header.data());
  longer.SendRaw(header + "owner-secr");
  EXPECT_TRUE(longer.ClosedAfter(kPrompt).has_value());
  // Not a hello at all.
  PtyClient data(port);
  data.Send(kPtyData, "id\n");
  EXPECT_TRUE(data.ClosedAfter(kPrompt).has_value());
  PtyClient http(port);
  http.SendRaw("GET / HTTP/1.1\r\n");
  EXPECT_TRUE(http.ClosedAfter(kPrompt).has_value());

  ExpectOwnerAttachesPromptly(port, "owner-secret");
  ASSERT_TRUE(WaitExit(launcher, "12.0.0").has_value());
}

TEST_F(PtyLauncherTest, AnIdleConnectionIsClosedAfterTheHelloDeadline) {
  TestLauncher launcher(NoCgroups());
  LaunchSpec spec = Shell("13.0.0", "sleep 30");
  spec.pty_secret = "owner-secret";
  ASSERT_TRUE(launcher.Start(spec).ok());
  const int port = launcher.PtyPort("13.0.0");
  ASSERT_GT(port, 0);

  // Each waits its own deadline, none is turned away for another.
  std::vector<std::unique_ptr<PtyClient>> idle = Idle(port, 3);
  for (std::unique_ptr<PtyClient>& c : idle) {
    EXPECT_FALSE(c->ClosedAfter(milliseconds(kPtyHelloMs - 200)).has_value())
        << "closed before its deadline";
  }
  for (std::unique_ptr<PtyClient>& c : idle) {
    EXPECT_TRUE(c->ClosedAfter(milliseconds(kPtyHelloMs + 1000)).has_value())
        << "still open after its deadline";
  }
  ASSERT_TRUE(launcher.Signal("13.0.0", SIGKILL).ok());
  ASSERT_TRUE(WaitExit(launcher, "13.0.0").has_value());
}

// The address a listener of OpenPtyEndpoint is bound to ("" when there is none).
std::string BoundAddress(const ShimPlan& plan) {
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  if (::getsockname(plan.pty_listen_fd.get(), reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
    return "";
  }
  char text[INET6_ADDRSTRLEN] = {};
  const void* addr =
      bound.ss_family == AF_INET6
          ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&bound)->sin6_addr)
          : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&bound)->sin_addr);
  return ::inet_ntop(bound.ss_family, addr, text, sizeof(text)) == nullptr ? "" : text;
}

TEST(PtyEndpointTest, ListensOnLoopbackOrTheGivenAddressOnly) {
  LaunchSpec spec;
  spec.id = "14.0.0";
  spec.pty_secret = "owner-secret";
  {
    ShimPlan plan;
    int port = 0;
    ASSERT_TRUE(OpenPtyEndpoint(spec, &plan, &port).ok());
    EXPECT_GT(port, 0);
    EXPECT_EQ(BoundAddress(plan), "127.0.0.1");
  }
  {
    spec.pty_address = "127.0.0.2";  // the node's advertised address
    ShimPlan plan;
    int port = 0;
    ASSERT_TRUE(OpenPtyEndpoint(spec, &plan, &port).ok());
    EXPECT_EQ(BoundAddress(plan), "127.0.0.2");
  }
  {
    spec.pty_address = "::1";
    ShimPlan plan;
    int port = 0;
    const Status opened = OpenPtyEndpoint(spec, &plan, &port);
    if (opened.ok()) {  // else the node has no IPv6 loopback
      EXPECT_EQ(BoundAddress(plan), "::1");
    } else {
      EXPECT_EQ(opened.code(), StatusCode::kInternal) << opened.message();
    }
  }
  for (const char* address : {"0.0.0.0", "::", "node-1.example", "127.0.0.1:80"}) {
    spec.pty_address = address;
    ShimPlan plan;
    int port = 0;
    EXPECT_EQ(OpenPtyEndpoint(spec, &plan, &port).code(), StatusCode::kInvalidArgument) << address;
  }
  spec.pty_address = "";
  spec.pty_secret = std::string(kMaxPtySecret + 1, 's');
  ShimPlan plan;
  int port = 0;
  EXPECT_EQ(OpenPtyEndpoint(spec, &plan, &port).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera
