#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "base/rng.h"
#include "model/node.h"
#include "plugins/fgd.h"
#include "plugins/registry.h"
#include "plugins/tessera_scorer.h"
#include "plugins/testing/fgd_testing.h"
#include "plugins/workload_learner.h"
#include "sched/placer.h"
#include "state/cluster_state.h"
#include "state/node_ledger.h"
#include "state/testing/test_cluster.h"

namespace tessera {
// Named, not anonymous: its helpers would meet tessera_scorer_test.cc's in a unity batch.
namespace tessera_scarcity_test {

using ::tessera::testing::ModelOf;
using ::tessera::testing::Request;
using ::tessera::testing::TestNode;

TaskRequest ShareReq(int64_t cpu, int64_t milli) { return Request(cpu, 1, milli); }
TaskRequest WholeReq(int64_t cpu, int count) { return Request(cpu, count, 1000); }

TypicalTask Typical(int64_t cpu, int64_t milli, int count, int64_t weight) {
  TypicalTask t;
  t.cpu = MilliCpu(cpu);
  t.gpu_milli = MilliGpu(milli);
  t.gpu_count = count;
  t.count = weight;
  return t;
}

GpuModelId ModelA() { return ::tessera::testing::Model("T4"); }
GpuModelId ModelB() { return ::tessera::testing::Model("V100M16"); }

// ---------------------------------------------------------------------------------
// Scarcity: a model's pressure, the share of GPU demand pinned to it over its share of
// the cluster's GPUs (capped at 1), and what a placement there costs.

TypicalTask PinnedTo(TypicalTask t, std::initializer_list<GpuModelId> models) {
  for (GpuModelId m : models) {
    t.models.Add(m);
  }
  return t;
}

TesseraScorer::ModelGpus Supply(int64_t a, int64_t b) {
  TesseraScorer::ModelGpus gpus{};
  gpus[ModelA().value()] = a;
  gpus[ModelB().value()] = b;
  return gpus;
}

TEST(TesseraScarcityTest, PressureHandComputed) {
  // Demand 6 x 1000 unpinned, 4 x 1000 on B, 2 x 2 x 500 on A or B: 12000. A has 8
  // of 12 GPUs. The A-or-B task's 2000 spreads 8:4 over A and B: A 1333, B 667. B:
  // (4000 + 667) / 12000 over 4 / 12 = 1.17, capped at 1; A: 1333 / 12000 over 8 / 12
  // = 1/6.
  FragmentationModel m =
      ModelOf({Typical(8000, 1000, 1, 6), PinnedTo(Typical(8000, 1000, 1, 4), {ModelB()}),
               PinnedTo(Typical(8000, 500, 2, 2), {ModelA(), ModelB()})});
  TesseraScorer s(&m, Supply(8, 4));
  EXPECT_DOUBLE_EQ(s.pressure(ModelB()), 1.0);
  EXPECT_DOUBLE_EQ(s.pressure(ModelA()), 1.0 / 6);
  EXPECT_EQ(s.pressure(::tessera::testing::Model("A10")), 0.0);  // no GPUs in the cluster
  // Without the cluster's supply there is no pressure.
  TesseraScorer blind(&m);
  EXPECT_EQ(blind.pressure(ModelB()), 0.0);
}

TEST(TesseraScarcityTest, PinsInProportionToSupplyPressEveryModelAlike) {
  // 3 x 1000 on B and 6 x 1000 on A, of 18 x 1000: A 6/18 over 8/12 = 0.5, B 3/18 over
  // 4/12 = 0.5. Nothing is scarcer than anything else: no placement costs anything.
  FragmentationModel m =
      ModelOf({Typical(8000, 1000, 1, 9), PinnedTo(Typical(8000, 1000, 1, 3), {ModelB()}),
               PinnedTo(Typical(8000, 1000, 1, 6), {ModelA()})});
  TesseraScorer s(&m, Supply(8, 4));
  EXPECT_DOUBLE_EQ(s.pressure(ModelA()), 0.5);
  EXPECT_DOUBLE_EQ(s.pressure(ModelB()), 0.5);
  TestNode b(
      MakeUniformNode("b", MilliCpu(64000), MiB(1 << 18), ModelB(), 4, SharingMode::kShared));
  EXPECT_EQ(s.ScarcityWeight(b.ledger, WholeReq(1000, 1)), 0.0);
}

// What the pinned tasks cannot use costs nothing: with 3 x (8000 CPU, 1 GPU) pinned to
// B (pressure 1), a 300-milli share on a B GPU with 300 left takes nothing they could
// use and scores as without scarcity; on a free GPU it takes 300 they could.
TEST(TesseraScarcityTest, FillingALeftoverPinnedTasksCannotUseIsFree) {
  FragmentationModel m =
      ModelOf({Typical(8000, 1000, 1, 6), PinnedTo(Typical(8000, 1000, 1, 3), {ModelB()})});
  TesseraScorer s(&m, Supply(8, 4));
  TesseraScorer blind(&m);
  ASSERT_DOUBLE_EQ(s.pressure(ModelB()), 1.0);
  const NodeSpec spec =
      MakeUniformNode("b", MilliCpu(64000), MiB(1 << 18), ModelB(), 2, SharingMode::kShared);
  TestNode leftover(spec);
  leftover.Share(0, 700);
  leftover.Occupy({1});
  EXPECT_EQ(s.Score(leftover.ledger, ShareReq(1000, 300)).score,
            blind.Score(leftover.ledger, ShareReq(1000, 300)).score);
  TestNode free_gpus(spec);
  EXPECT_LT(s.Score(free_gpus.ledger, ShareReq(1000, 300)).score,
            blind.Score(free_gpus.ledger, ShareReq(1000, 300)).score);
}

// Typical tasks: 6 x (8000 CPU, 1 GPU) of any model and 3 more pinned as `pins` says.
// Two 4-GPU A nodes with 64 cores and one 4-GPU B node "b" with 28, which feeds 3.5 of
// its 4 GPUs at 8 cores a GPU (500 milli stranded). A one-core whole GPU on b leaves
// none stranded (3000 - 27000 / 8 < 0): gain 500, level 62; on an A node nothing
// changes: level 50. So b is the better node, unless B's GPUs are wanted by pinned
// demand.
class TesseraScarcityPlacementTest : public ::testing::Test {
 protected:
  enum class Pins { kNone, kOnB, kOnA };

  static FragmentationModel Workload(Pins pins) {
    TypicalTask pinned = Typical(8000, 1000, 1, 3);
    if (pins != Pins::kNone) {
      pinned.models.Add(pins == Pins::kOnB ? ModelB() : ModelA());
    }
    return ModelOf({Typical(8000, 1000, 1, 6), pinned});
  }

  static ClusterState Cluster(bool b_first) {
    auto node = [](std::string name, GpuModelId model, int64_t cpu) {
      return MakeUniformNode(std::move(name), MilliCpu(cpu), MiB(1 << 18), model, 4,
                             SharingMode::kShared);
    };
    std::vector<NodeSpec> nodes = {node("a1", ModelA(), 64000), node("a2", ModelA(), 64000)};
    nodes.insert(b_first ? nodes.begin() : nodes.end(), node("b", ModelB(), 28000));
    return ::tessera::testing::Cluster(std::move(nodes));
  }

  // The node tessera picks for `r` in both node orders ("" if they differ), and its
  // score (locality included).
  static std::string Pick(Pins pins, const TaskRequest& r, int64_t* score) {
    FragmentationModel model = Workload(pins);
    std::string names[2];
    for (int order = 0; order < 2; ++order) {
      ClusterState state = Cluster(order == 0);
      StatusOr<Profile> p = MakeProfile("tessera", PolicyContext{ScaleOf(state), &model});
      EXPECT_TRUE(p.ok()) << p.status().ToString();
      Placer placer(std::move(p).value());
      Pcg32 rng(5);
      Placement placed = placer.Place(state, r, rng);
      EXPECT_TRUE(placed.placed);
      names[order] = placed.placed ? state.spec(placed.allocation.node).name : "";
      *score = placed.score;
    }
    return names[0] == names[1] ? names[0] : "";
  }
};

TEST_F(TesseraScarcityPlacementTest, UnpinnedTaskIsSteeredOffTheModelPinnedDemandNeeds) {
  // 3 of 9 GPUs of demand on B, which has 4 of 12 GPUs: pressure 1, A's 0, the mean
  // by GPUs 1/3. On b the GPU the pinned tasks could use costs 1000 x (1 - 1/3): gain
  // 500 - 667 = -167, level 45 < 50 on an A node (key 50 * 16 + 10, locality 3 x 2000).
  int64_t score = 0;
  EXPECT_EQ(Pick(Pins::kOnB, WholeReq(1000, 1), &score), "a1");
  EXPECT_EQ(score, 810 + 6000);
}

TEST_F(TesseraScarcityPlacementTest, NotSteeredWhenNothingIsPinnedThere) {
  // No pins: b, level 62 (key 62 * 16 + 10).
  int64_t score = 0;
  EXPECT_EQ(Pick(Pins::kNone, WholeReq(1000, 1), &score), "b");
  EXPECT_EQ(score, 1002 + 6000);
  // Pins on A only: A's pressure is 3/9 over 8/12 = 0.5, B's 0, below the mean (1/3);
  // b costs nothing and keeps its level.
  EXPECT_EQ(Pick(Pins::kOnA, WholeReq(1000, 1), &score), "b");
  EXPECT_EQ(score, 1002 + 6000);
}

TEST_F(TesseraScarcityPlacementTest, TaskPinnedToTheScarceModelPaysNothingThere) {
  // A task that may run only on B: B's pressure is the mean of the models it may
  // use, so b keeps level 62.
  TaskRequest r = WholeReq(1000, 1);
  r.models.Add(ModelB());
  int64_t score = 0;
  EXPECT_EQ(Pick(Pins::kOnB, r, &score), "b");
  EXPECT_EQ(score, 1002 + 6000);
}

// ---------------------------------------------------------------------------------
// Pressure from every task, not only the typical ones.

// 72 one-GPU tasks of any model, 24 pinned to A, 4 pinned to B; A has 24 GPUs, B 4.
// The pins follow supply (A 24 : B 4), so each model's pressure is 0.28: A 24000 /
// 100000 over 24 / 28, B 4000 / 100000 over 4 / 28. The typical tasks (95 % of the
// tasks) are the first two shapes only: from them B's pressure would read 0 and A's
// 24 / 96 over 24 / 28 = 0.29, above the mean, and every placement on A would pay.
std::vector<TaskRequest> ProportionalPins() {
  std::vector<TaskRequest> requests;
  auto add = [&](int n, std::initializer_list<GpuModelId> models) {
    for (int i = 0; i < n; ++i) {
      TaskRequest r = WholeReq(4000, 1);
      for (GpuModelId m : models) {
        r.models.Add(m);
      }
      requests.push_back(r);
    }
  };
  add(72, {});
  add(24, {ModelA()});
  add(4, {ModelB()});
  return requests;
}

TEST(TesseraScarcityDemandTest, FindTypicalTasksKeepsEveryTasksDemandByModels) {
  std::vector<TaskRequest> requests = ProportionalPins();
  requests.push_back(Request(2000));           // CPU only: no GPU demand
  requests.push_back(Request(1000, 2, 1000));  // two whole GPUs, any model
  TypicalWorkload w = FindTypicalTasks(requests);
  ASSERT_EQ(w.gpu_demand.size(), 3U);
  double any = 0;
  double on_a = 0;
  double on_b = 0;
  for (const ModelDemand& d : w.gpu_demand) {
    (d.models.empty() ? any : d.models.Contains(ModelA()) ? on_a : on_b) += d.milli;
  }
  EXPECT_EQ(any, 74000.0);
  EXPECT_EQ(on_a, 24000.0);
  EXPECT_EQ(on_b, 4000.0);
}

TEST(TesseraScarcityDemandTest, PressureCountsShapesTooRareToBeTypical) {
  FragmentationModel m(FindTypicalTasks(ProportionalPins()));
  ASSERT_EQ(m.workload().tasks.size(), 2U);  // B's 4 of 100 are not typical
  TesseraScorer::ModelGpus gpus{};
  gpus[ModelA().value()] = 24;
  gpus[ModelB().value()] = 4;
  TesseraScorer s(&m, gpus);
  EXPECT_DOUBLE_EQ(s.pressure(ModelA()), 0.28);
  EXPECT_DOUBLE_EQ(s.pressure(ModelB()), 0.28);
  TestNode a(
      MakeUniformNode("a", MilliCpu(64000), MiB(1 << 18), ModelA(), 4, SharingMode::kShared));
  EXPECT_EQ(s.ScarcityWeight(a.ledger, WholeReq(1000, 1)), 0.0);
}

TEST(TesseraScarcityDemandTest, LearnerKeepsEveryShapesDemandByModels) {
  WorkloadLearner learner;
  for (const TaskRequest& r : ProportionalPins()) {
    learner.Observe(r);
  }
  ASSERT_TRUE(learner.Refresh());
  const TypicalWorkload& w = learner.model()->workload();
  double all = 0;
  double on_b = 0;
  for (const ModelDemand& d : w.gpu_demand) {
    all += d.milli;
    on_b += d.models.Contains(ModelB()) ? d.milli : 0;
  }
  // Shares of the decayed weights, in the learner's count units: B's 4 of 100 tasks.
  EXPECT_NEAR(on_b / all, 0.04, 0.005);
}

}  // namespace tessera_scarcity_test
}  // namespace tessera
