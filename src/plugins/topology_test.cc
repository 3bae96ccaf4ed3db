// A multi-GPU exclusive task gets GPUs from one NVLink domain and one NUMA node
// where possible: through the full stack (ClusterState + MakeProfile + Placer), and
// GpuLocalityScorer's values on their own.

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "base/rng.h"
#include "model/node.h"
#include "plugins/fgd.h"
#include "plugins/fit_filters.h"
#include "plugins/registry.h"
#include "sched/gpu_selection.h"
#include "sched/placer.h"
#include "state/cluster_state.h"
#include "state/node_ledger.h"
#include "state/testing/test_cluster.h"

namespace tessera {
// Named, not anonymous: its Whole would meet testing::Whole in a unity batch.
namespace topology_test {

using ::tessera::testing::Cluster;
using ::tessera::testing::Model;
using ::tessera::testing::TestNode;

// Eight exclusive H100s: GPUs 0-3 in NVLink domain 0 on NUMA node 0, GPUs 4-7 in
// domain 1 on NUMA node 1.
NodeSpec TopoNode(std::string name, int64_t cpu = 128000) {
  NodeSpec spec = MakeUniformNode(std::move(name), MilliCpu(cpu), MiB(1 << 20), Model("H100-80GB"),
                                  8, SharingMode::kExclusive, 2, true);
  for (int g = 0; g < 8; ++g) {
    spec.gpus[g].nvlink_domain = g / 4;
  }
  return spec;
}

// Whole GPUs; unlike testing::Whole, with no CPU unless told.
TaskRequest Whole(int count, int64_t cpu = 0, GpuTopology topology = GpuTopology::kPreferLocal) {
  TaskRequest r;
  r.cpu = MilliCpu(cpu);
  r.gpu_count = count;
  r.gpu_milli = kWholeGpu;
  r.topology = topology;
  return r;
}

uint64_t MaskOf(const Allocation& a) {
  uint64_t mask = 0;
  for (const GpuGrant& g : a.gpus) {
    mask |= uint64_t{1} << g.gpu;
  }
  return mask;
}

// Typical tasks: 4 x one GPU (8000 CPU), 2 x two GPUs (16000), 2 x four GPUs (32000):
// 8 milli-CPU per milli-GPU, scale 8.
std::vector<TaskRequest> GpuWorkload() {
  std::vector<TaskRequest> w(4, Whole(1, 8000));
  w.push_back(Whole(2, 16000));
  w.push_back(Whole(2, 16000));
  w.push_back(Whole(4, 32000));
  w.push_back(Whole(4, 32000));
  return w;
}

class TopologyTest : public ::testing::Test {
 protected:
  TopologyTest() : workload_(GpuWorkload()), model_(FindTypicalTasks(workload_)) {}

  // Marks GPUs of node `id` busy (whole, no CPU).
  static void Busy(ClusterState& state, uint32_t id, std::vector<int> gpus) {
    Allocation a;
    a.node = NodeId(id);
    for (int g : gpus) {
      a.gpus.push_back({g, kWholeGpu, MiB(0)});
    }
    ASSERT_TRUE(state.Allocate(a).ok());
  }

  Placer MakePlacer(std::string_view policy, const ClusterState& state) {
    StatusOr<Profile> p = MakeProfile(policy, PolicyContext{ScaleOf(state), &model_});
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    return Placer(std::move(p).value());
  }

  Placement Place(std::string_view policy, const ClusterState& state, const TaskRequest& r,
                  uint64_t seed = 1, bool explain = false) {
    Placer placer = MakePlacer(policy, state);
    Pcg32 rng(seed);
    return placer.Place(state, r, rng, PlaceOptions{explain});
  }

  std::vector<TaskRequest> workload_;
  FragmentationModel model_;
};

TEST_F(TopologyTest, WorkloadShape) {
  ASSERT_EQ(model_.workload().tasks.size(), 3U);
  ASSERT_EQ(model_.scale(), 8);
}

TEST_F(TopologyTest, FourGpuTasksFillOneDomainAtATime) {
  ClusterState state = Cluster({TopoNode("a"), TopoNode("b")});
  Placer placer = MakePlacer("tessera", state);
  Pcg32 rng(1);
  // Each placement keeps all typical tasks fitting and strands nothing: Tessera key
  // 50 * 16 + 10 = 810, plus locality 3 * 2000. Ties go to the first node.
  const std::pair<uint32_t, uint64_t> expected[] = {{0, 0x0F}, {0, 0xF0}, {1, 0x0F}, {1, 0xF0}};
  for (const auto& [node, mask] : expected) {
    Placement p = placer.Place(state, Whole(4, 32000), rng);
    ASSERT_TRUE(p.placed);
    EXPECT_EQ(p.allocation.node, NodeId(node));
    EXPECT_EQ(MaskOf(p.allocation), mask);
    EXPECT_EQ(GpuSetLocality(state.node(p.allocation.node), MaskOf(p.allocation)), 0);
    EXPECT_EQ(p.score, 810 + 6000);
    ASSERT_TRUE(state.Allocate(p.allocation).ok());
  }
  EXPECT_FALSE(placer.Place(state, Whole(4, 32000), rng).placed);
}

TEST_F(TopologyTest, LocalityOutranksFragmentationAcrossNodes) {
  // Node 0 has GPUs 1 and 5 busy: its six free GPUs are 3 + 3 over the two domains,
  // so four of them are spread. Node 1 is fresh but CPU-poor (40 cores).
  ClusterState state = Cluster({TopoNode("busy"), TopoNode("poor", 40000)});
  Busy(state, 0, {1, 5});
  const TaskRequest task = Whole(4, 36000);
  // Tessera alone prefers node 0: there the task takes GPUs 0, 2, 3, 4 and leaves 2
  // GPUs (the 4-GPU typical task stops fitting: -2 * 2000 / 8 = -500): level 37, key
  // 602. On node 1 only 4000 CPU would be left for 4 GPUs: no typical task fits any
  // more (-4000) and stranded GPU grows 3000 -> 3500: level 1, key 26.
  // Locality: node 0 spread (0), node 1 one domain on one NUMA node (3).
  Placer placer = MakePlacer("tessera", state);
  std::vector<ScoreTerm> t0 = placer.Explain(state.node(NodeId(0)), task);
  std::vector<ScoreTerm> t1 = placer.Explain(state.node(NodeId(1)), task);
  ASSERT_EQ(t0.size(), 2U);
  ASSERT_EQ(t1.size(), 2U);
  EXPECT_EQ(t0[0].plugin, "tessera");
  EXPECT_EQ(t0[0].score, 602);
  EXPECT_EQ(t0[1].plugin, "gpu-locality");
  EXPECT_EQ(t0[1].score, 0);
  EXPECT_EQ(t0[1].weight, 2000);
  EXPECT_EQ(t1[0].score, 26);
  EXPECT_EQ(t1[1].score, 3);

  Pcg32 rng(1);
  Placement p = placer.Place(state, task, rng);
  ASSERT_TRUE(p.placed);
  EXPECT_EQ(p.allocation.node, NodeId(1));
  EXPECT_EQ(MaskOf(p.allocation), 0x0FU);
  EXPECT_EQ(p.score, 26 + 6000);

  // The FGD baseline (no locality scorer) takes node 0 and spreads the task.
  Placement fgd = Place("fgd", state, task);
  ASSERT_TRUE(fgd.placed);
  EXPECT_EQ(fgd.allocation.node, NodeId(0));
  EXPECT_EQ(MaskOf(fgd.allocation), 0x1DU);  // GPUs 0, 2, 3, 4
  EXPECT_EQ(fgd.score, 37);
}

TEST_F(TopologyTest, TwoGpusInOneDomainBeatOneFreeGpuPerDomain) {
  // Node 0: free GPUs 3 (domain 0) and 7 (domain 1). Node 1: free GPUs 6 and 7.
  // Tessera scores both alike (the task takes the last two GPUs: level 62, key 1002).
  ClusterState state = Cluster({TopoNode("split"), TopoNode("paired")});
  Busy(state, 0, {0, 1, 2, 4, 5, 6});
  Busy(state, 1, {0, 1, 2, 3, 4, 5});
  Placement p = Place("tessera", state, Whole(2, 16000));
  ASSERT_TRUE(p.placed);
  EXPECT_EQ(p.allocation.node, NodeId(1));
  EXPECT_EQ(MaskOf(p.allocation), 0xC0U);
  EXPECT_EQ(p.score, 1002 + 3 * 2000);
  EXPECT_EQ(p.tied_nodes, 1U);
  // Without the locality scorer the nodes tie and the first one wins.
  Placement fgd = Place("fgd", state, Whole(2, 16000));
  ASSERT_TRUE(fgd.placed);
  EXPECT_EQ(fgd.allocation.node, NodeId(0));
  EXPECT_EQ(MaskOf(fgd.allocation), 0x88U);
  EXPECT_EQ(fgd.tied_nodes, 2U);
}

TEST_F(TopologyTest, PreferLocalStillPlacesWhenNoNodeCanBeLocal) {
  ClusterState state = Cluster({TopoNode("a"), TopoNode("b")});
  Busy(state, 0, {1, 5});
  Busy(state, 1, {1, 5});
  // Both nodes spread (locality 0), Tessera key 602 on both: the first node, lowest
  // free GPUs.
  Placement p = Place("tessera", state, Whole(4, 32000));
  ASSERT_TRUE(p.placed);
  EXPECT_EQ(p.allocation.node, NodeId(0));
  EXPECT_EQ(MaskOf(p.allocation), 0x1DU);
  EXPECT_EQ(GpuSetLocality(state.node(NodeId(0)), 0x1D), 3);
  EXPECT_EQ(p.score, 602);
  EXPECT_EQ(p.tied_nodes, 2U);
}

TEST_F(TopologyTest, RequireLocalFailsWithTheLocalityFilterReason) {
  // Nodes 0 and 1 are busy on GPUs 1 and 5 (not now); node 2 has eight GPUs, each on
  // its own NUMA node without NVLink (never).
  NodeSpec lone = MakeUniformNode("lone", MilliCpu(128000), MiB(1 << 20), Model("H100-80GB"), 8,
                                  SharingMode::kExclusive, 8, false);
  ClusterState state = Cluster({TopoNode("a"), TopoNode("b"), std::move(lone)});
  Busy(state, 0, {1, 5});
  Busy(state, 1, {1, 5});
  Placement p = Place("tessera", state, Whole(4, 32000, GpuTopology::kRequireLocal), 1, true);
  EXPECT_FALSE(p.placed);
  EXPECT_TRUE(p.busy_nodes_exist);
  EXPECT_EQ(p.reasons, (std::vector<std::pair<std::string, int>>{
                           {"not enough free GPUs in one NVLink domain or NUMA node", 2},
                           {"no NVLink domain or NUMA node has enough GPUs", 1}}));
  // Preferring locality, the task places (on the fresh node 2, spread: locality 0 on
  // every node, and there fragmentation does not grow).
  Placement prefer = Place("tessera", state, Whole(4, 32000));
  ASSERT_TRUE(prefer.placed);
  EXPECT_EQ(prefer.allocation.node, NodeId(2));
  EXPECT_EQ(MaskOf(prefer.allocation), 0x0FU);
  EXPECT_EQ(GpuSetLocality(state.node(NodeId(2)), 0x0F), 3);
  // Requiring it with a 2-GPU task fits nodes 0 and 1 (GPUs 2 and 3 share domain 0).
  Placement two = Place("tessera", state, Whole(2, 16000, GpuTopology::kRequireLocal));
  ASSERT_TRUE(two.placed);
  EXPECT_EQ(GpuSetLocality(state.node(two.allocation.node), MaskOf(two.allocation)), 0);
}

TEST_F(TopologyTest, AnyTakesTheLowestFreeIndices) {
  ClusterState state = Cluster({TopoNode("a")});
  Busy(state, 0, {1});
  // Free: 0, 2, 3 in domain 0 and 4-7 in domain 1.
  Placement any = Place("tessera", state, Whole(4, 32000, GpuTopology::kAny));
  ASSERT_TRUE(any.placed);
  EXPECT_EQ(MaskOf(any.allocation), 0x1DU);  // 0, 2, 3, 4
  Placement local = Place("tessera", state, Whole(4, 32000));
  ASSERT_TRUE(local.placed);
  EXPECT_EQ(MaskOf(local.allocation), 0xF0U);
  Placement required = Place("tessera", state, Whole(4, 32000, GpuTopology::kRequireLocal));
  ASSERT_TRUE(required.placed);
  EXPECT_EQ(MaskOf(required.allocation), 0xF0U);
}

// The paper's baselines have no locality scorer, but GPU selection inside the node
// they choose is topology-aware.
TEST_F(TopologyTest, BaselinesPickLocalGpusInsideTheirNode) {
  ClusterState state = Cluster({TopoNode("a"), TopoNode("b")});
  Busy(state, 0, {1});
  Busy(state, 1, {1});
  for (const std::string& policy : PolicyNames()) {
    for (uint64_t seed = 1; seed <= (policy == "random" ? 16U : 1U); ++seed) {
      SCOPED_TRACE(::testing::Message() << policy << " seed " << seed);
      // Four GPUs: domain 1, the only group with four free.
      Placement p = Place(policy, state, Whole(4, 32000), seed);
      ASSERT_TRUE(p.placed);
      EXPECT_EQ(MaskOf(p.allocation), 0xF0U);
      // Three GPUs: the group with the fewest free that holds them (domain 0: 0, 2, 3),
      // keeping domain 1 whole.
      p = Place(policy, state, Whole(3, 24000), seed);
      ASSERT_TRUE(p.placed);
      EXPECT_EQ(MaskOf(p.allocation), 0x0DU);
      // Two GPUs: the same group, lowest indices.
      p = Place(policy, state, Whole(2, 16000), seed);
      ASSERT_TRUE(p.placed);
      EXPECT_EQ(MaskOf(p.allocation), 0x05U);
    }
  }
}

// ---------------------------------------------------------------------------------
// GpuLocalityScorer on its own.

int64_t Locality(const NodeLedger& node, const TaskRequest& r) {
  GpuLocalityScorer s;
  NodeScore ns = s.Score(node, r);
  EXPECT_TRUE(ns.gpus.empty());  // no opinion on the GPUs
  return ns.score;
}

TEST(GpuLocalityScorerTest, OneDomainOnOneNumaNode) {
  GpuLocalityScorer s;
  EXPECT_EQ(s.name(), "gpu-locality");
  TestNode n(TopoNode("n"));
  EXPECT_EQ(Locality(n.ledger, Whole(4)), 3);
  EXPECT_EQ(Locality(n.ledger, Whole(2, 0, GpuTopology::kRequireLocal)), 3);
  n.Whole({0, 1, 2, 4, 5});  // free 3 | 6, 7
  EXPECT_EQ(Locality(n.ledger, Whole(2)), 3);
}

TEST(GpuLocalityScorerTest, OneDomainAcrossNumaNodes) {
  // One NVLink domain over two NUMA nodes (0-3, 4-7); GPUs 0 and 5 busy: no NUMA node
  // has four free, the domain has six.
  TestNode n(MakeUniformNode("n", MilliCpu(64000), MiB(1 << 20), Model("H100-80GB"), 8,
                             SharingMode::kExclusive, 2, true));
  n.Whole({0, 5});
  EXPECT_EQ(Locality(n.ledger, Whole(4)), 2);
  EXPECT_EQ(Locality(n.ledger, Whole(4, 0, GpuTopology::kRequireLocal)), 2);
  EXPECT_EQ(Locality(n.ledger, Whole(3)), 3);  // NUMA node 0 has 1, 2, 3
  EXPECT_EQ(Locality(n.ledger, Whole(6)), 2);
}

TEST(GpuLocalityScorerTest, OneNumaNodeAcrossDomains) {
  // Four GPUs on one NUMA node, NVLink pairs 0-1 and 2-3.
  NodeSpec spec = MakeUniformNode("n", MilliCpu(64000), MiB(1 << 20), Model("H100-80GB"), 4,
                                  SharingMode::kExclusive, 1, true);
  spec.gpus[2].nvlink_domain = 1;
  spec.gpus[3].nvlink_domain = 1;
  TestNode n(std::move(spec));
  EXPECT_EQ(Locality(n.ledger, Whole(4)), 1);
  EXPECT_EQ(Locality(n.ledger, Whole(3)), 1);
  EXPECT_EQ(Locality(n.ledger, Whole(2)), 3);
  // PCIe GPUs (no NVLink) on one NUMA node: the NUMA node is the best there is.
  TestNode pcie(MakeUniformNode("p", MilliCpu(64000), MiB(1 << 20), Model("L40S"), 4,
                                SharingMode::kExclusive, 1, false));
  EXPECT_EQ(Locality(pcie.ledger, Whole(2)), 1);
  EXPECT_EQ(Locality(pcie.ledger, Whole(4)), 1);
}

TEST(GpuLocalityScorerTest, Spread) {
  TestNode n(TopoNode("n"));
  n.Whole({1, 5});
  EXPECT_EQ(Locality(n.ledger, Whole(4)), 0);
  EXPECT_EQ(Locality(n.ledger, Whole(4, 0, GpuTopology::kRequireLocal)), 0);
  EXPECT_EQ(Locality(n.ledger, Whole(3)), 3);
  // Not even enough free GPUs: as bad as spread.
  EXPECT_EQ(Locality(n.ledger, Whole(7)), 0);
  // Free GPUs 3 and 7 only: one per domain.
  TestNode split(TopoNode("s"));
  split.Whole({0, 1, 2, 4, 5, 6});
  EXPECT_EQ(Locality(split.ledger, Whole(2)), 0);
  // Eight GPUs on eight NUMA nodes, no NVLink.
  TestNode lone(MakeUniformNode("l", MilliCpu(64000), MiB(1 << 20), Model("L40S"), 8,
                                SharingMode::kExclusive, 8, false));
  EXPECT_EQ(Locality(lone.ledger, Whole(2)), 0);
}

TEST(GpuLocalityScorerTest, NeutralForSingleGpuMigCpuOnlyAndAny) {
  TestNode n(TopoNode("n"));
  n.Whole({1, 5});  // a 4-GPU task would be spread here (0)
  ASSERT_EQ(Locality(n.ledger, Whole(4)), 0);
  EXPECT_EQ(Locality(n.ledger, Whole(1)), 3);
  EXPECT_EQ(Locality(n.ledger, Whole(4, 0, GpuTopology::kAny)), 3);
  EXPECT_EQ(Locality(n.ledger, Whole(7, 0, GpuTopology::kAny)), 3);
  TaskRequest cpu;
  cpu.cpu = MilliCpu(1000);
  EXPECT_EQ(Locality(n.ledger, cpu), 3);
  // A lone PCIe GPU per NUMA node: single GPUs are still neutral.
  TestNode lone(MakeUniformNode("l", MilliCpu(64000), MiB(1 << 20), Model("L40S"), 8,
                                SharingMode::kExclusive, 8, false));
  EXPECT_EQ(Locality(lone.ledger, Whole(1)), 3);
  TaskRequest share = Whole(1);
  share.gpu_milli = MilliGpu(300);
  EXPECT_EQ(Locality(lone.ledger, share), 3);
  // MIG instance on an A100 node with GPUs on two NUMA nodes.
  TestNode mig(MakeUniformNode("m", MilliCpu(64000), MiB(1 << 20), Model("A100-40GB"), 4,
                               SharingMode::kMig, 4, false));
  TaskRequest instance;
  instance.cpu = MilliCpu(1000);
  instance.gpu_count = 1;
  instance.mig_profile = "3g.20gb";
  EXPECT_EQ(Locality(mig.ledger, instance), 3);
}

}  // namespace topology_test
}  // namespace tessera
