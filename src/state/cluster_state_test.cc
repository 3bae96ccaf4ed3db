#include "state/cluster_state.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

std::vector<NodeSpec> TwoNodes() {
  const GpuCatalog& c = GpuCatalog::Default();
  return {MakeUniformNode("a", MilliCpu(16000), MiB(65536), *c.Find("T4"), 2,
                          SharingMode::kShared),
          MakeUniformNode("b", MilliCpu(16000), MiB(65536), *c.Find("A10"), 1,
                          SharingMode::kExclusive)};
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

}  // namespace
}  // namespace tessera
