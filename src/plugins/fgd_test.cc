#include "plugins/fgd.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "base/rng.h"
#include "model/node.h"
#include "plugins/testing/fgd_testing.h"
#include "sched/gpu_selection.h"
#include "state/node_ledger.h"
#include "state/testing/test_cluster.h"

namespace tessera {
namespace {

using ::tessera::testing::Model;
using ::tessera::testing::ModelOf;
using ::tessera::testing::Request;
using ::tessera::testing::T4Node;
using ::tessera::testing::TakeRandomShares;
using ::tessera::testing::TestNode;

// Expected values are hand-computed from docs/fgd-replication.md §4 (§4.1 typical
// tasks, §4.2 node fragmentation, §4.3 the FGD score).

TypicalTask Typical(int64_t cpu, int64_t milli, int count, int64_t weight,
                    std::vector<std::string_view> models = {}) {
  TypicalTask t;
  t.cpu = MilliCpu(cpu);
  t.gpu_milli = MilliGpu(milli);
  t.gpu_count = count;
  for (std::string_view m : models) {
    t.models.Add(Model(m));
  }
  t.count = weight;
  return t;
}

// ---------------------------------------------------------------------------------
// Typical tasks.

std::vector<TaskRequest> SyntheticWorkload() {
  std::vector<TaskRequest> r;
  for (int i = 0; i < 5; ++i) {
    r.push_back(Request(4000, 1, 500, 1024));  // A
  }
  r.push_back(Request(4000, 1, 500, 99999));  // A: memory is not part of the shape
  for (int i = 0; i < 3; ++i) {
    r.push_back(Request(8000, 1, 1000));  // B
  }
  r.push_back(Request(2000));  // C: CPU only
  r.push_back(Request(2000));
  TaskRequest cpu_with_milli = Request(2000);
  cpu_with_milli.gpu_milli = MilliGpu(700);  // ignored for a CPU-only task
  r.push_back(cpu_with_milli);
  r.push_back(Request(16000, 2, 1000));    // E
  r.push_back(Request(1000, 1, 250));      // F
  TaskRequest t4 = Request(4000, 1, 500);  // G: A's shape, constrained to T4
  t4.models.Add(Model("T4"));
  r.push_back(t4);
  return r;
}

void ExpectTask(const TypicalTask& t, int64_t cpu, int64_t milli, int count, int64_t n) {
  EXPECT_EQ(t.cpu.value(), cpu);
  EXPECT_EQ(t.gpu_milli.value(), milli);
  EXPECT_EQ(t.gpu_count, count);
  EXPECT_EQ(t.count, n);
}

TEST(FindTypicalTasksTest, GroupsAndOrdersByCountThenLargerShape) {
  std::vector<TaskRequest> reqs = SyntheticWorkload();
  TypicalWorkload w = FindTypicalTasks(reqs, 0.95);
  EXPECT_EQ(w.total, 15);
  EXPECT_EQ(w.covered, 15);  // 95% of 15 = 14.25 needs every shape
  ASSERT_EQ(w.tasks.size(), 6U);
  ExpectTask(w.tasks[0], 4000, 500, 1, 6);    // A
  ExpectTask(w.tasks[1], 8000, 1000, 1, 3);   // B before C: equal counts, larger CPU
  ExpectTask(w.tasks[2], 2000, 0, 0, 3);      // C
  ExpectTask(w.tasks[3], 16000, 1000, 2, 1);  // E, G, F: equal counts, larger shape first
  ExpectTask(w.tasks[4], 4000, 500, 1, 1);
  EXPECT_TRUE(w.tasks[4].models.Contains(Model("T4")));
  EXPECT_TRUE(w.tasks[0].models.empty());
  ExpectTask(w.tasks[5], 1000, 250, 1, 1);
}

TEST(FindTypicalTasksTest, ShortestPrefixReachingCoverage) {
  std::vector<TaskRequest> reqs = SyntheticWorkload();
  TypicalWorkload half = FindTypicalTasks(reqs, 0.5);  // 7.5: A (6) is not enough
  ASSERT_EQ(half.tasks.size(), 2U);
  EXPECT_EQ(half.covered, 9);
  EXPECT_EQ(half.total, 15);
  TypicalWorkload most = FindTypicalTasks(reqs, 0.75);  // 11.25
  ASSERT_EQ(most.tasks.size(), 3U);
  EXPECT_EQ(most.covered, 12);
  TypicalWorkload top = FindTypicalTasks(reqs, 0.38);  // 5.7: A alone reaches it
  ASSERT_EQ(top.tasks.size(), 1U);
  EXPECT_EQ(top.covered, 6);
  EXPECT_EQ(FindTypicalTasks(reqs, 1.0).tasks.size(), 6U);
}

TEST(FindTypicalTasksTest, EmptyWorkload) {
  TypicalWorkload w = FindTypicalTasks({}, 0.95);
  EXPECT_TRUE(w.tasks.empty());
  EXPECT_EQ(w.total, 0);
  EXPECT_EQ(w.covered, 0);
  FragmentationModel m(w);
  EXPECT_EQ(m.scale(), 1);
  TestNode n(T4Node());
  n.Share(0, 300);
  EXPECT_EQ(m.ScaledFrag(n.ledger), 0);
}

// ---------------------------------------------------------------------------------
// Node fragmentation.

// T4 x4, left 300, 800, 1000, 0 (2100 idle), 8000 milli-CPU free.
void SetUpBusyNode(TestNode& n) {
  n.Take(24000);
  n.Share(0, 700);
  n.Share(1, 200);
  n.Share(3, 1000);
}

TEST(ScaledFragTest, SpecExampleWithThreeTypicalTasks) {
  TestNode n(T4Node());
  SetUpBusyNode(n);
  FragmentationModel m = ModelOf({
      Typical(4000, 500, 1, 5),    // fits: GPUs 0 (300) and 3 (0) are fragments: 5 * 300
      Typical(2000, 0, 0, 3),      // CPU only: all idle GPU, 3 * 2100
      Typical(16000, 1000, 1, 2),  // not enough CPU: all idle GPU, 2 * 2100
  });
  EXPECT_EQ(m.scale(), 10);
  EXPECT_EQ(m.ScaledFrag(n.ledger), 1500 + 6300 + 4200);
  EXPECT_DOUBLE_EQ(m.FragMilli(n.ledger), 1200.0);
}

TEST(ScaledFragTest, EachCase) {
  TestNode n(T4Node());
  SetUpBusyNode(n);
  auto frag = [&](TypicalTask t) { return ModelOf({std::move(t)}).ScaledFrag(n.ledger); };
  // CPU-only typical tasks count all idle GPU, whether they fit the CPU (XL) or not (XR).
  EXPECT_EQ(frag(Typical(2000, 0, 0, 1)), 2100);
  EXPECT_EQ(frag(Typical(64000, 0, 0, 1)), 2100);
  // Q-I / Q-IV: CPU lacking.
  EXPECT_EQ(frag(Typical(8001, 100, 1, 1)), 2100);
  // Q-III: CPU exactly enough; left == milli counts as usable.
  EXPECT_EQ(frag(Typical(8000, 300, 1, 1)), 0);
  EXPECT_EQ(frag(Typical(1000, 301, 1, 1)), 300);
  EXPECT_EQ(frag(Typical(1000, 800, 1, 4)), 4 * 300);  // 800 and 1000 usable
  EXPECT_EQ(frag(Typical(1000, 800, 2, 1)), 300);
  // Q-II: too few usable GPUs.
  EXPECT_EQ(frag(Typical(1000, 1000, 2, 1)), 2100);
  EXPECT_EQ(frag(Typical(1000, 801, 1, 1)), 300 + 800);  // only GPU 2 is usable
  // Model constraint: a T4 task may use them, an A100 task may not.
  EXPECT_EQ(frag(Typical(1000, 200, 1, 1, {"T4"})), 0);
  EXPECT_EQ(frag(Typical(1000, 200, 1, 1, {"A100-40GB"})), 2100);
  EXPECT_EQ(frag(Typical(1000, 200, 1, 1, {"A100-40GB", "T4"})), 0);
  // Weights scale linearly.
  EXPECT_EQ(frag(Typical(2000, 0, 0, 7)), 7 * 2100);
}

TEST(ScaledFragTest, FreshNodeAndFullNode) {
  TestNode n(T4Node(2, 8000));
  FragmentationModel m = ModelOf({Typical(1000, 500, 1, 2), Typical(1000, 0, 0, 1)});
  EXPECT_EQ(m.ScaledFrag(n.ledger), 2 * 0 + 1 * 2000);
  n.Share(0, 1000);
  n.Share(1, 1000);
  EXPECT_EQ(m.ScaledFrag(n.ledger), 0);  // nothing idle, nothing fragmented
}

TEST(ScaledFragTest, MixedModelsCountUnusableModelsAsFragments) {
  NodeSpec spec = T4Node();
  spec.gpus[2].model = Model("A100-40GB");
  spec.gpus[3].model = Model("A100-40GB");
  TestNode n(std::move(spec));
  n.Share(2, 400);  // left 1000, 1000, 600, 1000
  auto frag = [&](TypicalTask t) { return ModelOf({std::move(t)}).ScaledFrag(n.ledger); };
  EXPECT_EQ(frag(Typical(1000, 500, 1, 1, {"A100-40GB"})), 2000);  // the T4s
  EXPECT_EQ(frag(Typical(1000, 700, 1, 1, {"A100-40GB"})), 2000 + 600);
  EXPECT_EQ(frag(Typical(1000, 700, 2, 1, {"A100-40GB"})), 3600);  // one A100 usable
  EXPECT_EQ(frag(Typical(1000, 500, 1, 1, {"T4"})), 1600);
  EXPECT_EQ(frag(Typical(1000, 500, 1, 1)), 0);
}

TEST(ScaledFragTest, HypotheticalStateMatchesTheLedger) {
  TestNode n(T4Node());
  SetUpBusyNode(n);
  FragmentationModel m = ModelOf({Typical(4000, 500, 1, 5), Typical(2000, 0, 0, 3),
                                  Typical(16000, 1000, 1, 2), Typical(1000, 800, 2, 1)});
  const int32_t left[] = {300, 800, 1000, 0};
  const GpuModelId models[] = {Model("T4"), Model("T4"), Model("T4"), Model("T4")};
  EXPECT_EQ(m.ScaledFrag(8000, left, models), m.ScaledFrag(n.ledger));
  EXPECT_EQ(m.ScaledFrag(n.ledger), 1500 + 6300 + 4200 + 300);
  // 16 cores free: the third task now fits on GPU 2; GPUs 0, 1 and 3 are its fragments.
  EXPECT_EQ(m.ScaledFrag(16000, left, models), 1500 + 6300 + 2 * 1100 + 300);
}

FragmentationModel RandomModel(Rng& rng) {
  static const int64_t kMilli[] = {0, 100, 250, 500, 700, 1000};
  std::vector<TypicalTask> tasks;
  for (int i = 1 + static_cast<int>(rng.Uniform(6)); i > 0; --i) {
    int64_t milli = kMilli[rng.Uniform(6)];
    int count = milli == 0 ? 0 : milli == 1000 ? 1 + static_cast<int>(rng.Uniform(3)) : 1;
    std::vector<std::string_view> models;
    switch (rng.Uniform(4)) {
      case 0:
        models = {"T4"};
        break;
      case 1:
        models = {"A10"};
        break;
      default:
        break;
    }
    tasks.push_back(Typical(static_cast<int64_t>(rng.Uniform(17)) * 1000, milli, count,
                            1 + rng.Uniform(10), models));
  }
  return ModelOf(std::move(tasks));
}

NodeSpec RandomSpec(Rng& rng) {
  NodeSpec spec = T4Node(1 + static_cast<int>(rng.Uniform(8)));
  for (GpuSpec& g : spec.gpus) {
    if (rng.Uniform(3) == 0) {
      g.model = Model("A10");
    }
  }
  return spec;
}

// ScaledFragAfterShare (all candidates at once) equals ScaledFrag of the node with the
// share actually allocated, for every candidate GPU; so does ScaledFragAfter.
TEST(ScaledFragPropertyTest, AfterShareEqualsFragOfTheModifiedNode) {
  int checked = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    Pcg32 rng(seed);
    TestNode n(RandomSpec(rng));
    TakeRandomShares(rng, n, /*with_memory=*/false);
    FragmentationModel m = RandomModel(rng);
    const int64_t free_cpu = n.ledger.free_cpu().value();
    TaskRequest r = Request(static_cast<int64_t>(rng.Uniform(static_cast<uint32_t>(free_cpu) + 1)),
                            1, 10 * (1 + static_cast<int64_t>(rng.Uniform(99))));
    const int gpus = n.ledger.gpu_count();
    std::vector<uint8_t> candidates(gpus);
    for (int g = 0; g < gpus; ++g) {
      candidates[g] = GpuFitsRequest(n.ledger.gpus()[g], r) ? 1 : 0;
    }
    std::vector<int64_t> out(gpus, -1);
    m.ScaledFragAfterShare(n.ledger, r.cpu.value(), r.gpu_milli.value(), candidates, out);
    for (int g = 0; g < gpus; ++g) {
      if (candidates[g] == 0) {
        continue;
      }
      NodeLedger after = n.ledger;
      ASSERT_TRUE(after.Allocate({NodeId(0), r.cpu, MiB(0), {{g, r.gpu_milli, MiB(0)}}}).ok());
      SCOPED_TRACE(::testing::Message() << "seed " << seed << " gpu " << g);
      ASSERT_EQ(out[g], m.ScaledFrag(after));
      ASSERT_EQ(ScaledFragAfter(m, n.ledger, r, uint64_t{1} << g), out[g]);
      ++checked;
    }
  }
  EXPECT_GT(checked, 500);
}

TEST(ScaledFragAfterTest, WholeGpusAndCpuOnly) {
  TestNode n(T4Node());
  SetUpBusyNode(n);  // left 300, 800, 1000, 0; 8000 CPU free
  FragmentationModel m = ModelOf({Typical(4000, 500, 1, 5), Typical(2000, 0, 0, 3)});
  // GPU 2 taken whole, 2000 CPU: left 300, 800, 0, 0.
  EXPECT_EQ(ScaledFragAfter(m, n.ledger, Request(2000, 1, 1000), 0x4), 5 * 300 + 3 * 1100);
  // CPU only, leaving 3000 < 4000: the first task no longer fits.
  EXPECT_EQ(ScaledFragAfter(m, n.ledger, Request(5000), 0), 5 * 2100 + 3 * 2100);
}

// ---------------------------------------------------------------------------------
// FGD score.

TEST(FgdScorerTest, SigmoidScore) {
  EXPECT_EQ(FgdScorer::SigmoidScore(0), 50);
  EXPECT_EQ(FgdScorer::SigmoidScore(40), 50);  // 50.9999
  EXPECT_EQ(FgdScorer::SigmoidScore(41), 51);  // 51.025
  EXPECT_EQ(FgdScorer::SigmoidScore(-1), 49);  // 49.975
  EXPECT_EQ(FgdScorer::SigmoidScore(1000), 73);
  EXPECT_EQ(FgdScorer::SigmoidScore(-1000), 26);
  EXPECT_EQ(FgdScorer::SigmoidScore(4000), 98);
  EXPECT_EQ(FgdScorer::SigmoidScore(8000), 99);  // the largest change on an 8-GPU node
  EXPECT_EQ(FgdScorer::SigmoidScore(30000), 99);
  EXPECT_EQ(FgdScorer::SigmoidScore(-8000), 0);
  EXPECT_EQ(FgdScorer::SigmoidScore(-1e9), 0);
  // Monotone.
  int64_t last = 0;
  for (int d = -8000; d <= 8000; d += 10) {
    int64_t s = FgdScorer::SigmoidScore(d);
    EXPECT_GE(s, last);
    last = s;
  }
}

// T4 x4 with left 100, 700, 700, 1000.
void SetUpFgdNode(TestNode& n) {
  n.Share(0, 900);
  n.Share(1, 300);
  n.Share(2, 300);
}

TEST(FgdScorerTest, ShareGoesToTheFirstGpuWithTheBestScore) {
  TestNode n(T4Node());
  SetUpFgdNode(n);
  FragmentationModel m = ModelOf({Typical(1000, 500, 1, 1)});
  FgdScorer s(&m);
  EXPECT_EQ(s.name(), "fgd");
  // F0 = 100 (GPU 0). 300 on GPU 1 or 2 leaves 400 unusable: F = 500, delta -400 -> 40.
  // On GPU 3: F = 100, delta 0 -> 50.
  NodeScore ns = s.Score(n.ledger, Request(1000, 1, 300));
  EXPECT_EQ(ns.score, 50);
  EXPECT_EQ(ns.gpus, (GpuChoice{0x8, -1}));
  // 200 keeps GPUs 1, 2, 3 usable: all tie at 50; GPU 0 cannot take it.
  ns = s.Score(n.ledger, Request(1000, 1, 200));
  EXPECT_EQ(ns.score, 50);
  EXPECT_EQ(ns.gpus, (GpuChoice{0x2, -1}));
  // 950 fits GPU 3 only and leaves 50 unusable: delta -50 -> 48.
  ns = s.Score(n.ledger, Request(1000, 1, 950));
  EXPECT_EQ(ns.score, 48);
  EXPECT_EQ(ns.gpus, (GpuChoice{0x8, -1}));
  // 100 on GPU 0 fills it: F = 0, delta +100 -> 52.
  ns = s.Score(n.ledger, Request(1000, 1, 100));
  EXPECT_EQ(ns.score, 52);
  EXPECT_EQ(ns.gpus, (GpuChoice{0x1, -1}));
  // Fits nowhere.
  n.Share(3, 500);
  EXPECT_EQ(s.Score(n.ledger, Request(1000, 1, 800)).score, kInfeasibleScore);
}

TEST(FgdScorerTest, ShareWithWeightsAndCpuOnlyTypicalTask) {
  TestNode n(T4Node());
  SetUpFgdNode(n);
  // Scale 4. F0 = 3 * 100 + 1 * 2500 = 2800.
  FragmentationModel m = ModelOf({Typical(1000, 500, 1, 3), Typical(1000, 0, 0, 1)});
  FgdScorer s(&m);
  // GPU 1: 3 * 500 + 2200 = 3700, delta -225 -> 44. GPU 3: 3 * 100 + 2200 = 2500,
  // delta +75 -> 51.
  NodeScore ns = s.Score(n.ledger, Request(1000, 1, 300));
  EXPECT_EQ(ns.score, 51);
  EXPECT_EQ(ns.gpus, (GpuChoice{0x8, -1}));
}

TEST(FgdScorerTest, WholeGpusAndCpuOnlyTasks) {
  TestNode n(T4Node());
  n.Share(2, 300);  // left 1000, 1000, 700, 1000
  // Scale 2.
  FragmentationModel m = ModelOf({Typical(0, 0, 0, 1), Typical(1000, 500, 1, 1)});
  FgdScorer s(&m);
  // One whole GPU: idle 3700 -> 2700, the GPU task still fits: delta 1000 / 2 -> 62.
  NodeScore ns = s.Score(n.ledger, Request(1000, 1, 1000));
  EXPECT_EQ(ns.score, 62);
  EXPECT_TRUE(ns.gpus.empty());  // the Profile's selection picks the GPUs
  // Two whole GPUs: delta 2000 / 2 -> 73.
  EXPECT_EQ(s.Score(n.ledger, Request(1000, 2, 1000)).score, 73);
  // Four whole GPUs are not free.
  EXPECT_EQ(s.Score(n.ledger, Request(1000, 4, 1000)).score, kInfeasibleScore);

  // CPU only: 5000 CPU free, a 4000-CPU typical GPU task stops fitting after 2000.
  TestNode c(T4Node());
  c.Share(2, 300);
  c.Take(27000);
  FragmentationModel m2 = ModelOf({Typical(0, 0, 0, 1), Typical(4000, 500, 1, 1)});
  FgdScorer s2(&m2);
  // Before 3700 + 0; after 3700 + 3700: delta -3700 / 2 -> 13.
  EXPECT_EQ(s2.Score(c.ledger, Request(2000)).score, 13);
  EXPECT_EQ(s2.Score(c.ledger, Request(1000)).score, 50);  // 4000 left: no change
}

// The share score is the best over candidate GPUs of the brute-force fragmentation
// change, and the choice is the first GPU reaching it.
TEST(FgdScorerPropertyTest, ShareScoreMatchesBruteForce) {
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    Pcg32 rng(seed + 1000);
    TestNode n(RandomSpec(rng));
    TakeRandomShares(rng, n, /*with_memory=*/false);
    FragmentationModel m = RandomModel(rng);
    FgdScorer s(&m);
    const int64_t free_cpu = n.ledger.free_cpu().value();
    TaskRequest r = Request(static_cast<int64_t>(rng.Uniform(static_cast<uint32_t>(free_cpu) + 1)),
                            1, 10 * (1 + static_cast<int64_t>(rng.Uniform(99))));
    const int64_t before = m.ScaledFrag(n.ledger);
    int64_t best = kInfeasibleScore;
    int best_gpu = -1;
    for (int g = 0; g < n.ledger.gpu_count(); ++g) {
      if (!GpuFitsRequest(n.ledger.gpus()[g], r)) {
        continue;
      }
      NodeLedger after = n.ledger;
      ASSERT_TRUE(after.Allocate({NodeId(0), r.cpu, MiB(0), {{g, r.gpu_milli, MiB(0)}}}).ok());
      int64_t score = FgdScorer::SigmoidScore(static_cast<double>(before - m.ScaledFrag(after)) /
                                              static_cast<double>(m.scale()));
      if (score > best) {
        best = score;
        best_gpu = g;
      }
    }
    NodeScore ns = s.Score(n.ledger, r);
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    ASSERT_EQ(ns.score, best);
    if (best_gpu >= 0) {
      ASSERT_EQ(ns.gpus, (GpuChoice{uint64_t{1} << best_gpu, -1}));
    }
  }
}

}  // namespace
}  // namespace tessera
