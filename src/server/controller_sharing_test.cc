// Sharing modes through the controller: a timeslice GPU of 4 replicas takes four 0.25
// shares at once (no MPS, no memory cap in their launch) and never a whole-GPU job; a
// share on a shared GPU without a memory request is capped at its fraction of the card;
// a share asking more memory than any card (timeslice ones included) is refused; on a
// shared GPU whose MPS serves one Unix user (label mps=on), another tenant's share waits,
// with the reason, until the first tenant's shares end, also across a controller restart,
// and shares of both run at once where the node says mps-multi-user=on.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "server/controller_fixture.h"

namespace tessera {
namespace {

class ControllerSharingTest : public ControllerTest {
 protected:
  // node-1 (the fixture's agent): GPU 0 an exclusive H100, GPU 1 an A100 in `mode`
  // (timeslice with 4 replicas).
  void RegisterNode(SharingMode mode,
                    std::vector<std::pair<std::string, std::string>> labels = {}) {
    RegisterRequest r;
    r.agent_id = agent_id_;
    NodeSpec& spec = r.inventory.spec;
    spec.name = "node-1";
    spec.cpu = MilliCpu(64000);
    spec.memory = MiB(512 * 1024);
    spec.gpus = {GpuSpec{catalog().Find("H100-80GB").value(), SharingMode::kExclusive, 0, 0},
                 GpuSpec{catalog().Find("A100-80GB").value(), mode, 0, -1,
                         mode == SharingMode::kTimeslice ? 4 : 0}};
    spec.labels = std::move(labels);
    r.inventory.gpu_uuids = {"GPU-0", "GPU-1"};
    r.inventory.mig_instances.resize(2);
    r.tasks = Running();
    auto out = controller_->Register(r, "127.0.0.1");
    ASSERT_TRUE(out.ok()) << out.status().ToString();
  }

  StatusOr<JobIntake::Submitted> TrySubmit(const std::string& yaml) {
    StatusOr<JobSubmission> job = ParseJobYaml(yaml, catalog());
    if (!job.ok()) {
      return job.status();
    }
    return controller_->intake().Submit(Principal{Role::kTenant, "team-a", "test"},
                                        std::move(job).value(), "");
  }

  std::string State(uint64_t id) {
    auto j = Reads().GetJob(Principal{Role::kAdmin, "", "test"}, JobNumber(id));
    EXPECT_TRUE(j.ok()) << j.status().ToString();
    return j.ok() ? (*j)["state"].get<std::string>() : "";
  }
  std::string Reason(uint64_t id) {
    auto j = Reads().GetJob(Principal{Role::kAdmin, "", "test"}, JobNumber(id));
    return j.ok() ? (*j)["reason"].get<std::string>() : "";
  }
};

constexpr const char* kQuarter = "command: [/bin/true]\nresources: {gpu_fraction: 0.25}\n";
constexpr const char* kWhole = "command: [/bin/true]\nresources: {gpus: 1}\n";

TEST_F(ControllerSharingTest, TimesliceGpuRunsFourQuartersAndNoWholeGpuJob) {
  RegisterNode(SharingMode::kTimeslice);
  std::vector<uint64_t> quarters;
  for (int i = 0; i < 5; ++i) {
    quarters.push_back(Submit("team-a", kQuarter));
  }
  std::vector<TaskLaunch> launches = CycleAndTake();
  ASSERT_EQ(launches.size(), 4u);
  for (const TaskLaunch& l : launches) {
    EXPECT_EQ(l.gpus, std::vector<int>{1});
    EXPECT_EQ(l.gpu_milli, 250);
    EXPECT_EQ(l.gpu_memory_mib, 0);  // no memory cap: nothing isolates it
    EXPECT_EQ(l.env.at("TESSERA_GPU_SHARING"), "timeslice");
    EXPECT_EQ(l.env.count("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), 0u);
    EXPECT_EQ(l.env.count("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), 0u);
    EXPECT_EQ(l.env.count("TESSERA_CUDA_COMPUTE_PERCENT"), 0u);
    EXPECT_EQ(l.env.count("TESSERA_CUDA_MEMORY_LIMIT_MIB"), 0u);
  }
  EXPECT_EQ(State(quarters[4]), "pending");  // the fifth waits for a replica
  // Two whole-GPU jobs: one takes the exclusive H100; the other waits, never on GPU 1.
  const uint64_t whole_a = Submit("team-a", kWhole);
  const uint64_t whole_b = Submit("team-a", kWhole);
  launches = CycleAndTake();
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].key.job, whole_a);
  EXPECT_EQ(launches[0].gpus, std::vector<int>{0});
  EXPECT_EQ(State(whole_b), "pending");
  // A quarter ends: the fifth takes its replica.
  Exit(quarters[0]);
  launches = CycleAndTake();
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].key.job, quarters[4]);
  EXPECT_EQ(State(whole_b), "pending");
  // The dashboard's view of the GPU says its mode and replicas.
  const nlohmann::json nodes = Views().Nodes();
  const nlohmann::json& gpu = nodes["nodes"][0]["gpus"][1];
  EXPECT_EQ(gpu["mode"], "timeslice");
  EXPECT_EQ(gpu["replicas"], 4);
  EXPECT_EQ(gpu["used_milli"], 1000);
}

TEST_F(ControllerSharingTest, ShareWithoutMemoryIsCappedAtItsFractionOfTheCard) {
  RegisterNode(SharingMode::kShared);
  Submit("team-a", kQuarter);
  std::vector<TaskLaunch> launches = CycleAndTake();
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].gpus, std::vector<int>{1});
  EXPECT_EQ(launches[0].gpu_memory_mib, 81920 / 4);
  EXPECT_EQ(launches[0].env.at("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), "0=20480M");
  // The CUDA limiter's limits, the same ones.
  EXPECT_EQ(launches[0].env.at("TESSERA_CUDA_MEMORY_LIMIT_MIB"), "20480");
  EXPECT_EQ(launches[0].env.at("TESSERA_CUDA_COMPUTE_PERCENT"), "25");
  EXPECT_EQ(launches[0].env.at("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "25");
  // 0.25 + 0.5 with 61 GiB would overbook the card's memory: it waits.
  const uint64_t big =
      Submit("team-a", "command: [/bin/true]\nresources: {gpu_fraction: 0.5, gpu_memory: 61GiB}\n");
  EXPECT_TRUE(CycleAndTake().empty());
  EXPECT_EQ(State(big), "pending");
}

TEST_F(ControllerSharingTest, ShareAskingMoreMemoryThanTheTimesliceCardIsRefused) {
  RegisterNode(SharingMode::kTimeslice);
  ASSERT_TRUE(controller_->RunCycle().ok());
  StatusOr<JobIntake::Submitted> refused =
      TrySubmit("command: [/bin/true]\nresources: {gpu_fraction: 0.25, gpu_memory: 81GiB}\n");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.status().message().rfind(
                "never fits: a task asks 81 GiB of GPU memory per GPU; the largest GPU has 80 GiB "
                "(A100-80GB)",
                0),
            0u)
      << refused.status().message();
  EXPECT_TRUE(
      TrySubmit("command: [/bin/true]\nresources: {gpu_fraction: 0.25, gpu_memory: 80GiB}\n").ok());
}

TEST_F(ControllerSharingTest, AnotherTenantsShareWaitsForASingleUserMpsGpu) {
  const std::vector<std::pair<std::string, std::string>> labels = {{"mps", "on"}};
  RegisterNode(SharingMode::kShared, labels);
  const uint64_t a = Submit("team-a", kQuarter);
  const uint64_t a2 = Submit("team-a", kQuarter);  // joins its tenant's server
  const uint64_t b = Submit("team-b", kQuarter);
  std::vector<TaskLaunch> launches = CycleAndTake();
  ASSERT_EQ(launches.size(), 2u);
  EXPECT_EQ(launches[0].key.job, a);
  EXPECT_EQ(launches[1].key.job, a2);
  EXPECT_EQ(State(b), "pending");
  EXPECT_EQ(Reason(b),
            "waiting for resources: the shared GPUs with room for a task hold another tenant's "
            "shares, and their MPS serves one Unix user per GPU at a time (the node has no "
            "mps-multi-user=on); it starts when those shares end");

  // After a restart the shares put back from the store still hold the card for team-a.
  Reopen();
  RegisterNode(SharingMode::kShared, labels);
  EXPECT_TRUE(CycleAndTake().empty());
  EXPECT_EQ(State(b), "pending");
  Exit(a);
  EXPECT_TRUE(CycleAndTake().empty());  // a2 still runs as team-a
  Exit(a2);
  launches = CycleAndTake();
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].key.job, b);
}

TEST_F(ControllerSharingTest, MultiUserMpsRunsBothTenantsSharesAtOnce) {
  RegisterNode(SharingMode::kShared, {{"mps", "on"}, {"mps-multi-user", "on"}});
  Submit("team-a", kQuarter);
  Submit("team-b", kQuarter);
  EXPECT_EQ(CycleAndTake().size(), 2u);
}

}  // namespace
}  // namespace tessera
