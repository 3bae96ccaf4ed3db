// The per-GPU default CPUs and memory through the controller: applied at submission from
// the embedded defaults or the queue's own, bounded by the node, kept across a restart,
// and never applied over what the job states.
#include "server/gpu_task_defaults.h"

#include <gtest/gtest.h>

#include <string>

#include "server/controller_fixture.h"

namespace tessera {
namespace {

constexpr const char* kTwoH100s = "name: two\nresources: {gpus: 2, gpu_model: H100-80GB}\ncommand: [x]\n";

class GpuTaskDefaultsTest : public ControllerTest {
 protected:
  nlohmann::json SpecResources(uint64_t id) {
    auto j = Reads().GetJob(Principal{Role::kAdmin, "", "test"}, JobNumber(id));
    EXPECT_TRUE(j.ok()) << j.status().ToString();
    return j.ok() ? (*j)["spec"]["resources"] : nlohmann::json();
  }
  void SetTeamADefaults(const std::string& cpu, const std::string& memory) {
    const std::string yaml = "cohorts:\n  - name: cluster\nqueues:\n"
                             "  - {name: team-a, cohort: cluster, quota: {gpu: 8}, "
                             "defaultCpuPerGpu: " + cpu + ", defaultMemoryPerGpu: " + memory +
                             "}\n  - {name: team-b, cohort: cluster, quota: {gpu: 8}}\n"
                             "  - {name: default, cohort: cluster, quota: {gpu: 2}}\n";
    Status s = controller_->SetQueues(yaml);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
};

TEST_F(GpuTaskDefaultsTest, AGpuJobWithoutCpuOrMemoryGetsThePerGpuDefaultsAndKeepsThem) {
  Register();  // node-1: 64 cores, 512 GiB, two H100s and two A100s
  const uint64_t plain = Submit("team-a", kTwoH100s);
  EXPECT_EQ(SpecResources(plain)["cpu"], "8");  // 4 cores and 16 GiB per GPU
  EXPECT_EQ(SpecResources(plain)["memory"], "32GiB");
  const uint64_t stated =
      Submit("team-a", "resources: {gpus: 2, gpu_model: H100-80GB, cpu: 2}\ncommand: [x]\n");
  EXPECT_EQ(SpecResources(stated)["cpu"], "2");
  EXPECT_EQ(SpecResources(stated)["memory"], "32GiB");
  const uint64_t cpu_only = Submit("team-a", "command: [x]\n");
  EXPECT_EQ(SpecResources(cpu_only)["cpu"], "1");
  EXPECT_EQ(SpecResources(cpu_only)["memory"], "1GiB");

  // The queue's own defaults; past what the node offers per GPU (32 cores), the node's.
  SetTeamADefaults("12", "64GiB");
  const uint64_t queued = Submit("team-a", kTwoH100s);
  EXPECT_EQ(SpecResources(queued)["cpu"], "24");
  EXPECT_EQ(SpecResources(queued)["memory"], "128GiB");
  SetTeamADefaults("48", "64GiB");
  const uint64_t bounded = Submit("team-a", kTwoH100s);
  EXPECT_EQ(SpecResources(bounded)["cpu"], "64");
  const uint64_t other = Submit("team-b", kTwoH100s);  // team-b names none
  EXPECT_EQ(SpecResources(other)["cpu"], "8");

  // Stored as applied: a restart reads the same values back.
  Reopen();
  EXPECT_EQ(SpecResources(plain)["cpu"], "8");
  EXPECT_EQ(SpecResources(queued)["memory"], "128GiB");
}

}  // namespace

// On its own: a submission's jobs filled in for the queue configuration given with them.
namespace gpu_task_defaults_test {

JobSubmission GpuJob(const std::string& queue) {
  StatusOr<JobSubmission> job = ParseJobYaml(kTwoH100s, GpuCatalog::Default());
  EXPECT_TRUE(job.ok()) << job.status().message();
  job->spec.queue = queue;
  return *job;
}

TEST(GpuTaskDefaultsApplyAllTest, EveryJobGetsItsQueuesDefaultsFromTheTextGiven) {
  GpuTaskDefaults defaults(GpuCatalog::Default());
  NodeRegistry nodes;
  NodeInventory inventory;
  inventory.spec =
      MakeUniformNode("n", MilliCpu(64'000), MiB(512 * 1024),
                      GpuCatalog::Default().Find("H100-80GB").value(), 2, SharingMode::kExclusive);
  NodeRegistry::Registered(nodes.Add("n"), inventory, "a", "", 0);
  defaults.SetNodes(nodes);
  const std::string yaml =
      "queues:\n  - {name: team-a, quota: {gpu: 8}, defaultCpuPerGpu: 8, "
      "defaultMemoryPerGpu: 32GiB}\n  - {name: team-b, quota: {gpu: 8}}\n";
  std::vector<JobSubmission> jobs = {GpuJob("team-a"), GpuJob("team-b")};
  defaults.ApplyAll(yaml, jobs);
  EXPECT_EQ(jobs[0].spec.tasks[0].cpu, MilliCpu(16'000));  // 8 cores per GPU
  EXPECT_EQ(jobs[1].spec.tasks[0].cpu, MilliCpu(8'000));   // the embedded 4
  std::vector<JobSubmission> later = {GpuJob("team-a")};
  defaults.ApplyAll("queues:\n  - {name: team-a, quota: {gpu: 8}, defaultCpuPerGpu: 2}\n", later);
  EXPECT_EQ(later[0].spec.tasks[0].cpu, MilliCpu(4'000));
}

}  // namespace gpu_task_defaults_test
}  // namespace tessera
