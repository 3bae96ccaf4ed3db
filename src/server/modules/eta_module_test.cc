// EtaModule without a controller: the core's snapshot is a scheduler harness copied by
// the test (one 8-GPU node, a running job and a pending one), the cycle count and the
// published tables are the test's. Runtimes are learned only from succeeded jobs; the
// refresh runs only after a new cycle; the facade's table goes out via the callback.
#include "server/modules/eta_module.h"

#include <gtest/gtest.h>

#include <memory>
#include <utility>
#include <vector>

#include "model/gpu_catalog.h"
#include "sched/testing/scheduler_harness.h"

namespace tessera {
namespace {

constexpr Micros kEtaModuleMinute = 60'000'000;
constexpr uint64_t kEtaRunningId = 101, kEtaPendingId = 102;  // the core's job numbers

class EtaModuleTest : public ::testing::Test {
 protected:
  EtaModuleTest()
      : harness_({testing::GpuNode("n0")}, testing::OneQueue(), SchedulerOptions{}),
        eta_(Options(), Wiring()) {
    running_ = harness_.Submit(testing::Gang("train", "q", {8}), 0);
    harness_.Cycle(0);
    pending_ = harness_.Submit(testing::Gang("train", "q", {8}), 0);
    harness_.Cycle(0);
  }

  static EtaModule::Options Options() {
    EtaModule::Options o;
    o.horizon = 7 * 24 * 60 * kEtaModuleMinute;
    o.max_cycles = 1000;
    o.overdue_floor = 30'000'000;
    o.overdue_factor = 0.5;
    o.stop_grace = 30'000'000;
    return o;
  }
  EtaModule::Core Wiring() {
    return EtaModule::Core{[this](EtaSnapshot& snap) { return Snapshot(snap); },
                           [this](std::shared_ptr<const EtaTable> t) {
                             published_.push_back(std::move(t));
                           },
                           [this] { return cycles_; }};
  }
  // The harness as the core would copy it at time 0.
  bool Snapshot(EtaSnapshot& snap) {
    ++snapshots_;
    if (!core_built_) {
      return false;
    }
    snap.in.now = 0;
    snap.in.tree = std::make_shared<const QueueTree>(
        QueueTree::Create(testing::OneQueue(), GpuCatalog::Default()).value());
    snap.in.state = harness_.state();
    snap.in.policy.name = snap.in.policy.job_order = "fifo";
    for (const JobRecord& rec : harness_.jobs()) {
      snap.in.jobs.push_back(ForecastJob{rec, 0});
      snap.ids.push_back(JobNumber(rec.id == running_ ? kEtaRunningId : kEtaPendingId));
      if (core_prediction > 0) {
        snap.core_predicted.push_back(core_prediction);
      }
    }
    snap.gated.emplace(103, "held");
    return true;
  }
  // A job like both of the harness's, ended after `ran`.
  void Ended(JobEnd end, Micros ran, LifecycleEvent::Kind kind = LifecycleEvent::Kind::kFinished) {
    LifecycleEvent e;
    e.kind = kind;
    e.end = end;
    e.ran = ran;
    const QueueTree tree = QueueTree::Create(testing::OneQueue(), GpuCatalog::Default()).value();
    eta_.OnJobEvent(harness_.job(pending_), e, tree);
  }
  // The pending job's ETA in a fresh forecast.
  std::optional<Micros> PendingEta() {
    auto table = eta_.ForecastEtas(EtaRuntimes::kPredicted);
    EXPECT_TRUE(table.ok()) << table.status().ToString();
    if (!table.ok() || *table == nullptr || (*table)->jobs.count(kEtaPendingId) == 0) {
      ADD_FAILURE() << "no forecast of the pending job";
      return std::nullopt;
    }
    return (*table)->jobs.at(kEtaPendingId).eta;
  }

  testing::Harness harness_;
  JobId running_, pending_;
  bool core_built_ = true;
  Micros core_prediction = 0;  // > 0: the core's policy predicts, and says this
  uint64_t cycles_ = 0;
  int snapshots_ = 0;
  std::vector<std::shared_ptr<const EtaTable>> published_;
  EtaModule eta_;
};

TEST_F(EtaModuleTest, RuntimesAreLearnedOnlyFromJobsThatSucceededAfterRunning) {
  // Nothing learned, no limit: an hour each, so the pending job starts in an hour.
  EXPECT_EQ(PendingEta(), 60 * kEtaModuleMinute);
  for (int i = 0; i < 20; ++i) {
    Ended(JobEnd::kFailed, 10 * kEtaModuleMinute);
    Ended(JobEnd::kCancelled, 10 * kEtaModuleMinute);
    Ended(JobEnd::kSucceeded, 0);  // never ran
    Ended(JobEnd::kSucceeded, 10 * kEtaModuleMinute, LifecycleEvent::Kind::kRequeued);
  }
  EXPECT_EQ(PendingEta(), 60 * kEtaModuleMinute) << "learned from a job that did not succeed";
  for (int i = 0; i < 20; ++i) {
    Ended(JobEnd::kSucceeded, 10 * kEtaModuleMinute);
  }
  const std::optional<Micros> learned = PendingEta();
  ASSERT_TRUE(learned.has_value());
  EXPECT_GT(*learned, 8 * kEtaModuleMinute);
  EXPECT_LT(*learned, 12 * kEtaModuleMinute);
}

TEST_F(EtaModuleTest, UnderAPolicyThatPredictsTheCoresEstimatesAreUsedAndNothingIsLearned) {
  eta_.UseCorePredictor(true);
  core_prediction = 20 * kEtaModuleMinute;
  for (int i = 0; i < 20; ++i) {
    Ended(JobEnd::kSucceeded, 10 * kEtaModuleMinute);
  }
  EXPECT_EQ(PendingEta(), 20 * kEtaModuleMinute);
  core_prediction = 0;  // the module's own predictor answers: it learned nothing
  EXPECT_EQ(PendingEta(), 60 * kEtaModuleMinute);
}

TEST_F(EtaModuleTest, TheBackgroundRefreshRunsOnlyAfterANewCycle) {
  eta_.RefreshIfCycled();
  EXPECT_EQ(snapshots_, 0) << "no cycle has run yet";
  cycles_ = 1;
  eta_.RefreshIfCycled();
  EXPECT_EQ(snapshots_, 1);
  EXPECT_EQ(published_.size(), 1u);
  eta_.RefreshIfCycled();
  eta_.RefreshIfCycled();
  EXPECT_EQ(snapshots_, 1) << "refreshed without a new cycle";
  cycles_ = 3;
  eta_.RefreshIfCycled();
  EXPECT_EQ(snapshots_, 2);
  EXPECT_EQ(published_.size(), 2u);
}

TEST_F(EtaModuleTest, TheRefreshedTableIsPublishedThroughTheCallback) {
  auto table = eta_.RefreshEtas();
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  ASSERT_NE(*table, nullptr);
  ASSERT_EQ(published_.size(), 1u);
  EXPECT_EQ(published_[0], *table);
  EXPECT_EQ((*table)->pending, 1);
  // The forecast's indices are mapped back to the core's job numbers.
  ASSERT_EQ((*table)->jobs.count(kEtaPendingId), 1u);
  EXPECT_EQ((*table)->jobs.at(kEtaPendingId).position, 1);
  EXPECT_EQ((*table)->gated.at(103), "held");

  // A forecast by the users' limits is an answer, not the views' ETAs.
  auto limits = eta_.ForecastEtas(EtaRuntimes::kUserLimit);
  ASSERT_TRUE(limits.ok() && *limits != nullptr);
  EXPECT_EQ(published_.size(), 1u);

  // Before the core is built: no table, nothing published.
  core_built_ = false;
  auto none = eta_.RefreshEtas();
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, nullptr);
  EXPECT_EQ(published_.size(), 1u);
}

TEST_F(EtaModuleTest, AUsersLimitBoundsTheRuntime) {
  harness_.job(running_).spec.runtime_limit = 25 * kEtaModuleMinute;
  EXPECT_EQ(PendingEta(), 25 * kEtaModuleMinute);  // the prediction (an hour) within it
  auto limits = eta_.ForecastEtas(EtaRuntimes::kUserLimit);
  ASSERT_TRUE(limits.ok() && *limits != nullptr);
  EXPECT_EQ((*limits)->jobs.at(kEtaPendingId).eta, 25 * kEtaModuleMinute);
}

}  // namespace
}  // namespace tessera
