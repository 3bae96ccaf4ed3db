#include "state/cluster_state.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "state/testing/test_cluster.h"

namespace tessera {
namespace {

using ::tessera::testing::Cluster;
using ::tessera::testing::Model;

std::vector<NodeSpec> TwoNodes() {
  return {
      MakeUniformNode("a", MilliCpu(16000), MiB(65536), Model("T4"), 2, SharingMode::kShared),
      MakeUniformNode("b", MilliCpu(16000), MiB(65536), Model("A10"), 1, SharingMode::kExclusive)};
}

TEST(ClusterStateTest, TotalsFollowAllocations) {
  StatusOr<ClusterState> s = ClusterState::Create(TwoNodes(), GpuCatalog::Default());
  ASSERT_TRUE(s.ok());
  ClusterState& cs = *s;
  EXPECT_EQ(cs.total_gpus(), 3);
  EXPECT_EQ(cs.total_gpu_milli().value(), 3000);
  EXPECT_EQ(cs.total_cpu().value(), 32000);
  NodeId b = *cs.FindNode("b");
  EXPECT_EQ(b.value(), 1U);
  Allocation a{b, MilliCpu(2000), MiB(1024), {{0, kWholeGpu, MiB(0)}}};
  ASSERT_TRUE(cs.Allocate(a).ok());
  EXPECT_EQ(cs.allocated_gpu_milli().value(), 1000);
  EXPECT_EQ(cs.allocated_cpu().value(), 2000);
  // A copy is independent (what-if forks the live state).
  ClusterState fork = cs;
  ASSERT_TRUE(fork.Release(a).ok());
  EXPECT_EQ(fork.allocated_gpu_milli().value(), 0);
  EXPECT_EQ(cs.allocated_gpu_milli().value(), 1000);
  EXPECT_FALSE(cs.node(b).gpus()[0].idle());
  ASSERT_TRUE(cs.Release(a).ok());
  EXPECT_EQ(cs.Release(a).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(cs.FindNode("zz").status().code(), StatusCode::kNotFound);
}

TEST(ClusterStateTest, RejectsDuplicateNamesAndBadSpecs) {
  std::vector<NodeSpec> nodes = TwoNodes();
  nodes[1].name = "a";
  EXPECT_EQ(ClusterState::Create(nodes, GpuCatalog::Default()).status().code(),
            StatusCode::kInvalidArgument);
  nodes = TwoNodes();
  nodes[0].memory = MiB(-1);
  EXPECT_FALSE(ClusterState::Create(nodes, GpuCatalog::Default()).ok());
  StatusOr<ClusterState> s = ClusterState::Create(TwoNodes(), GpuCatalog::Default());
  ASSERT_TRUE(s.ok());
  Allocation bad{NodeId(9), MilliCpu(0), MiB(0), {}};
  EXPECT_EQ(s->Allocate(bad).code(), StatusCode::kInvalidArgument);
}

// The node set changes in place: an id per name, kept while the node is away.
TEST(ClusterStateMembershipTest, NodesLeaveAndRejoinUnderTheirIds) {
  ClusterState cs = Cluster(TwoNodes());
  const NodeId a = *cs.FindNode("a");
  ASSERT_TRUE(cs.RemoveNode(a).ok());
  EXPECT_FALSE(cs.present(a));
  EXPECT_EQ(cs.present_count(), 1u);
  EXPECT_EQ(cs.node_count(), 2u);  // the id stays reserved
  EXPECT_EQ(cs.total_gpus(), 1);
  EXPECT_EQ(cs.total_cpu().value(), 16000);
  EXPECT_EQ(cs.FindNode("a").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(cs.node(a).drained());
  EXPECT_EQ(cs.node(a).gpu_count(), 0);
  Allocation on_a{a, MilliCpu(1000), MiB(0), {}};
  EXPECT_EQ(cs.Allocate(on_a).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cs.RemoveNode(a).code(), StatusCode::kInvalidArgument);

  // Back with another spec: the same id, the new capacity.
  NodeSpec bigger =
      MakeUniformNode("a", MilliCpu(32000), MiB(65536), Model("T4"), 4, SharingMode::kShared);
  StatusOr<NodeId> again = cs.AddNode(bigger);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, a);
  EXPECT_EQ(cs.total_gpus(), 5);
  EXPECT_EQ(cs.total_cpu().value(), 48000);
  EXPECT_FALSE(cs.node(a).drained());
  EXPECT_EQ(cs.AddNode(bigger).status().code(), StatusCode::kAlreadyExists);

  // A new name takes the next id.
  StatusOr<NodeId> c = cs.AddNode(
      MakeUniformNode("c", MilliCpu(8000), MiB(1024), Model("A10"), 1, SharingMode::kExclusive));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->value(), 2u);
  EXPECT_EQ(*cs.FindNode("c"), *c);
  NodeSpec bad = bigger;
  bad.name = "d";
  bad.memory = MiB(-1);
  EXPECT_EQ(cs.AddNode(bad).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cs.node_count(), 3u);
}

TEST(ClusterStateMembershipTest, ANodeHoldingWorkNeitherLeavesNorChanges) {
  ClusterState cs = Cluster(TwoNodes());
  const NodeId b = *cs.FindNode("b");
  Allocation cpu_only{b, MilliCpu(1), MiB(0), {}};  // the smallest hold counts
  ASSERT_TRUE(cs.Allocate(cpu_only).ok());
  EXPECT_EQ(cs.RemoveNode(b).code(), StatusCode::kFailedPrecondition);
  NodeSpec other = cs.spec(b);
  other.cpu = MilliCpu(4000);
  EXPECT_EQ(cs.UpdateNode(b, other).code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(cs.present(b));
  ASSERT_TRUE(cs.Release(cpu_only).ok());
  ASSERT_TRUE(cs.UpdateNode(b, other).ok());
  EXPECT_EQ(cs.spec(b).cpu.value(), 4000);
  EXPECT_EQ(cs.total_cpu().value(), 20000);
  other.name = "renamed";
  EXPECT_EQ(cs.UpdateNode(b, other).code(), StatusCode::kInvalidArgument);
}

TEST(ClusterStateMembershipTest, LabelsChangeInPlaceWhileTheNodeHoldsWork) {
  ClusterState cs = Cluster(TwoNodes());
  const NodeId b = *cs.FindNode("b");
  Allocation cpu_only{b, MilliCpu(1000), MiB(0), {}};
  ASSERT_TRUE(cs.Allocate(cpu_only).ok());
  ClusterState fork = cs;
  const uint64_t from = cs.change_seq();
  ASSERT_TRUE(cs.RelabelNode(b, {{"block", "b1"}, {"rack", "r2"}}).ok());
  EXPECT_EQ(cs.spec(b).Label("rack"), "r2");
  EXPECT_EQ(cs.node(b).spec().Label("block"), "b1");
  EXPECT_EQ(cs.node(b).used_cpu().value(), 1000);  // what it holds stays
  EXPECT_EQ(cs.total_cpu().value(), 32000);
  std::vector<NodeId> changed;
  ASSERT_TRUE(cs.ChangesSince(from, &changed));
  EXPECT_EQ(changed, std::vector<NodeId>{b});
  EXPECT_EQ(fork.spec(b).Label("rack"), "");  // a fork keeps the labels it had
  EXPECT_EQ(fork.node(b).spec().Label("rack"), "");
  ASSERT_TRUE(cs.Release(cpu_only).ok());
  ASSERT_TRUE(cs.RemoveNode(b).ok());
  EXPECT_EQ(cs.RelabelNode(b, {}).code(), StatusCode::kInvalidArgument);
}

TEST(ClusterStateMembershipTest, ChangesAreRecordedAndCopiesKeepTheirOwnNodes) {
  ClusterState cs = Cluster(TwoNodes());
  const uint64_t from = cs.change_seq();
  const NodeId a = *cs.FindNode("a");
  ASSERT_TRUE(cs.RemoveNode(a).ok());
  ClusterState fork = cs;  // the fork keeps "a" absent whatever the source does next
  StatusOr<NodeId> c = cs.AddNode(
      MakeUniformNode("c", MilliCpu(8000), MiB(1024), Model("A10"), 1, SharingMode::kExclusive));
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(cs.AddNode(TwoNodes()[0]).ok());
  std::vector<NodeId> changed;
  ASSERT_TRUE(cs.ChangesSince(from, &changed));
  EXPECT_EQ(changed, (std::vector<NodeId>{a, *c, a}));
  EXPECT_EQ(fork.node_count(), 2u);
  EXPECT_FALSE(fork.present(a));
  EXPECT_EQ(fork.FindNode("c").status().code(), StatusCode::kNotFound);
  // The fork's ledgers still read their own specs after the source replaced them.
  const NodeId b = *fork.FindNode("b");
  EXPECT_EQ(fork.node(b).spec().name, "b");
  EXPECT_EQ(fork.node(a).spec().name, "a");
  EXPECT_EQ(fork.total_gpus(), 1);
}

ClusterState MakeState() { return Cluster(TwoNodes()); }

Allocation CpuOn(uint32_t node, int64_t cpu) {
  return Allocation{NodeId(node), MilliCpu(cpu), MiB(0), {}};
}

TEST(ClusterStateChangesTest, UidsAreDistinct) {
  ClusterState a = MakeState();
  ClusterState b = MakeState();
  EXPECT_NE(a.uid(), b.uid());
  ClusterState c = a;
  EXPECT_NE(c.uid(), a.uid());
  EXPECT_NE(c.uid(), b.uid());
  const uint64_t before = b.uid();
  b = a;
  EXPECT_NE(b.uid(), before);
  EXPECT_NE(b.uid(), a.uid());
  EXPECT_NE(b.uid(), c.uid());
  // Changes do not change the uid.
  const uint64_t uid = a.uid();
  ASSERT_TRUE(a.Allocate(CpuOn(0, 1000)).ok());
  EXPECT_EQ(a.uid(), uid);
  // Moving keeps the identity of the state moved.
  ClusterState d = std::move(a);
  EXPECT_EQ(d.uid(), uid);
  EXPECT_EQ(d.change_seq(), 1U);
}

TEST(ClusterStateChangesTest, RecordsEachSuccessfulChangeInOrder) {
  ClusterState s = MakeState();
  EXPECT_EQ(s.change_seq(), 0U);
  std::vector<NodeId> out;
  EXPECT_TRUE(s.ChangesSince(0, &out));
  EXPECT_TRUE(out.empty());

  Allocation a = CpuOn(1, 1000);
  Allocation b{NodeId(0), MilliCpu(500), MiB(0), {{1, MilliGpu(300), MiB(0)}}};
  ASSERT_TRUE(s.Allocate(a).ok());
  ASSERT_TRUE(s.Allocate(b).ok());
  ASSERT_TRUE(s.Allocate(a).ok());
  ASSERT_TRUE(s.Release(b).ok());
  EXPECT_EQ(s.change_seq(), 4U);
  EXPECT_TRUE(s.ChangesSince(0, &out));
  EXPECT_EQ(out, (std::vector<NodeId>{NodeId(1), NodeId(0), NodeId(1), NodeId(0)}));
  // Appends, from any point in the window.
  EXPECT_TRUE(s.ChangesSince(2, &out));
  EXPECT_EQ(
      out, (std::vector<NodeId>{NodeId(1), NodeId(0), NodeId(1), NodeId(0), NodeId(1), NodeId(0)}));
  out.clear();
  EXPECT_TRUE(s.ChangesSince(4, &out));
  EXPECT_TRUE(out.empty());
  // A sequence number from the future is not one of this state's.
  EXPECT_FALSE(s.ChangesSince(5, &out));

  // Failed calls change nothing and record nothing.
  EXPECT_FALSE(s.Allocate(CpuOn(0, 1 << 30)).ok());
  EXPECT_FALSE(s.Release(b).ok());
  EXPECT_FALSE(s.Allocate(CpuOn(7, 1)).ok());
  EXPECT_EQ(s.change_seq(), 4U);
}

TEST(ClusterStateChangesTest, CopiesStartTheirOwnHistory) {
  ClusterState s = MakeState();
  ASSERT_TRUE(s.Allocate(CpuOn(0, 1000)).ok());
  ASSERT_TRUE(s.Allocate(CpuOn(1, 1000)).ok());
  ClusterState copy = s;
  EXPECT_EQ(copy.change_seq(), 0U);
  std::vector<NodeId> out;
  EXPECT_TRUE(copy.ChangesSince(0, &out));
  EXPECT_TRUE(out.empty());
  ASSERT_TRUE(copy.Allocate(CpuOn(1, 1000)).ok());
  EXPECT_TRUE(copy.ChangesSince(0, &out));
  EXPECT_EQ(out, std::vector<NodeId>{NodeId(1)});
  // The original is untouched.
  EXPECT_EQ(s.change_seq(), 2U);
  out.clear();
  EXPECT_TRUE(s.ChangesSince(0, &out));
  EXPECT_EQ(out, (std::vector<NodeId>{NodeId(0), NodeId(1)}));
  // Copy assignment too.
  s = copy;
  EXPECT_EQ(s.change_seq(), 0U);
  EXPECT_EQ(s.node(NodeId(1)).used_cpu().value(), 2000);
}

TEST(ClusterStateChangesTest, WindowKeepsTheLastChanges) {
  ClusterState s = MakeState();
  constexpr uint64_t kWindow = ClusterState::kChangeWindow;
  // kWindow + 6 changes: node 1 first (6 of them), then alternating 0 and 1.
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(s.Allocate(CpuOn(1, 1)).ok());
  }
  for (uint64_t i = 0; i < kWindow / 2; ++i) {
    ASSERT_TRUE(s.Allocate(CpuOn(0, 1)).ok());
    ASSERT_TRUE(s.Release(CpuOn(1, 1)).ok());
    ASSERT_TRUE(s.Allocate(CpuOn(1, 1)).ok());
    ASSERT_TRUE(s.Release(CpuOn(0, 1)).ok());
  }
  // That was 6 + 2 * kWindow changes.
  ASSERT_EQ(s.change_seq(), 6 + 2 * kWindow);
  const uint64_t oldest = s.change_seq() - kWindow;
  std::vector<NodeId> out;
  EXPECT_FALSE(s.ChangesSince(0, &out));
  EXPECT_FALSE(s.ChangesSince(oldest - 1, &out));
  EXPECT_TRUE(out.empty());
  ASSERT_TRUE(s.ChangesSince(oldest, &out));
  ASSERT_EQ(out.size(), kWindow);
  // After the first 6, the changed nodes repeat 0, 1, 1, 0.
  const uint32_t pattern[] = {0, 1, 1, 0};
  for (uint64_t i = 0; i < kWindow; ++i) {
    ASSERT_EQ(out[i], NodeId(pattern[(oldest + i - 6) % 4])) << "seq " << oldest + i;
  }
  out.clear();
  ASSERT_TRUE(s.ChangesSince(s.change_seq() - 3, &out));
  EXPECT_EQ(out, (std::vector<NodeId>{NodeId(1), NodeId(1), NodeId(0)}));
}

}  // namespace
}  // namespace tessera
