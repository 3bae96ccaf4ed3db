// The agent on a MIG node over the fake NVML library (testing/fake_nvml.cc): a MIG
// instance that the driver will not create fails the launch with the reason, reported
// as failed_to_start and not as an exit code of the program (which never ran).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "agent/agent.h"
#include "agent/gpu/nvml_api.h"
#include "agent/testing/fake_controller.h"

#ifndef TESSERA_FAKE_NVML_PATH
#error "TESSERA_FAKE_NVML_PATH must name the fake NVML library (see src/agent/CMakeLists.txt)"
#endif

namespace tessera {
namespace {

using Json = nlohmann::json;

class AgentMigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(controller_.ok());
    char dir[] = "/tmp/tessera_agent_mig_XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    ::chmod(dir_.c_str(), 0711);
    setenv("FAKE_NVML_SPEC", "1xH100-80GB:mig", 1);
    AgentOptions o;
    o.server_url = controller_.url();
    o.token = "join-token";
    o.node_name = "n1";
    o.data_dir = dir_ + "/agent";
    o.nvml_library = TESSERA_FAKE_NVML_PATH;
    o.use_cgroups = false;
    o.telemetry_interval = 0;
    auto agent = Agent::Create(o, GpuCatalog::Default());
    ASSERT_TRUE(agent.ok()) << agent.status().ToString();
    agent_ = std::move(agent).value();
    ASSERT_EQ(agent_->inventory().spec.gpus.size(), 1u);
    ASSERT_EQ(agent_->inventory().spec.gpus[0].mode, SharingMode::kMig);
    Status registered = agent_->RunOnce();
    ASSERT_TRUE(registered.ok()) << registered.ToString();
    // The library the agent loaded, for its test hooks.
    fake_ = dlopen(TESSERA_FAKE_NVML_PATH, RTLD_NOW | RTLD_NOLOAD);
    ASSERT_NE(fake_, nullptr);
    fail_next_ = reinterpret_cast<void (*)(const char*, int)>(dlsym(fake_, "fakeNvmlFailNext"));
    gi_count_ = reinterpret_cast<int (*)(unsigned int)>(dlsym(fake_, "fakeNvmlGpuInstanceCount"));
    ASSERT_NE(fail_next_, nullptr);
    ASSERT_NE(gi_count_, nullptr);
  }
  void TearDown() override {
    agent_.reset();
    if (fake_ != nullptr) {
      dlclose(fake_);
    }
    unsetenv("FAKE_NVML_SPEC");
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // A task on a 1g.10gb instance at memory slot 0 of GPU 0.
  static TaskLaunch MigLaunch(uint64_t job) {
    TaskLaunch l;
    l.key = TaskKey{job, 0, 1};
    l.job_name = "j" + std::to_string(job);
    l.command = {"/bin/true"};
    l.mig = {MigRequest{0, "1g.10gb", 0}};
    l.uid = 200'777;
    l.gid = 200'777;
    return l;
  }

  void Send(TaskLaunch launch) {
    controller_.AnswerWithLaunch(std::move(launch));
    Status s = agent_->RunOnce();
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  // Heartbeats until one reports `job` in a state other than running; that report
  // (null after 10 s).
  Json BeatUntilEnded(uint64_t job) {
    for (int i = 0; i < 200; ++i) {
      (void)agent_->RunOnce();
      for (const Json& t : controller_.last().value("tasks", Json::array())) {
        if (t["key"]["job"] == job && t["state"] != "running") {
          return t;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return Json();
  }

  FakeController controller_;
  std::string dir_;
  std::unique_ptr<Agent> agent_;
  void* fake_ = nullptr;
  void (*fail_next_)(const char*, int) = nullptr;
  int (*gi_count_)(unsigned int) = nullptr;
};

TEST_F(AgentMigTest, AnInstanceTheDriverWillNotCreateFailsTheLaunchWithTheReason) {
  fail_next_("nvmlDeviceCreateGpuInstanceWithPlacement", NVML_ERROR_UNKNOWN);
  Send(MigLaunch(7));
  Json report = BeatUntilEnded(7);
  ASSERT_FALSE(report.is_null()) << controller_.last().dump();
  EXPECT_EQ(report["state"], "failed_to_start");
  // The program never ran: no exit code, least of all the shell's "command not found".
  EXPECT_NE(report.value("exit_code", -1), 127);
  EXPECT_EQ(report.value("exit_code", -1), 0);
  EXPECT_EQ(report.value("message", ""),
            "MIG instance 1g.10gb at slot 0 on GPU 0 could not be created: GPU 0: creating a "
            "1g.10gb GPU instance at slot 0: Unknown Error (NVML error 999)");
  // A driver failure is not a slice given twice, and nothing is left half made.
  EXPECT_EQ(agent_->double_bookings(), 0);
  EXPECT_EQ(gi_count_(0), 0);
}

}  // namespace
}  // namespace tessera
