// MpsSupervisor against fake processes (fast, exact), and against real processes of the
// fake nvidia-cuda-mps-control script (directories, environment, quit, restart).
#include "agent/mps_supervisor.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>

#include "base/file_util.h"
#include "base/strings.h"

namespace tessera {
namespace {

struct FakeProc {
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;
  std::string input;
  std::string output;
  bool ended = false;
  std::vector<int> signals;
};

// Shared between the ops a supervisor owns and the test.
struct FakeWorld {
  std::map<int, FakeProc> procs;
  int next_pid = 100;
  bool installed = true;
  bool daemons_ignore_quit = false;
  bool daemons_ignore_term = false;
  bool daemons_write_no_pid_file = false;  // stopped before they wrote it
  int pauses = 0;

  std::vector<int> Daemons() const {
    std::vector<int> out;
    for (const auto& [pid, p] : procs) {
      if (p.argv.size() == 2 && p.argv[1] == "-f") {
        out.push_back(pid);
      }
    }
    return out;
  }
  std::vector<int> Clients() const {
    std::vector<int> out;
    for (const auto& [pid, p] : procs) {
      if (p.argv.size() == 1) {
        out.push_back(pid);
      }
    }
    return out;
  }
};

class FakeOps final : public MpsProcessOps {
 public:
  explicit FakeOps(std::shared_ptr<FakeWorld> w) : w_(std::move(w)) {}
  std::string Find(const std::string& program) override {
    return w_->installed
               ? (program.find('/') == std::string::npos ? "/usr/bin/" + program : program)
               : "";
  }
  StatusOr<int> Start(const std::vector<std::string>& argv,
                      const std::map<std::string, std::string>& env, const std::string& input,
                      const std::string& output) override {
    const int pid = w_->next_pid++;
    w_->procs[pid] = FakeProc{argv, env, input, output, false, {}};
    const std::string pipe =
        env.count("CUDA_MPS_PIPE_DIRECTORY") ? env.at("CUDA_MPS_PIPE_DIRECTORY") : "";
    if (argv.size() == 2) {
      if (!w_->daemons_write_no_pid_file) {
        std::ofstream(pipe + "/nvidia-cuda-mps-control.pid") << pid << "\n";
      }
    } else {
      w_->procs[pid].ended = true;  // a client: runs its commands and ends
      if (input == "quit\n" && !w_->daemons_ignore_quit) {
        for (auto& [other, p] : w_->procs) {
          if (p.argv.size() == 2 && p.env.at("CUDA_MPS_PIPE_DIRECTORY") == pipe) {
            p.ended = true;
          }
        }
      }
    }
    return pid;
  }
  bool Ended(int pid) override { return w_->procs.count(pid) == 0 || w_->procs[pid].ended; }
  void Signal(int pid, int signal) override {
    FakeProc& p = w_->procs[pid];
    p.signals.push_back(signal);
    if (signal == SIGKILL || (signal == SIGTERM && !w_->daemons_ignore_term)) {
      p.ended = true;
    }
  }
  std::string CommandLine(int pid) override {
    if (Ended(pid)) {
      return "";
    }
    std::string out;
    for (const std::string& a : w_->procs[pid].argv) {
      out += (out.empty() ? "" : " ") + a;
    }
    return out;
  }
  void Pause(Micros) override { ++w_->pauses; }

 private:
  std::shared_ptr<FakeWorld> w_;
};

std::string TempDir() {
  char dir[] = "/tmp/tessera_mps_test_XXXXXX";
  EXPECT_NE(mkdtemp(dir), nullptr);
  return dir;
}

unsigned ModeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

class MpsSupervisorTest : public ::testing::Test {
 protected:
  void SetUp() override { root_ = TempDir() + "/mps"; }
  void TearDown() override {
    sup_.reset();
    std::error_code ec;
    std::filesystem::remove_all(std::filesystem::path(root_).parent_path(), ec);
  }
  std::unique_ptr<MpsSupervisor> Make() {
    MpsSupervisorOptions o;
    o.root = root_;
    return std::make_unique<MpsSupervisor>(o, &clock_, std::make_unique<FakeOps>(world_));
  }

  std::shared_ptr<FakeWorld> world_ = std::make_shared<FakeWorld>();
  ManualClock clock_{1'000'000'000};
  std::string root_;
  std::unique_ptr<MpsSupervisor> sup_;
};

const std::vector<SharedGpu> kTwo = {{0, "GPU-aaaa", false}, {1, "GPU-bbbb", false}};

TEST_F(MpsSupervisorTest, OneDaemonPerSharedGpuWithItsOwnDirectoriesAndDevice) {
  sup_ = Make();
  ASSERT_TRUE(sup_->Reconcile(kTwo).ok());
  std::vector<int> daemons = world_->Daemons();
  ASSERT_EQ(daemons.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const FakeProc& p = world_->procs[daemons[static_cast<size_t>(i)]];
    const std::string base = root_ + "/" + std::to_string(i);
    EXPECT_EQ(p.argv, (std::vector<std::string>{"/usr/bin/nvidia-cuda-mps-control", "-f"}));
    EXPECT_EQ(p.env.at("CUDA_VISIBLE_DEVICES"), kTwo[static_cast<size_t>(i)].uuid);
    EXPECT_EQ(p.env.at("CUDA_MPS_PIPE_DIRECTORY"), base + "/pipe");
    EXPECT_EQ(p.env.at("CUDA_MPS_LOG_DIRECTORY"), base + "/log");
    EXPECT_EQ(p.output, base + "/log/control.stderr");
    EXPECT_EQ(ModeOf(base + "/pipe"), 0755u);
    EXPECT_EQ(ModeOf(base + "/log"), 0700u);
    EXPECT_EQ(ModeOf(root_), 0755u);
    ASSERT_TRUE(sup_->Running(i).has_value());
    EXPECT_EQ(sup_->Running(i)->pipe, base + "/pipe");
  }
  // Reconciling the same inventory again starts nothing more.
  ASSERT_TRUE(sup_->Reconcile(kTwo).ok());
  sup_->Poll();
  EXPECT_EQ(world_->procs.size(), 2u);
  EXPECT_FALSE(sup_->Running(2).has_value());
}

TEST_F(MpsSupervisorTest, RestartsAnEndedDaemonAfterADoublingBoundedBackoff) {
  sup_ = Make();
  ASSERT_TRUE(sup_->Reconcile({kTwo[0]}).ok());
  Micros expected = 1'000'000;
  for (int round = 0; round < 7; ++round) {
    ASSERT_EQ(world_->Daemons().size(), static_cast<size_t>(round + 1));
    world_->procs[world_->Daemons().back()].ended = true;  // killed
    sup_->Poll();
    EXPECT_FALSE(sup_->Running(0).has_value());
    ASSERT_TRUE(sup_->Serving(0).has_value());  // tasks still get its directories
    EXPECT_EQ(sup_->Serving(0)->pipe, root_ + "/0/pipe");
    clock_.Advance(expected - 1);
    sup_->Poll();
    EXPECT_FALSE(sup_->Running(0).has_value()) << "round " << round;
    clock_.Advance(1);
    sup_->Poll();
    ASSERT_TRUE(sup_->Running(0).has_value()) << "round " << round;
    EXPECT_EQ(sup_->status()[0].restarts, round + 1);
    expected = std::min<Micros>(expected * 2, 30'000'000);  // 1, 2, 4, 8, 16, 30, 30 s
  }
  // A daemon that ran a minute before it ended comes back after the shortest wait.
  clock_.Advance(60'000'000);
  world_->procs[world_->Daemons().back()].ended = true;
  sup_->Poll();
  clock_.Advance(1'000'000);
  sup_->Poll();
  EXPECT_TRUE(sup_->Running(0).has_value());
}

TEST_F(MpsSupervisorTest, LeavingSharedModeQuitsTheDaemonThroughTheControlClient) {
  sup_ = Make();
  ASSERT_TRUE(sup_->Reconcile(kTwo).ok());
  const int gpu0 = world_->Daemons()[0];
  ASSERT_TRUE(sup_->Reconcile({kTwo[1]}).ok());
  EXPECT_TRUE(world_->procs[gpu0].ended);
  EXPECT_TRUE(world_->procs[gpu0].signals.empty());  // quit sufficed
  ASSERT_EQ(world_->Clients().size(), 1u);
  const FakeProc& client = world_->procs[world_->Clients()[0]];
  EXPECT_EQ(client.input, "quit\n");
  EXPECT_EQ(client.env.at("CUDA_MPS_PIPE_DIRECTORY"), root_ + "/0/pipe");
  EXPECT_FALSE(sup_->Running(0).has_value());
  EXPECT_FALSE(sup_->Serving(0).has_value());
  EXPECT_TRUE(sup_->Running(1).has_value());
  EXPECT_FALSE(world_->procs[world_->Daemons()[1]].ended);
  // A later end of GPU 0's old daemon restarts nothing.
  clock_.Advance(60'000'000);
  sup_->Poll();
  EXPECT_EQ(world_->Daemons().size(), 2u);
}

TEST_F(MpsSupervisorTest, ADaemonThatIgnoresQuitGetsSigtermThenSigkill) {
  sup_ = Make();
  ASSERT_TRUE(sup_->Reconcile({kTwo[0]}).ok());
  world_->daemons_ignore_quit = true;
  world_->daemons_ignore_term = true;
  sup_->Shutdown(true);
  const FakeProc& d = world_->procs[world_->Daemons()[0]];
  EXPECT_EQ(d.signals, (std::vector<int>{SIGTERM, SIGKILL}));
  EXPECT_TRUE(d.ended);
  EXPECT_GT(world_->pauses, 0);
}

TEST_F(MpsSupervisorTest, AGpuInMigModeIsRefusedWithAClearMessage) {
  sup_ = Make();
  Status s = sup_->Reconcile({{2, "GPU-cccc", true}, kTwo[0]});
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "GPU 2 is in MIG mode; MPS is not available on MIG instances");
  ASSERT_EQ(world_->Daemons().size(), 1u);  // GPU 0 runs all the same
  EXPECT_EQ(world_->procs[world_->Daemons()[0]].env.at("CUDA_VISIBLE_DEVICES"), "GPU-aaaa");
  EXPECT_FALSE(sup_->Running(2).has_value());
  EXPECT_FALSE(sup_->Serving(2).has_value());
  EXPECT_TRUE(sup_->Serving(0).has_value());
  std::vector<MpsDaemonStatus> st = sup_->status();
  ASSERT_EQ(st.size(), 2u);
  EXPECT_EQ(st[1].gpu, 2);
  EXPECT_EQ(st[1].problem, "GPU 2 is in MIG mode; MPS is not available on MIG instances");
}

TEST_F(MpsSupervisorTest, AMissingProgramIsReportedPerGpuAndNothingStarts) {
  world_->installed = false;
  sup_ = Make();
  Status s = sup_->Reconcile(kTwo);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("GPU 0: nvidia-cuda-mps-control is not found"), std::string::npos)
      << s.message();
  EXPECT_TRUE(world_->procs.empty());
  std::vector<MpsDaemonStatus> st = sup_->status();
  ASSERT_EQ(st.size(), 2u);
  EXPECT_NE(st[1].problem.find("GPU 1: nvidia-cuda-mps-control is not found"), std::string::npos);
  clock_.Advance(60'000'000);
  sup_->Poll();  // no restart loop for a refusal
  EXPECT_TRUE(world_->procs.empty());
  // Installed later: the next discovery starts the daemons.
  world_->installed = true;
  ASSERT_TRUE(sup_->Reconcile(kTwo).ok());
  EXPECT_EQ(world_->Daemons().size(), 2u);
  EXPECT_TRUE(sup_->Running(1).has_value());
  EXPECT_TRUE(sup_->status()[1].problem.empty());
}

TEST_F(MpsSupervisorTest, AnAgentThatKeepsItsTasksLeavesTheDaemonsForTheNextOneToAdopt) {
  sup_ = Make();
  ASSERT_TRUE(sup_->Reconcile(kTwo).ok());
  sup_->Shutdown(false);
  EXPECT_TRUE(world_->Clients().empty());
  for (int pid : world_->Daemons()) {
    EXPECT_FALSE(world_->procs[pid].ended);
  }
  sup_ = Make();
  ASSERT_TRUE(sup_->Reconcile(kTwo).ok());
  EXPECT_EQ(world_->Daemons().size(), 2u);  // adopted, none started
  ASSERT_TRUE(sup_->Running(1).has_value());
  EXPECT_TRUE(sup_->status()[1].adopted);
  // An adopted daemon that ends is restarted as the agent's own child.
  world_->procs[world_->Daemons()[1]].ended = true;
  sup_->Poll();
  clock_.Advance(1'000'000);
  sup_->Poll();
  EXPECT_EQ(world_->Daemons().size(), 3u);
  EXPECT_FALSE(sup_->status()[1].adopted);
}

TEST_F(MpsSupervisorTest, ADaemonLeftBeforeItWroteItsPidFileIsAdoptedAllTheSame) {
  world_->daemons_write_no_pid_file = true;
  sup_ = Make();
  ASSERT_TRUE(sup_->Reconcile(kTwo).ok());
  sup_->Shutdown(false);
  sup_ = Make();
  ASSERT_TRUE(sup_->Reconcile(kTwo).ok());
  EXPECT_EQ(world_->Daemons().size(), 2u);  // a second daemon on one pipe would be wrong
  EXPECT_TRUE(sup_->status()[0].adopted);
  EXPECT_TRUE(sup_->status()[1].adopted);
}

TEST_F(MpsSupervisorTest, ADaemonLeftForAGpuNoLongerSharedIsStoppedByTheNextAgent) {
  sup_ = Make();
  ASSERT_TRUE(sup_->Reconcile(kTwo).ok());
  sup_->Shutdown(false);
  const std::vector<int> left = world_->Daemons();
  ASSERT_EQ(left.size(), 2u);
  sup_ = Make();
  ASSERT_TRUE(sup_->Reconcile({kTwo[1]}).ok());  // GPU 0 is exclusive now
  EXPECT_TRUE(world_->procs[left[0]].ended);
  ASSERT_EQ(world_->Clients().size(), 1u);
  EXPECT_EQ(world_->procs[world_->Clients()[0]].env.at("CUDA_MPS_PIPE_DIRECTORY"),
            root_ + "/0/pipe");
  EXPECT_FALSE(world_->procs[left[1]].ended);
  EXPECT_TRUE(sup_->status()[0].adopted);
  EXPECT_EQ(world_->Daemons().size(), 2u);  // nothing new started
}

// ---- Real processes: the fake nvidia-cuda-mps-control script. ----

// The fake control daemon's log (empty while it has none).
std::string ReadLog(const std::string& path) { return ReadTextFile(path).value_or(""); }

// Waits (at most 5 s) until `done` holds.
template <typename F>
bool Eventually(F done) {
  for (int i = 0; i < 500; ++i) {
    if (done()) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

TEST(MpsSupervisorProcessTest, FakeControlDaemonsStartRestartAfterAKillAndQuit) {
  const std::string dir = TempDir();
  MpsSupervisorOptions o;
  o.root = dir + "/mps";
  o.program = TESSERA_FAKE_MPS_CONTROL;
  ManualClock clock(1'000'000'000);
  MpsSupervisor sup(o, &clock, MakeSystemMpsProcessOps());
  // A descriptor of the agent's without close-on-exec (a connection, say).
  const int leak = ::dup2(::open("/dev/null", O_RDONLY), 77);
  ASSERT_EQ(leak, 77);
  ASSERT_TRUE(sup.Reconcile(kTwo).ok());
  ::close(leak);
  const std::string log0 = o.root + "/0/log/fake-mps-control.log";
  const std::string log1 = o.root + "/1/log/fake-mps-control.log";
  ASSERT_TRUE(Eventually([&] { return CountOccurrences(ReadLog(log0), "daemon pid=") == 1; }));
  ASSERT_TRUE(Eventually([&] { return CountOccurrences(ReadLog(log1), "daemon pid=") == 1; }));
  EXPECT_FALSE(std::filesystem::exists("/proc/" + std::to_string(sup.status()[1].pid) + "/fd/77"))
      << "the daemon inherited the agent's descriptor";
  EXPECT_TRUE(std::filesystem::exists("/proc/" + std::to_string(sup.status()[1].pid) + "/fd/2"));
  const std::string line = ReadLog(log1);
  EXPECT_NE(line.find("argv=-f CUDA_VISIBLE_DEVICES=GPU-bbbb CUDA_MPS_PIPE_DIRECTORY=" + o.root +
                      "/1/pipe CUDA_MPS_LOG_DIRECTORY=" + o.root + "/1/log"),
            std::string::npos)
      << line;

  // SIGKILL GPU 0's daemon: noticed, restarted once the backoff (1 s) has passed.
  const int first = sup.status()[0].pid;
  ASSERT_GT(first, 0);
  ASSERT_EQ(::kill(first, SIGKILL), 0);
  ASSERT_TRUE(Eventually([&] {
    sup.Poll();
    return !sup.Running(0).has_value();
  }));
  clock.Advance(999'999);
  sup.Poll();
  EXPECT_FALSE(sup.Running(0).has_value());
  clock.Advance(1);
  sup.Poll();
  ASSERT_TRUE(sup.Running(0).has_value());
  EXPECT_NE(sup.status()[0].pid, first);
  EXPECT_EQ(sup.status()[0].restarts, 1);
  ASSERT_TRUE(Eventually([&] { return CountOccurrences(ReadLog(log0), "daemon pid=") == 2; }));

  // GPU 0 leaves shared mode: `quit` through the client, and the daemon ends.
  const int second = sup.status()[0].pid;
  ASSERT_TRUE(sup.Reconcile({kTwo[1]}).ok());
  EXPECT_FALSE(sup.Running(0).has_value());
  EXPECT_NE(::kill(second, 0), 0);  // gone and reaped
  const std::string after = ReadLog(log0);
  EXPECT_EQ(CountOccurrences(after, "command: quit"), 1) << after;
  EXPECT_EQ(CountOccurrences(after, "daemon pid=" + std::to_string(second) + " quit"), 1) << after;
  EXPECT_TRUE(sup.Running(1).has_value());

  const int gpu1 = sup.status()[0].pid;
  sup.Shutdown(true);
  EXPECT_NE(::kill(gpu1, 0), 0);
  EXPECT_EQ(CountOccurrences(ReadLog(log1), "command: quit"), 1);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

}  // namespace
}  // namespace tessera
