#include "plugins/fit_check.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "model/node.h"
#include "state/testing/test_cluster.h"

namespace tessera {
namespace {

using ::tessera::testing::Cluster;
using ::tessera::testing::Cpu;
using ::tessera::testing::Mig;
using ::tessera::testing::Model;
using ::tessera::testing::Share;
using ::tessera::testing::Whole;

NodeSpec Node(std::string name, std::string_view model, int gpus, SharingMode mode,
              std::vector<std::pair<std::string, std::string>> labels = {}) {
  NodeSpec n = MakeUniformNode(std::move(name), MilliCpu(64000), MiB(512 * 1024), Model(model),
                               gpus, mode, /*numa_nodes=*/2, /*nvlink=*/true);
  n.labels = std::move(labels);
  return n;
}

JobSpec Gang(const TaskRequest& task, int replicas, TopologyScope scope = TopologyScope::kAny,
             bool hard = false) {
  JobSpec spec;
  spec.queue = "q";
  spec.tasks.assign(static_cast<size_t>(replicas), task);
  spec.topology = {scope, hard};
  return spec;
}

std::string Never(const FitChecker& checker, const JobSpec& spec) {
  FitVerdict v = checker.Check(spec);
  EXPECT_FALSE(v.fits);
  return v.reason;
}

TEST(FitCheckTest, NoNodes) {
  ClusterState state = Cluster({});
  FitChecker checker(state);
  EXPECT_EQ(checker.nodes(), 0u);
  EXPECT_EQ(Never(checker, Gang(Whole(1), 1)), "no node is up");
}

TEST(FitCheckTest, FitsOnEmptyNodesWhateverRuns) {
  ClusterState state = Cluster({Node("n1", "H100-80GB", 8, SharingMode::kExclusive),
                                Node("n2", "H100-80GB", 8, SharingMode::kExclusive)});
  // Busy nodes do not matter: the check is against empty copies.
  TaskRequest eight = Whole(8);
  Allocation a;
  a.node = NodeId(0);
  a.cpu = MilliCpu(1000);
  for (int g = 0; g < 8; ++g) {
    a.gpus.push_back(GpuGrant{g, kWholeGpu, MiB(0), -1, -1});
  }
  ASSERT_TRUE(state.Allocate(a).ok());
  FitChecker checker(state);
  EXPECT_TRUE(checker.Check(Gang(eight, 2)).fits);
  EXPECT_TRUE(checker.Check(Gang(Whole(1), 16)).fits);
  EXPECT_TRUE(checker.Check(Gang(Cpu(64000), 2)).fits);
}

TEST(FitCheckTest, ShareAsksMoreGpuMemoryThanAnyGpu) {
  ClusterState state = Cluster({Node("n1", "H100-80GB", 8, SharingMode::kShared)});
  FitChecker checker(state);
  EXPECT_EQ(Never(checker, Gang(Share(500, 1000, 90 * 1024), 1)),
            "never fits: a task asks 90 GiB of GPU memory per GPU; the largest GPU has 79.6 GiB "
            "(H100-80GB)");
  EXPECT_TRUE(checker.Check(Gang(Share(500, 1000, 40 * 1024), 1)).fits);
}

// A timeslice card's memory counts for a share's memory request (it is not booked, but
// a request above the card never fits); a timeslice card never takes a whole-GPU task.
TEST(FitCheckTest, TimesliceCardsServeSharesWithinTheirMemoryOnly) {
  NodeSpec ts = Node("ts", "A100-80GB", 4, SharingMode::kTimeslice);
  for (GpuSpec& g : ts.gpus) {
    g.replicas = 4;
  }
  ClusterState state = Cluster({ts, Node("ex", "H100-80GB", 2, SharingMode::kExclusive)});
  FitChecker checker(state);
  EXPECT_EQ(Never(checker, Gang(Share(250, 1000, 81 * 1024), 1)),
            "never fits: a task asks 81 GiB of GPU memory per GPU; the largest GPU has 80 GiB "
            "(A100-80GB)");
  EXPECT_TRUE(checker.Check(Gang(Share(250, 1000, 80 * 1024), 1)).fits);
  // Shares of many tasks fit the replicas; whole GPUs only the two exclusive cards.
  EXPECT_TRUE(checker.Check(Gang(Share(250), 16)).fits);
  EXPECT_TRUE(checker.Check(Gang(Whole(1), 2)).fits);
  EXPECT_EQ(Never(checker, Gang(Whole(1), 3)).rfind("never fits: the job needs 3 GPUs; 2 are", 0),
            0u)
      << Never(checker, Gang(Whole(1), 3));
  ClusterState only_ts = Cluster({ts});
  EXPECT_EQ(Never(FitChecker(only_ts), Gang(Whole(1), 1)),
            "never fits: a task needs a GPU in exclusive or shared mode; no schedulable GPU is");
}

TEST(FitCheckTest, GangLargerThanSchedulableGpusNamesTheDrain) {
  ClusterState state = Cluster({Node("n1", "H100-80GB", 8, SharingMode::kExclusive),
                                Node("n3", "H100-80GB", 8, SharingMode::kExclusive)});
  ASSERT_TRUE(state.SetGpuDrained(NodeId(1), 5, true).ok());
  FitChecker checker(state);
  EXPECT_EQ(Never(checker, Gang(Whole(1), 16)),
            "never fits: the job needs 16 GPUs; 15 are schedulable (1 drained on node n3)");
  EXPECT_TRUE(checker.Check(Gang(Whole(1), 15)).fits);
  // Two tasks of 8: n3 can hold no task of 8 with a GPU drained.
  EXPECT_EQ(Never(checker, Gang(Whole(8), 2)),
            "never fits: the job needs 16 GPUs; 15 are schedulable (1 drained on node n3)");
}

TEST(FitCheckTest, DrainedNodesAreNotSchedulable) {
  ClusterState state = Cluster({Node("n1", "H100-80GB", 8, SharingMode::kExclusive),
                                Node("n2", "H100-80GB", 8, SharingMode::kExclusive)});
  ASSERT_TRUE(state.SetNodeDrained(NodeId(1), true).ok());
  FitChecker checker(state);
  EXPECT_EQ(Never(checker, Gang(Whole(8), 2)),
            "never fits: the job needs 16 GPUs; 8 are schedulable (8 drained on node n2)");
  ASSERT_TRUE(state.SetNodeDrained(NodeId(0), true).ok());
  EXPECT_EQ(Never(FitChecker(state), Gang(Whole(1), 1)),
            "held by a drain: every node is drained (2 nodes drained: n1, n2)");
  EXPECT_TRUE(FitChecker(state).Check(Gang(Whole(1), 1)).no_schedulable_node);
  EXPECT_FALSE(FitChecker(Cluster({Node("n1", "H100-80GB", 8, SharingMode::kExclusive)}))
                   .Check(Gang(Whole(9), 1))
                   .no_schedulable_node);
}

TEST(FitCheckTest, TaskTooLargeForAnyNode) {
  ClusterState state = Cluster({Node("n1", "H100-80GB", 8, SharingMode::kExclusive)});
  FitChecker checker(state);
  EXPECT_EQ(Never(checker, Gang(Whole(16), 1)),
            "never fits: a task asks 16 GPUs on one node; a schedulable node has at most 8");
  EXPECT_EQ(Never(checker, Gang(Cpu(128000), 1)),
            "never fits: a task asks 128 CPUs; the largest schedulable node has 64");
  EXPECT_EQ(Never(checker, Gang(Cpu(1000, 1024 * 1024), 1)),
            "never fits: a task asks 1024 GiB of memory; the largest schedulable node has 512 GiB");
}

TEST(FitCheckTest, GpuModelMissing) {
  ClusterState state = Cluster({Node("n1", "H100-80GB", 8, SharingMode::kExclusive)});
  TaskRequest a100 = Whole(1);
  a100.models.Add(Model("A100-80GB"));
  EXPECT_EQ(Never(FitChecker(state), Gang(a100, 1)),
            "never fits: a task asks for GPU model A100-80GB; no schedulable node has one (models "
            "here: H100-80GB)");
}

TEST(FitCheckTest, MigProfileAndMode) {
  ClusterState state = Cluster({Node("n1", "A100-40GB", 8, SharingMode::kMig)});
  FitChecker checker(state);
  EXPECT_TRUE(checker.Check(Gang(Mig("3g.20gb"), 1)).fits);
  EXPECT_EQ(Never(checker, Gang(Mig("3g.40gb"), 1)),
            "never fits: MIG profile 3g.40gb is not in the geometry of any GPU model here "
            "(A100-40GB)");
  EXPECT_EQ(Never(checker, Gang(Share(500), 1)),
            "never fits: a task needs a GPU in shared or timeslice mode; no schedulable GPU is");
  ClusterState exclusive = Cluster({Node("n1", "A100-40GB", 8, SharingMode::kExclusive)});
  EXPECT_EQ(Never(FitChecker(exclusive), Gang(Mig("3g.20gb"), 1)),
            "never fits: a task needs a GPU in MIG mode with profile 3g.20gb; no schedulable GPU "
            "is");
}

TEST(FitCheckTest, HardTopologyScopes) {
  ClusterState state =
      Cluster({Node("n1", "H100-80GB", 8, SharingMode::kExclusive, {{"rack", "r1"}}),
               Node("n2", "H100-80GB", 8, SharingMode::kExclusive, {{"rack", "r2"}}),
               Node("n3", "H100-80GB", 8, SharingMode::kExclusive, {{"rack", "r2"}})});
  FitChecker checker(state);
  EXPECT_TRUE(checker.Check(Gang(Whole(8), 2, TopologyScope::kRack, true)).fits);
  EXPECT_EQ(Never(checker, Gang(Whole(8), 3, TopologyScope::kRack, true)),
            "never fits: the job needs its 3 tasks, 24 GPUs in one rack (hard topology); no rack "
            "can hold them even when empty (at most 2 of the tasks)");
  // Soft: spreads wider.
  EXPECT_TRUE(checker.Check(Gang(Whole(8), 3, TopologyScope::kRack, false)).fits);
  EXPECT_EQ(Never(checker, Gang(Whole(4), 3, TopologyScope::kNode, true)),
            "never fits: the job needs its 3 tasks, 12 GPUs in one node (hard topology); no node "
            "can hold them even when empty (at most 2 of the tasks)");
  EXPECT_TRUE(checker.Check(Gang(Whole(4), 2, TopologyScope::kNode, true)).fits);
}

TEST(FitCheckTest, HardBlockAndNvlinkScopesUseTheirLabels) {
  ClusterState state = Cluster({Node("n1", "H100-80GB", 8, SharingMode::kExclusive,
                                     {{"block", "b1"}, {"nvlink-domain", "d1"}}),
                                Node("n2", "H100-80GB", 8, SharingMode::kExclusive,
                                     {{"block", "b1"}, {"nvlink-domain", "d2"}}),
                                Node("n3", "H100-80GB", 8, SharingMode::kExclusive,
                                     {{"block", "b2"}, {"nvlink-domain", "d2"}})});
  FitChecker checker(state);
  EXPECT_TRUE(checker.Check(Gang(Whole(8), 2, TopologyScope::kBlock, true)).fits);
  EXPECT_TRUE(checker.Check(Gang(Whole(8), 2, TopologyScope::kNvlinkDomain, true)).fits);
  EXPECT_EQ(Never(checker, Gang(Whole(8), 3, TopologyScope::kBlock, true)),
            "never fits: the job needs its 3 tasks, 24 GPUs in one block (hard topology); no block "
            "can hold them even when empty (at most 2 of the tasks)");
  EXPECT_EQ(Never(checker, Gang(Whole(8), 3, TopologyScope::kNvlinkDomain, true)),
            "never fits: the job needs its 3 tasks, 24 GPUs in one NVLink domain (hard topology); "
            "no NVLink domain can hold them even when empty (at most 2 of the tasks)");
}

TEST(FitCheckTest, RequireLocalNeedsOneNvlinkDomainOrNuma) {
  // Two NUMA nodes of 4 GPUs each, no NVLink.
  NodeSpec n = MakeUniformNode("n1", MilliCpu(64000), MiB(1 << 19), Model("L40S"), 8,
                               SharingMode::kExclusive, 2, false);
  ClusterState state = Cluster({n});
  FitChecker checker(state);
  EXPECT_TRUE(checker.Check(Gang(Whole(4, 1000, GpuTopology::kRequireLocal), 1)).fits);
  EXPECT_EQ(Never(checker, Gang(Whole(8, 1000, GpuTopology::kRequireLocal), 1)),
            "never fits: a task needs its 8 GPUs in one NVLink domain or NUMA node "
            "(require-local); no schedulable node has that many together");
}

TEST(FitCheckTest, GangPlacesOnTheLiveCopy) {
  ClusterState state = Cluster({Node("n1", "H100-80GB", 8, SharingMode::kExclusive),
                                Node("n2", "H100-80GB", 8, SharingMode::kExclusive)});
  Allocation a;
  a.node = NodeId(0);
  a.cpu = MilliCpu(1000);
  a.gpus.push_back(GpuGrant{0, kWholeGpu, MiB(0), -1, -1});
  ASSERT_TRUE(state.Allocate(a).ok());
  FitChecker now(state, FitChecker::Copy::kAsIs);
  EXPECT_TRUE(now.GangPlaces(Gang(Whole(1), 15)));
  EXPECT_FALSE(now.GangPlaces(Gang(Whole(1), 16)));
  EXPECT_FALSE(now.GangPlaces(Gang(Whole(8), 2)));
  EXPECT_TRUE(FitChecker(state).Check(Gang(Whole(8), 2)).fits);
}

TEST(FitCheckTest, LargeGangIsCheap) {
  std::vector<NodeSpec> nodes;
  for (int i = 0; i < 1000; ++i) {
    nodes.push_back(Node("n" + std::to_string(i), "H100-80GB", 8, SharingMode::kExclusive));
  }
  ClusterState state = Cluster(std::move(nodes));
  FitChecker checker(state);
  EXPECT_TRUE(checker.Check(Gang(Whole(1), 1024)).fits);
  EXPECT_EQ(Never(checker, Gang(Whole(8), 1001)),
            "never fits: the job needs 8008 GPUs; 8000 are schedulable");
}

// Hard scopes on many nodes: groups whose room cannot hold the gang are skipped, which
// must not change an answer, nor the "at most" count another group reaches.
TEST(FitCheckTest, HardScopesOnManyNodesGiveTheSameAnswers) {
  std::vector<NodeSpec> nodes;
  for (int i = 0; i < 600; ++i) {
    const bool big = i == 300;  // the one node with 8 GPUs
    nodes.push_back(Node("n" + std::to_string(i), "H100-80GB", big ? 8 : 4,
                         SharingMode::kExclusive, {{"rack", "r" + std::to_string(i / 2)}}));
  }
  ClusterState state = Cluster(std::move(nodes));
  FitChecker checker(state);
  EXPECT_TRUE(checker.Check(Gang(Whole(4), 2, TopologyScope::kNode, true)).fits);
  EXPECT_EQ(Never(checker, Gang(Whole(4), 3, TopologyScope::kNode, true)),
            "never fits: the job needs its 3 tasks, 12 GPUs in one node (hard topology); no node "
            "can hold them even when empty (at most 2 of the tasks)");
  EXPECT_EQ(Never(checker, Gang(Whole(4), 3, TopologyScope::kNvlinkDomain, true)),
            "never fits: the job needs its 3 tasks, 12 GPUs in one NVLink domain (hard topology); "
            "no NVLink domain can hold them even when empty (at most 2 of the tasks)");
  EXPECT_EQ(Never(checker, Gang(Whole(4), 4, TopologyScope::kRack, true)),
            "never fits: the job needs its 4 tasks, 16 GPUs in one rack (hard topology); no rack "
            "can hold them even when empty (at most 3 of the tasks)");
  EXPECT_EQ(Never(checker, Gang(Cpu(40000), 2, TopologyScope::kNode, true)),
            "never fits: the job needs its 2 tasks in one node (hard topology); no node can hold "
            "them even when empty (at most 1 of the tasks)");
  EXPECT_TRUE(checker.Check(Gang(Whole(4), 2, TopologyScope::kAny, true)).fits);

  // Live: three GPUs free on every node. Each rack has room for three 2-GPU tasks in
  // all, but not packed (one GPU left on each node), until a node is free.
  for (uint32_t i = 0; i < 600; ++i) {
    Allocation a;
    a.node = NodeId(i);
    for (int g = 0; g < (i == 300 ? 5 : 1); ++g) {
      a.gpus.push_back(GpuGrant{g, kWholeGpu, MiB(0), -1, -1});
    }
    ASSERT_TRUE(state.Allocate(a).ok());
  }
  EXPECT_FALSE(FitChecker(state, FitChecker::Copy::kAsIs)
                   .GangPlaces(Gang(Whole(2), 3, TopologyScope::kRack, true)));
  EXPECT_TRUE(FitChecker(state, FitChecker::Copy::kAsIs)
                  .GangPlaces(Gang(Whole(2), 2, TopologyScope::kRack, true)));
  EXPECT_FALSE(FitChecker(state, FitChecker::Copy::kAsIs)
                   .GangPlaces(Gang(Whole(4), 2, TopologyScope::kNode, true)));
  Allocation a;
  a.node = NodeId(451);
  a.gpus.push_back(GpuGrant{0, kWholeGpu, MiB(0), -1, -1});
  ASSERT_TRUE(state.Release(a).ok());  // n451 is free: n450 and n451 hold three
  EXPECT_TRUE(FitChecker(state, FitChecker::Copy::kAsIs)
                  .GangPlaces(Gang(Whole(2), 3, TopologyScope::kRack, true)));
  EXPECT_FALSE(FitChecker(state, FitChecker::Copy::kAsIs)
                   .GangPlaces(Gang(Whole(2), 3, TopologyScope::kNode, true)));
}

}  // namespace
}  // namespace tessera
