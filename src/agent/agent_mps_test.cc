// The agent on fake shared GPUs with the fake nvidia-cuda-mps-control: one control
// daemon per shared GPU, a share task's environment (its GPU's MPS directories, the
// limiter and its limits), and the daemons' end with the agent.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "base/file_util.h"
#include "base/strings.h"
#include "agent/agent.h"
#include "agent/testing/fake_controller.h"

namespace tessera {
namespace {

std::string ReadFile(const std::string& path) { return ReadTextFile(path).value_or(""); }

std::map<std::string, std::string> ReadEnv(const std::string& path) {
  std::map<std::string, std::string> env;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    const size_t eq = line.find('=');
    if (eq != std::string::npos) {
      env[line.substr(0, eq)] = line.substr(eq + 1);
    }
  }
  return env;
}

class AgentMpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(controller_.ok());
    char dir[] = "/tmp/tessera_agent_mps_XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    data_ = dir_ + "/data";
    std::ofstream(dir_ + "/limiter.so") << "not a real library\n";
  }
  void TearDown() override {
    agent_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  AgentOptions Options() {
    AgentOptions o;
    o.server_url = controller_.url();
    o.token = "join-token";
    o.node_name = "n1";
    o.data_dir = data_;
    o.fake_gpus = "2xA100-80GB:shared";
    o.mps_control = TESSERA_FAKE_MPS_CONTROL;
    o.cuda_limiter = dir_ + "/limiter.so";
    o.use_cgroups = false;
    o.allow_root_tasks = true;  // this stand-in controller gives no uid
    o.telemetry_interval = 0;
    return o;
  }

  void Start(AgentOptions o) {
    auto agent = Agent::Create(o, GpuCatalog::Default());
    ASSERT_TRUE(agent.ok()) << agent.status().ToString();
    agent_ = std::move(agent).value();
    ASSERT_TRUE(agent_->RunOnce().ok());  // registers
  }

  std::string Log(int gpu) {
    return ReadFile(data_ + "/mps/" + std::to_string(gpu) + "/log/fake-mps-control.log");
  }

  // Heartbeats until `done` (at most 5 s).
  template <typename F>
  bool Until(F done) {
    for (int i = 0; i < 250; ++i) {
      if (done()) {
        return true;
      }
      (void)agent_->RunOnce();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return done();
  }

  FakeController controller_;
  std::string dir_;
  std::string data_;
  std::unique_ptr<Agent> agent_;
};

TEST_F(AgentMpsTest, DaemonsPerSharedGpuAndAShareTaskSeesItsGpusPipeTheLimiterAndItsLimits) {
  Start(Options());
  const NodeInventory& inv = agent_->inventory();
  ASSERT_EQ(inv.gpu_uuids.size(), 2u);
  EXPECT_EQ(inv.spec.labels, (NodeLabels{{"cuda-limiter", "on"}, {"mps", "on"}}));
  for (int g = 0; g < 2; ++g) {
    const std::string base = data_ + "/mps/" + std::to_string(g);
    ASSERT_TRUE(Until([&] { return CountOccurrences(Log(g), "daemon pid=") == 1; })) << "GPU " << g;
    EXPECT_NE(Log(g).find("argv=-f CUDA_VISIBLE_DEVICES=" + inv.gpu_uuids[static_cast<size_t>(g)] +
                          " CUDA_MPS_PIPE_DIRECTORY=" + base +
                          "/pipe CUDA_MPS_LOG_DIRECTORY=" + base + "/log"),
              std::string::npos)
        << Log(g);
  }

  // A quarter of GPU 1 with 20 GiB, as the controller sends it (its MPS limits only: the
  // agent fills in the limiter's from the grant).
  TaskLaunch l;
  l.key = {9, 0, 0};
  l.job_name = "share";
  const std::string out = dir_ + "/task.env";
  l.command = {"/bin/sh", "-c", "env > " + out + ".tmp && mv " + out + ".tmp " + out};
  l.gpus = {1};
  l.gpu_milli = 250;
  l.gpu_memory_mib = 20480;
  l.env = {{"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "25"},
           {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=20480M"},
           {"LD_PRELOAD", "/opt/own.so"}};
  controller_.Answer(HeartbeatResponse{{l}, {}, false});
  ASSERT_TRUE(Until([&] { return std::filesystem::exists(out); }));
  std::map<std::string, std::string> env = ReadEnv(out);
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], inv.gpu_uuids[1]);
  EXPECT_EQ(env["CUDA_MPS_PIPE_DIRECTORY"], data_ + "/mps/1/pipe");
  EXPECT_EQ(env["CUDA_MPS_LOG_DIRECTORY"], data_ + "/mps/1/log");
  EXPECT_EQ(env["LD_PRELOAD"], data_ + "/lib/libtessera_cuda_limiter.so:/opt/own.so");
  EXPECT_EQ(env["TESSERA_CUDA_MEMORY_LIMIT_MIB"], "20480");
  EXPECT_EQ(env["TESSERA_CUDA_COMPUTE_PERCENT"], "25");
  EXPECT_EQ(env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"], "25");
  EXPECT_EQ(env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"], "0=20480M");
  EXPECT_EQ(ReadFile(data_ + "/lib/libtessera_cuda_limiter.so"), "not a real library\n");

  // A killed daemon comes back (after the first backoff, 1 s).
  std::ifstream pidfile(data_ + "/mps/0/pipe/nvidia-cuda-mps-control.pid");
  int pid = 0;
  ASSERT_TRUE(pidfile >> pid);
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  ASSERT_TRUE(Until([&] { return CountOccurrences(Log(0), "daemon pid=") == 2; })) << Log(0);
  EXPECT_NE(ReadFile(data_ + "/mps/status").find("gpu 0 " + inv.gpu_uuids[0]), std::string::npos);

  // An agent that kills its tasks as it stops also quits the daemons.
  agent_->Stop();
  for (int g = 0; g < 2; ++g) {
    EXPECT_EQ(CountOccurrences(Log(g), "command: quit"), 1) << Log(g);
    EXPECT_EQ(CountOccurrences(Log(g), " quit\n"), 2) << Log(g);  // the command and the daemon's end
  }
}

TEST_F(AgentMpsTest, AnAgentThatKeepsItsTasksLeavesTheDaemonsToItsSuccessor) {
  AgentOptions o = Options();
  o.keep_tasks_on_stop = true;
  Start(o);
  ASSERT_TRUE(Until([&] { return CountOccurrences(Log(1), "daemon pid=") == 1; }));
  agent_->Stop();
  agent_.reset();
  EXPECT_EQ(CountOccurrences(Log(1), "quit"), 0);
  o.keep_tasks_on_stop = false;
  Start(o);  // adopts them: no second start
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(CountOccurrences(Log(0), "daemon pid="), 1) << Log(0);
  EXPECT_EQ(CountOccurrences(Log(1), "daemon pid="), 1) << Log(1);
  agent_->Stop();
  EXPECT_EQ(CountOccurrences(Log(1), "command: quit"), 1) << Log(1);
}

TEST_F(AgentMpsTest, AnAgentWithMpsOffStopsTheDaemonsItsPredecessorLeft) {
  AgentOptions o = Options();
  o.keep_tasks_on_stop = true;
  Start(o);
  ASSERT_TRUE(Until([&] { return CountOccurrences(Log(0), "daemon pid=") == 1; }));
  ASSERT_TRUE(Until([&] { return CountOccurrences(Log(1), "daemon pid=") == 1; }));
  agent_->Stop();
  agent_.reset();
  o.mps_control = "none";
  Start(o);
  for (int g = 0; g < 2; ++g) {
    EXPECT_EQ(CountOccurrences(Log(g), " quit\n"), 1) << Log(g);  // SIGTERM: no client to send quit
    EXPECT_FALSE(std::filesystem::exists(data_ + "/mps/" + std::to_string(g) +
                                         "/pipe/nvidia-cuda-mps-control.pid"));
  }
  EXPECT_EQ(agent_->inventory().spec.labels, (NodeLabels{{"cuda-limiter", "on"}, {"mps", "off"}}));
}

// The admin's --mps-multi-user is reported as a label while MPS runs, never without it.
TEST_F(AgentMpsTest, MultiUserMpsIsReportedAsALabelWhileMpsIsOn) {
  AgentOptions o = Options();
  o.mps_multi_user = true;
  Start(o);
  EXPECT_EQ(agent_->inventory().spec.labels,
            (NodeLabels{{"cuda-limiter", "on"}, {"mps", "on"}, {"mps-multi-user", "on"}}));
  agent_->Stop();
  agent_.reset();
  o.mps_control = "none";
  Start(o);
  EXPECT_EQ(agent_->inventory().spec.labels, (NodeLabels{{"cuda-limiter", "on"}, {"mps", "off"}}));
}

TEST_F(AgentMpsTest, WithoutTheProgramOrTheLimiterSharesRunAndTheProblemIsWritten) {
  AgentOptions o = Options();
  o.mps_control = dir_ + "/no-such-mps-control";
  o.cuda_limiter = "none";
  Start(o);
  const std::string status = ReadFile(data_ + "/mps/status");
  EXPECT_NE(status.find("limiter none"), std::string::npos) << status;
  EXPECT_EQ(agent_->inventory().spec.labels,
            (NodeLabels{{"cuda-limiter", "off"}, {"mps", "unavailable"}}));
  EXPECT_NE(status.find("problem GPU 1: " + dir_ + "/no-such-mps-control is not found"),
            std::string::npos)
      << status;
  TaskLaunch l;
  l.key = {3, 0, 0};
  const std::string out = dir_ + "/task.env";
  l.command = {"/bin/sh", "-c", "env > " + out + ".tmp && mv " + out + ".tmp " + out};
  l.gpus = {0};
  l.gpu_milli = 500;
  controller_.Answer(HeartbeatResponse{{l}, {}, false});
  ASSERT_TRUE(Until([&] { return std::filesystem::exists(out); }));
  std::map<std::string, std::string> env = ReadEnv(out);
  EXPECT_EQ(env.count("CUDA_MPS_PIPE_DIRECTORY"), 0u);
  EXPECT_EQ(env.count("LD_PRELOAD"), 0u);
  EXPECT_EQ(env.count("TESSERA_CUDA_COMPUTE_PERCENT"), 0u);
}

// The project's limiter over the fake libcuda: a quarter share of GPU 1 booked 20 GiB
// allocates 1 GiB at a time; the 21st allocation fails with CUDA_ERROR_OUT_OF_MEMORY and
// cuMemGetInfo reports 20 GiB, in a task the agent started.
TEST_F(AgentMpsTest, TheInjectedLimiterCapsAShareTaskAtItsBooking) {
#ifdef TESSERA_LIMITER_LIBRARY
  AgentOptions o = Options();
  o.cuda_limiter = TESSERA_LIMITER_LIBRARY;
  Start(o);
  TaskLaunch l;
  l.key = {11, 0, 0};
  l.command = {TESSERA_CUDA_CLIENT, "alloc", "alloc", "dlsym", "25"};
  l.gpus = {1};
  l.gpu_milli = 250;
  l.gpu_memory_mib = 20480;
  l.env = {{"LD_LIBRARY_PATH", TESSERA_FAKE_LIBCUDA_DIR}};
  controller_.Answer(HeartbeatResponse{{l}, {}, false});
  auto log = [&] {
    std::string all;
    std::error_code ec;
    for (const auto& f : std::filesystem::directory_iterator(data_ + "/logs", ec)) {
      all += ReadFile(f.path().string());
    }
    return all;
  };
  ASSERT_TRUE(Until([&] { return log().find("realloc_after_free=") != std::string::npos; }))
      << log();
  const std::string out = log();
  EXPECT_NE(out.find("allocated=20\nfirst_failure=21\nfailure_code=2\n"), std::string::npos) << out;
  EXPECT_NE(out.find("info_total_mib=20480\n"), std::string::npos) << out;
#else
  GTEST_SKIP() << "the CUDA limiter (src/limiter) is not part of this build";
#endif
}

}  // namespace
}  // namespace tessera
