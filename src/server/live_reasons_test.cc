// LiveCache names what a waiting task is short of from the filters' causes
// (FilterCause), not from their message text.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "model/gpu_catalog.h"
#include "model/node.h"
#include "server/pending_reasons.h"
#include "state/testing/test_cluster.h"

namespace tessera {
namespace {

using ::tessera::testing::Cluster;
using ::tessera::testing::Cpu;
using ::tessera::testing::Mig;
using ::tessera::testing::Model;
using ::tessera::testing::Whole;

NodeSpec Node(std::string name, std::string_view model, int gpus, SharingMode mode,
              bool nvlink = true) {
  return MakeUniformNode(std::move(name), MilliCpu(64000), MiB(256 * 1024), Model(model), gpus,
                         mode, /*numa_nodes=*/2, nvlink);
}

Allocation Take(uint32_t node, int64_t memory, std::vector<int> gpus) {
  Allocation a;
  a.node = NodeId(node);
  a.memory = MiB(memory);
  for (int g : gpus) {
    a.gpus.push_back(GpuGrant{g, kWholeGpu, MiB(0), -1, -1});
  }
  return a;
}

TEST(LiveReasonsTest, MemoryShortNow) {
  ClusterState state = Cluster({Node("n1", "H100-80GB", 8, SharingMode::kExclusive),
                                Node("n2", "H100-80GB", 8, SharingMode::kExclusive)});
  ASSERT_TRUE(state.Allocate(Take(0, 246 * 1024, {})).ok());  // 10 GiB free
  ASSERT_TRUE(state.Allocate(Take(1, 236 * 1024, {})).ok());  // 20 GiB free
  EXPECT_EQ(LiveCache(state).Short({Cpu(1000, 30 * 1024)}, {}),
            "waiting for resources: a task needs 30GiB of free memory on one node; the most "
            "free on a schedulable node is 20GiB; jobs ahead of it or running hold them");
  EXPECT_EQ(LiveCache(state).Short({Cpu(1000, 20 * 1024)}, {}), "");
}

TEST(LiveReasonsTest, NoFreeMigSlot) {
  ClusterState state = Cluster({Node("n1", "A100-40GB", 2, SharingMode::kMig)});
  const GpuModel& a100 = state.catalog().Get(Model("A100-40GB"));
  const int p = *a100.FindMigProfile("7g.40gb");
  Allocation a;
  a.node = NodeId(0);
  for (int g = 0; g < 2; ++g) {
    a.gpus.push_back(GpuGrant{g, a100.mig_profiles[p].ChargedMilli(),
                              a100.mig_profiles[p].memory, p, 0});
  }
  ASSERT_TRUE(state.Allocate(a).ok());
  EXPECT_EQ(LiveCache(state).Short({Mig("3g.20gb")}, {}),
            "waiting for resources: no schedulable GPU has a free slot for a MIG 3g.20gb "
            "instance now; jobs ahead of it or running hold them");
}

TEST(LiveReasonsTest, NotEnoughFreeGpusTogether) {
  // No NVLink: GPUs 0-3 on NUMA node 0, 4-7 on NUMA node 1; one busy on each.
  ClusterState state =
      Cluster({Node("n1", "H100-80GB", 8, SharingMode::kExclusive, /*nvlink=*/false)});
  ASSERT_TRUE(state.Allocate(Take(0, 0, {0, 4})).ok());
  EXPECT_EQ(LiveCache(state).Short({Whole(4, 1000, GpuTopology::kRequireLocal)}, {}),
            "waiting for resources: a task needs 4 free GPUs in one NVLink domain or NUMA node; "
            "no schedulable node has them now");
  EXPECT_EQ(LiveCache(state).Short({Whole(3, 1000, GpuTopology::kRequireLocal)}, {}), "");
  // Without the locality requirement the 4 GPUs fit now.
  EXPECT_EQ(LiveCache(state).Short({Whole(4)}, {}), "");
}

}  // namespace
}  // namespace tessera
