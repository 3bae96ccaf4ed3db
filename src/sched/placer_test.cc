#include "sched/placer.h"

#include <gtest/gtest.h>

#include <array>
#include <map>
#include <memory>
#include <numeric>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/rng.h"
#include "model/node.h"
#include "sched/gpu_selection.h"
#include "sched/testing/scheduler_harness.h"
#include "state/testing/test_cluster.h"

namespace tessera {
namespace {

using ::tessera::testing::Cluster;
using ::tessera::testing::Cpu;
using ::tessera::testing::Mig;
using ::tessera::testing::Model;
using ::tessera::testing::Share;
using ::tessera::testing::Whole;

// ---------------------------------------------------------------------------------
// Test plugins.

// CPU, memory and GPUs: the harness's filters (never when the node is too small, not
// now when it is busy).
using ::tessera::testing::CpuFilter;
using ::tessera::testing::GpuFilter;

struct Counters {
  int prescore = 0;
  int score = 0;
};

// Scores each node from a table by node name (0 when absent), counting calls.
class TableScorer final : public ScorePlugin {
 public:
  TableScorer(std::string name, std::map<std::string, int64_t> table,
              std::shared_ptr<Counters> counters, bool cacheable = true)
      : name_(std::move(name)),
        table_(std::move(table)),
        counters_(std::move(counters)),
        cacheable_(cacheable) {}
  std::string_view name() const override { return name_; }
  void PreScore(const ClusterState&, const TaskRequest&) override { ++counters_->prescore; }
  NodeScore Score(const NodeLedger& node, const TaskRequest&) override {
    ++counters_->score;
    auto it = table_.find(node.spec().name);
    return {it == table_.end() ? 0 : it->second, {}};
  }
  bool cacheable() const override { return cacheable_; }

 private:
  std::string name_;
  std::map<std::string, int64_t> table_;
  std::shared_ptr<Counters> counters_;
  bool cacheable_;
};

// A deterministic packing score: the less CPU and GPU left after the task, the better.
class PackScorer final : public ScorePlugin {
 public:
  explicit PackScorer(bool cacheable = true) : cacheable_(cacheable) {}
  std::string_view name() const override { return "pack"; }
  NodeScore Score(const NodeLedger& node, const TaskRequest& r) override {
    int64_t gpu = r.cpu_only() ? 0 : r.gpu_milli.value() * r.gpu_count;
    int64_t cpu_left = node.free_cpu().value() - r.cpu.value();
    int64_t gpu_left = node.free_gpu_milli().value() - gpu;
    return {-(cpu_left / 1000) - 4 * (gpu_left / 100), {}};
  }
  bool cacheable() const override { return cacheable_; }

 private:
  bool cacheable_;
};

// Proposes the highest-index GPU that fits a share.
class LastGpuScorer final : public ScorePlugin {
 public:
  std::string_view name() const override { return "last-gpu"; }
  NodeScore Score(const NodeLedger& node, const TaskRequest& r) override {
    for (int g = node.gpu_count() - 1; g >= 0; --g) {
      if (GpuFitsRequest(node.gpus()[g], r)) {
        return {1, GpuChoice{uint64_t{1} << g, -1}};
      }
    }
    return {kInfeasibleScore, {}};
  }
};

Profile FilterProfile() {
  Profile p;
  p.name = "test";
  p.filters.push_back(std::make_unique<CpuFilter>());
  p.filters.push_back(std::make_unique<GpuFilter>());
  return p;
}

Profile PackProfile(bool cacheable = true) {
  Profile p = FilterProfile();
  p.scorers.push_back({std::make_unique<PackScorer>(cacheable), 1});
  return p;
}

Profile TableProfile(std::map<std::string, int64_t> table, std::shared_ptr<Counters> counters,
                     bool cacheable = true, int64_t weight = 1) {
  Profile p = FilterProfile();
  p.scorers.push_back(
      {std::make_unique<TableScorer>("table", std::move(table), std::move(counters), cacheable),
       weight});
  return p;
}

// ---------------------------------------------------------------------------------
// Clusters and requests.

NodeSpec T4Node(std::string name, int gpus = 4, int64_t cpu = 32000) {
  return MakeUniformNode(std::move(name), MilliCpu(cpu), MiB(128 * 1024), Model("T4"), gpus,
                         SharingMode::kShared);
}

NodeSpec CpuNode(std::string name, int64_t cpu) {
  return MakeUniformNode(std::move(name), MilliCpu(cpu), MiB(64 * 1024), Model("T4"), 0,
                         SharingMode::kShared);
}

// `n` identical T4 nodes named n0, n1, ...
ClusterState Uniform(int n) {
  std::vector<NodeSpec> nodes;
  for (int i = 0; i < n; ++i) {
    nodes.push_back(T4Node("n" + std::to_string(i)));
  }
  return Cluster(std::move(nodes));
}

// ---------------------------------------------------------------------------------
// Choosing the node.

TEST(PlacerTest, PicksTheMaxScore) {
  ClusterState s = Uniform(4);
  auto c = std::make_shared<Counters>();
  Placer placer(TableProfile({{"n0", 3}, {"n1", 9}, {"n2", 5}, {"n3", -1}}, c));
  Pcg32 rng(1);
  Placement p = placer.Place(s, Share(300), rng);
  ASSERT_TRUE(p.placed);
  EXPECT_EQ(p.allocation.node, NodeId(1));
  EXPECT_EQ(p.score, 9);
  EXPECT_EQ(p.tied_nodes, 1U);
  EXPECT_EQ(p.allocation.cpu.value(), 1000);
  ASSERT_EQ(p.allocation.gpus.size(), 1U);
  EXPECT_EQ(p.allocation.gpus[0].milli.value(), 300);
  EXPECT_TRUE(p.reasons.empty());
}

TEST(PlacerTest, SumsWeightedScores) {
  ClusterState s = Uniform(3);
  auto c = std::make_shared<Counters>();
  Profile profile = FilterProfile();
  profile.scorers.push_back(
      {std::make_unique<TableScorer>("first", std::map<std::string, int64_t>{{"n0", 10}}, c), 1});
  profile.scorers.push_back({std::make_unique<TableScorer>(
                                 "second", std::map<std::string, int64_t>{{"n1", 4}, {"n2", 6}}, c),
                             2});
  Placer placer(std::move(profile));
  Pcg32 rng(1);
  Placement p = placer.Place(s, Cpu(1000), rng);
  ASSERT_TRUE(p.placed);
  EXPECT_EQ(p.allocation.node, NodeId(2));  // totals 10, 8, 12
  EXPECT_EQ(p.score, 12);
  EXPECT_TRUE(p.allocation.gpus.empty());

  std::vector<ScoreTerm> terms = placer.Explain(s.node(NodeId(2)), Cpu(1000));
  ASSERT_EQ(terms.size(), 2U);
  EXPECT_EQ(terms[0].plugin, "first");
  EXPECT_EQ(terms[0].score, 0);
  EXPECT_EQ(terms[0].weight, 1);
  EXPECT_EQ(terms[1].plugin, "second");
  EXPECT_EQ(terms[1].score, 6);
  EXPECT_EQ(terms[1].weight, 2);
  terms = placer.Explain(s.node(NodeId(0)), Cpu(1000));
  ASSERT_EQ(terms.size(), 2U);
  EXPECT_EQ(terms[0].score, 10);
  // Infeasible node: no terms.
  EXPECT_TRUE(placer.Explain(s.node(NodeId(0)), Cpu(64000)).empty());
  EXPECT_TRUE(placer.Explain(s.node(NodeId(0)), Whole(5)).empty());
}

TEST(PlacerTest, InfeasibleScoreExcludesTheNode) {
  ClusterState s = Uniform(3);
  auto c = std::make_shared<Counters>();
  for (bool cacheable : {true, false}) {
    Placer placer(TableProfile({{"n0", 1}, {"n1", kInfeasibleScore}, {"n2", 0}}, c, cacheable));
    Pcg32 rng(1);
    Placement p = placer.Place(s, Cpu(1000), rng);
    EXPECT_EQ(p.allocation.node, NodeId(0));
    Placer none(
        TableProfile({{"n0", kInfeasibleScore}, {"n1", kInfeasibleScore}, {"n2", kInfeasibleScore}},
                     c, cacheable));
    EXPECT_FALSE(none.Place(s, Cpu(1000), rng).placed);
  }
}

TEST(PlacerTest, FiltersExcludeNodes) {
  ClusterState s = Cluster({CpuNode("cpu", 64000), T4Node("small", 4, 2000), T4Node("big")});
  auto c = std::make_shared<Counters>();
  for (bool cacheable : {true, false}) {
    Placer placer(TableProfile({{"cpu", 100}, {"small", 50}, {"big", 1}}, c, cacheable));
    Pcg32 rng(1);
    // The GPU-less node and the small node are filtered out although they score higher.
    Placement p = placer.Place(s, Share(500, 4000), rng);
    ASSERT_TRUE(p.placed);
    EXPECT_EQ(p.allocation.node, NodeId(2));
    EXPECT_EQ(placer.Place(s, Cpu(1000), rng).allocation.node, NodeId(0));
  }
}

TEST(PlacerTest, EmptyClusterPlacesNothing) {
  ClusterState s = Cluster({});
  Placer placer(PackProfile());
  Pcg32 rng(1);
  EXPECT_FALSE(placer.Place(s, Cpu(1000), rng, {.explain = true}).placed);
}

TEST(PlacerTest, NodePriorityFollowsRanks) {
  ClusterState s = Uniform(4);
  auto c = std::make_shared<Counters>();
  for (bool cacheable : {true, false}) {
    SCOPED_TRACE(cacheable ? "cacheable" : "full scan");
    Placer placer(TableProfile({}, c, cacheable), TieBreak::kNodePriority);
    Pcg32 rng(1);
    Placement p = placer.Place(s, Cpu(1000), rng);
    EXPECT_EQ(p.allocation.node, NodeId(0));  // node order by default
    EXPECT_EQ(p.tied_nodes, 4U);
    placer.SetNodeRanks({3, 1, 0, 2});
    EXPECT_EQ(placer.Place(s, Cpu(1000), rng).allocation.node, NodeId(2));
    // The same answer every time: no randomness.
    for (int i = 0; i < 20; ++i) {
      EXPECT_EQ(placer.Place(s, Cpu(1000), rng).allocation.node, NodeId(2));
    }
    // Rank 0 becomes infeasible: rank 1 wins.
    EXPECT_EQ(placer.Place(s, Cpu(32000), rng).allocation.node, NodeId(2));
    ClusterState busy = s;
    ASSERT_TRUE(busy.Allocate({NodeId(2), MilliCpu(31000), MiB(0), {}}).ok());
    EXPECT_EQ(placer.Place(busy, Cpu(2000), rng).allocation.node, NodeId(1));
    placer.SetNodeRanks({0, 1, 2, 3});
    EXPECT_EQ(placer.Place(busy, Cpu(2000), rng).allocation.node, NodeId(0));
  }
}

TEST(PlacerTest, ProfileTieBreakOverridesTheConstructor) {
  ClusterState s = Uniform(4);
  auto c = std::make_shared<Counters>();
  Profile profile = TableProfile({}, c);
  profile.tie_break = TieBreak::kRandom;
  Placer placer(std::move(profile), TieBreak::kNodePriority);
  Pcg32 rng(3);
  std::array<int, 4> hits{};
  for (int i = 0; i < 400; ++i) {
    ++hits[placer.Place(s, Cpu(1000), rng).allocation.node.value()];
  }
  for (int h : hits) {
    EXPECT_GT(h, 50);
  }
}

TEST(PlacerTest, RandomTieBreakSpreadsOverTiedNodesOnly) {
  ClusterState s = Uniform(5);
  auto c = std::make_shared<Counters>();
  for (bool cacheable : {true, false}) {
    SCOPED_TRACE(cacheable ? "cacheable" : "full scan");
    Placer placer(
        TableProfile({{"n0", 7}, {"n1", 7}, {"n2", 6}, {"n3", 7}, {"n4", 7}}, c, cacheable),
        TieBreak::kRandom);
    Pcg32 rng(99);
    std::array<int, 5> hits{};
    constexpr int kDraws = 4000;
    for (int i = 0; i < kDraws; ++i) {
      Placement p = placer.Place(s, Share(100), rng);
      ASSERT_TRUE(p.placed);
      ASSERT_EQ(p.tied_nodes, 4U);
      ASSERT_EQ(p.score, 7);
      ++hits[p.allocation.node.value()];
    }
    EXPECT_EQ(hits[2], 0);
    for (int n : {0, 1, 3, 4}) {
      // Expected 1000 each; 5 sigma is about 137.
      EXPECT_GT(hits[n], 860) << "node " << n;
      EXPECT_LT(hits[n], 1140) << "node " << n;
    }
  }
}

TEST(PlacerTest, RandomTieBreakIsReproducibleFromTheSeed) {
  ClusterState s = Uniform(6);
  Placer a(PackProfile(), TieBreak::kRandom);
  Placer b(PackProfile(), TieBreak::kRandom);
  Pcg32 ra(5);
  Pcg32 rb(5);
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(a.Place(s, Cpu(1000), ra).allocation, b.Place(s, Cpu(1000), rb).allocation);
  }
}

// ---------------------------------------------------------------------------------
// GPUs inside the node.

TEST(PlacerTest, UsesTheScorersGpuChoiceElseTheProfiles) {
  ClusterState s = Uniform(1);
  Profile with_choice = FilterProfile();
  with_choice.scorers.push_back({std::make_unique<LastGpuScorer>(), 1});
  with_choice.gpu_selection = GpuSelection::kFirstFit;
  Placer chooser(std::move(with_choice));
  Pcg32 rng(1);
  Placement p = chooser.Place(s, Share(300), rng);
  ASSERT_TRUE(p.placed);
  ASSERT_EQ(p.allocation.gpus.size(), 1U);
  EXPECT_EQ(p.allocation.gpus[0].gpu, 3);

  Profile first_fit = PackProfile();
  first_fit.gpu_selection = GpuSelection::kFirstFit;
  Placer plain(std::move(first_fit));
  p = plain.Place(s, Share(300), rng);
  ASSERT_TRUE(p.placed);
  EXPECT_EQ(p.allocation.gpus[0].gpu, 0);
}

TEST(PlacerTest, BestFitGpuSelectionAndMig) {
  ClusterState s =
      Cluster({T4Node("t4"), MakeUniformNode("mig", MilliCpu(32000), MiB(1 << 17),
                                             Model("A100-40GB"), 2, SharingMode::kMig)});
  ASSERT_TRUE(s.Allocate({NodeId(0), MilliCpu(0), MiB(0), {{2, MilliGpu(600), MiB(0)}}}).ok());
  Placer placer(PackProfile());  // gpu_selection defaults to kBestFit
  Pcg32 rng(1);
  Placement p = placer.Place(s, Share(300), rng);
  ASSERT_TRUE(p.placed);
  EXPECT_EQ(p.allocation.node, NodeId(0));
  EXPECT_EQ(p.allocation.gpus[0].gpu, 2);  // the fitting GPU with the least free milli

  p = placer.Place(s, Mig("3g.20gb"), rng);
  ASSERT_TRUE(p.placed);
  EXPECT_EQ(p.allocation.node, NodeId(1));
  ASSERT_EQ(p.allocation.gpus.size(), 1U);
  EXPECT_EQ(p.allocation.gpus[0].gpu, 0);
  EXPECT_EQ(p.allocation.gpus[0].mig_profile, 4);
  EXPECT_EQ(p.allocation.gpus[0].milli.value(), 428);
  ASSERT_TRUE(s.Allocate(p.allocation).ok());
  // The next 3g goes to the same (busiest) GPU, at the other legal start.
  p = placer.Place(s, Mig("3g.20gb"), rng);
  ASSERT_TRUE(p.placed);
  EXPECT_EQ(p.allocation.gpus[0].gpu, 0);
  EXPECT_NE(p.allocation.gpus[0].mig_start, -1);
  ASSERT_TRUE(s.Allocate(p.allocation).ok());
}

// ---------------------------------------------------------------------------------
// Explaining failures.

TEST(PlacerTest, ExplainTalliesFilterReasons) {
  // Three nodes too small, two without GPUs, one busy.
  ClusterState s = Cluster({T4Node("s0", 4, 2000), T4Node("s1", 4, 2000), CpuNode("c0", 64000),
                            T4Node("s2", 4, 2000), CpuNode("c1", 64000), T4Node("busy")});
  ASSERT_TRUE(s.Allocate({NodeId(5), MilliCpu(30000), MiB(0), {}}).ok());
  for (bool cacheable : {true, false}) {
    Placer placer(PackProfile(cacheable));
    Pcg32 rng(1);
    Placement p = placer.Place(s, Share(500, 8000), rng, {.explain = true});
    EXPECT_FALSE(p.placed);
    std::vector<std::pair<std::string, int>> want{
        {"cpu never", 3}, {"too few gpus", 2}, {"cpu busy", 1}};
    EXPECT_EQ(p.reasons, want);
    EXPECT_TRUE(p.busy_nodes_exist);
    // Without explain: no tally.
    p = placer.Place(s, Share(500, 8000), rng);
    EXPECT_FALSE(p.placed);
    EXPECT_TRUE(p.reasons.empty());
    EXPECT_FALSE(p.busy_nodes_exist);
    // Only "never" reasons: preemption cannot help.
    p = placer.Place(s, Share(500, 40000), rng, {.explain = true});
    EXPECT_FALSE(p.placed);
    want = {{"cpu never", 4}, {"too few gpus", 2}};
    EXPECT_EQ(p.reasons, want);
    EXPECT_FALSE(p.busy_nodes_exist);
  }
}

TEST(PlacerTest, ExplainOnSuccessLeavesReasonsEmpty) {
  ClusterState s = Cluster({T4Node("small", 4, 2000), T4Node("big")});
  Placer placer(PackProfile());
  Pcg32 rng(1);
  Placement p = placer.Place(s, Share(500, 8000), rng, {.explain = true});
  ASSERT_TRUE(p.placed);
  EXPECT_TRUE(p.reasons.empty());
  EXPECT_FALSE(p.busy_nodes_exist);
}

TEST(PlacerTest, CheckReturnsTheFirstFailingFilter) {
  ClusterState s = Cluster({CpuNode("tiny", 1000), T4Node("ok")});
  Placer cpu_first(PackProfile());
  const NodeLedger& tiny = s.node(NodeId(0));
  FilterResult r = cpu_first.Check(tiny, Share(500, 2000));
  EXPECT_EQ(r.code, FilterCode::kUnresolvable);
  EXPECT_EQ(r.reason, "cpu never");
  EXPECT_EQ(cpu_first.Check(tiny, Share(500, 500)).reason, "too few gpus");
  EXPECT_TRUE(cpu_first.Check(s.node(NodeId(1)), Share(500, 2000)).fits());

  Profile reversed;
  reversed.filters.push_back(std::make_unique<GpuFilter>());
  reversed.filters.push_back(std::make_unique<CpuFilter>());
  Placer gpu_first(std::move(reversed));
  EXPECT_EQ(gpu_first.Check(tiny, Share(500, 2000)).reason, "too few gpus");

  ASSERT_TRUE(s.Allocate({NodeId(1),
                          MilliCpu(0),
                          MiB(0),
                          {{0, kWholeGpu, MiB(0)},
                           {1, kWholeGpu, MiB(0)},
                           {2, kWholeGpu, MiB(0)},
                           {3, MilliGpu(800), MiB(0)}}})
                  .ok());
  r = cpu_first.Check(s.node(NodeId(1)), Share(500, 2000));
  EXPECT_EQ(r.code, FilterCode::kUnschedulable);
  EXPECT_EQ(r.reason, "gpus busy");
  EXPECT_TRUE(cpu_first.Check(s.node(NodeId(1)), Share(200, 2000)).fits());
}

// ---------------------------------------------------------------------------------
// Caching.

TEST(PlacerCacheTest, RescoresOnlyChangedNodes) {
  ClusterState s = Uniform(5);
  auto c = std::make_shared<Counters>();
  Placer placer(TableProfile({{"n0", 1}, {"n1", 2}, {"n2", 3}, {"n3", 4}, {"n4", 5}}, c));
  Pcg32 rng(1);
  Placement p = placer.Place(s, Share(300), rng);
  EXPECT_EQ(p.allocation.node, NodeId(4));
  EXPECT_EQ(c->score, 5);
  EXPECT_EQ(c->prescore, 1);  // PreScore runs on every placement, cached or not
  EXPECT_EQ(placer.cached_classes(), 1U);

  placer.Place(s, Share(300), rng);
  EXPECT_EQ(c->score, 5);  // nothing changed: nothing rescored
  EXPECT_EQ(c->prescore, 2);

  ASSERT_TRUE(s.Allocate(p.allocation).ok());
  ASSERT_TRUE(s.Allocate({NodeId(4), MilliCpu(1000), MiB(0), {}}).ok());
  placer.Place(s, Share(300), rng);
  EXPECT_EQ(c->score, 6);  // node 4 changed twice: scored once

  // Node 4 runs out of CPU: it drops out, and the next best wins.
  ASSERT_TRUE(s.Allocate({NodeId(4), MilliCpu(30000), MiB(0), {}}).ok());
  p = placer.Place(s, Share(300), rng);
  EXPECT_EQ(p.allocation.node, NodeId(3));
  EXPECT_EQ(c->score, 6);  // node 4 is filtered out before scoring

  // Another request class: its own cache, a full scan of the four feasible nodes.
  placer.Place(s, Share(400), rng);
  EXPECT_EQ(c->score, 10);
  EXPECT_EQ(placer.cached_classes(), 2U);
  placer.Place(s, Share(300), rng);
  EXPECT_EQ(c->score, 10);
}

TEST(PlacerCacheTest, NonCacheablePluginsScoreEveryNodeEveryTime) {
  ClusterState s = Uniform(5);
  auto c = std::make_shared<Counters>();
  Profile profile = TableProfile({{"n2", 5}}, c, /*cacheable=*/false);
  // One non-cacheable plugin makes the whole profile uncached.
  profile.scorers.push_back({std::make_unique<PackScorer>(true), 1});
  Placer placer(std::move(profile));
  Pcg32 rng(1);
  for (int i = 1; i <= 3; ++i) {
    Placement p = placer.Place(s, Share(300), rng);
    ASSERT_TRUE(p.placed);
    EXPECT_EQ(p.allocation.node, NodeId(2));
    EXPECT_EQ(c->prescore, i);
    EXPECT_EQ(c->score, 5 * i);
  }
  EXPECT_EQ(placer.cached_classes(), 0U);
  ASSERT_TRUE(s.Allocate({NodeId(0), MilliCpu(32000), MiB(0), {}}).ok());
  placer.Place(s, Share(300), rng);
  EXPECT_EQ(c->score, 19);  // node 0 is filtered out
}

TEST(PlacerCacheTest, CopiedStateIsRescanned) {
  ClusterState a = Cluster({T4Node("x"), T4Node("y")});
  ASSERT_TRUE(a.Allocate({NodeId(0), MilliCpu(2000), MiB(0), {}}).ok());
  Placer placer(PackProfile());
  Pcg32 rng(1);
  EXPECT_EQ(placer.Place(a, Cpu(1000), rng).allocation.node, NodeId(0));

  // The copy has its own uid and its change count starts again at 0; after one change
  // it has the same change_seq() as `a` had when the cache was filled.
  ClusterState b = a;
  EXPECT_NE(b.uid(), a.uid());
  ASSERT_TRUE(b.Allocate({NodeId(1), MilliCpu(8000), MiB(0), {}}).ok());
  EXPECT_EQ(b.change_seq(), a.change_seq());
  EXPECT_EQ(placer.Place(b, Cpu(1000), rng).allocation.node, NodeId(1));
  EXPECT_EQ(placer.Place(a, Cpu(1000), rng).allocation.node, NodeId(0));

  // Copy assignment makes a new state too.
  a = b;
  EXPECT_EQ(placer.Place(a, Cpu(1000), rng).allocation.node, NodeId(1));
  EXPECT_EQ(placer.cached_classes(), 1U);
}

TEST(PlacerCacheTest, RescansWhenChangesOverflowTheWindow) {
  ClusterState s = Uniform(3);
  Placer placer(PackProfile());
  Pcg32 rng(1);
  EXPECT_EQ(placer.Place(s, Cpu(1000), rng).allocation.node, NodeId(0));
  // Node 2 changes first, then node 0 churns past the window: the change of node 2 is
  // no longer in the window, and must still be seen.
  ASSERT_TRUE(s.Allocate({NodeId(2), MilliCpu(4000), MiB(0), {}}).ok());
  Allocation churn{NodeId(0), MilliCpu(1000), MiB(0), {}};
  for (uint64_t i = 0; i < ClusterState::kChangeWindow / 2 + 1; ++i) {
    ASSERT_TRUE(s.Allocate(churn).ok());
    ASSERT_TRUE(s.Release(churn).ok());
  }
  EXPECT_EQ(placer.Place(s, Cpu(1000), rng).allocation.node, NodeId(2));
}

TEST(PlacerCacheTest, ManyRequestClassesStayCorrect) {
  ClusterState s = Uniform(3);
  ASSERT_TRUE(s.Allocate({NodeId(1), MilliCpu(1000), MiB(0), {}}).ok());
  Placer placer(PackProfile());
  Pcg32 rng(1);
  for (int64_t cpu = 1; cpu <= 5000; ++cpu) {
    ASSERT_EQ(placer.Place(s, Cpu(cpu), rng).allocation.node, NodeId(1)) << cpu;
    ASSERT_LE(placer.cached_classes(), 4096U);
  }
  ASSERT_TRUE(s.Allocate({NodeId(2), MilliCpu(2000), MiB(0), {}}).ok());
  EXPECT_EQ(placer.Place(s, Cpu(1), rng).allocation.node, NodeId(2));
  EXPECT_EQ(placer.Place(s, Cpu(4999), rng).allocation.node, NodeId(2));
}

// A mixed cluster for the property test.
ClusterState MixedCluster() {
  std::vector<NodeSpec> nodes;
  nodes.push_back(T4Node("t4-a"));
  nodes.push_back(T4Node("t4-b"));
  nodes.push_back(MakeUniformNode("h100-a", MilliCpu(64000), MiB(1 << 20), Model("H100-80GB"), 8,
                                  SharingMode::kExclusive, 2, true));
  nodes.push_back(MakeUniformNode("h100-b", MilliCpu(64000), MiB(1 << 20), Model("H100-80GB"), 8,
                                  SharingMode::kExclusive, 2, true));
  nodes.push_back(MakeUniformNode("mig", MilliCpu(32000), MiB(1 << 19), Model("A100-80GB"), 4,
                                  SharingMode::kMig));
  nodes.push_back(CpuNode("cpu-a", 16000));
  nodes.push_back(CpuNode("cpu-b", 16000));
  nodes.push_back(T4Node("l40s", 2, 8000));
  nodes.back().gpus[0].model = Model("L40S");
  nodes.back().gpus[1].model = Model("L40S");
  return Cluster(std::move(nodes));
}

std::vector<TaskRequest> MixedRequests() {
  TaskRequest with_memory = Share(500, 2000);
  with_memory.gpu_memory = MiB(4096);
  TaskRequest local4 = Whole(4, 8000);
  local4.topology = GpuTopology::kRequireLocal;
  TaskRequest t4_only = Share(250, 1000);
  t4_only.models.Add(Model("T4"));
  return {Cpu(2000),      Cpu(6000), Share(300, 4000), with_memory,    Whole(1, 4000),
          Whole(2, 2000), local4,    Mig("1g.10gb"),   Mig("3g.40gb"), t4_only};
}

void ExpectSamePlacement(const Placement& got, const Placement& want) {
  ASSERT_EQ(got.placed, want.placed);
  ASSERT_EQ(got.allocation, want.allocation);
  ASSERT_EQ(got.score, want.score);
  ASSERT_EQ(got.tied_nodes, want.tied_nodes);
}

enum class Variant { kNodeOrder, kShuffledRanks, kRandom };

// A long-lived Placer (with caches) must decide exactly like a fresh one on every state
// reached by random allocations and releases; so must an uncached one.
TEST(PlacerCachePropertyTest, CachedEqualsFresh) {
  const std::vector<TaskRequest> requests = MixedRequests();
  for (Variant variant : {Variant::kNodeOrder, Variant::kShuffledRanks, Variant::kRandom}) {
    for (uint64_t seed = 1; seed <= 6; ++seed) {
      SCOPED_TRACE(::testing::Message()
                   << "variant " << static_cast<int>(variant) << " seed " << seed);
      ClusterState s = MixedCluster();
      const TieBreak tie =
          variant == Variant::kRandom ? TieBreak::kRandom : TieBreak::kNodePriority;
      std::vector<uint32_t> ranks(s.node_count());
      std::iota(ranks.begin(), ranks.end(), 0U);
      Pcg32 rng(seed);
      if (variant == Variant::kShuffledRanks) {
        rng.Shuffle(std::span<uint32_t>(ranks));
      }
      Placer cached(PackProfile(), tie);
      Placer uncached(PackProfile(/*cacheable=*/false), tie);
      if (variant == Variant::kShuffledRanks) {
        cached.SetNodeRanks(ranks);
        uncached.SetNodeRanks(ranks);
      }
      std::vector<Allocation> live;
      int placed = 0;
      int failed = 0;
      for (int step = 0; step < 300; ++step) {
        if (!live.empty() && rng.Uniform(3) == 0) {
          size_t k = rng.Uniform(static_cast<uint32_t>(live.size()));
          ASSERT_TRUE(s.Release(live[k]).ok());
          live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
          continue;
        }
        const TaskRequest& r = requests[rng.Uniform(static_cast<uint32_t>(requests.size()))];
        Placer fresh(PackProfile(), tie);
        if (variant == Variant::kShuffledRanks) {
          fresh.SetNodeRanks(ranks);
        }
        // Twin generators: equal decisions consume equal randomness.
        Pcg32 rng_cached(seed * 7919 + static_cast<uint64_t>(step));
        Pcg32 rng_fresh(seed * 7919 + static_cast<uint64_t>(step));
        Placement want = fresh.Place(s, r, rng_fresh);
        Placement got = cached.Place(s, r, rng_cached);
        SCOPED_TRACE(::testing::Message() << "step " << step);
        ExpectSamePlacement(got, want);
        if (variant != Variant::kRandom) {
          Pcg32 rng_uncached(1);
          ExpectSamePlacement(uncached.Place(s, r, rng_uncached), want);
        }
        if (HasFatalFailure()) {
          return;
        }
        if (!want.placed) {
          ++failed;
          continue;
        }
        ++placed;
        // Sometimes the driver does not apply the decision.
        if (rng.Uniform(4) != 0) {
          ASSERT_TRUE(s.Allocate(want.allocation).ok());
          live.push_back(want.allocation);
        }
      }
      EXPECT_GT(placed, 50);
      EXPECT_GT(failed, 0);  // the cluster did fill up at times
    }
  }
}

}  // namespace
}  // namespace tessera
