#include "sched/gpu_selection.h"

#include <gtest/gtest.h>

#include <array>
#include <bit>
#include <string>
#include <utility>
#include <vector>

#include "base/rng.h"
#include "model/node.h"
#include "state/node_ledger.h"
#include "state/testing/test_cluster.h"

namespace tessera {
namespace {

using ::tessera::testing::Mig;
using ::tessera::testing::Model;
using ::tessera::testing::Share;
using ::tessera::testing::TestNode;
using ::tessera::testing::Whole;

// A node whose GPUs are given as (NUMA node, NVLink domain) pairs.
NodeSpec TopologyNode(const std::vector<std::pair<int, int>>& gpus, int numa_nodes,
                      SharingMode mode = SharingMode::kExclusive,
                      std::string_view model = "H100-80GB") {
  NodeSpec n;
  n.name = "n";
  n.cpu = MilliCpu(64000);
  n.memory = MiB(512 * 1024);
  n.numa_nodes = numa_nodes;
  for (const auto& [numa, nvlink] : gpus) {
    n.gpus.push_back({Model(model), mode, numa, nvlink});
  }
  return n;
}

// Two NVLink islands of four GPUs, each on its own NUMA node.
NodeSpec TwoIslands() {
  return TopologyNode({{0, 0}, {0, 0}, {0, 0}, {0, 0}, {1, 1}, {1, 1}, {1, 1}, {1, 1}}, 2);
}

std::optional<uint64_t> Pick(const TestNode& n, const TaskRequest& r) {
  return PickWholeGpus(n.ledger, r);
}

TEST(PickWholeGpusTest, OneIslandAndFewestFreeGroup) {
  TestNode n(TwoIslands());
  EXPECT_EQ(Pick(n, Whole(2)), 0x03U);  // both islands free: the first, lowest indices
  EXPECT_EQ(Pick(n, Whole(4)), 0x0FU);
  n.Occupy({0, 1});
  EXPECT_EQ(Pick(n, Whole(1)), 0x04U);  // island 0 has 2 free, island 1 has 4
  EXPECT_EQ(Pick(n, Whole(2)), 0x0CU);  // the smaller island that still fits
  EXPECT_EQ(Pick(n, Whole(3)), 0x70U);  // island 0 is too small now
  EXPECT_EQ(Pick(n, Whole(4)), 0xF0U);
  EXPECT_EQ(Pick(n, Whole(5)), 0x7CU);  // no group fits: lowest free indices
  EXPECT_EQ(Pick(n, Whole(6)), 0xFCU);
  EXPECT_EQ(Pick(n, Whole(7)), std::nullopt);
}

TEST(PickWholeGpusTest, NvlinkDomainAndNumaBeforeDomainAlone) {
  // One NVLink domain across two NUMA nodes.
  TestNode n(TopologyNode({{0, 0}, {0, 0}, {1, 0}, {1, 0}}, 2));
  n.Occupy({0});
  EXPECT_EQ(Pick(n, Whole(2)), 0x0CU);  // GPUs 1,2 would cross NUMA nodes
  EXPECT_EQ(GpuSetLocality(n.ledger, 0x0C), 0);
  EXPECT_EQ(BestWholeGpuLocality(n.ledger, Whole(2)), 0);
  EXPECT_EQ(Pick(n, Whole(3)), 0x0EU);  // one NVLink domain, two NUMA nodes
  EXPECT_EQ(GpuSetLocality(n.ledger, 0x0E), 1);
  EXPECT_EQ(BestWholeGpuLocality(n.ledger, Whole(3)), 1);
}

TEST(PickWholeGpusTest, NvlinkDomainBeforeNumaNode) {
  // GPUs 1 and 3 share NVLink domain 5 across NUMA nodes; 0 and 2 have no NVLink.
  TestNode n(TopologyNode({{0, -1}, {0, 5}, {1, -1}, {1, 5}}, 2));
  EXPECT_EQ(Pick(n, Whole(2)), 0x0AU);
  EXPECT_EQ(GpuSetLocality(n.ledger, 0x0A), 1);
  EXPECT_EQ(GpuSetLocality(n.ledger, 0x03), 2);  // same NUMA node, no common NVLink
  EXPECT_EQ(GpuSetLocality(n.ledger, 0x06), 3);
  EXPECT_EQ(BestWholeGpuLocality(n.ledger, Whole(2)), 1);
  // kAny ignores topology: the lowest free indices.
  EXPECT_EQ(Pick(n, Whole(2, 1000, GpuTopology::kAny)), 0x03U);
  // kRequireLocal picks like kPreferLocal (the filter enforces the requirement).
  EXPECT_EQ(Pick(n, Whole(2, 1000, GpuTopology::kRequireLocal)), 0x0AU);
}

TEST(PickWholeGpusTest, NumaNodeThenSpread) {
  // No NVLink; NUMA nodes 0,0,1,1.
  TestNode n(MakeUniformNode("n", MilliCpu(64000), MiB(1 << 20), Model("L40S"), 4,
                             SharingMode::kExclusive, 2));
  n.Occupy({0});
  EXPECT_EQ(Pick(n, Whole(2)), 0x0CU);
  EXPECT_EQ(Pick(n, Whole(2, 1000, GpuTopology::kAny)), 0x06U);
  EXPECT_EQ(GpuSetLocality(n.ledger, 0x0C), 2);
  EXPECT_EQ(GpuSetLocality(n.ledger, 0x06), 3);
  EXPECT_EQ(BestWholeGpuLocality(n.ledger, Whole(2)), 2);
  n.Occupy({2});
  EXPECT_EQ(Pick(n, Whole(2)), 0x0AU);  // only spread is left
  EXPECT_EQ(BestWholeGpuLocality(n.ledger, Whole(2)), 3);
  EXPECT_EQ(Pick(n, Whole(3)), std::nullopt);
  EXPECT_EQ(BestWholeGpuLocality(n.ledger, Whole(3)), 4);
}

TEST(PickWholeGpusTest, SingleGpuGoesToTheFullestGroup) {
  // NUMA nodes 0,0,1,1,2,2 without NVLink.
  TestNode n(MakeUniformNode("n", MilliCpu(64000), MiB(1 << 20), Model("L40S"), 6,
                             SharingMode::kExclusive, 3));
  n.Occupy({2});
  EXPECT_EQ(Pick(n, Whole(1)), 0x08U);  // NUMA 1 has a single free GPU left
  EXPECT_EQ(Pick(n, Whole(2)), 0x03U);  // NUMA 0 and 2 tie at 2 free: the first
  EXPECT_EQ(Pick(n, Whole(1, 1000, GpuTopology::kAny)), 0x01U);
}

TEST(PickWholeGpusTest, SkipsGpusThatCannotServe) {
  // GPUs 0,1 A100 MIG; 2,3 exclusive H100; all on one NVLink domain.
  NodeSpec spec = TopologyNode({{0, 0}, {0, 0}, {0, 0}, {0, 0}}, 1);
  spec.gpus[0] = {Model("A100-40GB"), SharingMode::kMig, 0, 0};
  spec.gpus[1] = {Model("A100-40GB"), SharingMode::kMig, 0, 0};
  TestNode n(std::move(spec));
  EXPECT_EQ(Pick(n, Whole(2)), 0x0CU);
  EXPECT_EQ(Pick(n, Whole(3)), std::nullopt);
  TaskRequest a100 = Whole(1);
  a100.models.Add(Model("A100-40GB"));
  EXPECT_EQ(Pick(n, a100), std::nullopt);  // A100s are in MIG mode
  TaskRequest h100 = Whole(1);
  h100.models.Add(Model("H100-80GB"));
  EXPECT_EQ(Pick(n, h100), 0x04U);
}

TEST(GpuFitsRequestTest, WholeShareAndMig) {
  NodeSpec spec = TopologyNode({{0, -1}, {0, -1}, {0, -1}}, 1, SharingMode::kShared, "T4");
  spec.gpus[2] = {Model("A100-40GB"), SharingMode::kMig, 0, -1};
  TestNode n(std::move(spec));
  n.Share(0, 300, 4096);
  const auto& g = n.ledger.gpus();
  EXPECT_FALSE(GpuFitsRequest(g[0], Whole(1)));  // holds a share
  EXPECT_TRUE(GpuFitsRequest(g[1], Whole(1)));   // a whole card on an idle shared GPU
  EXPECT_FALSE(GpuFitsRequest(g[2], Whole(1)));  // MIG mode
  EXPECT_TRUE(GpuFitsRequest(g[0], Share(700)));
  EXPECT_FALSE(GpuFitsRequest(g[0], Share(701)));
  EXPECT_TRUE(GpuFitsRequest(g[0], Share(100, 1000, 15360 - 4096)));
  EXPECT_FALSE(GpuFitsRequest(g[0], Share(100, 1000, 15360 - 4096 + 1)));
  TaskRequest big_memory = Whole(1);
  big_memory.gpu_memory = MiB(15361);  // more than a T4 has
  EXPECT_FALSE(GpuFitsRequest(g[1], big_memory));
  big_memory.gpu_memory = MiB(15360);
  EXPECT_TRUE(GpuFitsRequest(g[1], big_memory));
  EXPECT_FALSE(GpuFitsRequest(g[1], Mig("1g.5gb")));
  EXPECT_TRUE(GpuFitsRequest(g[2], Mig("1g.5gb")));
  EXPECT_FALSE(GpuFitsRequest(g[2], Mig("1g.10gb+me")));  // not an A100-40GB profile
  TaskRequest only_a100 = Share(100);
  only_a100.models.Add(Model("A100-40GB"));
  EXPECT_FALSE(GpuFitsRequest(g[1], only_a100));
}

TEST(GpuSetLocalityTest, Levels) {
  TestNode n(TwoIslands());
  EXPECT_EQ(GpuSetLocality(n.ledger, 0x01), 0);
  EXPECT_EQ(GpuSetLocality(n.ledger, 0x0F), 0);
  EXPECT_EQ(GpuSetLocality(n.ledger, 0xF0), 0);
  EXPECT_EQ(GpuSetLocality(n.ledger, 0x18), 3);  // GPUs 3 and 4: different islands
  EXPECT_EQ(BestWholeGpuLocality(n.ledger, Whole(4)), 0);
  EXPECT_EQ(BestWholeGpuLocality(n.ledger, Whole(5)), 3);
  EXPECT_EQ(BestWholeGpuLocality(n.ledger, Whole(9)), 4);
}

// T4 shared GPUs with 700, 200, 400 and 1000 milli free.
void SetUpShares(TestNode& n) {
  n.Share(0, 300);
  n.Share(1, 800);
  n.Share(2, 600);
}

std::optional<GpuChoice> Select(const TestNode& n, const TaskRequest& r, GpuSelection s,
                                uint64_t seed = 1) {
  Pcg32 rng(seed);
  return SelectGpus(n.ledger, r, s, rng);
}

TEST(SelectGpusTest, SharesByBestFitAndFirstFit) {
  TestNode n(
      MakeUniformNode("n", MilliCpu(32000), MiB(1 << 17), Model("T4"), 4, SharingMode::kShared));
  SetUpShares(n);
  EXPECT_EQ(Select(n, Share(300), GpuSelection::kBestFit), (GpuChoice{0x4, -1}));
  EXPECT_EQ(Select(n, Share(300), GpuSelection::kFirstFit), (GpuChoice{0x1, -1}));
  EXPECT_EQ(Select(n, Share(200), GpuSelection::kBestFit), (GpuChoice{0x2, -1}));
  EXPECT_EQ(Select(n, Share(800), GpuSelection::kBestFit), (GpuChoice{0x8, -1}));
  EXPECT_EQ(Select(n, Share(800), GpuSelection::kFirstFit), (GpuChoice{0x8, -1}));
  n.Share(3, 50);
  EXPECT_EQ(Select(n, Share(960), GpuSelection::kBestFit), std::nullopt);
  EXPECT_EQ(Select(n, Share(960), GpuSelection::kRandom), std::nullopt);
  EXPECT_EQ(Select(n, Share(960), GpuSelection::kFirstFit), std::nullopt);
}

TEST(SelectGpusTest, BestFitTiesGoToTheLowestIndex) {
  TestNode n(
      MakeUniformNode("n", MilliCpu(32000), MiB(1 << 17), Model("T4"), 4, SharingMode::kShared));
  n.Share(1, 500);
  n.Share(3, 500);
  EXPECT_EQ(Select(n, Share(100), GpuSelection::kBestFit), (GpuChoice{0x2, -1}));
}

TEST(SelectGpusTest, ShareMemoryCapExcludesGpus) {
  TestNode n(
      MakeUniformNode("n", MilliCpu(32000), MiB(1 << 17), Model("T4"), 3, SharingMode::kShared));
  n.Share(0, 600, 12288);  // 3072 MiB of GPU memory left
  n.Share(1, 500, 0);
  EXPECT_EQ(Select(n, Share(100, 1000, 4096), GpuSelection::kBestFit), (GpuChoice{0x2, -1}));
  EXPECT_EQ(Select(n, Share(100, 1000, 3072), GpuSelection::kBestFit), (GpuChoice{0x1, -1}));
  EXPECT_EQ(Select(n, Share(100, 1000, 16384), GpuSelection::kBestFit), std::nullopt);
}

TEST(SelectGpusTest, RandomCoversEveryFittingGpuAndNoOther) {
  TestNode n(
      MakeUniformNode("n", MilliCpu(32000), MiB(1 << 17), Model("T4"), 4, SharingMode::kShared));
  SetUpShares(n);
  Pcg32 rng(12345);
  std::array<int, 4> hits{};
  constexpr int kDraws = 3000;
  for (int i = 0; i < kDraws; ++i) {
    std::optional<GpuChoice> c = SelectGpus(n.ledger, Share(300), GpuSelection::kRandom, rng);
    ASSERT_TRUE(c.has_value());
    ASSERT_EQ(std::popcount(c->mask), 1);
    ASSERT_EQ(c->mig_start, -1);
    ++hits[std::countr_zero(c->mask)];
  }
  EXPECT_EQ(hits[1], 0);  // 200 milli free: never
  for (int g : {0, 2, 3}) {
    // Expected 1000 each; 5 sigma is about 130.
    EXPECT_GT(hits[g], 850) << "GPU " << g;
    EXPECT_LT(hits[g], 1150) << "GPU " << g;
  }
}

TEST(SelectGpusTest, RandomIsReproducibleFromTheSeed) {
  TestNode n(
      MakeUniformNode("n", MilliCpu(32000), MiB(1 << 17), Model("T4"), 8, SharingMode::kShared));
  Pcg32 a(7);
  Pcg32 b(7);
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(SelectGpus(n.ledger, Share(100), GpuSelection::kRandom, a),
              SelectGpus(n.ledger, Share(100), GpuSelection::kRandom, b));
  }
}

TEST(SelectGpusTest, WholeAndCpuOnly) {
  TestNode n(TwoIslands());
  n.Occupy({0, 1});
  // GpuSelection does not matter for whole GPUs: the locality rule decides.
  for (GpuSelection s : {GpuSelection::kBestFit, GpuSelection::kRandom, GpuSelection::kFirstFit}) {
    EXPECT_EQ(Select(n, Whole(2), s), (GpuChoice{0x0C, -1}));
  }
  TaskRequest cpu;
  cpu.cpu = MilliCpu(1000);
  EXPECT_EQ(Select(n, cpu, GpuSelection::kBestFit), GpuChoice{});
  EXPECT_EQ(Select(n, Whole(7), GpuSelection::kBestFit), std::nullopt);
}

NodeSpec A100MigNode(int gpus) {
  return MakeUniformNode("mig", MilliCpu(64000), MiB(1 << 19), Model("A100-40GB"), gpus,
                         SharingMode::kMig);
}

TEST(SelectGpusTest, MigGoesToTheBusiestMigGpu) {
  TestNode n(A100MigNode(3));
  n.Mig(1, "3g.20gb", 0);
  n.Mig(2, "1g.5gb", 6);
  // GPU 1 is busiest (3 compute slices). Its free slots are 4..7; a 1g instance at 6
  // leaves 4-5 for a 2g, which starts 4 and 5 would not.
  EXPECT_EQ(Select(n, Mig("1g.5gb"), GpuSelection::kBestFit), (GpuChoice{0x2, 6}));
  // A 3g only fits at slot 4 of GPU 1 (busiest) too.
  EXPECT_EQ(Select(n, Mig("3g.20gb"), GpuSelection::kBestFit), (GpuChoice{0x2, 4}));
  // A 4g must start at 0: GPU 1 cannot, GPU 2 (1 slice used, slot 6) can.
  EXPECT_EQ(Select(n, Mig("4g.20gb"), GpuSelection::kBestFit), (GpuChoice{0x4, 0}));
  // A 7g needs an empty GPU.
  EXPECT_EQ(Select(n, Mig("7g.40gb"), GpuSelection::kBestFit), (GpuChoice{0x1, 0}));
}

TEST(SelectGpusTest, MigOnFreshGpusTakesTheFirstAndKeepsBigProfilesPlaceable) {
  TestNode n(A100MigNode(2));
  // Ties in busyness go to the lowest index; a 1g at slot 6 keeps 4g at 0 and 2g at 4.
  EXPECT_EQ(Select(n, Mig("1g.5gb"), GpuSelection::kBestFit), (GpuChoice{0x1, 6}));
  EXPECT_EQ(Select(n, Mig("7g.40gb"), GpuSelection::kBestFit), (GpuChoice{0x1, 0}));
  // The start is what MigLayout::ChooseStart says for that GPU.
  n.Mig(0, "2g.10gb", 2);
  const int p = *n.ledger.gpus()[0].model().FindMigProfile("1g.10gb");
  std::optional<GpuChoice> c = Select(n, Mig("1g.10gb"), GpuSelection::kBestFit);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->mask, 0x1U);
  EXPECT_EQ(c->mig_start, *n.ledger.gpus()[0].mig().ChooseStart(p));
}

TEST(SelectGpusTest, MigIgnoresNonMigGpusAndFullGpus) {
  NodeSpec spec = A100MigNode(3);
  spec.gpus[0].mode = SharingMode::kExclusive;
  TestNode n(std::move(spec));
  n.Occupy({0});
  n.Mig(2, "1g.5gb", 6);
  EXPECT_EQ(Select(n, Mig("1g.5gb"), GpuSelection::kBestFit)->mask, 0x4U);
  n.Mig(1, "7g.40gb", 0);
  n.Mig(2, "4g.20gb", 0);
  n.Mig(2, "2g.10gb", 4);
  // GPU 1 is full; GPU 2 has 7 compute slices used.
  EXPECT_EQ(Select(n, Mig("1g.5gb"), GpuSelection::kBestFit), std::nullopt);
  EXPECT_EQ(Select(n, Mig("1g.18gb"), GpuSelection::kBestFit), std::nullopt);
}

TEST(MakeAllocationTest, RejectsMalformedChoices) {
  TestNode n(
      MakeUniformNode("n", MilliCpu(32000), MiB(1 << 17), Model("T4"), 4, SharingMode::kShared));
  TaskRequest cpu;
  cpu.cpu = MilliCpu(1000);
  EXPECT_EQ(MakeAllocation(NodeId(0), n.ledger, cpu, GpuChoice{0x1, -1}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeAllocation(NodeId(0), n.ledger, Whole(2), GpuChoice{0x1, -1}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeAllocation(NodeId(0), n.ledger, Whole(2), GpuChoice{0x7, -1}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeAllocation(NodeId(0), n.ledger, Share(100), GpuChoice{}).status().code(),
            StatusCode::kInvalidArgument);
  // The right count, but GPU 5 does not exist on a 4-GPU node.
  EXPECT_EQ(MakeAllocation(NodeId(0), n.ledger, Whole(2), GpuChoice{0x21, -1}).status().code(),
            StatusCode::kInvalidArgument);
  // A MIG profile the T4 does not have.
  EXPECT_EQ(MakeAllocation(NodeId(0), n.ledger, Mig("1g.5gb"), GpuChoice{0x1, 0}).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(MakeAllocationTest, ExactGrants) {
  TestNode n(
      MakeUniformNode("n", MilliCpu(32000), MiB(1 << 17), Model("T4"), 4, SharingMode::kShared));
  TaskRequest cpu;
  cpu.cpu = MilliCpu(1500);
  cpu.memory = MiB(2048);
  StatusOr<Allocation> a = MakeAllocation(NodeId(3), n.ledger, cpu, GpuChoice{});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, (Allocation{NodeId(3), MilliCpu(1500), MiB(2048), {}}));

  TaskRequest whole = Whole(2);
  whole.memory = MiB(4096);
  whole.gpu_memory = MiB(8192);
  a = MakeAllocation(NodeId(1), n.ledger, whole, GpuChoice{0x5, -1});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, (Allocation{NodeId(1),
                            MilliCpu(1000),
                            MiB(4096),
                            {{0, kWholeGpu, MiB(8192)}, {2, kWholeGpu, MiB(8192)}}}));
  EXPECT_TRUE(n.ledger.Allocate(*a).ok());

  a = MakeAllocation(NodeId(0), n.ledger, Share(250, 1000, 2048), GpuChoice{0x8, -1});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, (Allocation{NodeId(0), MilliCpu(1000), MiB(0), {{3, MilliGpu(250), MiB(2048)}}}));
  EXPECT_TRUE(n.ledger.Allocate(*a).ok());
  EXPECT_EQ(n.ledger.free_gpu_milli().value(), 4000 - 2000 - 250);
}

TEST(MakeAllocationTest, MigGrantChargesTheProfile) {
  TestNode n(A100MigNode(2));
  StatusOr<Allocation> a = MakeAllocation(NodeId(0), n.ledger, Mig("3g.20gb"), GpuChoice{0x2, 4});
  ASSERT_TRUE(a.ok());
  ASSERT_EQ(a->gpus.size(), 1U);
  const GpuGrant& g = a->gpus[0];
  EXPECT_EQ(g.gpu, 1);
  EXPECT_EQ(g.milli.value(), 3 * 1000 / 7);  // 428
  EXPECT_EQ(g.memory.value(), 19968);
  EXPECT_EQ(g.mig_profile, 4);  // index of 3g.20gb in the A100-40GB table
  EXPECT_EQ(g.mig_start, 4);
  EXPECT_EQ(a->TotalGpuMilli().value(), 428);
  ASSERT_TRUE(n.ledger.Allocate(*a).ok());
  EXPECT_EQ(n.ledger.gpus()[1].mig().used_compute(), 3);

  a = MakeAllocation(NodeId(0), n.ledger, Mig("1g.5gb"), GpuChoice{0x1, 6});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->gpus[0].milli.value(), 142);
  EXPECT_EQ(a->gpus[0].memory.value(), 4864);
  EXPECT_EQ(a->gpus[0].mig_profile, 0);
}

// Whatever SelectGpus picks is a valid allocation on the node.
TEST(SelectGpusPropertyTest, ChoicesAlwaysAllocate) {
  const std::vector<TaskRequest> requests{
      Share(100), Share(450, 1000, 2048), Whole(1),       Whole(2),
      Whole(3),   Mig("1g.10gb"),         Mig("3g.40gb"), Mig("2g.20gb")};
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    NodeSpec spec = TopologyNode({{0, 0}, {0, 0}, {0, 0}, {0, 0}, {1, 1}, {1, 1}, {1, 1}, {1, 1}},
                                 2, SharingMode::kShared, "A100-80GB");
    for (int g = 0; g < 8; g += 3) {
      spec.gpus[g].mode = SharingMode::kMig;
    }
    TestNode n(std::move(spec));
    Pcg32 rng(seed);
    int placed = 0;
    for (int step = 0; step < 80; ++step) {
      const TaskRequest& r = requests[rng.Uniform(static_cast<uint32_t>(requests.size()))];
      auto sel = static_cast<GpuSelection>(rng.Uniform(3));
      std::optional<GpuChoice> c = SelectGpus(n.ledger, r, sel, rng);
      if (!c) {
        continue;
      }
      StatusOr<Allocation> a = MakeAllocation(NodeId(0), n.ledger, r, *c);
      ASSERT_TRUE(a.ok()) << a.status().ToString();
      ASSERT_TRUE(n.ledger.Allocate(*a).ok()) << "seed " << seed << " step " << step;
      ++placed;
    }
    EXPECT_GT(placed, 5);
  }
}

}  // namespace
}  // namespace tessera
