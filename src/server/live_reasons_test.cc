// LiveCache names what a waiting task is short of from the filters' causes
// (FilterCause), not from their message text.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "model/gpu_catalog.h"
#include "model/node.h"
#include "server/job_views.h"
#include "server/known_nodes.h"
#include "server/node_registry.h"
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

namespace live_reasons_test {

NodeInfo& UpNode(NodeRegistry& nodes, const std::string& name, int gpus) {
  NodeInfo& node = nodes.Add(name);
  node.inventory.spec = MakeUniformNode(name, MilliCpu(64000), MiB(256 * 1024),
                                        testing::Model("H100-80GB"), gpus, SharingMode::kExclusive,
                                        /*numa_nodes=*/2, /*nvlink=*/true);
  node.up = true;
  return node;
}

// The verdicts are rebuilt only for the node sets a change touches: the rest are shared
// with the last context, and so is what was made from the nodes' specs.
TEST(FitVerdictsTest, KeptForAnUnchangedNodeSetAndRemadeAfterAChange) {
  const GpuCatalog& catalog = GpuCatalog::Default();
  NodeRegistry nodes;
  UpNode(nodes, "n1", 8);
  WaitContext first;
  EXPECT_TRUE(SetFitVerdicts(nodes, catalog, WaitContext(), first));
  ASSERT_NE(first.fit, nullptr);
  ASSERT_NE(first.fit_up, nullptr);
  ASSERT_NE(first.fit_undrained, nullptr);
  EXPECT_EQ(first.fit->nodes(), 1u);
  EXPECT_TRUE(first.down.empty());

  WaitContext same;
  EXPECT_FALSE(SetFitVerdicts(nodes, catalog, first, same));
  EXPECT_EQ(same.fit, first.fit);
  EXPECT_EQ(same.fit_up, first.fit_up);
  EXPECT_EQ(same.fit_undrained, first.fit_undrained);

  NodeInfo& n2 = UpNode(nodes, "n2", 4);
  WaitContext grown;
  EXPECT_TRUE(SetFitVerdicts(nodes, catalog, same, grown));
  EXPECT_NE(grown.fit, same.fit);
  EXPECT_NE(grown.fit_undrained, same.fit_undrained);
  EXPECT_EQ(grown.fit->nodes(), 2u);
  EXPECT_EQ(grown.fit_up->nodes(), 2u);
  EXPECT_EQ(NodesUp(nodes), 2u);

  // n2 goes down: only the set of the nodes up changes.
  n2.up = false;
  n2.reason = "heartbeat timeout";
  WaitContext shrunk;
  EXPECT_FALSE(SetFitVerdicts(nodes, catalog, grown, shrunk));
  EXPECT_EQ(shrunk.fit, grown.fit);
  EXPECT_EQ(shrunk.fit_undrained, grown.fit_undrained);
  ASSERT_NE(shrunk.fit_up, nullptr);
  EXPECT_NE(shrunk.fit_up, grown.fit_up);
  EXPECT_EQ(shrunk.fit_up->nodes(), 1u);
  ASSERT_EQ(shrunk.down.size(), 1u);
  EXPECT_EQ(shrunk.down[0].name, "n2");
  EXPECT_EQ(shrunk.down[0].reason, "heartbeat timeout");
  EXPECT_EQ(NodesUp(nodes), 1u);

  // A drain changes the drained sets, not the one as if no drain held.
  nodes.Find("n1")->drain = DrainInfo{"maintenance", "admin", "admin", 0};
  WaitContext drained;
  EXPECT_FALSE(SetFitVerdicts(nodes, catalog, shrunk, drained));
  EXPECT_NE(drained.fit, shrunk.fit);
  EXPECT_NE(drained.fit_up, shrunk.fit_up);
  EXPECT_EQ(drained.fit_undrained, shrunk.fit_undrained);
}

// Before a submission is judged, the published verdicts follow the node registry once a
// node event marked them stale, and not otherwise.
TEST(FitVerdictsTest, RefreshedOnlyWhenStaleWithTheNodesUpNow) {
  const GpuCatalog& catalog = GpuCatalog::Default();
  NodeRegistry nodes;
  UpNode(nodes, "n1", 8);
  PublishedJobs views(catalog);
  FitVerdicts fits(catalog);
  auto built = std::make_shared<WaitContext>();
  built->built = true;
  built->nodes_up = 1;
  fits.Publish(nodes, views, built);
  const std::shared_ptr<const WaitContext> published = views.context();
  ASSERT_EQ(published.get(), built.get());
  ASSERT_NE(published->fit, nullptr);
  EXPECT_EQ(published->fit->nodes(), 1u);

  UpNode(nodes, "n2", 4);
  fits.Refresh(nodes, views);  // not marked stale: published must not change
  EXPECT_EQ(views.context(), published);
  fits.MarkStale();
  fits.Refresh(nodes, views);
  const std::shared_ptr<const WaitContext> fresh = views.context();
  ASSERT_NE(fresh, published);
  EXPECT_EQ(fresh->nodes_up, 2u);
  ASSERT_NE(fresh->fit, nullptr);
  EXPECT_EQ(fresh->fit->nodes(), 2u);
  fits.Refresh(nodes, views);  // published again: no longer stale
  EXPECT_EQ(views.context(), fresh);
}

}  // namespace live_reasons_test
}  // namespace tessera
