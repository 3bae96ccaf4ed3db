// RestartsModule through a fake step on a manual clock: restarts counted by cause and
// written as tessera_job_restarts_total, the view's restart block for the default and a
// job's own policy, and the detail a requeued attempt's stored record gets.
#include "server/modules/restarts_module.h"

#include <gtest/gtest.h>

#include <string>

#include "base/time_format.h"
#include "server/modules/fake_module_step.h"

namespace tessera {
// Named, not anonymous: its helpers would meet other files' in a unity batch.
namespace restarts_module_test {

constexpr Micros kSec = 1'000'000;

// An attempt requeued for `cause`, its policy having counted `counted` (none: not counted).
EndedAttempt Requeued(RequeueCause cause, std::optional<RestartOn> counted, int restarts = 1,
                      Micros restart_at = 0) {
  EndedAttempt e;
  e.as = RequeueCauseName(cause);
  e.requeued = true;
  e.cause = cause;
  e.run_start = 10 * kSec;
  e.counted = counted;
  e.restarts = restarts;
  e.restart_at = restart_at;
  return e;
}

// An attempt that finished the job (a GPU fault's, its restarts spent, when failed).
EndedAttempt Finished(JobEnd end) {
  EndedAttempt e;
  e.as = end == JobEnd::kFailed ? "failed" : "succeeded";
  e.end = end;
  e.cause = RequeueCause::kGpuFault;
  e.run_start = 10 * kSec;
  return e;
}

class RestartsModuleTest : public ::testing::Test {
 protected:
  void SetUp() override { step_.now_us = 1000 * kSec; }
  // Job `id` as the attempt machine left it: pending again (requeued) with `reason`.
  FakeModuleStep::Job& Requeue(uint64_t id, const std::string& reason) {
    FakeModuleStep::Job& j = step_.jobs[id];
    j.state = JobState::kPending;
    j.record.phase = JobPhase::kPending;
    j.reason = reason;
    return j;
  }
  // The stored record OnAttemptEnded leaves of job `id`'s attempt that ended as `ended`.
  nlohmann::json End(uint64_t id, const EndedAttempt& ended) {
    nlohmann::json stored = {{"attempt", 1}, {"ended", std::string(ended.as)}};
    restarts_.OnAttemptEnded(step_.FactsOf(id), ended, stored, step_);
    return stored;
  }
  std::string Metrics() const {
    MetricsWriter w;
    restarts_.WriteMetrics(step_, w);
    return w.Take();
  }
  nlohmann::json Block(uint64_t id) const {
    nlohmann::json out = nlohmann::json::object();
    restarts_.DescribeJob(step_.FactsOf(id), out);
    return out["restart"];
  }

  FakeModuleStep step_;
  RestartsModule restarts_;
};

TEST_F(RestartsModuleTest, CountsEachCountedRestartByItsCause) {
  Requeue(1, "restarting after failure (exit 1)");
  End(1, Requeued(RequeueCause::kFailure, RestartOn::kFailure));
  End(1, Requeued(RequeueCause::kFailure, RestartOn::kFailure, 2));
  Requeue(2, "requeued: gpu-fault: XID 79 on node n1 GPU 0");
  End(2, Requeued(RequeueCause::kGpuFault, RestartOn::kGpuFault));
  // Not counted: a preemption requeues without its policy counting it; an end that
  // finishes the job restarts nothing.
  Requeue(3, "preempted by job 9");
  End(3, Requeued(RequeueCause::kPreempted, std::nullopt, 0));
  End(3, Finished(JobEnd::kFailed));
  EXPECT_EQ(restarts_.counted(RestartOn::kFailure), 2u);
  EXPECT_EQ(restarts_.counted(RestartOn::kGpuFault), 1u);
  EXPECT_EQ(restarts_.counted(RestartOn::kNodeLost), 0u);
}

TEST_F(RestartsModuleTest, TheFamilyHasEveryCauseWithZerosForThoseNotSeen) {
  const std::string zero = Metrics();
  EXPECT_NE(zero.find("# HELP tessera_job_restarts_total Restarts counted by jobs' restart "
                      "policies, by cause (failure, node-lost, gpu-fault), since the controller "
                      "started.\n# TYPE tessera_job_restarts_total counter\n"),
            std::string::npos)
      << zero;
  EXPECT_NE(zero.find("tessera_job_restarts_total{cause=\"failure\"} 0\n"
                      "tessera_job_restarts_total{cause=\"node-lost\"} 0\n"
                      "tessera_job_restarts_total{cause=\"gpu-fault\"} 0\n"),
            std::string::npos)
      << zero;

  Requeue(1, "requeued: node n1 was lost (silent)");
  End(1, Requeued(RequeueCause::kNodeLost, RestartOn::kNodeLost));
  End(1, Requeued(RequeueCause::kNodeLost, RestartOn::kNodeLost, 2));
  End(1, Requeued(RequeueCause::kFailure, RestartOn::kFailure, 3));
  const std::string text = Metrics();
  EXPECT_NE(text.find("tessera_job_restarts_total{cause=\"failure\"} 1\n"
                      "tessera_job_restarts_total{cause=\"node-lost\"} 2\n"
                      "tessera_job_restarts_total{cause=\"gpu-fault\"} 0\n"),
            std::string::npos)
      << text;
}

TEST_F(RestartsModuleTest, TheDefaultPolicysBlockShowsItsBackoffsEnd) {
  FakeModuleStep::Job& j = Requeue(1, "requeued: node n1 was lost (silent)");
  j.record.attempt.restarts = 1;
  j.held_until = step_.now_us + 20 * kSec;  // the lifecycle's hold
  const nlohmann::json block = Block(1);
  EXPECT_EQ(block["max"], 3);
  EXPECT_EQ(block["on"], nlohmann::json({"node-lost", "gpu-fault"}));
  EXPECT_EQ(block["backoff_seconds"], 0.0);
  EXPECT_EQ(block["default"], true);
  EXPECT_EQ(block["used"], 1);
  EXPECT_EQ(block["left"], 2);
  EXPECT_EQ(block["restart_at"], FormatRfc3339(1020 * kSec));
}

TEST_F(RestartsModuleTest, AJobsOwnPolicyCountsItsUsedRestartsDownToNone) {
  FakeModuleStep::Job& j = step_.jobs[1];  // running its third attempt, nothing held
  j.submission.restart = RestartPolicy{2, static_cast<uint8_t>(RestartOn::kFailure), 10 * kSec};
  j.record.phase = JobPhase::kRunning;
  j.record.attempt.restarts = 2;
  nlohmann::json block = Block(1);
  EXPECT_EQ(block["max"], 2);
  EXPECT_EQ(block["on"], nlohmann::json({"failure"}));
  EXPECT_EQ(block["backoff_seconds"], 10.0);
  EXPECT_EQ(block["default"], false);
  EXPECT_EQ(block["used"], 2);
  EXPECT_EQ(block["left"], 0);
  EXPECT_TRUE(block["restart_at"].is_null());

  // A job read back from the store has no record: its last stored attempt's count.
  FakeModuleStep::Job& archived = step_.archived[5];
  archived.state = JobState::kFailed;
  archived.submission.restart = j.submission.restart;
  archived.stored_restarts = 1;
  ASSERT_TRUE(step_.FindOrLoad(JobNumber(5), [&](const JobFacts& facts) {
    nlohmann::json out;
    restarts_.DescribeJob(facts, out);
    block = out["restart"];
  }));
  EXPECT_EQ(block["used"], 1);
  EXPECT_EQ(block["left"], 1);
  EXPECT_TRUE(block["restart_at"].is_null());
}

TEST_F(RestartsModuleTest, ARequeuedAttemptsRecordGetsTheDetailItsCauseDoesNotSay) {
  Requeue(1, "requeued: gpu-fault: XID 79 (fell off the bus) on node n1 GPU 0");
  nlohmann::json stored = End(1, Requeued(RequeueCause::kGpuFault, RestartOn::kGpuFault));
  EXPECT_EQ(stored["detail"], "XID 79 (fell off the bus) on node n1 GPU 0");
  // The count and backoff stored with the attempt are the core's, not the module's.
  EXPECT_FALSE(stored.contains("restarts"));
  EXPECT_FALSE(stored.contains("restart_at"));

  Requeue(2, "requeued: idle: 0% GPU use for 30m");
  stored = End(2, Requeued(RequeueCause::kIdle, std::nullopt, 0));
  EXPECT_EQ(stored["detail"], "0% GPU use for 30m");

  // A reason of another shape: what follows "requeued: ".
  Requeue(3, "requeued: GPU 1 lost");
  stored = End(3, Requeued(RequeueCause::kGpuFault, RestartOn::kGpuFault));
  EXPECT_EQ(stored["detail"], "GPU 1 lost");

  // A failure's exit code says it; a finished attempt is not the module's.
  Requeue(4, "restarting after failure (exit 1)");
  stored = End(4, Requeued(RequeueCause::kFailure, RestartOn::kFailure, 1, 1010 * kSec));
  EXPECT_FALSE(stored.contains("detail"));
  Requeue(5, "requeued: gpu-fault: XID 79");
  stored = End(5, Finished(JobEnd::kFailed));
  EXPECT_EQ(stored, nlohmann::json({{"attempt", 1}, {"ended", "failed"}}));
}

}  // namespace restarts_module_test
}  // namespace tessera
