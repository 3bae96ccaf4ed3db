// The rules a submission passes (job_admission.h), on their own.
#include "server/job_admission.h"

#include <gtest/gtest.h>

#include "server/modules/job_gates.h"
#include "server/testing/queue_trees.h"

namespace tessera {
namespace job_admission_test {

constexpr const char* kQueues = R"(cohorts:
  - name: all
queues:
  - name: a-main
    cohort: all
    tenant: team-a
    maxPending: 3
    quota:
      gpu: 4
  - name: a-low
    cohort: all
    tenant: team-a
    quota:
      gpu: 1
  - name: b-main
    cohort: all
    tenant: team-b
    quota:
      gpu: 4
)";

QueueTree Tree(const std::string& yaml) { return testing::TreeFromYaml(yaml); }

TEST(JobAdmissionTest, AQueueIsResolvedForItsOwnTenantOnly) {
  const QueueTree tree = Tree(kQueues);
  const Principal a{Role::kTenant, "team-a", "t"};
  std::string queue;
  StatusOr<std::string> tenant = ResolveQueue(tree, a, queue);
  ASSERT_TRUE(tenant.ok()) << tenant.status().message();
  EXPECT_EQ(*tenant, "team-a");
  EXPECT_EQ(queue, "a-main");  // its tenant's first queue, filled in

  queue = "b-main";
  EXPECT_EQ(ResolveQueue(tree, a, queue).status().code(), StatusCode::kPermissionDenied);
  queue = "nope";
  EXPECT_EQ(ResolveQueue(tree, a, queue).status().code(), StatusCode::kInvalidArgument);
  queue = "";
  EXPECT_EQ(ResolveQueue(tree, Principal{Role::kTenant, "team-c", "t"}, queue).status().code(),
            StatusCode::kFailedPrecondition);
  queue = "b-main";
  StatusOr<std::string> admin = ResolveQueue(tree, Principal{Role::kAdmin, "", "ops"}, queue);
  ASSERT_TRUE(admin.ok());
  EXPECT_EQ(*admin, "team-b");  // the admin submits for the queue's tenant
}

TEST(JobAdmissionTest, APriorityClassSetsThePriorityOrIsRefusedListingTheClasses) {
  const QueueTree tree =
      Tree(std::string("priorityClasses:\n  - {name: high, value: 100}\n  - {name: low, value: -5}\n") +
           kQueues);
  JobSubmission job;
  job.spec.priority = 7;
  ASSERT_TRUE(ResolvePriorityClass(tree, job).ok());
  EXPECT_EQ(job.spec.priority, 7);  // none named: unchanged
  job.priority_class = "low";
  ASSERT_TRUE(ResolvePriorityClass(tree, job).ok());
  EXPECT_EQ(job.spec.priority, -5);
  job.priority_class = "urgent";
  Status refused = ResolvePriorityClass(tree, job);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("there are: high, low"), std::string::npos) << refused.message();
  EXPECT_NE(ResolvePriorityClass(Tree(kQueues), job).message().find("has none"), std::string::npos);
}

TEST(JobAdmissionTest, PendingBoundsFollowTheConfigurationText) {
  PendingBounds bounds;
  EXPECT_EQ(bounds.Of("a-main", kQueues), 3);
  auto pending = [](const std::string& queue) -> size_t { return queue == "a-main" ? 2 : 0; };
  EXPECT_TRUE(bounds.Check({{"a-main", 1}}, kQueues, pending).ok());
  Status full = bounds.Check({{"a-main", 2}}, kQueues, pending);
  EXPECT_EQ(full.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(full.message().find("has 2 pending jobs and holds at most 3"), std::string::npos)
      << full.message();
  // Another text: read again (the bound is gone, so the default applies).
  std::string raised = kQueues;
  raised.erase(raised.find("    maxPending: 3\n"), std::string("    maxPending: 3\n").size());
  EXPECT_GT(bounds.Of("a-main", raised), 3);
  EXPECT_TRUE(bounds.Check({{"a-main", 2}}, raised, pending).ok());
}

TEST(JobAdmissionTest, BatchErrorsAndKeysNameTheJob) {
  EXPECT_EQ(AtJob(3, InvalidArgumentError("queue: no queue named 'x'")).message(),
            "jobs[3].queue: no queue named 'x'");
  EXPECT_EQ(AtJob(0, InvalidArgumentError("bad")).message(), "jobs[0]: bad");
  EXPECT_NE(BatchJobKey("k", 1), BatchJobKey("k", 2));
  EXPECT_NE(BatchJobKey("k", 1), "k1");  // apart from a single submission's key
  EXPECT_EQ(BatchKeyReused("k").code(), StatusCode::kAlreadyExists);
}

TEST(JobAdmissionTest, ANewRowIsPendingOrHeld) {
  JobSubmission job;
  job.spec.queue = "a-main";
  job.spec.name = "train";
  JobRow row = NewJobRow(JobNumber(7), "team-a", job, "{}", "key", 123);
  EXPECT_EQ(row.id, 7u);
  EXPECT_EQ(row.tenant, "team-a");
  EXPECT_EQ(row.queue, "a-main");
  EXPECT_EQ(row.name, "train");
  EXPECT_EQ(row.idempotency_key, "key");
  EXPECT_EQ(row.state, "pending");
  EXPECT_EQ(row.submit_us, 123);
  EXPECT_EQ(row.reason, "waiting for the next scheduling cycle");
  job.hold = true;
  EXPECT_TRUE(IsHeldReason(NewJobRow(JobNumber(8), "team-a", job, "{}", "", 1).reason));
}

TEST(JobAdmissionTest, OnlyAStoreFailureMarksTheStoreFailed) {
  bool failed = false;
  EXPECT_EQ(SubmitCommitError(InvalidArgumentError("too large"), "the jobs", &failed).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(SubmitCommitError(AlreadyExistsError("key"), "the job", &failed).code(),
            StatusCode::kAlreadyExists);
  EXPECT_FALSE(failed);
  EXPECT_EQ(SubmitCommitError(InternalError("disk"), "the job", &failed).code(),
            StatusCode::kUnavailable);
  EXPECT_TRUE(failed);
}

TEST(JobAdmissionTest, AUserChangesOnlyItsOwnJobs) {
  const Principal alice{Role::kTenant, "team-a", "t", "alice"};
  EXPECT_TRUE(MayChange(alice, JobNumber(1), "alice").ok());
  EXPECT_EQ(MayChange(alice, JobNumber(1), "bob").code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(MayChange(Principal{Role::kTenant, "team-a", "coordinator"}, JobNumber(1), "bob").ok());
  EXPECT_TRUE(MayChange(Principal{Role::kAdmin, "", "ops"}, JobNumber(1), "bob").ok());
  EXPECT_EQ(Actor(alice), "user alice");
  EXPECT_EQ(Actor(Principal{Role::kAdmin, "", "ops"}), "admin ops");
  EXPECT_EQ(Actor(Principal{Role::kTenant, "team-a", ""}), "tenant token (unnamed)");
}

}  // namespace job_admission_test
}  // namespace tessera
