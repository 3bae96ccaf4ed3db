// What a tenant can send must not take the controller down: a legal array's stored
// rows read back at the next start, a row that cannot be read is quarantined rather
// than fatal, and two submissions racing with one Idempotency-Key get one job and
// leave the store healthy.
#include <gtest/gtest.h>

#include <latch>
#include <thread>

#include "api/job_batch.h"
#include "api/job_relations.h"
#include "server/controller_fixture.h"
#include "server/testing/job_yaml.h"

namespace tessera {
namespace {

using testing::kOneGpu;

class ControllerTrustTest : public ControllerTest {
 protected:
  static Principal TeamA() { return Principal{Role::kTenant, "team-a", "test"}; }
  nlohmann::json Job(uint64_t id) {
    auto j = Reads().GetJob(Principal{Role::kAdmin, "", "test"}, JobNumber(id));
    EXPECT_TRUE(j.ok()) << j.status().ToString();
    return j.ok() ? *j : nlohmann::json();
  }
  static JobSubmission Parse(const std::string& yaml) {
    StatusOr<JobSubmission> job = ParseJobYaml(yaml, catalog());
    EXPECT_TRUE(job.ok()) << job.status().ToString();
    return job.ok() ? *job : JobSubmission{};
  }
};

// Within the documented caps (indices up to 4,000,000, 10,000 elements): each element's
// row once carried the index list written out (77 KB), which the reader refused at
// every later start.
TEST_F(ControllerTrustTest, AnArrayWithAStepSurvivesARestart) {
  const uint64_t first =
      Submit("team-a", std::string(kOneGpu) + "array: \"0-3999999:400\"\n");
  ASSERT_GT(first, 0u);
  EXPECT_EQ(Job(first + 9999)["array_index"], 3999600);
  auto rows = store_->LoadJobs();
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 10000u);
  for (const JobRow& row : *rows) {
    ASSERT_LT(row.spec_json.size(), 1024u) << "job " << row.id;
  }
  Reopen();
  ASSERT_NE(controller_, nullptr);
  EXPECT_TRUE(controller_->quarantined().empty());
  EXPECT_EQ(Job(first + 9999)["array_index"], 3999600);
  EXPECT_EQ(Job(first)["spec"]["array"], "0-3999600:400");
}

// Whatever the text, what is stored is no longer than what was sent; a list that is
// long even written compactly is refused, naming the field (it is stored with each of
// up to 10,000 elements and read back with each at a restart).
TEST_F(ControllerTrustTest, AnArrayIsStoredCompactlyOrRefused) {
  std::string list;
  for (int i = 0; i < 300; ++i) {  // 0,1,3,4,6,7,...: runs of two, never three
    list += (list.empty() ? "" : ",") + std::to_string(3 * i) + "," + std::to_string(3 * i + 1);
  }
  ASSERT_LT(list.size(), kMaxArrayText);
  const uint64_t first = Submit("team-a", std::string(kOneGpu) + "array: \"" + list + "\"\n");
  ASSERT_GT(first, 0u);
  Reopen();
  ASSERT_NE(controller_, nullptr);
  EXPECT_LE(Job(first)["spec"]["array"].get<std::string>().size(), list.size());
  EXPECT_EQ(Job(first + 599)["array_index"], 898);

  std::string longer;
  for (int i = 0; i < 3000; ++i) {
    longer += (longer.empty() ? "" : ",") + std::to_string(3 * i) + "," + std::to_string(3 * i + 1);
  }
  StatusOr<JobSubmission> refused =
      ParseJobYaml(std::string(kOneGpu) + "array: \"" + longer + "\"\n", catalog());
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.status().message().rfind("array: ", 0), 0u) << refused.status().message();
}

// A row this version cannot read (a bug, an edit by hand, a downgrade) is left out and
// reported; every other job comes back, and its Idempotency-Key is still refused as a
// conflict (an answer), not a failure of the store.
TEST_F(ControllerTrustTest, AnUnreadableRowIsQuarantinedAndTheRestStarts) {
  const uint64_t good = Submit("team-a", kOneGpu);
  ASSERT_GT(good, 0u);
  WriteBatch bad;
  JobRow row;
  row.id = good + 1;
  row.tenant = "team-a";
  row.queue = "team-a";
  row.name = "bad";
  row.idempotency_key = "bad-key";
  row.spec_json = R"({"name": "bad", "resources": {"gpus": 1}, "command": ["x"], "bogus": 1})";
  row.state = "pending";
  row.submit_us = kT0;
  bad.jobs.push_back(row);
  row.id = good + 2;
  row.idempotency_key = "";
  row.spec_json = "{not json";
  bad.jobs.push_back(row);
  ASSERT_TRUE(store_->Commit(std::move(bad)).ok());

  Reopen();
  ASSERT_NE(controller_, nullptr);
  ASSERT_EQ(controller_->quarantined().size(), 2u);
  EXPECT_EQ(controller_->quarantined()[0].id, good + 1);
  EXPECT_NE(controller_->quarantined()[0].why.find("bogus"), std::string::npos)
      << controller_->quarantined()[0].why;
  EXPECT_EQ(controller_->quarantined()[1].id, good + 2);
  EXPECT_EQ(Job(good)["state"], "pending");

  auto again = controller_->intake().Submit(TeamA(), Parse(kOneGpu), "bad-key");
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), StatusCode::kAlreadyExists) << again.status().ToString();
  EXPECT_TRUE(controller_->healthy());
  // New jobs take ids above the quarantined rows'.
  EXPECT_GT(Submit("team-a", kOneGpu), good + 2);
  EXPECT_TRUE(controller_->healthy());
}

// A client that resends after a slow answer: the two requests meet in the controller.
// Each round both get the one job (a replay), and the store stays healthy throughout.
TEST_F(ControllerTrustTest, TwoSubmissionsWithOneKeyGetOneJob) {
  constexpr int kRounds = 1000;
  std::set<uint64_t> ids;
  for (int round = 0; round < kRounds; ++round) {
    const std::string key = "key-" + std::to_string(round);
    std::latch go(2);
    StatusOr<JobIntake::Submitted> answers[2] = {InternalError("not run"),
                                                 InternalError("not run")};
    auto submit = [&](int k) {
      JobSubmission job = Parse(kOneGpu);
      go.arrive_and_wait();
      answers[k] = controller_->intake().Submit(TeamA(), std::move(job), key);
    };
    std::thread other(submit, 1);
    submit(0);
    other.join();
    ASSERT_TRUE(answers[0].ok()) << "round " << round << ": " << answers[0].status().ToString();
    ASSERT_TRUE(answers[1].ok()) << "round " << round << ": " << answers[1].status().ToString();
    ASSERT_EQ(answers[0]->jobs, answers[1]->jobs) << "round " << round;
    ASSERT_EQ(answers[0]->replayed + answers[1]->replayed, 1) << "round " << round;
    ASSERT_TRUE(controller_->healthy()) << "round " << round;
    ids.insert(answers[0]->jobs.at(0).value());
  }
  EXPECT_EQ(ids.size(), static_cast<size_t>(kRounds));
  auto rows = store_->LoadJobs();
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(rows->size(), static_cast<size_t>(kRounds));
}

// The same for batches (and so for arrays, which are batches of their elements).
TEST_F(ControllerTrustTest, TwoBatchesWithOneKeyGetOneSetOfJobs) {
  constexpr int kRounds = 200;
  for (int round = 0; round < kRounds; ++round) {
    const std::string key = "batch-" + std::to_string(round);
    std::latch go(2);
    StatusOr<JobIntake::Submitted> answers[2] = {InternalError("not run"),
                                                 InternalError("not run")};
    auto submit = [&](int k) {
      std::vector<JobSubmission> jobs = {Parse(kOneGpu), Parse(kOneGpu)};
      jobs[1].array = "0-2";
      go.arrive_and_wait();
      answers[k] = controller_->intake().SubmitBatch(TeamA(), std::move(jobs), key);
    };
    std::thread other(submit, 1);
    submit(0);
    other.join();
    ASSERT_TRUE(answers[0].ok()) << "round " << round << ": " << answers[0].status().ToString();
    ASSERT_TRUE(answers[1].ok()) << "round " << round << ": " << answers[1].status().ToString();
    ASSERT_EQ(answers[0]->jobs, answers[1]->jobs) << "round " << round;
    ASSERT_EQ(answers[0]->jobs.size(), 4u);
    ASSERT_EQ(answers[0]->replayed + answers[1]->replayed, 1) << "round " << round;
    ASSERT_TRUE(controller_->healthy()) << "round " << round;
  }
}

// One tenant cannot fill the controller with pending jobs: its queue's maxPending
// bounds them (arrays' elements each), a submission past it is refused whole with
// ResourceExhausted (429), other queues are not affected, and room comes back as jobs
// start or end.
TEST_F(ControllerTrustTest, AQueueHoldsAtMostItsMaxPendingJobs) {
  std::string yaml = DefaultQueuesYaml();
  const std::string at = "  - name: team-a\n";
  ASSERT_NE(yaml.find(at), std::string::npos);
  yaml.insert(yaml.find(at) + at.size(), "    maxPending: 5\n");
  ASSERT_TRUE(controller_->SetQueues(yaml).ok());
  EXPECT_GT(Submit("team-a", std::string(kOneGpu) + "array: \"0-3\"\n"), 0u);
  JobSubmission two = Parse(std::string(kOneGpu) + "array: \"0-1\"\n");
  auto refused = controller_->intake().Submit(TeamA(), std::move(two), "");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("maxPending"), std::string::npos)
      << refused.status().message();
  auto rows = store_->LoadJobs();
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(rows->size(), 4u);  // nothing of the refused array was made
  EXPECT_GT(Submit("team-a", kOneGpu), 0u);  // the fifth fits
  auto sixth = controller_->intake().Submit(TeamA(), Parse(kOneGpu), "");
  EXPECT_EQ(sixth.status().code(), StatusCode::kResourceExhausted);
  // Two start (the node has two whole H100s): two more fit.
  Register();
  EXPECT_EQ(CycleAndTake().size(), 2u);
  EXPECT_GT(Submit("team-a", kOneGpu), 0u);
  EXPECT_GT(Submit("team-a", kOneGpu), 0u);
  EXPECT_EQ(controller_->intake().Submit(TeamA(), Parse(kOneGpu), "").status().code(),
            StatusCode::kResourceExhausted);
  EXPECT_GT(Submit("team-b", kOneGpu), 0u);  // another queue's bound is its own
  // A bad bound is refused with its path.
  std::string bad = DefaultQueuesYaml();
  bad.insert(bad.find(at) + at.size(), "    maxPending: 0\n");
  Status s = controller_->SetQueues(bad);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("maxPending"), std::string::npos) << s.message();
}

// As in Slurm, a user acts on its own jobs: another user of the same tenant may see
// them but not cancel, hold or requeue them; the tenant's own token (its coordinator)
// and the admin may, and the job records who did.
TEST_F(ControllerTrustTest, AUserChangesOnlyItsOwnJobsAndTheActorIsRecorded) {
  const Principal alice{Role::kTenant, "team-a", "alice-token", "alice"};
  const Principal bob{Role::kTenant, "team-a", "bob-token", "bob"};
  JobSubmission job = Parse(kOneGpu);
  job.spec.user = "alice";
  auto made = controller_->intake().Submit(alice, std::move(job), "");
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  const JobNumber id = made->jobs.at(0);
  const std::string name = std::to_string(id.value());

  auto cancel = Actions().Cancel(bob, id);
  ASSERT_FALSE(cancel.ok());
  EXPECT_EQ(cancel.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(cancel.status().message().find("alice"), std::string::npos) << cancel.status().message();
  EXPECT_EQ(Actions().Hold(bob, name).status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(Job(id.value())["state"], "pending");

  ASSERT_TRUE(Actions().Hold(alice, name).ok());
  EXPECT_NE(Job(id.value())["reason"].get<std::string>().find("(held by user alice)"), std::string::npos)
      << Job(id.value())["reason"];
  ASSERT_TRUE(Actions().Release(TeamA(), name).ok());  // the tenant's own token may
  ASSERT_TRUE(Actions().Cancel(TeamA(), id).ok());
  EXPECT_EQ(Job(id.value())["state"], "cancelled");
  EXPECT_EQ(Job(id.value())["reason"], "cancelled before it started, by tenant token test");
}

}  // namespace
}  // namespace tessera
