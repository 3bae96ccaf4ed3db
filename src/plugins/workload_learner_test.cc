#include "plugins/workload_learner.h"

#include <gtest/gtest.h>

#include <vector>

#include "plugins/registry.h"

namespace tessera {
namespace {

TaskRequest Task(int64_t cpu_milli, int gpus, int64_t milli, int64_t memory_mib = 1024) {
  TaskRequest t;
  t.cpu = MilliCpu(cpu_milli);
  t.memory = MiB(memory_mib);
  t.gpu_count = gpus;
  t.gpu_milli = MilliGpu(gpus == 0 ? 0 : milli);
  return t;
}

// The share of the learned typical workload that one shape holds.
double ShareOf(const TypicalWorkload& w, int64_t cpu_milli, int gpus, int64_t milli) {
  for (const TypicalTask& t : w.tasks) {
    if (t.cpu.value() == cpu_milli && t.gpu_count == gpus && t.gpu_milli.value() == milli) {
      return static_cast<double>(t.count) / static_cast<double>(w.total);
    }
  }
  return 0;
}

TEST(WorkloadLearnerTest, WithoutDecayItFindsWhatFindTypicalTasksFinds) {
  WorkloadLearner::Options o;
  o.half_life_tasks = 1e12;  // no decay to speak of
  WorkloadLearner learner(o);
  std::vector<TaskRequest> tasks;
  for (int i = 0; i < 60; ++i) tasks.push_back(Task(4000, 1, 1000, 2048));
  for (int i = 0; i < 30; ++i) tasks.push_back(Task(2000, 1, 500, 1024));
  for (int i = 0; i < 8; ++i) tasks.push_back(Task(32000, 8, 1000, 8192));
  for (int i = 0; i < 2; ++i) tasks.push_back(Task(1000, 0, 0));
  for (const TaskRequest& t : tasks) learner.Observe(t);

  const TypicalWorkload want = FindTypicalTasks(tasks);
  const TypicalWorkload got = learner.Typical();
  ASSERT_EQ(got.tasks.size(), want.tasks.size());
  for (size_t i = 0; i < want.tasks.size(); ++i) {
    EXPECT_EQ(got.tasks[i].cpu, want.tasks[i].cpu) << i;
    EXPECT_EQ(got.tasks[i].gpu_count, want.tasks[i].gpu_count) << i;
    EXPECT_EQ(got.tasks[i].gpu_milli, want.tasks[i].gpu_milli) << i;
    EXPECT_EQ(got.tasks[i].memory, want.tasks[i].memory) << i;
    EXPECT_NEAR(static_cast<double>(got.tasks[i].count) / static_cast<double>(got.total),
                static_cast<double>(want.tasks[i].count) / static_cast<double>(want.total), 1e-5);
  }
  // 60 + 30 + 8 = 98 % of the tasks: the CPU-only shape is left out, as there.
  EXPECT_EQ(ShareOf(got, 1000, 0, 0), 0);
}

TEST(WorkloadLearnerTest, OldShapesFadeByHalfEveryHalfLife) {
  WorkloadLearner::Options o;
  o.half_life_tasks = 100;
  o.coverage = 1.0;
  WorkloadLearner learner(o);
  for (int i = 0; i < 1000; ++i) learner.Observe(Task(4000, 1, 1000));
  // Then 100 tasks of another shape: the old one's weight halves (relative to a new
  // task's), so shares are 1/2 * W_old against the geometric sum of the new ones.
  for (int i = 0; i < 100; ++i) learner.Observe(Task(2000, 2, 1000));
  const TypicalWorkload w = learner.Typical();
  // W_old (in units of a task at the switch) = sum_{k>=0} 2^(-k/100) ~ 144.77; after
  // 100 more tasks it is half of that relative to the newest, and the new shape holds
  // sum_{k<100} 2^(-k/100) ~ 72.39: the two are equal.
  EXPECT_NEAR(ShareOf(w, 4000, 1, 1000), 0.5, 0.01);
  EXPECT_NEAR(ShareOf(w, 2000, 2, 1000), 0.5, 0.01);
  for (int i = 0; i < 700; ++i) learner.Observe(Task(2000, 2, 1000));
  EXPECT_LT(ShareOf(learner.Typical(), 4000, 1, 1000), 0.01);
}

TEST(WorkloadLearnerTest, MakesANewModelOnlyWhenTheShapesMoved) {
  WorkloadLearner::Options o;
  o.half_life_tasks = 1e12;
  o.republish_distance = 0.05;
  WorkloadLearner learner(o);
  EXPECT_FALSE(learner.Refresh());
  EXPECT_EQ(learner.model(), nullptr);
  TaskRequest mig = Task(1000, 1, 0);
  mig.mig_profile = "1g.10gb";
  learner.Observe(mig);
  EXPECT_FALSE(learner.Refresh()) << "MIG requests are not part of the model";

  for (int i = 0; i < 100; ++i) learner.Observe(Task(4000, 1, 1000));
  ASSERT_TRUE(learner.Refresh());
  ASSERT_NE(learner.model(), nullptr);
  EXPECT_EQ(learner.models_made(), 1);
  EXPECT_FALSE(learner.Refresh()) << "nothing seen since";
  // 5 other tasks of 105: a distance of 5/105 < 0.05, no new model.
  for (int i = 0; i < 5; ++i) learner.Observe(Task(2000, 1, 500));
  EXPECT_FALSE(learner.Refresh());
  // 6 of 106: 0.0566 > 0.05.
  learner.Observe(Task(2000, 1, 500));
  EXPECT_TRUE(learner.Refresh());
  EXPECT_EQ(learner.models_made(), 2);
  EXPECT_EQ(learner.model()->workload().tasks.size(), 2U);
}

TEST(WorkloadLearnerTest, SaveAndRestoreKeepWhatWasLearned) {
  WorkloadLearner::Options o;
  o.half_life_tasks = 50;
  WorkloadLearner learner(o);
  for (int i = 0; i < 300; ++i) {
    learner.Observe(Task(1000 * (1 + i % 3), 1, i % 2 == 0 ? 1000 : 250, 512 * (1 + i % 4)));
  }
  WorkloadLearner restored(o);
  ASSERT_TRUE(restored.Restore(learner.Save()).ok());
  EXPECT_EQ(restored.observed(), 300);
  const TypicalWorkload a = learner.Typical();
  const TypicalWorkload b = restored.Typical();
  ASSERT_EQ(a.tasks.size(), b.tasks.size());
  for (size_t i = 0; i < a.tasks.size(); ++i) {
    EXPECT_EQ(a.tasks[i].cpu, b.tasks[i].cpu);
    EXPECT_EQ(a.tasks[i].gpu_milli, b.tasks[i].gpu_milli);
    EXPECT_EQ(a.tasks[i].memory, b.tasks[i].memory);
    EXPECT_NEAR(static_cast<double>(a.tasks[i].count), static_cast<double>(b.tasks[i].count), 1);
  }
  EXPECT_TRUE(restored.Refresh()) << "a restored learner makes its model at the next refresh";

  WorkloadLearner::Saved bad;
  bad.shapes.push_back(WorkloadLearner::Shape{1000, 1000, 1, 0, -1.0, 0});
  EXPECT_FALSE(restored.Restore(bad).ok());
}

TEST(WorkloadLearnerTest, WeightsSurviveManyHalfLives) {
  WorkloadLearner::Options o;
  o.half_life_tasks = 1;  // the increment doubles every task: rescaled every ~660 tasks
  WorkloadLearner learner(o);
  for (int i = 0; i < 5000; ++i) learner.Observe(Task(1000, 1, 1000));
  learner.Observe(Task(2000, 1, 1000));
  const TypicalWorkload w = learner.Typical();
  EXPECT_NEAR(ShareOf(w, 2000, 1, 1000), 0.5, 0.01);
  EXPECT_NEAR(ShareOf(w, 1000, 1, 1000), 0.5, 0.01);
}

TEST(WorkloadLearnerTest, LearnedProfileIsBestfitUntilATaskIsSeen) {
  NodeScale scale{};
  StatusOr<Profile> before = MakeLearnedProfile("tessera", scale, nullptr);
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  EXPECT_EQ(before->name, "bestfit");
  WorkloadLearner learner;
  learner.Observe(Task(4000, 1, 1000));
  ASSERT_TRUE(learner.Refresh());
  StatusOr<Profile> after = MakeLearnedProfile("tessera", scale, learner.model());
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(after->name, "tessera");
  EXPECT_TRUE(PlacementNeedsWorkload("fgd"));
  EXPECT_FALSE(PlacementNeedsWorkload("bestfit"));
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

TEST(WorkloadLearnerPruneTest, ShapesUnseenForThirtyHalfLivesAreForgotten) {
  WorkloadLearner::Options o;
  o.half_life_tasks = 100;
  WorkloadLearner learner(o);
  TaskRequest old_shape;
  old_shape.cpu = MilliCpu(3000);
  old_shape.gpu_count = 1;
  old_shape.gpu_milli = MilliGpu(1000);
  learner.Observe(old_shape);
  TaskRequest now_shape = old_shape;
  now_shape.cpu = MilliCpu(1000);
  for (int i = 1; i < 4096; ++i) learner.Observe(now_shape);  // 41 half-lives later
  ASSERT_EQ(learner.observed(), 4096);
  EXPECT_EQ(learner.Save().shapes.size(), 1U) << "the old shape is forgotten";
  // One seen within the last 30 half-lives is kept.
  learner.Observe(old_shape);
  for (int i = 1; i < 4096; ++i) {
    if (i == 2000) learner.Observe(old_shape);
    else learner.Observe(now_shape);
  }
  EXPECT_EQ(learner.Save().shapes.size(), 2U);
}

}  // namespace
}  // namespace tessera
