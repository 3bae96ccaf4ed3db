#include "sim/fgd_experiment.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <limits>
#include <numeric>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/rng.h"
#include "model/gpu_catalog.h"
#include "plugins/fgd.h"
#include "plugins/registry.h"
#include "sched/placer.h"
#include "sim/openb_trace.h"
#include "sim/testing/sim_testing.h"
#include "state/cluster_state.h"

namespace tessera {
namespace {

using ::tessera::testing::ExpectSameRun;
using ::tessera::testing::OpenbDir;

// --- helpers ---------------------------------------------------------------------------

TracePod Pod(std::string name, int64_t cpu, int gpus, int64_t milli) {
  TracePod p;
  p.name = std::move(name);
  p.request.cpu = MilliCpu(cpu);
  p.request.memory = MiB(1024);
  p.request.gpu_count = gpus;
  p.request.gpu_milli = MilliGpu(gpus == 0 ? 0 : milli);
  return p;
}

int64_t GpuMilli(const std::vector<TaskRequest>& requests) {
  int64_t total = 0;
  for (const TaskRequest& r : requests) {
    total += r.gpu_milli.value() * r.gpu_count;
  }
  return total;
}

NodeSpec GpuNode(const std::string& name, int gpus, int64_t cpu = 32000,
                 const std::string& model = "T4") {
  return MakeUniformNode(name, MilliCpu(cpu), MiB(262144), *GpuCatalog::Default().Find(model), gpus,
                         SharingMode::kShared);
}

StatusOr<ClusterState> Cluster(std::vector<NodeSpec> nodes) {
  return ClusterState::Create(std::move(nodes), GpuCatalog::Default());
}

// An Rng that plays back scripted draws, so the shuffle and the tuning draws of
// PrepareWorkload can be chosen by hand. Expect(k, bound) queues one NextU32 for which
// Uniform(bound) returns k (Lemire's method: high word of v * bound, no rejection).
// Running out throws, so a loop that would never stop ends the test instead.
class ScriptedRng final : public Rng {
 public:
  struct Exhausted : std::runtime_error {
    Exhausted() : std::runtime_error("scripted draws exhausted") {}
  };

  ScriptedRng& Expect(uint32_t k, uint32_t bound) {
    values_.push_back(
        static_cast<uint32_t>(((static_cast<uint64_t>(k) << 32) + (uint64_t{1} << 31)) / bound));
    return *this;
  }
  // `n` draws that pick index `k` of `bound`.
  ScriptedRng& Repeat(uint32_t k, uint32_t bound, int n) {
    for (int i = 0; i < n; ++i) {
      Expect(k, bound);
    }
    return *this;
  }
  uint32_t NextU32() override {
    if (values_.empty()) {
      throw Exhausted();
    }
    uint32_t v = values_.front();
    values_.pop_front();
    ++used_;
    return v;
  }
  size_t left() const { return values_.size(); }
  size_t used() const { return used_; }

 private:
  std::deque<uint32_t> values_;
  size_t used_ = 0;
};

TEST(ScriptedRngTest, DrawsWhatWasScripted) {
  ScriptedRng rng;
  rng.Expect(0, 4).Expect(3, 4).Expect(1, 2).Expect(2, 3).Expect(6212, 8152);
  EXPECT_EQ(rng.Uniform(4), 0u);
  EXPECT_EQ(rng.Uniform(4), 3u);
  EXPECT_EQ(rng.Uniform(2), 1u);
  EXPECT_EQ(rng.Uniform(3), 2u);
  EXPECT_EQ(rng.Uniform(8152), 6212u);
  EXPECT_EQ(rng.left(), 0u);
}

// --- RoundHalfEven ---------------------------------------------------------------------

TEST(RoundHalfEvenTest, WholeNumbersRoundHalfToEven) {
  EXPECT_EQ(RoundHalfEven(0.5, 0), 0.0);
  EXPECT_EQ(RoundHalfEven(1.5, 0), 2.0);
  EXPECT_EQ(RoundHalfEven(2.5, 0), 2.0);
  EXPECT_EQ(RoundHalfEven(3.5, 0), 4.0);
  EXPECT_EQ(RoundHalfEven(100.5, 0), 100.0);
  EXPECT_EQ(RoundHalfEven(101.5, 0), 102.0);
  EXPECT_EQ(RoundHalfEven(-0.5, 0), 0.0);
  EXPECT_EQ(RoundHalfEven(-1.5, 0), -2.0);
  EXPECT_EQ(RoundHalfEven(-2.5, 0), -2.0);
  EXPECT_EQ(RoundHalfEven(0.49999999, 0), 0.0);
  EXPECT_EQ(RoundHalfEven(0.50000001, 0), 1.0);
  EXPECT_EQ(RoundHalfEven(2.51, 0), 3.0);
  EXPECT_EQ(RoundHalfEven(7.0, 0), 7.0);
}

TEST(RoundHalfEvenTest, TwoDecimalsOnExactlyRepresentableHalves) {
  // x.xx5 values that binary floating point holds exactly are true ties.
  EXPECT_EQ(RoundHalfEven(0.125, 2), 0.12);
  EXPECT_EQ(RoundHalfEven(0.375, 2), 0.38);
  EXPECT_EQ(RoundHalfEven(0.625, 2), 0.62);
  EXPECT_EQ(RoundHalfEven(0.875, 2), 0.88);
  EXPECT_EQ(RoundHalfEven(-0.125, 2), -0.12);
  EXPECT_EQ(RoundHalfEven(12.3456, 2), 12.35);
  EXPECT_EQ(RoundHalfEven(12.3449, 2), 12.34);
  EXPECT_EQ(RoundHalfEven(99.999, 2), 100.0);
  EXPECT_EQ(RoundHalfEven(4.77, 2), 4.77);
  // 1.005 is stored as 1.00499999999999989...: Python's round(1.005, 2) is 1.0.
  EXPECT_EQ(RoundHalfEven(1.005, 2), 1.0);
  EXPECT_EQ(RoundHalfEven(1.3, 2), 1.3);
}

// BUG: RoundHalfEven (fgd_experiment.cc) promises Python's round(), which rounds the
// exact binary value: 2.675 is stored as 2.67499999999999982..., so Python gives
// round(2.675, 2) == 2.67, round(1.115, 2) == 1.11 (1.11499999...) and
// round(2.665, 2) == 2.67 (2.66500000000000003...). The implementation scales first,
// and 2.675 * 100 rounds to exactly 267.5 (likewise 111.5 and 266.5) before the
// half-to-even step, so it returns 2.68, 1.12 and 2.66. Over the 6,212-GPU cluster this
// makes 658 of the 6,212,001 possible per-sample alloc % values differ from the
// authors' round(used / 6212 / 10, 2).
TEST(RoundHalfEvenTest, MatchesPythonOnDecimalLiteralsNotExactlyRepresentable) {
  EXPECT_EQ(RoundHalfEven(2.675, 2), 2.67);
  EXPECT_EQ(RoundHalfEven(1.115, 2), 1.11);
  EXPECT_EQ(RoundHalfEven(2.665, 2), 2.67);
}

// --- AuthorsPolicyLabel ----------------------------------------------------------------

TEST(AuthorsPolicyLabelTest, NamesOfTheAuthorsResultFiles) {
  EXPECT_EQ(AuthorsPolicyLabel("random"), "01-Random");
  EXPECT_EQ(AuthorsPolicyLabel("dotprod"), "02-DotProd");
  EXPECT_EQ(AuthorsPolicyLabel("gpuclustering"), "03-GpuClustering");
  EXPECT_EQ(AuthorsPolicyLabel("gpupacking"), "04-GpuPacking");
  EXPECT_EQ(AuthorsPolicyLabel("bestfit"), "05-BestFit");
  EXPECT_EQ(AuthorsPolicyLabel("fgd"), "06-FGD");
  EXPECT_EQ(AuthorsPolicyLabel("tessera"), "07-Tessera");
  EXPECT_EQ(AuthorsPolicyLabel("my-policy"), "my-policy");
  EXPECT_EQ(AuthorsPolicyLabel(""), "");
  // Every registered policy has a label of its own.
  for (const std::string& p : PolicyNames()) {
    EXPECT_NE(AuthorsPolicyLabel(p), p) << p;
  }
}

// --- PrepareWorkload -------------------------------------------------------------------

// Four pods given out of name order; each has a distinct CPU so results can be told
// apart. GPU milli: a 500 (share), b 2 x 1000, c CPU-only, d 300: 2800 in total.
PodList FourPods() {
  PodList list;
  list.trace = "four";
  list.pods = {Pod("pod-d", 4000, 1, 300), Pod("pod-b", 2000, 2, 1000), Pod("pod-a", 1000, 1, 500),
               Pod("pod-c", 3000, 0, 0)};
  return list;
}

// The CPU of each request: identifies the pods (a=1000, b=2000, c=3000, d=4000).
std::vector<int64_t> Cpus(const std::vector<TaskRequest>& requests) {
  std::vector<int64_t> out;
  for (const TaskRequest& r : requests) {
    out.push_back(r.cpu.value());
  }
  return out;
}

TEST(PrepareWorkloadTest, ShufflesTheNameSortedPods) {
  // Fisher-Yates on [a,b,c,d]: swap(3, 0) -> [d,b,c,a]; swap(2, 0) -> [c,b,d,a];
  // swap(1, 1). Total 2800 equals the target (2800 x 1.0): no tuning draws.
  ScriptedRng rng;
  rng.Expect(0, 4).Expect(0, 3).Expect(1, 2);
  std::vector<TaskRequest> w = PrepareWorkload(FourPods(), 2800, 1.0, rng);
  EXPECT_EQ(Cpus(w), (std::vector<int64_t>{3000, 2000, 4000, 1000}));
  EXPECT_EQ(rng.left(), 0u);
  EXPECT_EQ(GpuMilli(w), 2800);
  // The requests are the pods' own.
  EXPECT_EQ(w[1], FourPods().pods[1].request);
}

TEST(PrepareWorkloadTest, TuneUpStopsWhenTheNextCloneWouldPassTheTarget) {
  // Identity shuffle, then target 4000: clone d (3100), clone a (3600); the next clone,
  // a (500), would make 4100 > 4000: stop and drop it.
  ScriptedRng rng;
  rng.Expect(3, 4).Expect(2, 3).Expect(1, 2);
  rng.Expect(3, 4).Expect(0, 4).Expect(0, 4);
  std::vector<TaskRequest> w = PrepareWorkload(FourPods(), 4000, 1.0, rng);
  EXPECT_EQ(Cpus(w), (std::vector<int64_t>{1000, 2000, 3000, 4000, 4000, 1000}));
  EXPECT_EQ(GpuMilli(w), 3600);
  EXPECT_EQ(rng.left(), 0u);  // the rejected clone's draw is consumed
}

TEST(PrepareWorkloadTest, TuneUpKeepsACloneThatLandsExactlyOnTheTarget) {
  // 2800 + 4 x 300 = 4000 = target: the fourth d clone is kept; the fifth is not.
  ScriptedRng rng;
  rng.Expect(3, 4).Expect(2, 3).Expect(1, 2).Repeat(3, 4, 5);
  std::vector<TaskRequest> w = PrepareWorkload(FourPods(), 4000, 1.0, rng);
  EXPECT_EQ(Cpus(w), (std::vector<int64_t>{1000, 2000, 3000, 4000, 4000, 4000, 4000, 4000}));
  EXPECT_EQ(GpuMilli(w), 4000);
  EXPECT_EQ(rng.left(), 0u);
}

TEST(PrepareWorkloadTest, TuneUpComparesThePerGpuMilliAndMayOvershoot) {
  // The authors' quirk: the stop test adds the clone's per-GPU milli, the total adds
  // all its GPUs. Shuffle [a,b,c,d] -> [c,b,d,a] (as above). Clone c: CPU-only, always
  // passes, total stays 2800. Clone b: 2800 + 1000 <= 4000 passes, total becomes
  // 4800. Clone a: 4800 + 500 > 4000: stop.
  ScriptedRng rng;
  rng.Expect(0, 4).Expect(0, 3).Expect(1, 2);
  rng.Expect(2, 4).Expect(1, 4).Expect(0, 4);
  std::vector<TaskRequest> w = PrepareWorkload(FourPods(), 4000, 1.0, rng);
  EXPECT_EQ(Cpus(w), (std::vector<int64_t>{3000, 2000, 4000, 1000, 3000, 2000}));
  EXPECT_EQ(GpuMilli(w), 4800);
  EXPECT_EQ(rng.left(), 0u);
}

TEST(PrepareWorkloadTest, TuneDownRemovesRandomPodsWhileAboveTheTarget) {
  // Target 0.5 x 4000 = 2000 < 2800. Remove index 2 of [a,b,c,d] (c, CPU-only: the
  // total stays 2800), index 0 of [a,b,d] (a: 2300), index 1 of [b,d] (d: 2000, no
  // longer above the target).
  ScriptedRng rng;
  rng.Expect(3, 4).Expect(2, 3).Expect(1, 2);
  rng.Expect(2, 4).Expect(0, 3).Expect(1, 2);
  std::vector<TaskRequest> w = PrepareWorkload(FourPods(), 4000, 0.5, rng);
  EXPECT_EQ(Cpus(w), (std::vector<int64_t>{2000}));
  EXPECT_EQ(GpuMilli(w), 2000);
  EXPECT_EQ(rng.left(), 0u);
}

TEST(PrepareWorkloadTest, TuneDownStopsAtOrBelowTheTarget) {
  // Target 0.5 x 5000 = 2500: removing b (2000) leaves 800; done after one draw.
  ScriptedRng rng;
  rng.Expect(3, 4).Expect(2, 3).Expect(1, 2).Expect(1, 4);
  std::vector<TaskRequest> w = PrepareWorkload(FourPods(), 5000, 0.5, rng);
  EXPECT_EQ(Cpus(w), (std::vector<int64_t>{1000, 3000, 4000}));
  EXPECT_EQ(rng.left(), 0u);
}

TEST(PrepareWorkloadTest, EmptyPodListGivesEmptyWorkload) {
  ScriptedRng rng;
  PodList empty;
  EXPECT_TRUE(PrepareWorkload(empty, 4000, 1.3, rng).empty());
  EXPECT_TRUE(PrepareWorkload(empty, 4000, 0.5, rng).empty());
  EXPECT_EQ(rng.used(), 0u);
}

// BUG: PrepareWorkload (fgd_experiment.cc) never ends when the pods ask for no GPU at
// all (every pod CPU-only, or a trace whose GPU pods all had gpu_milli 0) and the
// target is above 0: every clone adds 0 milli, so `total + clone.gpu_milli > target`
// never holds and clones are appended forever (RunFgdExperiment then runs out of
// memory instead of reporting the trace never reaches 100%). Expected: stop (return
// the shuffled pods) or cap the clones. The scripted Rng throws after 1000 draws.
TEST(PrepareWorkloadTest, TuneUpTerminatesWhenNoPodAsksForGpu) {
  PodList cpu_only;
  cpu_only.pods = {Pod("x", 1000, 0, 0), Pod("y", 2000, 0, 0)};
  ScriptedRng rng;
  rng.Repeat(0, 2, 1000);
  bool finished = true;
  try {
    std::vector<TaskRequest> w = PrepareWorkload(cpu_only, 4000, 1.3, rng);
    EXPECT_EQ(GpuMilli(w), 0);
  } catch (const ScriptedRng::Exhausted&) {
    finished = false;
  }
  EXPECT_TRUE(finished) << "PrepareWorkload drew 1000 clones of CPU-only pods and went on";
}

// Thirty distinct pods: a mix of shares, whole GPUs and CPU-only pods.
PodList ThirtyPods() {
  PodList list;
  list.trace = "thirty";
  for (int i = 0; i < 30; ++i) {
    int gpus = i % 5 == 0 ? 0 : (i % 7 == 0 ? 2 : 1);
    int64_t milli = gpus == 1 ? 100 + 30 * i : 1000;
    list.pods.push_back(Pod("pod-" + std::to_string(100 + i), 1000 + i, gpus, milli));
  }
  return list;
}

TEST(PrepareWorkloadTest, SameSeedSameOrderAndInputOrderDoesNotMatter) {
  PodList pods = ThirtyPods();
  const int64_t original = GpuMilli(pods.Requests());
  const int64_t capacity = 16'000;  // the pods ask for more than 100%
  ASSERT_GT(original, capacity);
  ASSERT_LT(original, static_cast<int64_t>(1.3 * capacity));

  Pcg32 rng1(42);
  Pcg32 rng2(42);
  std::vector<TaskRequest> w1 = PrepareWorkload(pods, capacity, 1.3, rng1);
  std::vector<TaskRequest> w2 = PrepareWorkload(pods, capacity, 1.3, rng2);
  EXPECT_EQ(w1, w2);
  EXPECT_EQ(rng1.NextU32(), rng2.NextU32());  // and the same number of draws

  // Reversed input: the name sort undoes it.
  PodList reversed = pods;
  std::reverse(reversed.pods.begin(), reversed.pods.end());
  Pcg32 rng3(42);
  EXPECT_EQ(PrepareWorkload(reversed, capacity, 1.3, rng3), w1);

  // Another seed gives another order.
  Pcg32 rng4(43);
  std::vector<TaskRequest> w4 = PrepareWorkload(pods, capacity, 1.3, rng4);
  EXPECT_NE(w4, w1);

  // Tuned up to the authors' rule: at most the target plus the overshoot of the last
  // multi-GPU clone; the originals come first, each once.
  const auto target = static_cast<int64_t>(1.3 * capacity);
  for (const std::vector<TaskRequest>* w : {&w1, &w4}) {
    EXPECT_GT(w->size(), pods.pods.size());
    EXPECT_LE(GpuMilli(*w), target + 1000);
    EXPECT_GT(GpuMilli(*w), target - 1000);  // else another share clone would fit
    std::vector<int64_t> head = Cpus(*w);
    head.resize(pods.pods.size());
    std::sort(head.begin(), head.end());
    std::vector<int64_t> want(30);
    std::iota(want.begin(), want.end(), 1000);
    EXPECT_EQ(head, want);
  }
}

TEST(PrepareWorkloadTest, TuneDownWithRealRngStaysAtOrBelowTarget) {
  PodList pods = ThirtyPods();
  ASSERT_GT(GpuMilli(pods.Requests()), 10'000);
  for (uint64_t seed : {1, 2, 3}) {
    Pcg32 rng(seed);
    std::vector<TaskRequest> w = PrepareWorkload(pods, 20'000, 0.5, rng);
    EXPECT_LE(GpuMilli(w), 10'000) << seed;
    // Removing stops as soon as the total is at or below the target, and a removed
    // pod asks for at most 2000: the total ends within 2000 of the target.
    EXPECT_GT(GpuMilli(w), 10'000 - 2000) << seed;
    EXPECT_LT(w.size(), pods.pods.size()) << seed;
  }
}

// --- RunFgdExperiment on tiny clusters -------------------------------------------------

// Three one-GPU nodes (3000 milli); five 600-milli shares, one CPU-only pod that fits
// and one too big for any node (64 cores > 32). Tune 1.0: the target is 3000, the GPU
// total 3000: no tuning. Whatever the order and the policy: every GPU takes one share
// (600 + 600 > 1000), so 3 shares are placed and 2 fail; the small CPU pod is placed,
// the big one fails without counting as a failed GPU pod. Arrived GPU goes 20, 40, 60,
// 80, 100 %; allocated 20, 40, 60, 60, 60 %. CPU pods add samples equal to the one
// before them, so bin means do not depend on where they land in the order.
//
// Fragmentation, by docs/fgd-replication.md §4.2 with typical tasks {share 600 x5,
// CPU 1000 x1, CPU 64000 x1} (7 pods, all needed for 95%): CPU-only typical tasks count
// all idle GPU; the share counts nothing on a node with 1000 free and all of 400 free.
// Scaled by 7: an empty node has 2 x 1000 = 2000 (285.71 milli), a node with one share
// 7 x 400 (400 milli). After 1 share: 400 + 2 x 285.71 = 971.43 milli = 32.38 % of
// 3000, 40.48 % of 2400 idle; after 2: 1085.71 = 36.19 %, 60.32 % of 1800 idle;
// after 3 and on: 1200 = 40.00 %, 100 % of idle.
struct ThreeNodes {
  ThreeNodes()
      : cluster(*Cluster({GpuNode("n0", 1), GpuNode("n1", 1), GpuNode("n2", 1)})),
        pods(MakePods()),
        typical(FindTypicalTasks(pods.Requests())) {}
  static PodList MakePods() {
    PodList list;
    list.trace = "tiny";
    for (int i = 0; i < 5; ++i) {
      list.pods.push_back(Pod("share-" + std::to_string(i), 1000, 1, 600));
    }
    list.pods.push_back(Pod("cpu-small", 1000, 0, 0));
    list.pods.push_back(Pod("cpu-big", 64000, 0, 0));
    return list;
  }
  FgdRunSpec Spec(const std::string& policy, uint64_t seed) const {
    FgdRunSpec spec;
    spec.cluster = &cluster;
    spec.pods = &pods;
    spec.typical = &typical;
    spec.policy = policy;
    spec.seed = seed;
    spec.tune_ratio = 1.0;
    return spec;
  }
  ClusterState cluster;
  PodList pods;
  FragmentationModel typical;
};

TEST(RunFgdExperimentTest, TinyClusterOutcomeIsTheSameForEveryPolicy) {
  ThreeNodes t;
  ASSERT_EQ(t.typical.workload().tasks.size(), 3u);
  for (const std::string& policy : PolicyNames()) {
    for (uint64_t seed : {42, 7}) {
      SCOPED_TRACE(policy + " seed " + std::to_string(seed));
      StatusOr<FgdRunResult> r = RunFgdExperiment(t.Spec(policy, seed));
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_EQ(r->trace, "tiny");
      EXPECT_EQ(r->policy, policy);
      EXPECT_EQ(r->seed, seed);
      EXPECT_EQ(r->total_gpus, 3);
      EXPECT_EQ(r->pods_tried, 7);
      EXPECT_EQ(r->pods_placed, 4);
      EXPECT_EQ(r->gpu_pods_failed, 2);
      ASSERT_EQ(r->alloc_pct.size(), static_cast<size_t>(kArrivedBins));
      ASSERT_EQ(r->frag_pct.size(), static_cast<size_t>(kArrivedBins));
      ASSERT_EQ(r->frag_ratio_pct.size(), static_cast<size_t>(kArrivedBins));
      EXPECT_EQ(r->alloc_pct[20], 20.0);
      EXPECT_EQ(r->alloc_pct[40], 40.0);
      EXPECT_EQ(r->alloc_pct[60], 60.0);
      EXPECT_EQ(r->alloc_pct[80], 60.0);
      EXPECT_EQ(r->alloc_pct[100], 60.0);
      EXPECT_DOUBLE_EQ(r->UnallocatedAt100(), 40.0);
      // Empty bins take the mean of their neighbours' samples, else stay NaN.
      EXPECT_EQ(r->alloc_pct[19], 20.0);
      EXPECT_EQ(r->alloc_pct[21], 20.0);
      EXPECT_EQ(r->alloc_pct[99], 60.0);
      EXPECT_EQ(r->alloc_pct[101], 60.0);
      EXPECT_TRUE(std::isnan(r->alloc_pct[30]));
      EXPECT_TRUE(std::isnan(r->alloc_pct[102]));
      EXPECT_TRUE(std::isnan(r->alloc_pct[130]));
      EXPECT_EQ(r->frag_pct[20], 32.38);
      EXPECT_EQ(r->frag_pct[40], 36.19);
      EXPECT_EQ(r->frag_pct[60], 40.0);
      EXPECT_EQ(r->frag_pct[100], 40.0);
      EXPECT_EQ(r->frag_ratio_pct[20], 40.48);
      EXPECT_EQ(r->frag_ratio_pct[40], 60.32);
      EXPECT_EQ(r->frag_ratio_pct[100], 100.0);
      // Bin 0 has samples only when a CPU pod comes first: then allocated is 0.
      EXPECT_TRUE(std::isnan(r->alloc_pct[0]) || r->alloc_pct[0] == 0.0);
    }
  }
}

// Two one-GPU nodes; shares of 500 and 500 and one whole GPU: 2000 of 2000. Packing
// both shares on one GPU leaves a whole GPU for the third pod.
//   bestfit: the second share scores the half-used node higher (less GPU and CPU left).
//   fgd: typical tasks {500 x2, 1000 x1}; a node with 500 free has fragmentation
//     1000/3 x 500 ... = 166.67 milli (the whole GPU cannot use it), an empty or a full
//     node 0. Second share on the half-used node: delta +166.67 -> int(100 *
//     sigmoid(0.1667)) = 54; on the empty node: delta -166.67 -> 45. It packs.
// If the whole GPU comes first or second, it takes one GPU and the shares share the
// other. So for every seed: 3 placed, 100 % allocated at 100 % arrived.
TEST(RunFgdExperimentTest, PackingPoliciesFitAllThreePods) {
  ClusterState cluster = *Cluster({GpuNode("a", 1), GpuNode("b", 1)});
  PodList pods;
  pods.trace = "pack";
  pods.pods = {Pod("p1", 1000, 1, 500), Pod("p2", 1000, 1, 500), Pod("p3", 1000, 1, 1000)};
  FragmentationModel typical(FindTypicalTasks(pods.Requests()));
  for (const std::string policy : {"bestfit", "fgd", "gpupacking", "tessera"}) {
    for (uint64_t seed = 40; seed < 50; ++seed) {
      SCOPED_TRACE(std::string(policy) + " seed " + std::to_string(seed));
      FgdRunSpec spec{&cluster, &pods, &typical, policy, seed, 1.0};
      StatusOr<FgdRunResult> r = RunFgdExperiment(spec);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_EQ(r->pods_placed, 3);
      EXPECT_EQ(r->gpu_pods_failed, 0);
      EXPECT_EQ(r->alloc_pct[100], 100.0);
      EXPECT_EQ(r->frag_pct[100], 0.0);
      EXPECT_EQ(r->frag_ratio_pct[100], 0.0);  // no idle GPU: ratio recorded as 0
    }
  }
}

TEST(RunFgdExperimentTest, SameSeedSameResult) {
  ThreeNodes t;
  for (const std::string policy : {"random", "fgd"}) {
    StatusOr<FgdRunResult> a = RunFgdExperiment(t.Spec(policy, 42));
    StatusOr<FgdRunResult> b = RunFgdExperiment(t.Spec(policy, 42));
    ASSERT_TRUE(a.ok() && b.ok());
    ExpectSameRun(*a, *b);
  }
}

TEST(RunFgdExperimentTest, Errors) {
  ThreeNodes t;
  {
    StatusOr<FgdRunResult> r = RunFgdExperiment(t.Spec("no-such-policy", 42));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("no-such-policy"), std::string::npos)
        << r.status().message();
  }
  {
    ClusterState cpu_only = *Cluster({GpuNode("c0", 0), GpuNode("c1", 0)});
    FgdRunSpec spec = t.Spec("bestfit", 42);
    spec.cluster = &cpu_only;
    StatusOr<FgdRunResult> r = RunFgdExperiment(spec);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("no GPUs"), std::string::npos) << r.status().message();
  }
  for (int missing = 0; missing < 3; ++missing) {
    FgdRunSpec spec = t.Spec("bestfit", 42);
    if (missing == 0) spec.cluster = nullptr;
    if (missing == 1) spec.pods = nullptr;
    if (missing == 2) spec.typical = nullptr;
    StatusOr<FgdRunResult> r = RunFgdExperiment(spec);
    ASSERT_FALSE(r.ok()) << missing;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << missing;
  }
  {
    // Tuned down to 50 %: bin 100 never gets a sample.
    FgdRunSpec spec = t.Spec("bestfit", 42);
    spec.tune_ratio = 0.5;
    StatusOr<FgdRunResult> r = RunFgdExperiment(spec);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(r.status().message().find("tiny"), std::string::npos) << r.status().message();
  }
}

// BUG: RunFgdExperiment (fgd_experiment.cc) bins by RoundHalfEven(arrived / capacity *
// 100, 0), while the authors (docs/fgd-replication.md §5) take round(arrived /
// total_gpus / 10, 0). The float operations differ, so exact halves can land in the
// other bin: with 2 GPUs and 1090 milli arrived the authors get 1090 / 2 / 10 = 54.5 ->
// bin 54, we get 1090 / 2000 * 100 = 54.50000000000001 -> bin 55. On the 6212-GPU
// cluster this moves the samples at exactly 54.5, 57.5, 101.5, 103.5, 122.5, 124.5,
// 125.5 and 127.5 % (never bin 100, so the headline number is safe). Same story for
// the per-sample alloc % (allocated / capacity * 100 vs used / total_gpus / 10), on top
// of the RoundHalfEven issue above. Fix: use the authors' expression.
// Here: two 1-GPU nodes; pods of 1000, 90 and 910 milli (2000, tune 1.0: no tuning),
// and a seed whose shuffle puts 1000 and 90 first: samples at 50 %, 54.5 %, 100 %.
// The authors' bins: 54 holds 54.5; 53 (empty) takes bins 52..54: 54.5; 56 (empty)
// finds nothing in 55..57: missing.
TEST(RunFgdExperimentTest, ArrivedBinsFollowTheAuthorsArithmetic) {
  ClusterState cluster = *Cluster({GpuNode("a", 1), GpuNode("b", 1)});
  PodList pods;
  pods.trace = "halves";
  pods.pods = {Pod("p1", 1000, 1, 1000), Pod("p2", 1000, 1, 90), Pod("p3", 1000, 1, 910)};
  FragmentationModel typical(FindTypicalTasks(pods.Requests()));
  uint64_t seed = 0;
  for (uint64_t s = 1; s < 100 && seed == 0; ++s) {
    Pcg32 rng(s);
    std::vector<TaskRequest> w = PrepareWorkload(pods, 2000, 1.0, rng);
    if (w.size() == 3 && GpuMilli({w[0], w[1]}) == 1090) {
      seed = s;
    }
  }
  ASSERT_NE(seed, 0u);
  FgdRunSpec spec{&cluster, &pods, &typical, "bestfit", seed, 1.0};
  StatusOr<FgdRunResult> r = RunFgdExperiment(spec);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->pods_placed, 3);
  EXPECT_EQ(r->alloc_pct[50], 50.0);
  EXPECT_EQ(r->alloc_pct[54], 54.5);
  EXPECT_EQ(r->alloc_pct[55], 54.5);
  EXPECT_EQ(r->alloc_pct[53], 54.5);
  EXPECT_TRUE(std::isnan(r->alloc_pct[56])) << r->alloc_pct[56];
  EXPECT_EQ(r->alloc_pct[100], 100.0);
}

}  // namespace
}  // namespace tessera
