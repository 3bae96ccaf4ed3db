// The live placement learns the workload from submissions and keeps what it learned
// across a restart (CoreSession::RefreshPlacement, WorkloadLearner, "scheduler/workload").
#include <gtest/gtest.h>

#include <string>

#include "server/controller_fixture.h"
#include "server/testing/job_yaml.h"

namespace tessera {
namespace {

class ControllerPlacementTest : public ControllerTest {
 protected:
  void Tune(ControllerOptions& options) override { options.history_interval = 0; }

  double Metric(const std::string& name) {
    const std::string text = Views().Metrics();
    const size_t at = text.find("\n" + name + " ");
    EXPECT_NE(at, std::string::npos) << name << " missing from\n" << text;
    return at == std::string::npos ? -1 : std::stod(text.substr(at + name.size() + 2));
  }
};

using testing::kOneGpu;

// A quarter of any GPU, with 10 GiB of its memory.
constexpr const char* kMemoryShare =
    "name: share\nresources: {gpu_fraction: 0.25, gpu_memory: 10GiB}\ncommand: [x]\n";

TEST_F(ControllerPlacementTest, TheDefaultPlacementLearnsTheWorkloadAndKeepsItAcrossARestart) {
  Register();
  EXPECT_EQ(Metric("tessera_placement_tasks_observed_total"), 0);
  EXPECT_EQ(Metric("tessera_placement_typical_tasks"), 0) << "bestfit until a task is seen";
  Submit("team-a", kOneGpu);
  Submit("team-b", kMemoryShare);
  Submit("team-a", kOneGpu);
  ASSERT_EQ(CycleAndTake().size(), 3U);
  EXPECT_EQ(Metric("tessera_placement_tasks_observed_total"), 3);
  EXPECT_EQ(Metric("tessera_placement_typical_tasks"), 2) << "a whole-GPU shape and a share";
  EXPECT_GE(Metric("tessera_placement_workload_models_total"), 1);

  Reopen();  // what was learned comes back from the store
  EXPECT_EQ(Metric("tessera_placement_tasks_observed_total"), 3);
  EXPECT_EQ(Metric("tessera_placement_typical_tasks"), 2);
  Register();
  Submit("team-a", kOneGpu);
  CycleAndTake();
  EXPECT_EQ(Metric("tessera_placement_tasks_observed_total"), 4);
}

}  // namespace
}  // namespace tessera
