// The FGD `default` pod list through the live controller (fgd_controller_replay.h): the
// unallocated GPU % users get live is within half a point of what the placement
// experiment measures for the same placement and seed.
#include "server/scenarios/fgd_controller_replay.h"

#include <gtest/gtest.h>

#include <cmath>
#include <iostream>

#include "plugins/fgd.h"
#include "sim/fgd_experiment.h"
#include "sim/testing/sim_testing.h"
#include "state/cluster_state.h"

namespace tessera {
namespace {

const GpuCatalog& Catalog() { return GpuCatalog::Default(); }

struct Openb {
  std::vector<NodeSpec> nodes;
  PodList pods;
};

Openb LoadDefault() {
  Openb out;
  const std::string dir = testing::OpenbDir();
  if (dir.empty()) {
    return out;
  }
  auto nodes = ReadOpenbNodes(dir + "/openb_node_list_gpu_node.csv", Catalog());
  EXPECT_TRUE(nodes.ok()) << nodes.status().ToString();
  auto pods = ReadOpenbPods(dir + "/openb_pod_list_default.csv", Catalog());
  EXPECT_TRUE(pods.ok()) << pods.status().ToString();
  if (nodes.ok() && pods.ok()) {
    out.nodes = std::move(nodes).value();
    out.pods = std::move(pods).value();
  }
  return out;
}

double Simulated(const Openb& t, const std::string& policy, uint64_t seed) {
  auto cluster = ClusterState::Create(t.nodes, Catalog());
  EXPECT_TRUE(cluster.ok());
  FragmentationModel typical(FindTypicalTasks(t.pods.Requests()));
  FgdRunSpec spec;
  spec.cluster = &cluster.value();
  spec.pods = &t.pods;
  spec.typical = &typical;
  spec.policy = policy;
  spec.seed = seed;
  auto run = RunFgdExperiment(spec);
  EXPECT_TRUE(run.ok()) << run.status().ToString();
  return run.ok() ? run->UnallocatedAt100() : NAN;
}

// One test: the tessera replay, the costly part, serves both checks.
TEST(FgdControllerReplayTest, LiveTesseraMatchesTheExperimentAndBeatsLiveBestfit) {
  const Openb t = LoadDefault();
  ASSERT_FALSE(t.nodes.empty());
  constexpr uint64_t kSeed = 42;
  FgdLiveReplaySpec spec;
  spec.nodes = &t.nodes;
  spec.pods = &t.pods;
  spec.placement = "tessera";
  spec.seed = kSeed;
  auto live = ReplayFgdThroughController(spec, Catalog());
  ASSERT_TRUE(live.ok()) << live.status().ToString();
  const double sim = Simulated(t, "tessera", kSeed);
  std::cout << "tessera, seed " << kSeed << ": live " << live->unallocated_at_100
            << " % unallocated at 100 % arrived, experiment " << sim << " % ("
            << live->pods_placed << " of " << live->pods_tried << " pods placed live in "
            << live->seconds << " s)\n";
  EXPECT_GT(live->pods_placed, live->pods_tried / 2);
  EXPECT_LT(live->pods_placed, live->pods_tried) << "tuned to 130 %: some pods must fail";
  EXPECT_NEAR(live->unallocated_at_100, sim, 0.5);

  // The replay tells placements apart: the live default beats the old live default.
  spec.placement = "bestfit";
  auto bestfit = ReplayFgdThroughController(spec, Catalog());
  ASSERT_TRUE(bestfit.ok()) << bestfit.status().ToString();
  std::cout << "live, seed 42: bestfit " << bestfit->unallocated_at_100 << " %, tessera "
            << live->unallocated_at_100 << " %\n";
  EXPECT_GT(bestfit->unallocated_at_100, live->unallocated_at_100 + 1.0);
}

TEST(FgdControllerReplayTest, RefusesAMissingInput) {
  FgdLiveReplaySpec spec;
  EXPECT_FALSE(ReplayFgdThroughController(spec, Catalog()).ok());
}

}  // namespace
}  // namespace tessera
