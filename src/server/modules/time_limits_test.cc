#include "server/modules/time_limits.h"

#include <gtest/gtest.h>

#include <vector>

#include "server/modules/fake_module_step.h"

namespace tessera {
namespace {

constexpr Micros kSec = 1'000'000;

TimeLimits::Attempt LimitedAttempt(uint64_t job, int32_t attempt, Micros start, Micros limit,
                                   int signal = 0, Micros before = 0) {
  return TimeLimits::Attempt{JobNumber(job), attempt, start, limit, signal, before};
}

TEST(TimeLimitsTest, AnAttemptWithoutALimitIsNotWatched) {
  TimeLimits limits;
  limits.Watch(LimitedAttempt(1, 1, 10 * kSec, 0, 10, 5 * kSec));
  EXPECT_EQ(limits.watched(), 0u);
  EXPECT_EQ(limits.next(), 0);
  EXPECT_TRUE(limits.TakeDue(1'000'000 * kSec).empty());
}

TEST(TimeLimitsTest, ALimitFallsDueAtItsStartPlusTheLimitAndOnlyOnce) {
  TimeLimits limits;
  limits.Watch(LimitedAttempt(7, 2, 100 * kSec, 60 * kSec));
  EXPECT_EQ(limits.next(), 160 * kSec);
  EXPECT_TRUE(limits.TakeDue(160 * kSec - 1).empty());
  const std::vector<TimeLimits::Due> due = limits.TakeDue(160 * kSec);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].kind, TimeLimits::Due::Kind::kLimit);
  EXPECT_EQ(due[0].job, JobNumber(7));
  EXPECT_EQ(due[0].attempt, 2);
  EXPECT_EQ(due[0].limit_at, 160 * kSec);
  EXPECT_TRUE(limits.TakeDue(500 * kSec).empty());
  EXPECT_EQ(limits.watched(), 0u);
}

TEST(TimeLimitsTest, TheSignalComesItsLeadAheadOfTheLimitThenTheLimit) {
  TimeLimits limits;
  limits.Watch(LimitedAttempt(3, 1, 0, 600 * kSec, 10, 120 * kSec));
  EXPECT_EQ(limits.next(), 480 * kSec);
  std::vector<TimeLimits::Due> due = limits.TakeDue(480 * kSec);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].kind, TimeLimits::Due::Kind::kSignal);
  EXPECT_EQ(due[0].signal, 10);
  EXPECT_EQ(due[0].limit_at, 600 * kSec);  // its grace runs to the limit
  due = limits.TakeDue(600 * kSec);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].kind, TimeLimits::Due::Kind::kLimit);
}

TEST(TimeLimitsTest, BothDueAtOnceComeSignalFirst) {
  // After a controller restart both may have passed: the controller skips the signal
  // when the limit is due too.
  TimeLimits limits;
  limits.Watch(LimitedAttempt(3, 1, 0, 100 * kSec, 12, 30 * kSec));
  const std::vector<TimeLimits::Due> due = limits.TakeDue(1000 * kSec);
  ASSERT_EQ(due.size(), 2u);
  EXPECT_EQ(due[0].kind, TimeLimits::Due::Kind::kSignal);
  EXPECT_EQ(due[1].kind, TimeLimits::Due::Kind::kLimit);
}

TEST(TimeLimitsTest, ALeadLongerThanTheLimitSignalsAtOnceButNeverAfterTheLimit) {
  TimeLimits limits;
  limits.Watch(LimitedAttempt(4, 1, 50 * kSec, 20 * kSec, 10, 60 * kSec));
  EXPECT_EQ(limits.next(), 10 * kSec);  // before the start: due at the first check
  // A negative lead is read as none: the signal falls at the limit, not after it.
  limits.Watch(LimitedAttempt(5, 1, 50 * kSec, 20 * kSec, 10, -5 * kSec));
  std::vector<TimeLimits::Due> due = limits.TakeDue(69 * kSec);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].job, JobNumber(4));
  EXPECT_EQ(due[0].kind, TimeLimits::Due::Kind::kSignal);
  due = limits.TakeDue(70 * kSec);
  ASSERT_EQ(due.size(), 3u);
  EXPECT_EQ(due[0].job, JobNumber(4));
  EXPECT_EQ(due[0].kind, TimeLimits::Due::Kind::kLimit);
  EXPECT_EQ(due[1].job, JobNumber(5));
  EXPECT_EQ(due[1].kind, TimeLimits::Due::Kind::kSignal);
  EXPECT_EQ(due[2].kind, TimeLimits::Due::Kind::kLimit);
}

TEST(TimeLimitsTest, DeadlinesOfManyAttemptsComeEarliestFirstAndTiesInWatchOrder) {
  TimeLimits limits;
  limits.Watch(LimitedAttempt(1, 1, 0, 300 * kSec));
  limits.Watch(LimitedAttempt(2, 1, 100 * kSec, 50 * kSec));
  limits.Watch(LimitedAttempt(3, 1, 0, 150 * kSec));
  limits.Watch(LimitedAttempt(2, 2, 200 * kSec, 50 * kSec));  // a later attempt of job 2
  EXPECT_EQ(limits.next(), 150 * kSec);
  std::vector<TimeLimits::Due> due = limits.TakeDue(250 * kSec);
  ASSERT_EQ(due.size(), 3u);
  EXPECT_EQ(due[0].job, JobNumber(2));
  EXPECT_EQ(due[1].job, JobNumber(3));
  EXPECT_EQ(due[2].job, JobNumber(2));
  EXPECT_EQ(due[2].attempt, 2);
  EXPECT_EQ(limits.next(), 300 * kSec);
}

// The module's hooks through a fake step: what it watches and what it asks of the core.
class TimeLimitsModuleTest : public ::testing::Test {
 protected:
  // A running job `id` started at 100 s with `limit`, signal 10 sent `before` it.
  FakeModuleStep::Job& Running(uint64_t id, Micros limit, Micros before = 0) {
    FakeModuleStep::Job& j = step_.jobs[id];
    j.record.phase = JobPhase::kRunning;
    j.record.run_start = 100 * kSec;
    j.record.spec.runtime_limit = limit;
    j.submission.limit_signal = before > 0 ? 10 : 0;
    j.submission.limit_signal_before = before;
    j.task_nodes = {"n1"};
    return j;
  }
  void At(Micros t) {
    step_.now_us = t;
    limits_.BeforeCycle(step_);
  }
  FakeModuleStep step_;
  TimeLimits limits_;
};

TEST_F(TimeLimitsModuleTest, ALimitFailsTheAttemptThroughTheMachineWithTheStopGrace) {
  Running(1, 60 * kSec);
  limits_.OnAttemptRunning(step_.FactsOf(1));
  At(159 * kSec);
  EXPECT_TRUE(step_.stops.empty());
  At(160 * kSec);
  ASSERT_EQ(step_.stops.size(), 1u);
  EXPECT_EQ(step_.stops[0].job, JobNumber(1));
  EXPECT_EQ(step_.stops[0].request.after, AttemptEnd::kFail);
  EXPECT_EQ(step_.stops[0].request.grace, step_.grace);
  EXPECT_EQ(step_.stops[0].reason, "failed: time limit of 1m reached");
  At(500 * kSec);
  EXPECT_EQ(step_.stops.size(), 1u) << "due once";
}

TEST_F(TimeLimitsModuleTest, TheSignalAheadOfTheLimitGetsAGraceRunningToTheLimitThenTheStopGrace) {
  Running(1, 60 * kSec, 15 * kSec);
  limits_.OnAttemptRunning(step_.FactsOf(1));
  At(146 * kSec);
  ASSERT_EQ(step_.signals.size(), 1u);
  EXPECT_EQ(step_.signals[0].signal, 10);
  EXPECT_EQ(step_.signals[0].grace, 14 * kSec + step_.grace);
  EXPECT_TRUE(step_.stops.empty());
}

TEST_F(TimeLimitsModuleTest, AnEndedOrNewerAttemptAndTheControllersOwnChecksAreLeftAlone) {
  Running(1, 60 * kSec);
  limits_.OnAttemptRunning(step_.FactsOf(1));
  step_.jobs[1].attempt = 2;  // the watched attempt was requeued and runs again
  FakeModuleStep::Job& stopping = Running(2, 60 * kSec);
  limits_.OnAttemptRunning(step_.FactsOf(2));
  stopping.state = JobState::kStopping;
  Running(3, 60 * kSec).internal = true;
  limits_.OnAttemptRunning(step_.FactsOf(3));
  EXPECT_EQ(limits_.watched(), 2u) << "a validation check times out by its own rules";
  At(1'000 * kSec);
  EXPECT_TRUE(step_.stops.empty());
  EXPECT_TRUE(step_.signals.empty());
}

}  // namespace
}  // namespace tessera
