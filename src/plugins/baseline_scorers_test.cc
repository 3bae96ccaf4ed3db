#include "plugins/baseline_scorers.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "model/node.h"
#include "state/node_ledger.h"
#include "state/testing/test_cluster.h"

namespace tessera {
namespace {

using ::tessera::testing::Cpu;
using ::tessera::testing::Mig;
using ::tessera::testing::Model;
using ::tessera::testing::Share;
using ::tessera::testing::TestNode;
using ::tessera::testing::Whole;

// Expected values below are hand-computed from the formulas of the FGD simulator
// (docs/fgd-replication.md §3), with the Alibaba scale: 128 cores, 8 GPUs.
constexpr NodeScale kScale{128000, 8000};

NodeSpec SharedNode(int gpus, int64_t cpu = 64000, std::string_view model = "T4") {
  return MakeUniformNode("n", MilliCpu(cpu), MiB(1 << 18), Model(model), gpus,
                         SharingMode::kShared);
}

TEST(RequestGpuMilliTest, AllForms) {
  TestNode t4(SharedNode(4));
  EXPECT_EQ(RequestGpuMilli(t4.ledger, Cpu(1000)), 0);
  EXPECT_EQ(RequestGpuMilli(t4.ledger, Share(300)), 300);
  EXPECT_EQ(RequestGpuMilli(t4.ledger, Whole(1)), 1000);
  EXPECT_EQ(RequestGpuMilli(t4.ledger, Whole(4)), 4000);
  EXPECT_EQ(RequestGpuMilli(t4.ledger, Mig("3g.20gb")), 0);  // no such profile on a T4
  TestNode mig(MakeUniformNode("m", MilliCpu(64000), MiB(1 << 18), Model("A100-40GB"), 2,
                               SharingMode::kMig));
  EXPECT_EQ(RequestGpuMilli(mig.ledger, Mig("3g.20gb")), 428);  // 3 * 1000 / 7
  EXPECT_EQ(RequestGpuMilli(mig.ledger, Mig("1g.5gb")), 142);
  EXPECT_EQ(RequestGpuMilli(mig.ledger, Mig("7g.40gb")), 1000);
}

TEST(RandomScorerTest, SameForEveryNode) {
  RandomScorer s;
  EXPECT_EQ(s.name(), "random");
  TestNode a(SharedNode(4));
  TestNode b(SharedNode(1, 8000));
  b.Share(0, 900);
  EXPECT_EQ(s.Score(a.ledger, Share(100)).score, 0);
  EXPECT_EQ(s.Score(b.ledger, Share(100)).score, 0);
  EXPECT_TRUE(s.Score(a.ledger, Share(100)).gpus.empty());
}

TEST(BestFitScorerTest, HandComputed) {
  BestFitScorer s(kScale);
  EXPECT_EQ(s.name(), "bestfit");
  TestNode n(SharedNode(4, 64000));
  // s = (56000/128000)*0.5 + (3500/8000)*0.5 = 0.4375 -> int(56.25) = 56
  EXPECT_EQ(s.Score(n.ledger, Share(500, 8000)).score, 56);
  // CPU only: (56000/128000)*0.5 + (4000/8000)*0.5 = 0.46875 -> int(53.125) = 53
  EXPECT_EQ(s.Score(n.ledger, Cpu(8000)).score, 53);
  n.Take(32000);
  n.Whole({0, 1});
  // (16000/128000)*0.5 + (1000/8000)*0.5 = 0.125 -> 87
  EXPECT_EQ(s.Score(n.ledger, Whole(1, 16000)).score, 87);
  // Everything taken: s = 0 -> 100.
  EXPECT_EQ(s.Score(n.ledger, Whole(2, 32000)).score, 100);
  // Truncation toward zero: (31000/128000)*0.5 + (1700/8000)*0.5
  //   = 0.12109375 + 0.10625 = 0.22734375 -> int(77.265625) = 77
  EXPECT_EQ(s.Score(n.ledger, Share(300, 1000)).score, 77);
  EXPECT_TRUE(s.Score(n.ledger, Share(300, 1000)).gpus.empty());
}

TEST(BestFitScorerTest, UsesTheGivenScaleAndMigCharges) {
  BestFitScorer s(NodeScale{64000, 2000});
  TestNode mig(MakeUniformNode("m", MilliCpu(64000), MiB(1 << 18), Model("A100-40GB"), 2,
                               SharingMode::kMig));
  // (63000/64000)*0.5 + ((2000-428)/2000)*0.5 = 0.4921875 + 0.393 = 0.8851875 -> 11
  EXPECT_EQ(s.Score(mig.ledger, Mig("3g.20gb")).score, 11);
}

TEST(DotProductScorerTest, HandComputed) {
  DotProductScorer s(kScale);
  EXPECT_EQ(s.name(), "dotprod");
  TestNode n(SharedNode(4, 64000));
  // node (0.5, 0.5), task (0.0625, 0.0625): d = 0.0625/2 = 0.03125 -> int(96.875) = 96
  EXPECT_EQ(s.Score(n.ledger, Share(500, 8000)).score, 96);
  // task (0.5, 0.5): d = 0.5/2 = 0.25 -> 75
  EXPECT_EQ(s.Score(n.ledger, Whole(4, 64000)).score, 75);
  // CPU only, task (0.25, 0): d = 0.125/2 = 0.0625 -> int(93.75) = 93
  EXPECT_EQ(s.Score(n.ledger, Cpu(32000)).score, 93);
  // Less left on the node: a higher score for the same task.
  n.Take(48000);
  n.Whole({0, 1, 2});
  n.Share(3, 500);
  // node (0.125, 0.0625), task (0.0078125, 0.0625): d = (0.0009765625+0.00390625)/2
  //   = 0.00244140625 -> int(99.755859375) = 99
  EXPECT_EQ(s.Score(n.ledger, Share(500, 1000)).score, 99);
}

TEST(GpuPackingScorerTest, CpuOnlyScoresZero) {
  GpuPackingScorer s;
  EXPECT_EQ(s.name(), "gpupacking");
  TestNode n(SharedNode(4));
  EXPECT_EQ(s.Score(n.ledger, Cpu(1000)).score, 0);
  n.Share(0, 500);
  EXPECT_EQ(s.Score(n.ledger, Cpu(1000)).score, 0);
}

TEST(GpuPackingScorerTest, UnusedNodes) {
  GpuPackingScorer s;
  // max(33 - F, F) for F fully free GPUs on a node without any GPU use.
  for (auto [gpus, want] :
       std::vector<std::pair<int, int64_t>>{{1, 32}, {2, 31}, {4, 29}, {8, 25}}) {
    TestNode n(SharedNode(gpus));
    EXPECT_EQ(s.Score(n.ledger, Share(300)).score, want) << gpus << " GPUs";
    EXPECT_EQ(s.Score(n.ledger, Whole(1)).score, want) << gpus << " GPUs";
  }
  TestNode big(SharedNode(20));
  EXPECT_EQ(s.Score(big.ledger, Share(300)).score, 20);  // max(13, 20)
  // CPU use alone does not make a node used.
  TestNode cpu_used(SharedNode(4));
  cpu_used.Take(8000);
  EXPECT_EQ(s.Score(cpu_used.ledger, Share(300)).score, 29);
}

TEST(GpuPackingScorerTest, UsedNodeTakingFullyFreeGpus) {
  GpuPackingScorer s;
  TestNode n(SharedNode(4));
  n.Share(0, 600);  // left: 400, 1000, 1000, 1000
  // 500 does not fit GPU 0: the first fitting GPU in ascending-left order is fully free.
  EXPECT_EQ(s.Score(n.ledger, Share(500)).score, 49);  // max(50 - 1, 33)
  EXPECT_EQ(s.Score(n.ledger, Whole(1)).score, 49);
  EXPECT_EQ(s.Score(n.ledger, Whole(2)).score, 48);
  EXPECT_EQ(s.Score(n.ledger, Whole(3)).score, 47);
  TestNode big(SharedNode(20));
  big.Share(0, 100);
  EXPECT_EQ(s.Score(big.ledger, Whole(17)).score, 33);  // max(50 - 17, 33)
  EXPECT_EQ(s.Score(big.ledger, Whole(19)).score, 33);  // max(31, 33)
  EXPECT_EQ(s.Score(big.ledger, Whole(16)).score, 34);
}

TEST(GpuPackingScorerTest, UsedNodeTakingPartlyUsedGpu) {
  GpuPackingScorer s;
  TestNode n(SharedNode(4));
  n.Share(0, 600);  // left 400
  n.Share(1, 400);  // left 600
  n.Share(2, 1);    // left 999
  // Ascending left: 400 (GPU 0), 600 (GPU 1), 999 (GPU 2), 1000 (GPU 3).
  EXPECT_EQ(s.Score(n.ledger, Share(300)).score, 96);  // s = 40 -> 100 - 4
  EXPECT_EQ(s.Score(n.ledger, Share(400)).score, 96);
  EXPECT_EQ(s.Score(n.ledger, Share(500)).score, 94);   // s = 60 -> 100 - 6 (GpuPacking, §3)
  EXPECT_EQ(s.Score(n.ledger, Share(700)).score, 91);   // 999 -> 99 -> 100 - 9
  EXPECT_EQ(s.Score(n.ledger, Share(1000)).score, 49);  // only GPU 3 fits
  TestNode t(SharedNode(2));
  t.Share(1, 545);  // left 455 -> 45 -> 100 - 4
  EXPECT_EQ(s.Score(t.ledger, Share(100)).score, 96);
  t.Share(1, 450);  // left 5 -> 0 -> 100
  EXPECT_EQ(s.Score(t.ledger, Share(5)).score, 100);
}

TEST(GpuPackingScorerTest, FullyUsedGpusCountAsUsed) {
  GpuPackingScorer s;
  TestNode n(SharedNode(2));
  n.Whole({0});
  // F = 1 of 2: not an unused node; the picked GPU is fully free.
  EXPECT_EQ(s.Score(n.ledger, Share(300)).score, 49);
}

TEST(GpuClusteringScorerTest, CpuOnlyScoresZero) {
  GpuClusteringScorer s(kScale);
  EXPECT_EQ(s.name(), "gpuclustering");
  TestNode n(SharedNode(4));
  n.Share(0, 300);
  EXPECT_EQ(s.Score(n.ledger, Cpu(1000)).score, 0);
}

TEST(GpuClusteringScorerTest, NoGpuTasksOnTheNode) {
  GpuClusteringScorer s(kScale);
  TestNode n(SharedNode(4));
  // base = 25 * (8000 - 4000) / 8000 = 12 (integer), + 25
  EXPECT_EQ(s.Score(n.ledger, Share(300)).score, 37);
  EXPECT_EQ(s.Score(n.ledger, Whole(2)).score, 37);
  n.Take(16000);  // a CPU-only task is not a GPU task
  EXPECT_EQ(s.Score(n.ledger, Share(300)).score, 37);
  TestNode one(SharedNode(1));
  // base = 25 * 7000 / 8000 = 21
  EXPECT_EQ(s.Score(one.ledger, Whole(1)).score, 46);
}

TEST(GpuClusteringScorerTest, AllFourCases) {
  GpuClusteringScorer s(kScale);
  TestNode n(SharedNode(4));
  n.Share(0, 500);  // free 3500: base = 25 * 4500 / 8000 = 14
  EXPECT_EQ(s.Score(n.ledger, Share(300)).score, 14 + 75);  // same shape only
  EXPECT_EQ(s.Score(n.ledger, Whole(1)).score, 14);         // other shapes only
  EXPECT_EQ(s.Score(n.ledger, Whole(2)).score, 14);
  n.Whole({1});  // free 2500: base = 25 * 5500 / 8000 = 17
  EXPECT_EQ(s.Score(n.ledger, Share(300)).score, 17 + 50);  // same plus others
  EXPECT_EQ(s.Score(n.ledger, Whole(1)).score, 17 + 50);
  EXPECT_EQ(s.Score(n.ledger, Whole(2)).score, 17);
  n.Whole({2, 3});  // a 2-GPU task; free 500: base = 25 * 7500 / 8000 = 23
  EXPECT_EQ(s.Score(n.ledger, Whole(2)).score, 23 + 50);
}

TEST(GpuClusteringScorerTest, ReleasedTasksNoLongerCount) {
  GpuClusteringScorer s(kScale);
  TestNode n(SharedNode(4));
  Allocation whole{NodeId(0), MilliCpu(0), MiB(0), {{1, kWholeGpu, MiB(0)}}};
  ASSERT_TRUE(n.ledger.Allocate(whole).ok());
  n.Share(0, 500);
  EXPECT_EQ(s.Score(n.ledger, Share(300)).score, 17 + 50);
  ASSERT_TRUE(n.ledger.Release(whole).ok());
  EXPECT_EQ(s.Score(n.ledger, Share(300)).score, 14 + 75);
}

TEST(GpuClusteringScorerTest, MigTasksFormTheirOwnShape) {
  GpuClusteringScorer s(kScale);
  TestNode n(MakeUniformNode("m", MilliCpu(64000), MiB(1 << 18), Model("A100-40GB"), 2,
                             SharingMode::kMig));
  n.Mig(0, "1g.5gb", 6);  // free 2000 - 142 = 1858: base = 25 * 6142 / 8000 = 19
  EXPECT_EQ(s.Score(n.ledger, Mig("3g.20gb")).score, 19 + 75);
  EXPECT_EQ(s.Score(n.ledger, Share(300)).score, 19);
}

}  // namespace
}  // namespace tessera
