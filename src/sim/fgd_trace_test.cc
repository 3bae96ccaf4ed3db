// The FGD experiment on the real trace: a slice of it replayed against the authors'
// arithmetic, and the whole default trace. Unit tests of the experiment's parts are in
// fgd_experiment_test.cc.
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

// --- scenario: a slice of the real trace ------------------------------------------------

// The first 40 nodes of the GPU node list (22 P100x2, 11 G2x8, 2 G3x8, 2 V100M32x8,
// 1 V100M16x4, 1 T4x4, 1 T4x2: 174 GPUs) and the first 200 pods of the default trace
// by name (191 one-GPU, 2 eight-GPU, 7 CPU-only: 170.15 GPUs, 97.79 %).
struct TraceSlice {
  std::string error;
  std::optional<ClusterState> cluster;
  PodList pods;
  std::optional<FragmentationModel> typical;
};

TraceSlice LoadSlice() {
  TraceSlice s;
  std::string dir = OpenbDir();
  if (dir.empty()) {
    s.error = "no traces";
    return s;
  }
  const GpuCatalog& catalog = GpuCatalog::Default();
  StatusOr<std::vector<NodeSpec>> nodes =
      ReadOpenbNodes(dir + "/openb_node_list_gpu_node.csv", catalog);
  StatusOr<PodList> pods = ReadOpenbPods(dir + "/openb_pod_list_default.csv", catalog);
  if (!nodes.ok() || !pods.ok()) {
    s.error = nodes.status().ToString() + " " + pods.status().ToString();
    return s;
  }
  nodes->resize(40);
  StatusOr<ClusterState> cluster = ClusterState::Create(std::move(*nodes), catalog);
  if (!cluster.ok()) {
    s.error = cluster.status().ToString();
    return s;
  }
  s.cluster.emplace(std::move(*cluster));
  s.pods = std::move(*pods);
  std::stable_sort(s.pods.pods.begin(), s.pods.pods.end(),
                   [](const TracePod& a, const TracePod& b) { return a.name < b.name; });
  s.pods.pods.resize(200);
  s.typical.emplace(FindTypicalTasks(s.pods.Requests()));
  return s;
}

// The run's placement loop redone here from the public pieces (same Rng draws in the
// same order as RunFgdExperiment: workload, node ranks, placements), to see what the
// result vectors do not show: every ledger after every pod, and the final allocation.
struct Replay {
  int64_t placed = 0;
  int64_t gpu_failed = 0;
  int64_t cpu_failed = 0;
  int64_t allocated_milli = 0;
  std::vector<int64_t> arrived;    // per pod, cumulative
  std::vector<int64_t> allocated;  // per pod, after it
};

Replay ReplayRun(const TraceSlice& s, const std::string& policy, uint64_t seed, double tune) {
  Replay out;
  ClusterState state = *s.cluster;
  PolicyContext context{ScaleOf(state), &*s.typical};
  StatusOr<Profile> profile = MakeProfile(policy, context);
  EXPECT_TRUE(profile.ok());
  Placer placer(std::move(*profile), TieBreak::kNodePriority);
  Pcg32 rng(seed);
  const int64_t capacity = state.total_gpu_milli().value();
  std::vector<TaskRequest> workload = PrepareWorkload(s.pods, capacity, tune, rng);
  std::vector<uint32_t> ranks(state.node_count());
  std::iota(ranks.begin(), ranks.end(), 0);
  rng.Shuffle(std::span<uint32_t>(ranks));
  placer.SetNodeRanks(std::move(ranks));
  int64_t arrived = 0;
  for (const TaskRequest& request : workload) {
    arrived += request.gpu_milli.value() * request.gpu_count;
    Placement p = placer.Place(state, request, rng);
    if (p.placed) {
      EXPECT_TRUE(state.Allocate(p.allocation).ok());
      ++out.placed;
    } else if (request.cpu_only()) {
      ++out.cpu_failed;
    } else {
      ++out.gpu_failed;
    }
    // Nothing is ever over-committed.
    EXPECT_LE(state.allocated_gpu_milli().value(), capacity);
    for (const NodeLedger& n : state.nodes()) {
      EXPECT_GE(n.free_cpu().value(), 0);
      EXPECT_GE(n.free_memory().value(), 0);
      for (const GpuLedger& g : n.gpus()) {
        EXPECT_GE(g.free_milli().value(), 0);
        EXPECT_LE(g.free_milli().value(), kMilliPerGpu);
      }
    }
    EXPECT_LE(state.allocated_gpu_milli().value(), arrived);
    out.arrived.push_back(arrived);
    out.allocated.push_back(state.allocated_gpu_milli().value());
  }
  out.allocated_milli = state.allocated_gpu_milli().value();
  int64_t sum = 0;
  for (const NodeLedger& n : state.nodes()) {
    for (const GpuLedger& g : n.gpus()) {
      sum += g.used_milli().value();
    }
  }
  EXPECT_EQ(sum, out.allocated_milli);
  return out;
}

// The authors' binning (docs/fgd-replication.md §5), written out independently:
// bin = round(arrived % of capacity), the mean of each bin's round(alloc %, 2), else of
// bins k-1..k+1.
std::vector<double> AuthorsBins(const Replay& r, int64_t capacity) {
  std::vector<double> sum(kArrivedBins + 2, 0.0);
  std::vector<int> count(kArrivedBins + 2, 0);
  for (size_t i = 0; i < r.arrived.size(); ++i) {
    double pct = static_cast<double>(r.arrived[i]) * 100.0 / static_cast<double>(capacity);
    auto bin = static_cast<int64_t>(std::nearbyint(pct));
    if (bin > kArrivedBins) continue;
    sum[bin] += std::nearbyint(static_cast<double>(r.allocated[i]) * 10000.0 /
                               static_cast<double>(capacity)) /
                100.0;
    ++count[bin];
  }
  std::vector<double> out(kArrivedBins, std::numeric_limits<double>::quiet_NaN());
  for (int k = 0; k < kArrivedBins; ++k) {
    double s = sum[k];
    int c = count[k];
    if (c == 0) {
      for (int j = std::max(0, k - 1); j <= k + 1; ++j) {
        s += sum[j];
        c += count[j];
      }
    }
    if (c > 0) out[k] = std::nearbyint(s / c * 100.0) / 100.0;
  }
  return out;
}

struct ScenarioExpectation {
  std::string policy;
  int64_t pods_tried;
  int64_t pods_placed;
  int64_t gpu_pods_failed;
  int64_t allocated_milli;  // at the end of the run
  double alloc_50;
  double alloc_90;
  double alloc_100;
  double alloc_110;
  double alloc_130;
};

// Expected values: computed once by running this code (seed 42, tune 1.3: 200 pods
// plus 71 clones; node-rank tie break) and printing the fields, then frozen as a
// regression guard for exact placement outcomes: a change in filters, scorers, GPU
// choice, tie-breaking, Rng draw order, tuning or binning moves them. They are
// cross-checked in the test by the replay above (its own driver loop over the public
// Placer, every ledger checked after every pod, and the authors' binning written out
// separately) and are plausible: the pods ask for 97.79 % of the GPUs before tuning, so
// bin 50 and 90 are nearly all placed, and fgd leaves less idle at 100 % than bestfit.
// The hand-verified cases (every number derived on paper) are the tiny-cluster tests
// above. If a deliberate change moves these numbers, re-derive and update them.
TEST(FgdScenarioTest, FirstTwoHundredPodsOnFortyNodes) {
  TraceSlice s = LoadSlice();
  ASSERT_TRUE(s.error.empty()) << s.error;
  ASSERT_EQ(s.cluster->total_gpus(), 174);
  ASSERT_EQ(s.pods.pods.front().name, "openb-pod-0000");
  ASSERT_EQ(s.pods.pods.back().name, "openb-pod-0199");
  const int64_t capacity = s.cluster->total_gpu_milli().value();

  const std::vector<ScenarioExpectation> expected{
      {"fgd", 271, 208, 63, 171060, 49.95, 89.97, 98.18, 98.31, 98.31},
      {"bestfit", 271, 208, 63, 170810, 49.95, 89.97, 97.91, 98.17, 98.17},
  };
  for (const ScenarioExpectation& want : expected) {
    SCOPED_TRACE(want.policy);
    FgdRunSpec spec{&*s.cluster, &s.pods, &*s.typical, want.policy, 42, 1.3};
    StatusOr<FgdRunResult> r = RunFgdExperiment(spec);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    Replay replay = ReplayRun(s, want.policy, 42, 1.3);

    // The replay agrees with the run.
    EXPECT_EQ(r->pods_tried, static_cast<int64_t>(replay.arrived.size()));
    EXPECT_EQ(r->pods_placed, replay.placed);
    EXPECT_EQ(r->gpu_pods_failed, replay.gpu_failed);
    EXPECT_EQ(r->pods_tried, replay.placed + replay.gpu_failed + replay.cpu_failed);
    std::vector<double> bins = AuthorsBins(replay, capacity);
    for (int k = 0; k < kArrivedBins; ++k) {
      ASSERT_EQ(std::isnan(bins[k]), std::isnan(r->alloc_pct[k])) << "bin " << k;
      if (!std::isnan(bins[k])) {
        EXPECT_NEAR(r->alloc_pct[k], bins[k], 0.0101) << "bin " << k;
      }
    }

    // Invariants: never above capacity or arrived, non-decreasing where defined.
    double last = -1;
    for (int k = 0; k < kArrivedBins; ++k) {
      double v = r->alloc_pct[k];
      if (std::isnan(v)) continue;
      EXPECT_LE(v, 100.0) << "bin " << k;
      EXPECT_LE(v, k + 1.5) << "bin " << k;  // an empty bin may take bin k+1's samples
      EXPECT_GE(v, last) << "bin " << k;
      last = v;
    }

    // Frozen outcome.
    EXPECT_EQ(r->total_gpus, 174);
    EXPECT_EQ(r->pods_tried, want.pods_tried);
    EXPECT_EQ(r->pods_placed, want.pods_placed);
    EXPECT_EQ(r->gpu_pods_failed, want.gpu_pods_failed);
    EXPECT_EQ(replay.allocated_milli, want.allocated_milli);
    EXPECT_EQ(r->alloc_pct[50], want.alloc_50);
    EXPECT_EQ(r->alloc_pct[90], want.alloc_90);
    EXPECT_EQ(r->alloc_pct[100], want.alloc_100);
    EXPECT_EQ(r->alloc_pct[110], want.alloc_110);
    EXPECT_EQ(r->alloc_pct[130], want.alloc_130);
    EXPECT_NEAR(r->UnallocatedAt100(), 100.0 - want.alloc_100, 1e-9);
    EXPECT_EQ(replay.cpu_failed, 0);

    // Deterministic: a second run gives the same vectors.
    StatusOr<FgdRunResult> again = RunFgdExperiment(spec);
    ASSERT_TRUE(again.ok());
    ExpectSameRun(*r, *again);
  }
}

// One full run of the paper's experiment (docs/fgd-replication.md §1) with its cheapest
// policy: the default trace (8152 pods, tuned to 130 % of 6212 GPUs), bestfit, seed 42.
// Expected values computed once by running this code and frozen (about 0.15 s); they
// sit inside the authors' own seed range for bestfit on this trace (unallocated
// 6.96..7.36 %, median 7.09, in fgd-kss-expected-results/analysis_allo_discrete.csv),
// which the last check keeps as a looser guard.
TEST(FgdFullTraceTest, DefaultTraceBestfitSeed42) {
  std::string dir = OpenbDir();
  ASSERT_FALSE(dir.empty());
  const GpuCatalog& catalog = GpuCatalog::Default();
  StatusOr<std::vector<NodeSpec>> nodes =
      ReadOpenbNodes(dir + "/openb_node_list_gpu_node.csv", catalog);
  ASSERT_TRUE(nodes.ok()) << nodes.status().ToString();
  StatusOr<PodList> pods = ReadOpenbPods(dir + "/openb_pod_list_default.csv", catalog);
  ASSERT_TRUE(pods.ok()) << pods.status().ToString();
  StatusOr<ClusterState> cluster = ClusterState::Create(std::move(*nodes), catalog);
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  FragmentationModel typical(FindTypicalTasks(pods->Requests()));
  // docs/fgd-replication.md §4.1: 35 typical pods covering 95.26 % of 8152.
  EXPECT_EQ(typical.workload().tasks.size(), 35u);
  EXPECT_EQ(typical.workload().total, 8152);

  FgdRunSpec spec{&*cluster, &*pods, &typical, "bestfit", 42, 1.3};
  StatusOr<FgdRunResult> r = RunFgdExperiment(spec);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->trace, "default");
  EXPECT_EQ(r->total_gpus, 6212);
  // 8152 + 2674 clones (tuning, docs/fgd-replication.md §1; about +2663 estimated).
  EXPECT_EQ(r->pods_tried, 10826);
  EXPECT_EQ(r->pods_placed, 8231);
  EXPECT_EQ(r->gpu_pods_failed, 2595);
  EXPECT_EQ(r->alloc_pct[50], 50.01);
  EXPECT_EQ(r->alloc_pct[100], 92.96);
  EXPECT_EQ(r->alloc_pct[130], 93.18);
  EXPECT_EQ(r->frag_pct[100], 6.97);
  EXPECT_NEAR(r->UnallocatedAt100(), 7.09, 0.5);
}

}  // namespace
}  // namespace tessera
