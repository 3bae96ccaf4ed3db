#include "plugins/tessera_scorer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "base/rng.h"
#include "model/node.h"
#include "plugins/registry.h"
#include "plugins/testing/fgd_testing.h"
#include "sched/gpu_selection.h"
#include "sched/placer.h"
#include "state/cluster_state.h"
#include "state/node_ledger.h"
#include "state/testing/test_cluster.h"

namespace tessera {
// Named, not anonymous: its Typical would meet fgd_test.cc's in a unity batch.
namespace tessera_scorer_test {

// Expected values are hand-computed in the comments. Notation: r = cpu_per_gpu,
// m = memory_per_gpu, S(cpu, mem, gpu) = StrandedGpu, "level" = SigmoidScore(gain),
// key = level * 16 + (10 - leftover / 100) for shares, level * 16 + 10 otherwise.

using ::tessera::testing::Catalog;
using ::tessera::testing::Cpu;
using ::tessera::testing::ModelOf;
using ::tessera::testing::Request;
using ::tessera::testing::T4Node;
using ::tessera::testing::TakeRandomShares;
using ::tessera::testing::TestNode;

TaskRequest ShareReq(int64_t cpu, int64_t milli, int64_t memory = 0) {
  return Request(cpu, 1, milli, memory);
}
TaskRequest WholeReq(int64_t cpu, int count, int64_t memory = 0) {
  return Request(cpu, count, 1000, memory);
}

TypicalTask Typical(int64_t cpu, int64_t milli, int count, int64_t weight, int64_t memory = 0) {
  TypicalTask t;
  t.cpu = MilliCpu(cpu);
  t.gpu_milli = MilliGpu(milli);
  t.gpu_count = count;
  t.count = weight;
  t.memory = MiB(memory);
  return t;
}

// ---------------------------------------------------------------------------------
// The workload's CPU and memory per milli-GPU.

TEST(TesseraScorerTest, RatiosAreCountWeightedOverGpuTypicalTasks) {
  FragmentationModel m = ModelOf({
      Typical(4000, 500, 1, 6, 8192),     // 6 x (4000 CPU, 500 milli, 8192 MiB)
      Typical(16000, 1000, 2, 2, 32768),  // 2 x (16000 CPU, 2000 milli, 32768 MiB)
      Typical(2000, 0, 0, 5, 4096),       // CPU only: ignored
  });
  TesseraScorer s(&m);
  EXPECT_EQ(s.name(), "tessera");
  // CPU 6 * 4000 + 2 * 16000 = 56000 over GPU 6 * 500 + 2 * 2000 = 7000 milli.
  EXPECT_DOUBLE_EQ(s.cpu_per_gpu(), 8.0);
  // Memory 6 * 8192 + 2 * 32768 = 114688 MiB over 7000 milli.
  EXPECT_DOUBLE_EQ(s.memory_per_gpu(), 114688.0 / 7000.0);
}

TEST(TesseraScorerTest, RatiosFromFindTypicalTasksUseMeanMemoryPerShape) {
  // Shape A: (2000 CPU, 250 milli) x 3 with memory 1000, 2000, 3000 (mean 2000).
  // Shape B: (8000 CPU, 1 whole GPU) x 1 with memory 12000. Shape C: CPU only x 2.
  std::vector<TaskRequest> reqs = {ShareReq(2000, 250, 1000), ShareReq(2000, 250, 2000),
                                   ShareReq(2000, 250, 3000), WholeReq(8000, 1, 12000),
                                   Cpu(64000, 100000),        Cpu(64000, 100000)};
  FragmentationModel m(FindTypicalTasks(reqs, 1.0));
  ASSERT_EQ(m.workload().tasks.size(), 3U);
  TesseraScorer s(&m);
  // CPU 3 * 2000 + 8000 = 14000 over 3 * 250 + 1000 = 1750 milli.
  EXPECT_DOUBLE_EQ(s.cpu_per_gpu(), 8.0);
  // Memory 3 * 2000 + 12000 = 18000 over 1750 milli.
  EXPECT_DOUBLE_EQ(s.memory_per_gpu(), 18000.0 / 1750.0);
}

// A MIG request has gpu_milli 0; were it a typical task it would add CPU to the ratio
// and nothing to the GPU side ((4000 + 4000) / 500 = 16, twice the share's own
// ratio), making every node look CPU-starved in MIG-heavy workloads.
TEST(TesseraScorerTest, MigTypicalTaskDoesNotInflateTheCpuRatio) {
  TaskRequest mig;
  mig.cpu = MilliCpu(4000);
  mig.gpu_count = 1;
  mig.mig_profile = "3g.20gb";
  ASSERT_TRUE(ValidateTaskRequest(mig, Catalog()).ok());
  std::vector<TaskRequest> reqs = {ShareReq(4000, 500), mig};
  FragmentationModel m(FindTypicalTasks(reqs, 1.0));
  // MIG requests are not typical tasks: their placement follows MIG geometry.
  ASSERT_EQ(m.workload().tasks.size(), 1U);
  EXPECT_EQ(m.workload().tasks[0].gpu_milli.value(), 500);
  TesseraScorer s(&m);
  EXPECT_DOUBLE_EQ(s.cpu_per_gpu(), 8.0);
}

TEST(TesseraScorerTest, WorkloadWithoutGpuTasksDisablesTheTerm) {
  FragmentationModel cpu_only = ModelOf({Typical(4000, 0, 0, 3, 8192)});
  TesseraScorer s(&cpu_only);
  EXPECT_EQ(s.cpu_per_gpu(), 0.0);
  EXPECT_EQ(s.memory_per_gpu(), 0.0);
  EXPECT_EQ(s.StrandedGpu(0, 0, 4000), 0.0);  // nothing to feed by: nothing stranded
  EXPECT_EQ(s.StrandedGpu(1000, 0, 3000), 0.0);

  // On a node with 1000 CPU left for 4 idle GPUs the level is pure FGD.
  TestNode n(T4Node(4, 32000));
  n.Take(31000);
  FgdScorer fgd(&cpu_only);
  // CPU only: idle GPU unchanged, frag unchanged: level 50, key 50 * 16 + 10.
  EXPECT_EQ(s.Score(n.ledger, Cpu(1000)).score, 810);
  // A 500-milli share on GPU 0 removes 500 of the CPU-only task's 4000 idle: level
  // SigmoidScore(500) = 62 (FGD's score), leftover 500: key 62 * 16 + 5.
  EXPECT_EQ(fgd.Score(n.ledger, ShareReq(500, 500)).score, 62);
  NodeScore ns = s.Score(n.ledger, ShareReq(500, 500));
  EXPECT_EQ(ns.score, 997);
  EXPECT_EQ(ns.gpus, (GpuChoice{0x1, -1}));

  // No typical tasks at all: fragmentation 0 everywhere, no ratios.
  FragmentationModel empty(FindTypicalTasks({}));
  TesseraScorer e(&empty);
  EXPECT_EQ(e.cpu_per_gpu(), 0.0);
  EXPECT_EQ(e.memory_per_gpu(), 0.0);
  EXPECT_EQ(e.Score(n.ledger, Cpu(1000)).score, 810);
  EXPECT_EQ(e.Score(n.ledger, WholeReq(0, 2)).score, 810);
}

// ---------------------------------------------------------------------------------
// Stranded GPU.

TEST(TesseraScorerTest, StrandedGpuHandComputed) {
  // r = 4000 / 500 = 8 milli-CPU and m = 8000 / 500 = 16 MiB per milli-GPU.
  FragmentationModel model = ModelOf({Typical(4000, 500, 1, 1, 8000)});
  TesseraScorer s(&model);
  ASSERT_DOUBLE_EQ(s.cpu_per_gpu(), 8.0);
  ASSERT_DOUBLE_EQ(s.memory_per_gpu(), 16.0);
  // CPU-limited: CPU feeds 16000 / 8 = 2000, memory 64000 / 16 = 4000, of 4000 idle.
  EXPECT_DOUBLE_EQ(s.StrandedGpu(16000, 64000, 4000), 2000.0);
  // Memory-limited: CPU feeds 4000, memory 16000 / 16 = 1000.
  EXPECT_DOUBLE_EQ(s.StrandedGpu(32000, 16000, 4000), 3000.0);
  // Both limited: the tighter one counts (CPU 1500, memory 2500).
  EXPECT_DOUBLE_EQ(s.StrandedGpu(12000, 40000, 4000), 2500.0);
  // Neither: CPU feeds 8000 and memory 8000 of 4000 idle.
  EXPECT_DOUBLE_EQ(s.StrandedGpu(64000, 128000, 4000), 0.0);
  // Exactly enough of both.
  EXPECT_DOUBLE_EQ(s.StrandedGpu(32000, 64000, 4000), 0.0);
  // Fractions of a milli are kept: 1001 / 8 = 125.125 fed of 300.
  EXPECT_DOUBLE_EQ(s.StrandedGpu(1001, 64000, 300), 174.875);
  // No idle GPU: nothing to strand, whatever the CPU and memory.
  EXPECT_DOUBLE_EQ(s.StrandedGpu(0, 0, 0), 0.0);
  EXPECT_DOUBLE_EQ(s.StrandedGpu(64000, 128000, 0), 0.0);
  // No CPU or memory left: all idle GPU is stranded.
  EXPECT_DOUBLE_EQ(s.StrandedGpu(0, 64000, 2500), 2500.0);
  EXPECT_DOUBLE_EQ(s.StrandedGpu(64000, 0, 2500), 2500.0);

  // Typical tasks without memory: only CPU can strand GPU.
  FragmentationModel no_mem = ModelOf({Typical(4000, 500, 1, 1, 0)});
  TesseraScorer c(&no_mem);
  EXPECT_EQ(c.memory_per_gpu(), 0.0);
  EXPECT_DOUBLE_EQ(c.StrandedGpu(16000, 0, 4000), 2000.0);
  EXPECT_DOUBLE_EQ(c.StrandedGpu(32000, 0, 4000), 0.0);
}

// ---------------------------------------------------------------------------------
// Score keys on a hand-built node.

// T4 x4 with left 300, 800, 1000, 1000 (3100 idle) and 16000 milli-CPU free.
// Workload: one typical task (4000 CPU, 500 milli): r = 8, no memory term, scale 1.
// Before: frag 300 (GPU 0 is too full); stranded 3100 - 16000 / 8 = 1100.
void SetUpKeyNode(TestNode& n) {
  n.Take(16000);
  n.Share(0, 700);
  n.Share(1, 200);
}

TEST(TesseraScorerTest, ShareKeyIsLevelAndFit) {
  TestNode n(T4Node());
  SetUpKeyNode(n);
  FragmentationModel m = ModelOf({Typical(4000, 500, 1, 1)});
  TesseraScorer s(&m);
  ASSERT_EQ(m.ScaledFrag(n.ledger), 300);
  ASSERT_DOUBLE_EQ(s.StrandedGpu(16000, 0, 3100), 1100.0);
  // Share (2000 CPU, 300 milli): stranded after 2800 - 14000 / 8 = 1050, growth -50.
  //   GPU 0: left 0, frag 0: gain 300 + 50 = 350 -> 58; key 58 * 16 + 10 = 938.
  //   GPU 1: left 500, frag 300: gain 50 -> 51; key 51 * 16 + 5 = 821.
  //   GPUs 2, 3: left 700: gain 50 -> 51; key 51 * 16 + 3 = 819.
  EXPECT_EQ(FgdScorer::SigmoidScore(350), 58);
  EXPECT_EQ(FgdScorer::SigmoidScore(50), 51);
  NodeScore ns = s.Score(n.ledger, ShareReq(2000, 300));
  EXPECT_EQ(ns.score, 938);
  EXPECT_EQ(ns.gpus, (GpuChoice{0x1, -1}));

  // Share (2000 CPU, 900 milli): only GPUs 2 and 3 fit. GPU 2 left 100, now too full:
  // frag 400, decrease -100; stranded after 2200 - 1750 = 450, growth -650;
  // gain 550 -> 63; key 63 * 16 + 9 = 1017.
  EXPECT_EQ(FgdScorer::SigmoidScore(550), 63);
  ns = s.Score(n.ledger, ShareReq(2000, 900));
  EXPECT_EQ(ns.score, 1017);
  EXPECT_EQ(ns.gpus, (GpuChoice{0x4, -1}));
}

TEST(TesseraScorerTest, WholeGpuAndCpuOnlyKeys) {
  TestNode n(T4Node());
  SetUpKeyNode(n);
  FragmentationModel m = ModelOf({Typical(4000, 500, 1, 1)});
  TesseraScorer s(&m);
  // One whole GPU (4000 CPU) takes GPU 2: left 300, 800, 0, 1000, 12000 CPU: frag 300,
  // unchanged; stranded after 2100 - 1500 = 600, growth -500; gain 500 -> 62;
  // key 62 * 16 + 10 = 1002. No GPU choice: the Profile's selection picks.
  NodeScore ns = s.Score(n.ledger, WholeReq(4000, 1));
  EXPECT_EQ(ns.score, 1002);
  EXPECT_TRUE(ns.gpus.empty());
  // Two whole GPUs (0 CPU): GPUs 2 and 3, left 300, 800, 0, 0: frag 300; stranded
  // after max(0, 1100 - 2000) = 0, growth -1100; gain 1100 -> 75; key 1210.
  EXPECT_EQ(FgdScorer::SigmoidScore(1100), 75);
  EXPECT_EQ(s.Score(n.ledger, WholeReq(0, 2)).score, 1210);
  // CPU only, 8000: frag unchanged (8000 >= 4000 left); stranded after
  // 3100 - 1000 = 2100, growth 1000; gain -1000 -> 26; key 26 * 16 + 10 = 426.
  ns = s.Score(n.ledger, Cpu(8000));
  EXPECT_EQ(ns.score, 426);
  EXPECT_TRUE(ns.gpus.empty());
  // CPU only, 14000: 2000 CPU left is too little for the typical task: frag 3100,
  // decrease -2800; stranded after 3100 - 250 = 2850, growth 1750; gain -4550 -> 1.
  EXPECT_EQ(FgdScorer::SigmoidScore(-4550), 1);
  EXPECT_EQ(s.Score(n.ledger, Cpu(14000)).score, 26);
}

TEST(TesseraScorerTest, MemoryCanStrandGpu) {
  // r = 8, m = 16. Node: T4 x4, 64 cores, 32000 MiB: stranded before
  // 4000 - min(8000, 2000) = 2000 (memory-limited). Scale 1, frag 0 throughout.
  FragmentationModel m = ModelOf({Typical(4000, 500, 1, 1, 8000)});
  TesseraScorer s(&m);
  TestNode n(T4Node(4, 64000, 32000));
  // Share (1000 CPU, 500 milli, 12000 MiB): stranded after 3500 - min(7875, 1250) =
  // 2250, growth 250: gain -250 -> 43; key 43 * 16 + 5 = 693.
  EXPECT_EQ(FgdScorer::SigmoidScore(-250), 43);
  NodeScore ns = s.Score(n.ledger, ShareReq(1000, 500, 12000));
  EXPECT_EQ(ns.score, 693);
  EXPECT_EQ(ns.gpus, (GpuChoice{0x1, -1}));  // all GPUs tie: the first
  // The same share without memory: 3500 - min(7875, 2000) = 1500, growth -500:
  // gain 500 -> 62; key 997.
  EXPECT_EQ(s.Score(n.ledger, ShareReq(1000, 500)).score, 997);
}

TEST(TesseraScorerTest, AmongEqualLevelsTheShareGoesToTheGpuItFillsBest) {
  // T4 x4 with left 600, 1000, 400, 1000. The typical task (1000 CPU, 100 milli) fits
  // every GPU before and after, and 32 cores feed all idle GPU: every candidate has
  // level 50, and the key is decided by the fill.
  TestNode n(T4Node());
  n.Share(0, 400);
  n.Share(2, 600);
  FragmentationModel m = ModelOf({Typical(1000, 100, 1, 1)});
  TesseraScorer s(&m);
  FgdScorer fgd(&m);
  // 300 milli leaves 300, 700, 100, 700: keys 807, 803, 809, 803.
  NodeScore ns = s.Score(n.ledger, ShareReq(1000, 300));
  EXPECT_EQ(ns.score, 809);
  EXPECT_EQ(ns.gpus, (GpuChoice{0x4, -1}));
  // FGD alone sees a tie and takes the first GPU.
  EXPECT_EQ(fgd.Score(n.ledger, ShareReq(1000, 300)).gpus, (GpuChoice{0x1, -1}));
  // 500 milli fits GPUs 0, 1, 3 (GPU 2 has 400): leftovers 100, 500, 500: GPU 0.
  ns = s.Score(n.ledger, ShareReq(1000, 500));
  EXPECT_EQ(ns.score, 50 * 16 + 9);
  EXPECT_EQ(ns.gpus, (GpuChoice{0x1, -1}));

  // The fit counts in 100-milli steps: left 650 and 620 less 500 leave 150 and 120,
  // both step 1: a tie, which the first GPU wins.
  TestNode t(T4Node(2));
  t.Share(0, 350);
  t.Share(1, 380);
  ns = s.Score(t.ledger, ShareReq(1000, 500));
  EXPECT_EQ(ns.score, 50 * 16 + 9);
  EXPECT_EQ(ns.gpus, (GpuChoice{0x1, -1}));
}

TEST(TesseraScorerTest, InfeasibleWhenTheGpusAreNotFree) {
  TestNode n(T4Node());
  n.Share(0, 100);
  n.Share(1, 600);  // left 900, 400, 1000, 1000
  FragmentationModel m = ModelOf({Typical(4000, 500, 1, 1)});
  TesseraScorer s(&m);
  NodeScore ns = s.Score(n.ledger, WholeReq(1000, 3));  // two whole GPUs free
  EXPECT_EQ(ns.score, kInfeasibleScore);
  EXPECT_TRUE(ns.gpus.empty());
  EXPECT_EQ(s.Score(n.ledger, WholeReq(1000, 5)).score, kInfeasibleScore);  // 4 GPUs
  EXPECT_NE(s.Score(n.ledger, WholeReq(1000, 2)).score, kInfeasibleScore);
  EXPECT_NE(s.Score(n.ledger, ShareReq(1000, 950)).score, kInfeasibleScore);
  n.Share(2, 100);
  n.Share(3, 100);  // left 900, 400, 900, 900: no whole GPU, no room for 950
  EXPECT_EQ(s.Score(n.ledger, WholeReq(1000, 1)).score, kInfeasibleScore);
  ns = s.Score(n.ledger, ShareReq(1000, 950));
  EXPECT_EQ(ns.score, kInfeasibleScore);
  EXPECT_TRUE(ns.gpus.empty());
  EXPECT_NE(s.Score(n.ledger, ShareReq(1000, 900)).score, kInfeasibleScore);
}

// ---------------------------------------------------------------------------------
// Behaviour through the full stack: MakeProfile("tessera") + Placer + ClusterState.

// Typical tasks: 6 x (4000 CPU, 500 milli) and 2 x (8000 CPU, 1 whole GPU): r = 40000 /
// 5000 = 8, no memory. Two nodes of 4 T4s, equal but for CPU: "poor" has 24 cores
// (feeds 3000 of 4000 idle milli: 1000 stranded), "rich" 64 (nothing stranded).
std::vector<TaskRequest> RatioWorkload() {
  std::vector<TaskRequest> w(6, ShareReq(4000, 500));
  w.push_back(WholeReq(8000, 1));
  w.push_back(WholeReq(8000, 1));
  return w;
}

class TesseraPlacementTest : public ::testing::Test {
 protected:
  TesseraPlacementTest() : workload_(RatioWorkload()), model_(FindTypicalTasks(workload_)) {}

  // A cluster of {poor, rich} (poor_first) or {rich, poor}.
  static ClusterState Cluster(bool poor_first) {
    std::vector<NodeSpec> nodes = {T4Node(4, 24000, 1 << 18, "poor"),
                                   T4Node(4, 64000, 1 << 18, "rich")};
    if (!poor_first) {
      std::swap(nodes[0], nodes[1]);
    }
    return ::tessera::testing::Cluster(std::move(nodes));
  }

  Placement Place(std::string_view policy, const ClusterState& state, const TaskRequest& r) {
    StatusOr<Profile> p = MakeProfile(policy, PolicyContext{ScaleOf(state), &model_});
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    Placer placer(std::move(p).value());
    Pcg32 rng(7);
    return placer.Place(state, r, rng);
  }

  // Name of the node the policy picks, in both node orders; "" if they differ.
  std::string Pick(std::string_view policy, const TaskRequest& r, int64_t* score = nullptr) {
    std::string names[2];
    for (int order = 0; order < 2; ++order) {
      ClusterState state = Cluster(order == 0);
      Placement p = Place(policy, state, r);
      EXPECT_TRUE(p.placed);
      if (!p.placed) {
        return "";
      }
      names[order] = state.spec(p.allocation.node).name;
      if (score != nullptr) {
        *score = p.score;
      }
    }
    return names[0] == names[1] ? names[0] : "";
  }

  std::vector<TaskRequest> workload_;
  FragmentationModel model_;
};

TEST_F(TesseraPlacementTest, WorkloadRatio) {
  ASSERT_EQ(model_.workload().tasks.size(), 2U);
  ASSERT_EQ(model_.scale(), 8);
  TesseraScorer s(&model_);
  EXPECT_DOUBLE_EQ(s.cpu_per_gpu(), 8.0);
  EXPECT_EQ(s.memory_per_gpu(), 0.0);
}

TEST_F(TesseraPlacementTest, LowCpuShareGoesWhereCpuIsScarce) {
  // Share (1000 CPU, 500 milli) on GPU 0 of either node: the whole-GPU typical task
  // can no longer use GPU 0's 500 left: frag +2 * 500 / 8 = 125. Poor: stranded 3500 - 23000 / 8 =
  // 625, growth -375, gain 250 -> 56, key 56 * 16 + 5 = 901. Rich: gain -125 -> 46, key 741.
  // Locality is neutral (3 * 2000).
  int64_t score = 0;
  EXPECT_EQ(Pick("tessera", ShareReq(1000, 500), &score), "poor");
  EXPECT_EQ(score, 901 + 6000);
  // FGD sees both nodes alike (46) and takes the first node in either order.
  ClusterState rich_first = Cluster(false);
  Placement fgd = Place("fgd", rich_first, ShareReq(1000, 500));
  ASSERT_TRUE(fgd.placed);
  EXPECT_EQ(fgd.allocation.node, NodeId(0));
  EXPECT_EQ(fgd.score, 46);
  EXPECT_EQ(fgd.tied_nodes, 2U);
}

TEST_F(TesseraPlacementTest, CpuHungryGpuTaskGoesWhereCpuIsPlentiful) {
  // One whole GPU with 12000 CPU: frag unchanged on both (12000 CPU left on poor
  // still fits both typical tasks). Poor: stranded 3000 - 1500 = 1500, growth 500,
  // gain -500 -> 37, key 602. Rich: nothing stranded: 50, key 810.
  int64_t score = 0;
  EXPECT_EQ(Pick("tessera", WholeReq(12000, 1), &score), "rich");
  EXPECT_EQ(score, 810 + 6000);
  ClusterState poor_first = Cluster(true);
  Placement fgd = Place("fgd", poor_first, WholeReq(12000, 1));
  ASSERT_TRUE(fgd.placed);
  EXPECT_EQ(fgd.allocation.node, NodeId(0));  // FGD: a tie, the first node
  EXPECT_EQ(fgd.tied_nodes, 2U);
}

TEST_F(TesseraPlacementTest, CpuOnlyTaskAvoidsStrandingGpus) {
  // 8000 CPU. Poor: stranded 4000 - 2000 = 2000, growth 1000: gain -1000 -> 26, key
  // 426. Rich: 56000 CPU feed all: key 810.
  int64_t score = 0;
  EXPECT_EQ(Pick("tessera", Cpu(8000), &score), "rich");
  EXPECT_EQ(score, 810 + 6000);
  ClusterState poor_first = Cluster(true);
  Placement fgd = Place("fgd", poor_first, Cpu(8000));
  ASSERT_TRUE(fgd.placed);
  EXPECT_EQ(fgd.allocation.node, NodeId(0));
  EXPECT_EQ(fgd.tied_nodes, 2U);
}

// Through the Placer, on one node with left 600, 1000, 400, 1000 and a workload of
// small shares (1000 CPU, 100 milli), every GPU keeps the same level for a 300-milli
// share: tessera takes the best fit (GPU 2, leftover 100), FGD the first GPU.
TEST(TesseraPlacementFitTest, ShareGoesToTheGpuItFillsBest) {
  StatusOr<ClusterState> made = ClusterState::Create({T4Node()}, Catalog());
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  ClusterState state = std::move(made).value();
  ASSERT_TRUE(state.Allocate({NodeId(0), MilliCpu(0), MiB(0), {{0, MilliGpu(400), MiB(0)}}}).ok());
  ASSERT_TRUE(state.Allocate({NodeId(0), MilliCpu(0), MiB(0), {{2, MilliGpu(600), MiB(0)}}}).ok());
  std::vector<TaskRequest> workload(4, ShareReq(1000, 100));
  FragmentationModel model(FindTypicalTasks(workload));
  auto gpu_of = [&](std::string_view policy) {
    StatusOr<Profile> p = MakeProfile(policy, PolicyContext{ScaleOf(state), &model});
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    Placer placer(std::move(p).value());
    Pcg32 rng(3);
    Placement placed = placer.Place(state, ShareReq(1000, 300), rng);
    EXPECT_TRUE(placed.placed);
    EXPECT_EQ(placed.allocation.gpus.size(), 1U);
    if (placed.allocation.gpus.size() != 1) {
      return -1;
    }
    EXPECT_EQ(placed.allocation.gpus[0].milli, MilliGpu(300));
    return placed.allocation.gpus[0].gpu;
  };
  EXPECT_EQ(gpu_of("tessera"), 2);
  EXPECT_EQ(gpu_of("fgd"), 0);
}

// ---------------------------------------------------------------------------------
// Property: Score equals a reference computed from first principles.

struct Reference {
  double cpu_per_gpu = 0;
  double memory_per_gpu = 0;

  explicit Reference(const TypicalWorkload& w) {
    int64_t cpu = 0;
    int64_t memory = 0;
    int64_t gpu = 0;
    for (const TypicalTask& t : w.tasks) {
      if (t.gpu_count == 0) {
        continue;
      }
      cpu += t.count * t.cpu.value();
      memory += t.count * t.memory.value();
      gpu += t.count * t.gpu_milli.value() * t.gpu_count;
    }
    if (gpu > 0) {
      cpu_per_gpu = static_cast<double>(cpu) / static_cast<double>(gpu);
      memory_per_gpu = static_cast<double>(memory) / static_cast<double>(gpu);
    }
  }

  double Stranded(int64_t cpu, int64_t memory, int64_t gpu) const {
    double fed = static_cast<double>(gpu);
    if (cpu_per_gpu > 0) {
      fed = std::min(fed, static_cast<double>(cpu) / cpu_per_gpu);
    }
    if (memory_per_gpu > 0) {
      fed = std::min(fed, static_cast<double>(memory) / memory_per_gpu);
    }
    return std::max(0.0, static_cast<double>(gpu) - fed);
  }
};

FragmentationModel RandomWorkload(Rng& rng) {
  static const int64_t kMilli[] = {0, 100, 250, 500, 700, 1000};
  std::vector<TypicalTask> tasks;
  for (int i = 1 + static_cast<int>(rng.Uniform(5)); i > 0; --i) {
    int64_t milli = kMilli[rng.Uniform(6)];
    int count = milli == 0 ? 0 : milli == 1000 ? 1 + static_cast<int>(rng.Uniform(3)) : 1;
    tasks.push_back(Typical(static_cast<int64_t>(rng.Uniform(17)) * 1000, milli, count,
                            1 + rng.Uniform(10), static_cast<int64_t>(rng.Uniform(5)) * 4096));
  }
  return ModelOf(std::move(tasks));
}

TEST(TesseraScorerPropertyTest, ScoreMatchesReferenceAndIsDeterministic) {
  int shares = 0;
  int wholes = 0;
  int cpu_only = 0;
  int infeasible = 0;
  for (uint64_t seed = 1; seed <= 600; ++seed) {
    Pcg32 rng(seed + 5000);
    TestNode n(T4Node(1 + static_cast<int>(rng.Uniform(8)), 32000, 65536));
    TakeRandomShares(rng, n, /*with_memory=*/true);
    FragmentationModel m = RandomWorkload(rng);
    TesseraScorer s(&m);
    Reference ref(m.workload());
    ASSERT_EQ(s.cpu_per_gpu(), ref.cpu_per_gpu);
    ASSERT_EQ(s.memory_per_gpu(), ref.memory_per_gpu);

    const NodeLedger& node = n.ledger;
    const int64_t free_cpu = node.free_cpu().value();
    const int64_t free_mem = node.free_memory().value();
    const int64_t free_gpu = node.free_gpu_milli().value();
    TaskRequest r;
    r.cpu = MilliCpu(static_cast<int64_t>(rng.Uniform(static_cast<uint32_t>(free_cpu) + 1)));
    r.memory = MiB(static_cast<int64_t>(rng.Uniform(static_cast<uint32_t>(free_mem) + 1)));
    switch (rng.Uniform(3)) {
      case 0:
        r.gpu_count = 1;
        r.gpu_milli = MilliGpu(10 * (1 + static_cast<int64_t>(rng.Uniform(99))));
        break;
      case 1:
        r.gpu_count = 1 + static_cast<int>(rng.Uniform(3));
        r.gpu_milli = kWholeGpu;
        break;
      default:
        break;
    }
    const int64_t req_gpu = r.gpu_milli.value() * r.gpu_count;
    const double growth =
        ref.Stranded(free_cpu - r.cpu.value(), free_mem - r.memory.value(), free_gpu - req_gpu) -
        ref.Stranded(free_cpu, free_mem, free_gpu);
    const int64_t before = m.ScaledFrag(node);
    // Level of a placement: frag of the node with the allocation actually made.
    auto level = [&](const std::vector<GpuGrant>& grants) -> int64_t {
      NodeLedger after = node;
      EXPECT_TRUE(after.Allocate({NodeId(0), r.cpu, r.memory, grants}).ok());
      double gain =
          static_cast<double>(before - m.ScaledFrag(after)) / static_cast<double>(m.scale()) -
          growth;
      return FgdScorer::SigmoidScore(gain);
    };

    NodeScore want{kInfeasibleScore, {}};
    if (r.fractional()) {
      ++shares;
      for (int g = 0; g < node.gpu_count(); ++g) {
        const int64_t left = node.gpus()[g].free_milli().value();
        if (left < r.gpu_milli.value()) {
          continue;
        }
        int64_t key =
            level({{g, r.gpu_milli, MiB(0)}}) * 16 + 10 - (left - r.gpu_milli.value()) / 100;
        if (key > want.score) {
          want = {key, GpuChoice{uint64_t{1} << g, -1}};
        }
      }
    } else if (r.cpu_only()) {
      ++cpu_only;
      want = {level({}) * 16 + 10, {}};
    } else {
      ++wholes;
      std::optional<uint64_t> mask = PickWholeGpus(node, r);
      if (mask) {
        std::vector<GpuGrant> grants;
        for (int g = 0; g < node.gpu_count(); ++g) {
          if ((*mask >> g) & 1U) {
            ASSERT_EQ(node.gpus()[g].free_milli(), kWholeGpu);
            grants.push_back({g, kWholeGpu, MiB(0)});
          }
        }
        want = {level(grants) * 16 + 10, {}};
      }
    }
    infeasible += want.score == kInfeasibleScore ? 1 : 0;

    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    NodeScore got = s.Score(node, r);
    ASSERT_EQ(got.score, want.score);
    ASSERT_EQ(got.gpus, want.gpus);
    if (got.score != kInfeasibleScore) {
      // Below the locality scorer's weight: 0 < key <= 100 * 16 + 10.
      ASSERT_GT(got.score, 0);
      ASSERT_LE(got.score, 1610);
    }
    // Deterministic: again, on a copy, and from another scorer over the same model.
    NodeLedger copy = node;
    TesseraScorer other(&m);
    NodeScore again = s.Score(node, r);
    NodeScore on_copy = other.Score(copy, r);
    ASSERT_EQ(again.score, got.score);
    ASSERT_EQ(again.gpus, got.gpus);
    ASSERT_EQ(on_copy.score, got.score);
    ASSERT_EQ(on_copy.gpus, got.gpus);
  }
  // Every kind of request was exercised.
  EXPECT_GT(shares, 100);
  EXPECT_GT(wholes, 100);
  EXPECT_GT(cpu_only, 100);
  EXPECT_GT(infeasible, 10);
}

// ---------------------------------------------------------------------------------
// GPU models: both terms per model, from the typical tasks that may use it.

GpuModelId ModelA() { return ::tessera::testing::Model("T4"); }
GpuModelId ModelB() { return ::tessera::testing::Model("V100M16"); }

TypicalTask PinnedToB(TypicalTask t) {
  t.models.Add(ModelB());
  return t;
}

TEST(TesseraScorerModelTest, WithoutPinnedTasksEveryModelSeesTheWholeWorkload) {
  FragmentationModel m = ModelOf({Typical(4000, 500, 1, 6), Typical(16000, 1000, 2, 2)});
  TesseraScorer s(&m);
  EXPECT_EQ(s.view_count(), 1);
  EXPECT_EQ(&s.fragmentation(ModelA()), &m);
  EXPECT_EQ(&s.fragmentation(ModelB()), &m);
  EXPECT_DOUBLE_EQ(s.cpu_per_gpu(ModelA()), s.cpu_per_gpu());
}

TEST(TesseraScorerModelTest, RatiosCountOnlyTheTasksThatMayUseTheModel) {
  FragmentationModel m = ModelOf({
      Typical(4000, 500, 1, 6, 8192),                // any model
      PinnedToB(Typical(16000, 1000, 1, 2, 32768)),  // B only
      Typical(2000, 0, 0, 5),                        // CPU only
  });
  TesseraScorer s(&m);
  EXPECT_EQ(s.view_count(), 2);  // B's, and A's = every other model's
  // Whole workload: CPU 6 * 4000 + 2 * 16000 = 56000 over 3000 + 2000 milli.
  EXPECT_DOUBLE_EQ(s.cpu_per_gpu(), 56000.0 / 5000.0);
  EXPECT_DOUBLE_EQ(s.cpu_per_gpu(ModelB()), 56000.0 / 5000.0);
  // A: only the 6 unpinned shares, 24000 CPU over 3000 milli.
  EXPECT_DOUBLE_EQ(s.cpu_per_gpu(ModelA()), 8.0);
  EXPECT_DOUBLE_EQ(s.memory_per_gpu(ModelA()), 6 * 8192.0 / 3000.0);
  EXPECT_DOUBLE_EQ(s.StrandedGpuOn(ModelA(), 8000, 1 << 20, 2000), 1000.0);  // feeds 1000
  // A's view keeps the unpinned and CPU-only tasks, at the whole workload's scale.
  const FragmentationModel& a = s.fragmentation(ModelA());
  ASSERT_EQ(a.workload().tasks.size(), 2U);
  EXPECT_EQ(a.workload().tasks[0].cpu.value(), 4000);
  EXPECT_EQ(a.workload().tasks[1].gpu_milli.value(), 0);
  EXPECT_EQ(a.scale(), m.scale());
  EXPECT_EQ(s.fragmentation(ModelB()).workload().tasks.size(), 3U);
}

// Typical tasks: 1 x (8000 CPU, 1 GPU) of any model and 9 x (0 CPU, 1 GPU) pinned to
// B, so the whole workload's ratio is 8000 / 10000 = 0.8 CPU per milli-GPU while what
// may run on A needs 8. Two 2-GPU A nodes, "scarce" with 9 cores (it can feed one
// of its GPUs: 875 milli stranded) and "plenty" with 64; a 1-core one-GPU task.
// Right: scarce, whose second GPU is stranded anyway; plenty keeps room for two.
// Ignoring models, nothing is stranded at 0.8 and the B-pinned tasks count all of
// either node's idle GPU, so both nodes score alike and node order decides.
TEST(TesseraScorerModelTest, StrandedGpuAtTheRatioOfWhatMayRunThere) {
  FragmentationModel m =
      ModelOf({Typical(8000, 1000, 1, 1), PinnedToB(Typical(0, 1000, 1, 9))});
  TesseraScorer s(&m);
  FgdScorer fgd(&m);
  TestNode scarce(T4Node(2, 9000));
  TestNode plenty(T4Node(2, 64000));
  const TaskRequest r = WholeReq(1000, 1);
  // Model-blind: no stranding at 0.8 on either node, before or after, and FGD's
  // score (9 x 1000 of idle removed / 10 = 900: level 71) is the same on both.
  EXPECT_EQ(s.StrandedGpu(9000, 0, 2000), 0.0);
  EXPECT_EQ(s.StrandedGpu(8000, 0, 1000), 0.0);
  EXPECT_EQ(fgd.Score(scarce.ledger, r).score, 71);
  EXPECT_EQ(fgd.Score(plenty.ledger, r).score, 71);
  // Model-aware: on scarce the stranded GPU falls from 2000 - 9000 / 8 = 875 to 0, no
  // fragmentation change: level SigmoidScore(875) = 70, key 70 * 16 + 10.
  EXPECT_EQ(s.StrandedGpuOn(ModelA(), 9000, 0, 2000), 875.0);
  EXPECT_EQ(s.Score(scarce.ledger, r).score, 1130);
  // On plenty nothing changes: level 50.
  EXPECT_EQ(s.Score(plenty.ledger, r).score, 810);
}

// 1 x (4000 CPU, 1 GPU) of any model, 9 x (0 CPU, 1 GPU) pinned to B. A 6-GPU task
// (6 cores) on one of two 8-GPU A nodes: "scarce" (9 cores) or "plenty" (64).
// Right: scarce; it can feed only two 4-core tasks anyway, and plenty keeps eight.
// Ignoring models, the pinned tasks' "all idle is fragment" adds 9 x 6000 / 10 =
// 5400 to both gains, past where FGD's sigmoid saturates (level 99 from 4595 on):
// scarce's -200 of fragmentation is lost and the two tie.
TEST(TesseraScorerModelTest, PinnedTasksElsewhereDoNotDrownTheDifference) {
  FragmentationModel m =
      ModelOf({Typical(4000, 1000, 1, 1), PinnedToB(Typical(0, 1000, 1, 9))});
  TesseraScorer s(&m);
  FgdScorer fgd(&m);
  TestNode scarce(T4Node(8, 9000));
  TestNode plenty(T4Node(8, 64000));
  const TaskRequest r = WholeReq(6000, 6);
  EXPECT_EQ(fgd.Score(scarce.ledger, r).score, 99);  // (54000 - 2000) / 10 = 5200
  EXPECT_EQ(fgd.Score(plenty.ledger, r).score, 99);  // 54000 / 10 = 5400
  // Model-aware, scarce: fragmentation 0 -> 2000 (3 cores < 4: the last two GPUs are
  // lost to the A task), -200; stranded 8000 - 9000 / 4 = 5750 -> 2000 - 3000 / 4 =
  // 1250, +4500. Gain 4300: level 98, key 98 * 16 + 10.
  EXPECT_EQ(s.Score(scarce.ledger, r).score, 1578);
  // plenty: nothing changes for the A task: level 50.
  EXPECT_EQ(s.Score(plenty.ledger, r).score, 810);
}

// On a node of model M the score is that of a scorer whose workload is the typical
// tasks M admits, weighed at the whole workload's scale.
TEST(TesseraScorerModelTest, ScoreOnAModelIsTheScoreOfItsTasks) {
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    Pcg32 rng(seed + 9000);
    FragmentationModel base = RandomWorkload(rng);
    TypicalWorkload w = base.workload();
    for (TypicalTask& t : w.tasks) {
      if (t.gpu_milli.value() > 0 && rng.Uniform(2) == 0) {
        t.models.Add(rng.Uniform(2) == 0 ? ModelA() : ModelB());
      }
    }
    TypicalWorkload on_a = w;
    std::erase_if(on_a.tasks, [](const TypicalTask& t) { return !t.models.Allows(ModelA()); });
    FragmentationModel full(w);
    FragmentationModel only_a(on_a);
    ASSERT_EQ(only_a.scale(), full.scale());
    TesseraScorer s(&full);
    TesseraScorer ref(&only_a);
    TestNode n(T4Node(1 + static_cast<int>(rng.Uniform(8)), 32000, 65536));
    TakeRandomShares(rng, n, /*with_memory=*/true);
    for (const TaskRequest& r : {ShareReq(2000, 300, 1024), ShareReq(0, 1000), WholeReq(4000, 1),
                                 WholeReq(1000, 2, 2048), Cpu(3000, 4096)}) {
      EXPECT_EQ(s.Score(n.ledger, r).score, ref.Score(n.ledger, r).score) << "seed " << seed;
    }
  }
}

}  // namespace tessera_scorer_test
}  // namespace tessera
