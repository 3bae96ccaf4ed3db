// What the scheduler learned, to and from the store (scheduler_memory.h): each of the
// three values round-trips, unreadable ones are left out, and Save writes at most every
// interval and only what changed (the core session's own tests: core_session_test.cc).
#include "server/scheduler_memory.h"

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "sched/testing/scheduler_harness.h"
#include "server/job_rows.h"
#include "server/job_table.h"
#include "server/modules/eta_module.h"
#include "server/node_registry.h"
#include "server/testing/core_sessions.h"
#include "server/views/metrics_views.h"

namespace tessera {
namespace scheduler_memory_test {

constexpr Micros kSecond = 1'000'000;
constexpr Micros kInterval = 60 * kSecond;

QueueUsage::Saved SomeUsage() {
  QueueUsage::Saved saved;
  saved.at = 5 * kSecond;
  saved.decayed = {{"team-a", 1234.5}, {"team-b", 0.1}};
  saved.users = {{"team-a", "alice", 1000.25}, {"team-a", "bob", 234.25}};
  return saved;
}

// The batch's keys, in order.
std::vector<std::string> Keys(const WriteBatch& batch) {
  std::vector<std::string> keys;
  for (const auto& kv : batch.kv) {
    keys.push_back(kv.first);
  }
  return keys;
}

void ExpectSameUsage(const QueueUsage::Saved& a, const QueueUsage::Saved& b) {
  EXPECT_EQ(a.at, b.at);
  EXPECT_EQ(a.decayed, b.decayed);
  ASSERT_EQ(a.users.size(), b.users.size());
  for (size_t i = 0; i < a.users.size(); ++i) {
    EXPECT_EQ(a.users[i].queue, b.users[i].queue);
    EXPECT_EQ(a.users[i].user, b.users[i].user);
    EXPECT_EQ(a.users[i].decayed, b.users[i].decayed);
  }
}

void ExpectSamePredictor(const RuntimePredictor::State& a, const RuntimePredictor::State& b) {
  EXPECT_EQ(a.observations, b.observations);
  ASSERT_EQ(a.histograms.size(), b.histograms.size());
  for (size_t i = 0; i < a.histograms.size(); ++i) {
    EXPECT_EQ(a.histograms[i].key, b.histograms[i].key);
    EXPECT_EQ(a.histograms[i].epoch, b.histograms[i].epoch);
    EXPECT_EQ(a.histograms[i].total, b.histograms[i].total);
    EXPECT_EQ(a.histograms[i].bins, b.histograms[i].bins);
  }
}

void ExpectSameWorkload(const WorkloadLearner::Saved& a, const WorkloadLearner::Saved& b) {
  EXPECT_EQ(a.observed, b.observed);
  ASSERT_EQ(a.shapes.size(), b.shapes.size());
  for (size_t i = 0; i < a.shapes.size(); ++i) {
    const WorkloadLearner::Shape& x = a.shapes[i];
    const WorkloadLearner::Shape& y = b.shapes[i];
    EXPECT_EQ(std::tie(x.cpu, x.gpu_milli, x.gpu_count, x.models, x.weight, x.memory_weighted),
              std::tie(y.cpu, y.gpu_milli, y.gpu_count, y.models, y.weight, y.memory_weighted));
  }
}

TEST(SchedulerMemoryTest, SaveThenLoadRoundTripsUsagePredictorAndWorkload) {
  InMemoryStore store;
  CoreSession before = testing::BestFitSession();
  SchedulerMemory memory(kInterval);
  memory.Load(store, before, 0);  // an empty store: nothing restored
  EXPECT_FALSE(before.carried_usage().has_value());
  before.carried_usage() = SomeUsage();
  testing::TeachSomeWork(before);
  WriteBatch batch;
  memory.Save(kInterval, before, batch);
  EXPECT_EQ(Keys(batch), (std::vector<std::string>{SchedulerMemory::kFairShareKey,
                                                   SchedulerMemory::kPredictorKey,
                                                   SchedulerMemory::kWorkloadKey}));
  ASSERT_TRUE(store.Commit(std::move(batch)).ok());

  CoreSession after = testing::BestFitSession();
  SchedulerMemory restarted(kInterval);
  restarted.Load(store, after, 2 * kInterval);
  ASSERT_TRUE(after.carried_usage().has_value());
  ExpectSameUsage(*after.carried_usage(), SomeUsage());
  ASSERT_GT(before.predictor().observations(), 0);
  ExpectSamePredictor(after.predictor().Save(), before.predictor().Save());
  ASSERT_FALSE(before.learner().Save().shapes.empty());
  ExpectSameWorkload(after.learner().Save(), before.learner().Save());
  EXPECT_NE(after.learner().model(), nullptr);  // made at once, for the first scheduler

  // What was read back is not written again until it changes.
  WriteBatch again;
  restarted.Save(3 * kInterval, after, again);
  EXPECT_EQ(Keys(again), (std::vector<std::string>{SchedulerMemory::kFairShareKey}));
}

TEST(SchedulerMemoryTest, AnUnreadableValueIsLeftOutAndTheOthersStillLoad) {
  InMemoryStore store;
  CoreSession taught = testing::BestFitSession();
  testing::TeachSomeWork(taught);
  WriteBatch batch;
  batch.kv.emplace_back(SchedulerMemory::kFairShareKey, "{not json");
  batch.kv.emplace_back(SchedulerMemory::kPredictorKey, R"({"observations":3})");
  batch.kv.emplace_back(SchedulerMemory::kWorkloadKey,
                        scheduler_memory::WorkloadJson(taught.learner().Save()).dump());
  ASSERT_TRUE(store.Commit(std::move(batch)).ok());
  CoreSession core = testing::BestFitSession();
  SchedulerMemory(kInterval).Load(store, core, 0);
  EXPECT_FALSE(core.carried_usage().has_value());
  EXPECT_EQ(core.predictor().observations(), 0);
  ExpectSameWorkload(core.learner().Save(), taught.learner().Save());

  // Well-formed but refused by the learner (a negative weight): left out too.
  WriteBatch refused;
  refused.kv.emplace_back(SchedulerMemory::kWorkloadKey,
                          R"({"observed":3,"shapes_cpu_milli_gpus_models_weight_memory":)"
                          R"([[1000,1000,1,0,-1.0,0]]})");
  ASSERT_TRUE(store.Commit(std::move(refused)).ok());
  CoreSession other = testing::BestFitSession();
  SchedulerMemory(kInterval).Load(store, other, 0);
  EXPECT_EQ(other.learner().observed(), 0);
}

TEST(SchedulerMemoryTest, SaveWritesNothingBeforeTheInterval) {
  InMemoryStore store;
  CoreSession core = testing::BestFitSession();
  SchedulerMemory memory(kInterval);
  memory.Load(store, core, 10 * kSecond);
  core.carried_usage() = SomeUsage();
  testing::TeachSomeWork(core);
  WriteBatch early;
  memory.Save(10 * kSecond + kInterval - 1, core, early);
  EXPECT_TRUE(early.kv.empty());
  WriteBatch due;
  memory.Save(10 * kSecond + kInterval, core, due);
  EXPECT_EQ(due.kv.size(), 3u);
  WriteBatch soon;
  memory.Save(10 * kSecond + kInterval + kSecond, core, soon);  // the interval starts again
  EXPECT_TRUE(soon.kv.empty());
}

TEST(SchedulerMemoryTest, AnUnchangedPredictorOrLearnerIsNotWrittenAgain) {
  InMemoryStore store;
  CoreSession core = testing::BestFitSession();
  SchedulerMemory memory(kInterval);
  memory.Load(store, core, 0);
  testing::TeachSomeWork(core);
  WriteBatch first;
  memory.Save(kInterval, core, first);
  EXPECT_EQ(Keys(first), (std::vector<std::string>{SchedulerMemory::kPredictorKey,
                                                   SchedulerMemory::kWorkloadKey}));
  WriteBatch unchanged;
  memory.Save(2 * kInterval, core, unchanged);
  EXPECT_TRUE(unchanged.kv.empty());

  TaskRequest t;
  t.cpu = MilliCpu(1000);
  core.learner().Observe(t);  // the learner only
  WriteBatch learner_only;
  memory.Save(3 * kInterval, core, learner_only);
  EXPECT_EQ(Keys(learner_only), (std::vector<std::string>{SchedulerMemory::kWorkloadKey}));
}

TEST(SchedulerMemoryTest, TheCodecsRefuseMalformedValues) {
  const nlohmann::json empty = nlohmann::json::object();
  EXPECT_EQ(scheduler_memory::UsageFromJson(empty).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(scheduler_memory::PredictorFromJson(empty).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(scheduler_memory::WorkloadFromJson(empty).status().code(),
            StatusCode::kInvalidArgument);
  nlohmann::json negative = scheduler_memory::UsageJson(SomeUsage());
  negative["decayed_milli_gpu_seconds"]["team-a"] = -1;
  EXPECT_EQ(scheduler_memory::UsageFromJson(negative).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(SchedulerMemoryTest, FairShareIsNullBeforeTheFirstScheduler) {
  EXPECT_TRUE(FairShareJson(testing::BestFitSession(), QueueId(0)).is_null());
}

}  // namespace scheduler_memory_test
}  // namespace tessera
