#include "plugins/registry.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/rng.h"
#include "model/node.h"
#include "sched/placer.h"
#include "state/testing/test_cluster.h"

namespace tessera {
namespace {

using ::tessera::testing::Cluster;
using ::tessera::testing::Model;
using ::tessera::testing::Request;

NodeSpec Node(std::string name, int64_t cpu, std::string_view model, int gpus,
              SharingMode mode = SharingMode::kShared) {
  return MakeUniformNode(std::move(name), MilliCpu(cpu), MiB(1 << 18), Model(model), gpus, mode);
}

std::vector<TaskRequest> Workload() {
  return {Request(4000, 1, 500), Request(4000, 1, 500),   Request(8000, 1, 1000),
          Request(2000),         Request(16000, 2, 1000), Request(6000, 1, 250),
          Request(6000, 1, 250), Request(12000, 4, 1000)};
}

TEST(ScaleOfTest, LargestCpuAndGpuSeparately) {
  ClusterState s = Cluster({Node("a", 64000, "T4", 4), Node("b", 128000, "A10", 2),
                            Node("c", 8000, "G2", 8), Node("d", 32000, "T4", 0)});
  NodeScale scale = ScaleOf(s);
  EXPECT_EQ(scale.max_cpu_milli, 128000);
  EXPECT_EQ(scale.max_gpu_milli, 8000);
}

TEST(ScaleOfTest, NeverZero) {
  NodeScale empty = ScaleOf(Cluster({}));
  EXPECT_EQ(empty.max_cpu_milli, 1);
  EXPECT_EQ(empty.max_gpu_milli, 1);
  NodeScale cpu_only = ScaleOf(Cluster({Node("a", 16000, "T4", 0)}));
  EXPECT_EQ(cpu_only.max_cpu_milli, 16000);
  EXPECT_EQ(cpu_only.max_gpu_milli, 1);
}

TEST(PolicyNamesTest, TheFgdBaselinesAndTessera) {
  std::set<std::string> names(PolicyNames().begin(), PolicyNames().end());
  EXPECT_EQ(names, (std::set<std::string>{"random", "bestfit", "dotprod", "gpupacking",
                                          "gpuclustering", "fgd", "tessera"}));
  EXPECT_EQ(names.size(), PolicyNames().size());  // no duplicates
}

TEST(MakeProfileTest, EveryPolicyBuilds) {
  std::vector<TaskRequest> workload = Workload();
  FragmentationModel model(FindTypicalTasks(workload));
  PolicyContext context{NodeScale{}, &model};
  for (const std::string& name : PolicyNames()) {
    SCOPED_TRACE(name);
    StatusOr<Profile> p = MakeProfile(name, context);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    EXPECT_EQ(p->name, name);
    ASSERT_EQ(p->filters.size(), 3U);
    EXPECT_EQ(p->filters[0]->name(), "resource-fit");
    EXPECT_EQ(p->filters[1]->name(), "gpu-fit");
    EXPECT_EQ(p->filters[2]->name(), "gpu-locality");
    // The paper's baselines are one scorer each; tessera adds GPU locality, weighted
    // to outrank any difference of its own score.
    ASSERT_EQ(p->scorers.size(), name == "tessera" ? 2U : 1U);
    EXPECT_EQ(p->scorers[0].plugin->name(), name);
    EXPECT_EQ(p->scorers[0].weight, 1);
    if (name == "tessera") {
      EXPECT_EQ(p->scorers[1].plugin->name(), "gpu-locality");
      EXPECT_EQ(p->scorers[1].weight, 2000);
    }
    if (name == "random") {
      EXPECT_EQ(p->gpu_selection, GpuSelection::kRandom);
      EXPECT_EQ(p->tie_break, TieBreak::kRandom);
    } else {
      EXPECT_EQ(p->gpu_selection, GpuSelection::kBestFit);
      EXPECT_FALSE(p->tie_break.has_value());
    }
  }
}

// Every policy's GPU pick (a scorer's or the selection's) keeps a tenant's share off a
// single-user MPS GPU that serves another tenant, and says why when nothing else is free.
TEST(MakeProfileTest, EveryPolicyKeepsTenantsApartOnSingleUserMps) {
  std::vector<TaskRequest> workload = Workload();
  FragmentationModel model(FindTypicalTasks(workload));
  PolicyContext context{NodeScale{}, &model};
  NodeSpec spec = Node("n", 64000, "A100-80GB", 2);
  spec.labels = {{"mps", "on"}};
  for (const std::string& name : PolicyNames()) {
    SCOPED_TRACE(name);
    StatusOr<Profile> p = MakeProfile(name, context);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    ClusterState state = Cluster({spec});
    // Tenant 1 holds 0.75 of GPU 0: best fit would put another 0.25 beside it.
    auto of_tenant_1 = [](int gpu, int64_t milli) {
      return Allocation{NodeId(0), MilliCpu(1000), MiB(0), {{gpu, MilliGpu(milli), MiB(0)}}, 1};
    };
    ASSERT_TRUE(state.Allocate(of_tenant_1(0, 750)).ok());
    Placer placer(std::move(p).value());
    Pcg32 rng(3);
    TaskRequest other = Request(1000, 1, 250);
    other.identity = 2;
    Placement first = placer.Place(state, other, rng);
    ASSERT_TRUE(first.placed);
    ASSERT_EQ(first.allocation.gpus.size(), 1U);
    EXPECT_EQ(first.allocation.gpus[0].gpu, 1);
    EXPECT_EQ(first.allocation.identity, 2U);
    // With GPU 1 taken by tenant 1 too, tenant 2 waits, and the reason says why.
    ASSERT_TRUE(state.Allocate(of_tenant_1(1, 250)).ok());
    Placement second = placer.Place(state, other, rng, PlaceOptions{true});
    EXPECT_FALSE(second.placed);
    EXPECT_TRUE(second.busy_nodes_exist);  // not now: preemption could help
    ASSERT_EQ(second.reasons.size(), 1U);
    EXPECT_NE(second.reasons[0].first.find("another tenant's shares"), std::string::npos)
        << second.reasons[0].first;
    TaskRequest same = other;
    same.identity = 1;
    EXPECT_TRUE(placer.Place(state, same, rng).placed);
  }
}

TEST(MakeProfileTest, FragmentationPoliciesNeedTypicalTasks) {
  PolicyContext context;  // no fragmentation model
  for (const std::string& name : PolicyNames()) {
    StatusOr<Profile> p = MakeProfile(name, context);
    if (name == "fgd" || name == "tessera") {
      ASSERT_FALSE(p.ok()) << name;
      EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument) << name;
      EXPECT_NE(p.status().message().find(name), std::string::npos) << p.status().message();
    } else {
      EXPECT_TRUE(p.ok()) << name << ": " << p.status().ToString();
    }
  }
}

TEST(MakeProfileTest, UnknownPolicyListsTheKnownOnes) {
  StatusOr<Profile> p = MakeProfile("roundrobin", PolicyContext{});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  const std::string msg = p.status().message();
  EXPECT_NE(msg.find("roundrobin"), std::string::npos) << msg;
  for (const std::string& name : PolicyNames()) {
    EXPECT_NE(msg.find(name), std::string::npos) << name << " missing from: " << msg;
  }
  EXPECT_FALSE(MakeProfile("", PolicyContext{}).ok());
  EXPECT_FALSE(MakeProfile("FGD", PolicyContext{}).ok());  // names are case-sensitive
}

TEST(MakeProfileTest, ScorersUseTheContextScale) {
  // bestfit with the scale of a 2-GPU, 16-core cluster: an empty 2-GPU node taking one
  // GPU and 8 cores scores (1 - (0.5 * 0.5 + 0.5 * 0.5)) * 100 = 50.
  ClusterState s = Cluster({Node("a", 16000, "T4", 2)});
  StatusOr<Profile> p = MakeProfile("bestfit", PolicyContext{ScaleOf(s), nullptr});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->scorers[0].plugin->Score(s.node(NodeId(0)), Request(8000, 1, 1000)).score, 50);
}

TEST(MakeProfileTest, FiltersRejectWhatCannotFit) {
  ClusterState s = Cluster({Node("small", 4000, "T4", 1), Node("t4", 32000, "T4", 4),
                            Node("excl", 32000, "A10", 2, SharingMode::kExclusive)});
  StatusOr<Profile> p = MakeProfile("bestfit", PolicyContext{ScaleOf(s), nullptr});
  ASSERT_TRUE(p.ok());
  Placer placer(std::move(p).value());
  EXPECT_EQ(placer.Check(s.node(NodeId(0)), Request(8000, 1, 500)).code, FilterCode::kUnresolvable);
  EXPECT_EQ(placer.Check(s.node(NodeId(2)), Request(1000, 1, 500)).code,
            FilterCode::kUnresolvable);  // shares on exclusive GPUs
  EXPECT_TRUE(placer.Check(s.node(NodeId(1)), Request(8000, 1, 500)).fits());
  TaskRequest local = Request(1000, 2, 1000);
  local.topology = GpuTopology::kRequireLocal;
  EXPECT_TRUE(placer.Check(s.node(NodeId(1)), local).fits());  // one NUMA node
}

// Drains keep new work off a GPU or a whole node, for every policy that needs no
// workload model; grants already there stay and undraining brings the GPU back.
TEST(MakeProfileTest, DrainedGpusAndNodesTakeNoNewWork) {
  ClusterState s = Cluster({Node("a", 32000, "T4", 2), Node("b", 32000, "T4", 1)});
  StatusOr<Profile> p = MakeProfile("bestfit", PolicyContext{ScaleOf(s), nullptr});
  ASSERT_TRUE(p.ok());
  Placer placer(std::move(p).value());
  Pcg32 rng(1);
  ASSERT_TRUE(s.SetGpuDrained(NodeId(0), 0, true).ok());
  ASSERT_TRUE(s.SetNodeDrained(NodeId(1), true).ok());
  EXPECT_FALSE(s.SetGpuDrained(NodeId(0), 2, true).ok());
  EXPECT_FALSE(s.SetNodeDrained(NodeId(7), true).ok());
  // Only node a's GPU 1 is left: one share lands there, a 2-GPU task fits nowhere.
  Placement one = placer.Place(s, Request(1000, 1, 500), rng);
  ASSERT_TRUE(one.placed);
  EXPECT_EQ(one.allocation.node, NodeId(0));
  ASSERT_EQ(one.allocation.gpus.size(), 1U);
  EXPECT_EQ(one.allocation.gpus[0].gpu, 1);
  EXPECT_FALSE(placer.Place(s, Request(1000, 2, 1000), rng).placed);
  EXPECT_EQ(placer.Check(s.node(NodeId(1)), Request(1000)).code, FilterCode::kUnschedulable);
  // A grant of work already running on the drained GPU is still accepted.
  Allocation held{NodeId(0), MilliCpu(1000), MiB(0), {GpuGrant{0, MilliGpu(500), MiB(0)}}};
  EXPECT_TRUE(s.Allocate(held).ok());
  ASSERT_TRUE(s.Release(held).ok());
  ASSERT_TRUE(s.SetGpuDrained(NodeId(0), 0, false).ok());
  ASSERT_TRUE(s.SetNodeDrained(NodeId(1), false).ok());
  EXPECT_TRUE(placer.Place(s, Request(1000, 2, 1000), rng).placed);
  EXPECT_TRUE(placer.Check(s.node(NodeId(1)), Request(1000)).fits());
}

// An Alibaba-like cluster in miniature.
ClusterState OpenbLike() {
  return Cluster({Node("g2-a", 96000, "G2", 8), Node("g2-b", 96000, "G2", 8),
                  Node("t4-a", 104000, "T4", 2), Node("t4-b", 104000, "T4", 2),
                  Node("p100", 16000, "P100", 2), Node("v100", 32000, "V100M16", 4),
                  Node("small", 8000, "V100M16", 1)});
}

// Every policy's Placer, with its caches, decides like a fresh Placer on every state.
TEST(MakeProfilePropertyTest, CachedPlacerEqualsFreshForEveryPolicy) {
  const std::vector<TaskRequest> workload = Workload();
  FragmentationModel model(FindTypicalTasks(workload));
  for (const std::string& name : PolicyNames()) {
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      SCOPED_TRACE(::testing::Message() << name << " seed " << seed);
      ClusterState s = OpenbLike();
      PolicyContext context{ScaleOf(s), &model};
      StatusOr<Profile> profile = MakeProfile(name, context);
      ASSERT_TRUE(profile.ok());
      Placer cached(std::move(profile).value());
      Pcg32 rng(seed);
      std::vector<Allocation> live;
      int placed = 0;
      for (int step = 0; step < 250; ++step) {
        if (!live.empty() && rng.Uniform(4) == 0) {
          size_t k = rng.Uniform(static_cast<uint32_t>(live.size()));
          ASSERT_TRUE(s.Release(live[k]).ok());
          live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
          continue;
        }
        const TaskRequest& r = workload[rng.Uniform(static_cast<uint32_t>(workload.size()))];
        StatusOr<Profile> fresh_profile = MakeProfile(name, context);
        ASSERT_TRUE(fresh_profile.ok());
        Placer fresh(std::move(fresh_profile).value());
        Pcg32 rng_cached(seed * 104729 + static_cast<uint64_t>(step));
        Pcg32 rng_fresh(seed * 104729 + static_cast<uint64_t>(step));
        Placement want = fresh.Place(s, r, rng_fresh);
        Placement got = cached.Place(s, r, rng_cached);
        SCOPED_TRACE(::testing::Message() << "step " << step);
        ASSERT_EQ(got.placed, want.placed);
        ASSERT_EQ(got.allocation, want.allocation);
        ASSERT_EQ(got.score, want.score);
        ASSERT_EQ(got.tied_nodes, want.tied_nodes);
        if (!want.placed) {
          continue;
        }
        ++placed;
        ASSERT_TRUE(s.Allocate(want.allocation).ok()) << "a placement must be applicable";
        live.push_back(want.allocation);
      }
      EXPECT_GT(placed, 100);
    }
  }
}

}  // namespace
}  // namespace tessera
