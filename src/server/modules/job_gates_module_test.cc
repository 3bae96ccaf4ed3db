// JobGatesModule through a fake step: holds, dependencies, throttled arrays and
// singletons gated and let go, with the reasons the views show.
#include "server/modules/job_gates_module.h"

#include <gtest/gtest.h>

#include "server/modules/fake_module_step.h"

namespace tessera {
namespace {

class JobGatesModuleTest : public ::testing::Test {
 protected:
  // Pending job `id` (its attempt not started), watched as at its acknowledgement.
  FakeModuleStep::Job& Pending(uint64_t id, const std::string& dependency = "",
                               const std::string& reason = "waiting") {
    FakeModuleStep::Job& j = step_.jobs[id];
    j.state = JobState::kPending;
    j.attempt = 0;
    j.record.phase = JobPhase::kPending;
    j.submission.dependency = dependency;
    j.reason = reason;
    return j;
  }
  void Accept(uint64_t id) { gates_.OnJobAccepted(step_.FactsOf(id), step_); }
  // A pass after something changed (a lifecycle event marks the gates so).
  void Pass() {
    gates_.Recheck();
    gates_.BeforeDecide(step_);
  }
  bool Gated(uint64_t id) const { return step_.gated.count(id) != 0; }
  std::string Why(uint64_t id) const { return gates_.Reason(JobNumber(id)); }
  void End(uint64_t id, JobState state) {
    step_.jobs[id].state = state;
    step_.jobs[id].attempt = 1;
    step_.jobs[id].record.phase = JobPhase::kFinished;
  }

  FakeModuleStep step_;
  JobGatesModule gates_;
};

TEST_F(JobGatesModuleTest, AHeldJobStaysGatedUntilReleased) {
  Pending(1, "", HeldReason() + " (held by user ana)");
  Pending(2);  // nothing keeps it back: never watched, never gated
  Accept(1);
  Accept(2);
  EXPECT_TRUE(Gated(1));
  EXPECT_FALSE(Gated(2));
  EXPECT_TRUE(IsHeldReason(Why(1))) << Why(1);
  Pass();
  EXPECT_TRUE(Gated(1));
  EXPECT_EQ(Why(1), HeldReason() + " (held by user ana)");
  EXPECT_EQ(Why(2), "");

  step_.jobs[1].reason = "released by user ana";
  Pass();
  EXPECT_FALSE(Gated(1));
  EXPECT_EQ(Why(1), "");
  ASSERT_FALSE(step_.republished.empty());
  EXPECT_EQ(step_.republished.back(), JobNumber(1));  // its reason changed
}

TEST_F(JobGatesModuleTest, NothingIsDecidedAgainUntilSomethingChanged) {
  step_.jobs[1].attempt = 1;  // running
  Pending(2, "afterok:1");
  Accept(2);
  gates_.BeforeDecide(step_);
  EXPECT_TRUE(Gated(2));
  End(1, JobState::kSucceeded);
  gates_.BeforeDecide(step_);  // no event since the last pass: left as it was
  EXPECT_TRUE(Gated(2));
  Pass();
  EXPECT_FALSE(Gated(2));
}

TEST_F(JobGatesModuleTest, AfterokLetsGoOnSuccessAndNeverRunsAfterAFailure) {
  step_.jobs[1].attempt = 1;  // running
  step_.jobs[2].attempt = 1;
  Pending(3, "afterok:1");
  Pending(4, "afterok:2");
  Accept(3);
  Accept(4);
  Pass();
  EXPECT_TRUE(Gated(3));
  EXPECT_EQ(Why(3), "waiting for its dependency: afterok on job 1 (afterok:1)");

  End(1, JobState::kSucceeded);
  End(2, JobState::kFailed);
  Pass();
  EXPECT_FALSE(Gated(3));
  EXPECT_EQ(Why(3), "");
  EXPECT_TRUE(Gated(4));
  EXPECT_EQ(Why(4),
            "dependency never satisfied: afterok on job 2, which failed or was cancelled "
            "(afterok:2); it will not start: cancel it");
  // It stays so: nothing it waits for can change.
  Pass();
  EXPECT_TRUE(Gated(4));
}

TEST_F(JobGatesModuleTest, AnArchivedDependencyIsReadFromTheStoreOnce) {
  FakeModuleStep::Job& gone = step_.archived[1];
  gone.state = JobState::kSucceeded;
  gone.attempt = 1;
  Pending(2, "afterok:1");
  Pending(3, "afterok:1");
  step_.load_error = UnavailableError("store down");
  Accept(2);
  Pass();
  EXPECT_TRUE(Gated(2));  // a failed read decides nothing
  step_.load_error = Status::Ok();
  gates_.BeforeDecide(step_);  // the failed read asked for another pass
  EXPECT_FALSE(Gated(2));
  const int loads = step_.loads;
  Accept(3);
  Pass();
  EXPECT_FALSE(Gated(3));
  EXPECT_EQ(step_.loads, loads);  // its outcome was kept for the jobs that name it
}

TEST_F(JobGatesModuleTest, AThrottledArrayRunsAtMostItsLimitAtOnce) {
  // Array 10: indices 0, 1, 2, 3, at most two at once.
  for (uint64_t k = 0; k < 4; ++k) {
    FakeModuleStep::Job& e = Pending(10 + k);
    e.submission.array = "0-3%2";
    e.submission.array_index = static_cast<int64_t>(k);
    Accept(10 + k);
    EXPECT_TRUE(Gated(10 + k));
  }
  Pass();
  EXPECT_FALSE(Gated(10));
  EXPECT_FALSE(Gated(11));
  EXPECT_TRUE(Gated(12));
  EXPECT_TRUE(Gated(13));
  EXPECT_EQ(Why(12), "array throttle: 2 elements of array 10 run at once (%2)");
  nlohmann::json view;
  gates_.DescribeJob(step_.FactsOf(12), view);
  EXPECT_EQ(view["array_job"], 10);
  EXPECT_EQ(view["array_index"], 2);
  EXPECT_EQ(view["array"], "0-3%2");

  for (uint64_t id : {10, 11}) {  // started
    step_.jobs[id].state = JobState::kRunning;
    step_.jobs[id].attempt = 1;
  }
  Pass();
  EXPECT_TRUE(Gated(12));
  EXPECT_TRUE(Gated(13));
  End(10, JobState::kSucceeded);
  Pass();
  EXPECT_FALSE(Gated(12));  // one place free: the next element only
  EXPECT_TRUE(Gated(13));
}

TEST_F(JobGatesModuleTest, ASingletonWaitsForTheRunningJobOfItsUserAndName) {
  FakeModuleStep::Job& first = step_.jobs[1];  // running
  first.submission.spec.name = "nightly";
  first.submission.spec.user = "ana";
  first.submission.dependency = "singleton";
  for (uint64_t id : {2, 3}) {
    FakeModuleStep::Job& j = Pending(id, "singleton");
    j.submission.spec.name = "nightly";
    j.submission.spec.user = id == 2 ? "ana" : "bo";  // bo's is another singleton
    Accept(id);
  }
  Pass();
  EXPECT_TRUE(Gated(2));
  EXPECT_EQ(Why(2), "singleton: job 1 of the same user and name is running");
  EXPECT_FALSE(Gated(3));
  End(1, JobState::kSucceeded);
  Pass();
  EXPECT_FALSE(Gated(2));
}

TEST_F(JobGatesModuleTest, NamedJobsResolveArraysAndArchivedJobs) {
  for (uint64_t k = 0; k < 3; ++k) {
    FakeModuleStep::Job& e = step_.jobs[20 + k];
    e.submission.array = "1,5,9";
    e.submission.array_index = static_cast<int64_t>(k * 4 + 1);
  }
  StatusOr<std::vector<JobNumber>> whole =
      gates_.DependencyJobs(JobRef{20, -1}, step_, /*may_load=*/false);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  EXPECT_EQ(whole->size(), 3u);
  StatusOr<std::vector<JobNumber>> nine = gates_.DependencyJobs(JobRef{20, 9}, step_, false);
  ASSERT_TRUE(nine.ok());
  EXPECT_EQ(*nine, std::vector<JobNumber>{JobNumber(22)});
  EXPECT_FALSE(gates_.DependencyJobs(JobRef{20, 2}, step_, false).ok());

  step_.archived[7].state = JobState::kSucceeded;
  EXPECT_FALSE(gates_.DependencyJobs(JobRef{7, -1}, step_, /*may_load=*/false).ok());
  StatusOr<std::vector<JobNumber>> loaded =
      gates_.DependencyJobs(JobRef{7, -1}, step_, /*may_load=*/true);
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(*loaded, std::vector<JobNumber>{JobNumber(7)});
}

TEST_F(JobGatesModuleTest, ASubmittedDependencyNamesJobsItsSubmitterSees) {
  step_.jobs[1].tenant = "ana";
  step_.archived[2].tenant = "bo";
  step_.archived[3].tenant = "ana";
  auto ana = [](const JobFacts& job) { return job.tenant == "ana"; };
  EXPECT_TRUE(gates_.CheckDependency("", step_, ana).ok());
  EXPECT_TRUE(gates_.CheckDependency("afterok:1", step_, ana).ok());
  EXPECT_TRUE(gates_.CheckDependency("afterany:1:3", step_, ana).ok());  // archived: loaded
  Status other = gates_.CheckDependency("afterok:1:2", step_, ana);
  EXPECT_EQ(other.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(other.message(), "dependency: no job 2");  // not told apart from none
  EXPECT_EQ(gates_.CheckDependency("afterok:9", step_, ana).message(), "dependency: no job 9");
  Status bad = gates_.CheckDependency("after:", step_, ana);
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.message().rfind("dependency: ", 0), 0u) << bad.message();
}

}  // namespace
}  // namespace tessera
