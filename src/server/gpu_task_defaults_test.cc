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
}  // namespace tessera
