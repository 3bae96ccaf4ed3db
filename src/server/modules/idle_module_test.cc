// IdleModule on a manual clock through a fake step: samples from the nodes' telemetry,
// flags after the queue's window, the queue's action asked once per flag, and what the
// intervals used.
#include "server/modules/idle_module.h"

#include <gtest/gtest.h>

#include "server/modules/fake_module_step.h"

namespace tessera {
namespace {

constexpr Micros kSec = 1'000'000;
constexpr const char* kIdleModuleQueues = R"(
queues:
  - name: quiet
    quota: {gpu: 4}
  - name: strict
    quota: {gpu: 4}
    idle: {below: 10%, for: 10m, action: requeue}
  - name: harsh
    quota: {gpu: 4}
    idle: {below: 10%, for: 10m, action: cancel}
)";

class IdleModuleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    step_.yaml = kIdleModuleQueues;
    step_.now_us = 1'000 * kSec;
    NodeInfo& n = step_.nodes["n1"];
    n.up = true;
    n.telemetry.resize(2);
    n.telemetry[0].index = 0;
    n.telemetry[1].index = 1;
    SetUtil(0, 0);
  }
  // Job `id` in `queue` on GPU `gpu` of n1, holding `milli` of it.
  void AddJob(uint64_t id, const std::string& queue, int gpu, int64_t milli = 1000) {
    FakeModuleStep::Job& j = step_.jobs[id];
    j.queue = queue;
    j.record.run_start = step_.now_us;
    j.record.gpu_milli = milli;
    Allocation a;
    a.gpus.push_back(GpuGrant{gpu, MilliGpu(milli), MiB(0)});
    j.record.allocations.push_back(a);
    j.task_nodes.push_back("n1");
  }
  void SetUtil(int gpu0, int gpu1) {
    NodeInfo& n = step_.nodes["n1"];
    n.telemetry[0].util_pct = gpu0;
    n.telemetry[1].util_pct = gpu1;
    n.telemetry_at = step_.now_us;
  }
  // Samples every kIdleSampleInterval for `span`, the telemetry kept fresh; job
  // `writing` (if any) writes output before each sample.
  void RunFor(Micros span, uint64_t writing = 0) {
    const Micros end = step_.now_us + span;
    while (step_.now_us < end) {
      step_.now_us += kIdleSampleInterval;
      step_.nodes["n1"].telemetry_at = step_.now_us;
      if (writing != 0) {
        idle_.OnOutput(JobNumber(writing), step_.now_us);
      }
      idle_.BeforeCycle(step_);
    }
  }
  FakeModuleStep step_;
  IdleModule idle_;
};

TEST_F(IdleModuleTest, AQueuesActionIsAskedOnceWhenItsWindowIsIdle) {
  AddJob(1, "strict", 0);
  AddJob(2, "harsh", 1);
  idle_.BeforeCycle(step_);
  RunFor(9 * 60 * kSec, /*writing=*/2);
  EXPECT_TRUE(step_.stops.empty()) << "flagged before the 10-minute window";
  RunFor(2 * 60 * kSec, 2);
  ASSERT_EQ(step_.stops.size(), 2u);
  EXPECT_EQ(step_.stops[0].job, JobNumber(1));
  EXPECT_EQ(step_.stops[0].request.after, AttemptEnd::kRequeue);
  EXPECT_EQ(step_.stops[0].request.cause, RequeueCause::kIdle);
  EXPECT_EQ(step_.stops[0].request.grace, step_.grace);
  EXPECT_EQ(step_.stops[0].request.reason,
            "requeued: hung: GPU utilisation below 10% and no output for 10m")
      << "idle and silent is hung";
  EXPECT_EQ(step_.stops[1].job, JobNumber(2));
  EXPECT_EQ(step_.stops[1].request.after, AttemptEnd::kCancel);
  EXPECT_NE(step_.stops[1].reason.find("idle: GPU utilisation below 10% for 10m"),
            std::string::npos)
      << "idle but writing output is not hung: " << step_.stops[1].reason;
  RunFor(30 * 60 * kSec);
  EXPECT_EQ(step_.stops.size(), 2u) << "the action is taken once per flag";
}

TEST_F(IdleModuleTest, ABusyJobAndANotifyQueueAreNeverStopped) {
  AddJob(1, "strict", 0);
  AddJob(2, "quiet", 1);  // the default policy notifies only
  SetUtil(80, 0);
  RunFor(60 * 60 * kSec);
  EXPECT_TRUE(step_.stops.empty());
  nlohmann::json view;
  idle_.DescribeJob(step_.FactsOf(2), view);
  EXPECT_FALSE(view["idle_since"].is_null()) << view.dump();
  nlohmann::json busy;
  idle_.DescribeJob(step_.FactsOf(1), busy);
  EXPECT_TRUE(busy["idle_since"].is_null()) << busy.dump();
  EXPECT_DOUBLE_EQ(busy["utilisation_window"]["mean_pct"].get<double>(), 80.0);
}

TEST_F(IdleModuleTest, StaleTelemetryOrAMigInstanceGivesNoSample) {
  AddJob(1, "strict", 0);
  step_.jobs[1].record.allocations[0].gpus[0].mig_profile = 0;
  AddJob(2, "strict", 1);
  step_.now_us += step_.timeout + kSec;  // n1's telemetry is older than the timeout
  EXPECT_FALSE(IdleModule::UtilisationNow(step_, step_.FactsOf(2)).has_value());
  step_.nodes["n1"].telemetry_at = step_.now_us;
  EXPECT_TRUE(IdleModule::UtilisationNow(step_, step_.FactsOf(2)).has_value());
  EXPECT_FALSE(IdleModule::UtilisationNow(step_, step_.FactsOf(1)).has_value());
  RunFor(60 * 60 * kSec);
  ASSERT_EQ(step_.stops.size(), 1u);
  EXPECT_EQ(step_.stops[0].job, JobNumber(2)) << "the MIG job was never measured";
}

TEST_F(IdleModuleTest, AShareIsMeasuredAgainstItsShareNotTheCard) {
  AddJob(1, "strict", 0, 250);  // a quarter of GPU 0
  SetUtil(25, 0);               // the card is 25 % busy: the share is fully used
  EXPECT_DOUBLE_EQ(*IdleModule::UtilisationNow(step_, step_.FactsOf(1)), 100.0);
  SetUtil(10, 0);
  EXPECT_DOUBLE_EQ(*IdleModule::UtilisationNow(step_, step_.FactsOf(1)), 40.0);
}

TEST_F(IdleModuleTest, UsageIsWhatTheAttemptUsedAndEndedIntervalsCountForTheTenant) {
  AddJob(1, "quiet", 0);
  SetUtil(50, 0);
  RunFor(10 * 60 * kSec);
  UsageRow row{1, "t", "quiet", 0, 600 * kSec, 1000};
  idle_.OnUsage(row, /*attempt=*/1, /*ended=*/false);
  EXPECT_EQ(row.used_gpu_milli, 500);
  UsageRow other_attempt = row;
  idle_.OnUsage(other_attempt, /*attempt=*/2, /*ended=*/true);
  EXPECT_EQ(other_attempt.used_gpu_milli, -1) << "another attempt's use is not this one's";
  idle_.OnUsage(row, 1, /*ended=*/true);
  MetricsWriter w;
  idle_.WriteMetrics(step_, w);
  const std::string text = w.Take();
  // 600 s of half a GPU ended, plus the running attempt's 600 s at half.
  EXPECT_NE(text.find("tessera_tenant_gpu_seconds_used_total{tenant=\"t\"} 600"), std::string::npos)
      << text;
}

TEST_F(IdleModuleTest, AJobThatStopsRunningIsForgottenAtTheNextSample) {
  AddJob(1, "quiet", 0);
  RunFor(kIdleSampleInterval);
  ASSERT_NE(idle_.watch().Find(1), nullptr);
  step_.jobs[1].state = JobState::kSucceeded;
  RunFor(kIdleSampleInterval);
  EXPECT_EQ(idle_.watch().Find(1), nullptr);
}

}  // namespace
}  // namespace tessera
