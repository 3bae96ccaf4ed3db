// `tessera run` and `tessera run --pty` against a real controller and agent on loopback:
// the task's output and exit code, Ctrl-C cancelling the job, and a shell on the task's
// own terminal driven through a terminal the test opens.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "e2e/cluster_fixture.h"

namespace tessera::e2e {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// A `tessera` CLI process: stdout and stderr to files, or, with a terminal, all three
// on the slave of a pseudo-terminal whose master the test holds.
class Cli {
 public:
  Cli(const std::vector<std::string>& args, const std::string& dir, bool terminal)
      : out_(dir + "/cli.out"), err_(dir + "/cli.err") {
    std::vector<std::string> argv = {TESSERA_BINARY};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> raw;
    for (std::string& a : argv) {
      raw.push_back(a.data());
    }
    raw.push_back(nullptr);
    if (terminal) {
      struct winsize size {};
      size.ws_row = 30;
      size.ws_col = 100;
      pid_ = ::forkpty(&master_, nullptr, nullptr, &size);
    } else {
      pid_ = ::fork();
    }
    if (pid_ == 0) {
      if (!terminal) {
        ::setpgid(0, 0);
        const int in = ::open("/dev/null", O_RDONLY);
        const int out = ::open(out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        const int err = ::open(err_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        ::dup2(in, 0);
        ::dup2(out, 1);
        ::dup2(err, 2);
      }
      ::execv(raw[0], raw.data());
      std::_Exit(127);
    }
  }
  ~Cli() {
    if (pid_ > 0 && !status_) {
      ::kill(pid_, SIGKILL);
      (void)Wait(seconds(5));
    }
    if (master_ >= 0) {
      ::close(master_);
    }
  }

  std::optional<int> Wait(milliseconds timeout) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (!status_) {
      int st = 0;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        break;
      }
      if (std::chrono::steady_clock::now() >= end) {
        return std::nullopt;
      }
      Drain(20);
    }
    return status_;
  }
  void Signal(int sig) const { ::kill(pid_, sig); }
  std::string Stdout() const { return Process::ReadFile(out_); }
  std::string Stderr() const { return Process::ReadFile(err_); }

  // The terminal: what the CLI wrote to it so far, and keys typed into it.
  void Type(const std::string& keys) {
    ASSERT_EQ(::write(master_, keys.data(), keys.size()), static_cast<ssize_t>(keys.size()));
  }
  bool ScreenHas(const std::string& text, milliseconds timeout) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (screen_.find(text) == std::string::npos) {
      if (std::chrono::steady_clock::now() >= end) {
        return false;
      }
      Drain(50);
    }
    return true;
  }
  const std::string& screen() const { return screen_; }

 private:
  void Drain(int ms) {
    if (master_ < 0) {
      std::this_thread::sleep_for(milliseconds(ms));
      return;
    }
    pollfd p{master_, POLLIN, 0};
    if (::poll(&p, 1, ms) == 1) {
      char buf[4096];
      const ssize_t n = ::read(master_, buf, sizeof(buf));
      if (n > 0) {
        screen_.append(buf, static_cast<size_t>(n));
      }
    }
  }

  std::string out_;
  std::string err_;
  pid_t pid_ = -1;
  int master_ = -1;
  std::optional<int> status_;
  std::string screen_;
};

// Whether a process runs whose command line is exactly `argv`.
bool ProcessRuns(const std::vector<std::string>& argv) {
  std::string want;
  for (const std::string& a : argv) {
    want += a;
    want += '\0';
  }
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string cmdline = Process::ReadFile(entry.path().string() + "/cmdline");
    if (cmdline == want) {
      return true;
    }
  }
  return false;
}

class RunE2eTest : public ServerAndAgentsTest {
 protected:
  std::string Prefix() const override { return "run"; }
  void SetUp() override {
    ServerAndAgentsTest::SetUp();
    if (!HasFatalFailure()) {
      StartAgent("n1", "2xH100-80GB");
    }
  }
  std::vector<std::string> Run(std::vector<std::string> tail) {
    std::vector<std::string> args = {"run",  "--server", url_,    "--token",
                                     admin_, "--queue",  "team-a"};
    args.insert(args.end(), tail.begin(), tail.end());
    return args;
  }
  // The id of the newest job in `state`; 0 until there is one.
  uint64_t NewestJob(const std::string& state) {
    nlohmann::json jobs = Get("/v1/jobs?state=" + state).value("jobs", nlohmann::json::array());
    return jobs.empty() ? 0 : jobs[0].value("id", uint64_t{0});
  }
};

TEST_F(RunE2eTest, PrintsTheTaskOutputAndExitsWithItsCode) {
  Cli cli(Run({"--", "sh", "-c", "echo hi; exit 3"}), dir_, false);
  EXPECT_EQ(cli.Wait(seconds(20)), std::optional<int>(3)) << cli.Stderr();
  EXPECT_EQ(cli.Stdout(), "hi\n");
  const uint64_t id = NewestJob("failed");
  ASSERT_GT(id, 0u);
  EXPECT_EQ(Job(id).value("exit_code", 0), 3);
}

TEST_F(RunE2eTest, CtrlCCancelsTheJobAndEndsItsProcesses) {
  const std::vector<std::string> task = {"sleep", "60.125"};
  std::vector<std::string> tail = {"--"};
  tail.insert(tail.end(), task.begin(), task.end());
  Cli cli(Run(tail), dir_, false);
  uint64_t id = 0;
  ASSERT_TRUE(
      WaitFor([&] { return (id = NewestJob("running")) > 0 && ProcessRuns(task); }, seconds(20)))
      << cli.Stderr();
  cli.Signal(SIGINT);
  EXPECT_EQ(cli.Wait(seconds(20)), std::optional<int>(130)) << cli.Stderr();
  EXPECT_EQ(Job(id).value("state", ""), "cancelled");
  EXPECT_TRUE(WaitFor([&] { return !ProcessRuns(task); }, seconds(5)));
  EXPECT_NE(cli.Stderr().find("cancelling job " + std::to_string(id)), std::string::npos)
      << cli.Stderr();
}

TEST_F(RunE2eTest, PtyRunsAnInteractiveShellOnItsOwnTerminal) {
  Cli cli(Run({"--pty", "--", "/bin/sh"}), dir_, true);
  uint64_t id = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        id = NewestJob("running");
        return id > 0 && Get("/v1/jobs/" + std::to_string(id) + "/attach").value("ready", false);
      },
      seconds(20)))
      << cli.screen();
  cli.Type("echo $((6*7)); tty; exit 5\n");
  EXPECT_TRUE(cli.ScreenHas("42", seconds(10))) << cli.screen();
  EXPECT_TRUE(cli.ScreenHas("/dev/pts/", seconds(10))) << cli.screen();
  EXPECT_EQ(cli.Wait(seconds(20)), std::optional<int>(5)) << cli.screen();
  EXPECT_EQ(Job(id).value("exit_code", 0), 5);
  // The terminal's output is the job's log as well.
  auto log = ApiClient(url_, admin_).Get(("/v1/jobs/" + std::to_string(id) + "/logs").c_str());
  ASSERT_TRUE(log);
  EXPECT_NE(log->body.find("42"), std::string::npos) << log->body;
}

}  // namespace
}  // namespace tessera::e2e
