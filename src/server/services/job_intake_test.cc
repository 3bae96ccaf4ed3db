// JobIntake on a fake core (its port, JobIntake::Core): idempotency keys, batches all or
// nothing with consecutive ids, the pending bound, and a resend racing its first try.
#include "server/services/job_intake.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "api/job_relations.h"
#include "base/clock.h"

namespace tessera {
namespace job_intake_test {

// A core in memory: queues "q-<tenant>" belong to their tenant; a staged job is in
// flight until acknowledged. The test sets what the store's commit answers, and may
// hold a commit until released.
class FakeCore final : public JobIntake::Core {
 public:
  struct Job {
    JobRow row;
    JobSubmission submission;
    bool durable = false;
  };

  Mutex& lock() const override RETURN_CAPABILITY(mu_) { return mu_; }
  bool healthy() const override { return !store_failed_.load(); }
  void StoreFailed() override { store_failed_ = true; }
  Status Commit(WriteBatch batch) override EXCLUDES(mu_) {
    {
      std::unique_lock<std::mutex> l(gate_mu_);
      ++commits_started_;
      gate_cv_.notify_all();
      gate_cv_.wait(l, [this] { return !hold_commits_; });
    }
    MutexLock lock(mu_);
    if (!commit_answer_.ok()) {
      return commit_answer_;
    }
    committed_rows_ += batch.jobs.size();
    return Status::Ok();
  }
  std::shared_ptr<const WaitContext> FitContext() const override {
    return std::make_shared<WaitContext>();  // no node known: every job may wait
  }
  size_t PendingIn(const std::string& /*queue*/) const override { return pending_.load(); }

  StatusOr<std::string> ResolveQueue(const Principal& who, std::string& queue) override
      REQUIRES(mu_) {
    if (queue.empty()) {
      queue = "q-" + who.tenant;
    }
    if (queue.rfind("q-", 0) != 0) {
      return InvalidArgumentError("queue: no queue named '" + queue + "'");
    }
    if (queue != "q-" + who.tenant) {
      return PermissionDeniedError("queue '" + queue + "' belongs to another tenant");
    }
    return who.tenant;
  }
  const std::string& QueuesYaml() const override REQUIRES(mu_) { return yaml_; }
  std::shared_ptr<const JobGates::Array> ParsedArray(const std::string& text) override
      REQUIRES(mu_) {
    StatusOr<ArraySpec> spec = ParseArraySpec(text);
    if (!spec.ok()) {
      return nullptr;
    }
    auto array = std::make_shared<JobGates::Array>();
    array->indices = spec->indices;
    return array;
  }
  Status PrepareSubmission(const Principal& /*who*/, JobSubmission& job) override REQUIRES(mu_) {
    return job.array_index >= 0 ? InvalidArgumentError("array_index: is set by the server")
                                : Status::Ok();
  }
  void ApplyGpuDefaults(std::span<JobSubmission> /*jobs*/) override REQUIRES(mu_) {}
  std::optional<JobNumber> FindKey(const std::string& tenant, const std::string& key) const override
      REQUIRES(mu_) {
    auto it = keys_.find({tenant, key});
    return it != keys_.end() ? std::optional<JobNumber>(it->second) : std::nullopt;
  }
  bool InFlight(JobNumber id) const override REQUIRES(mu_) {
    auto it = jobs_.find(id);
    const bool in_flight = it != jobs_.end() && !it->second.durable;
    in_flight_seen_ += in_flight ? 1 : 0;
    return in_flight;
  }
  std::optional<JobSubmission> SubmissionOf(JobNumber id, nlohmann::json* json) override
      REQUIRES(mu_) {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) {
      return std::nullopt;
    }
    if (json != nullptr) {
      *json = JobJson(id);
    }
    return it->second.submission;
  }
  JobNumber TakeId() override REQUIRES(mu_) { return JobNumber(next_id_++); }
  void AddStaged(const JobRow& row, JobSubmission job) override REQUIRES(mu_) {
    jobs_[JobNumber(row.id)] = Job{row, std::move(job), false};
    if (!row.idempotency_key.empty()) {
      keys_[{row.tenant, row.idempotency_key}] = JobNumber(row.id);
    }
  }
  void Forget(JobNumber id) override REQUIRES(mu_) {
    const JobRow& row = jobs_.at(id).row;
    keys_.erase({row.tenant, row.idempotency_key});
    jobs_.erase(id);
  }
  void Acknowledge(JobNumber id, Micros /*now*/, bool /*spec_text_ok*/) override REQUIRES(mu_) {
    jobs_.at(id).durable = true;
  }
  nlohmann::json JobJson(JobNumber id) const override REQUIRES(mu_) {
    return nlohmann::json{{"id", id.value()}, {"name", jobs_.at(id).submission.spec.name}};
  }
  void Wake() override REQUIRES(mu_) { ++wakes_; }

  // ---- for the test ----
  void AnswerCommits(Status s) EXCLUDES(mu_) {
    MutexLock lock(mu_);
    commit_answer_ = std::move(s);
  }
  void SetBound(int64_t max_pending, size_t pending) EXCLUDES(mu_) {
    MutexLock lock(mu_);
    yaml_ = "queues:\n  - name: q-a\n    maxPending: " + std::to_string(max_pending) + "\n";
    pending_ = pending;
  }
  size_t jobs() const EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return jobs_.size();
  }
  size_t keys() const EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return keys_.size();
  }
  uint64_t next_id() const EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return next_id_;
  }
  int in_flight_seen() const EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return in_flight_seen_;
  }
  // Commits wait while held; WaitForCommits(n): until n commits have started.
  void HoldCommits(bool hold) {
    std::lock_guard<std::mutex> l(gate_mu_);
    hold_commits_ = hold;
    gate_cv_.notify_all();
  }
  void WaitForCommits(int n) {
    std::unique_lock<std::mutex> l(gate_mu_);
    gate_cv_.wait(l, [&] { return commits_started_ >= n; });
  }

 private:
  mutable Mutex mu_;
  std::map<JobNumber, Job> jobs_ GUARDED_BY(mu_);
  std::map<std::pair<std::string, std::string>, JobNumber> keys_ GUARDED_BY(mu_);
  uint64_t next_id_ GUARDED_BY(mu_) = 1;
  std::string yaml_ GUARDED_BY(mu_) = "queues:\n  - name: q-a\n";
  Status commit_answer_ GUARDED_BY(mu_);
  size_t committed_rows_ GUARDED_BY(mu_) = 0;
  mutable int in_flight_seen_ GUARDED_BY(mu_) = 0;
  int wakes_ GUARDED_BY(mu_) = 0;
  std::atomic<size_t> pending_{0};
  std::atomic<bool> store_failed_{false};
  std::mutex gate_mu_;
  std::condition_variable gate_cv_;
  bool hold_commits_ = false;
  int commits_started_ = 0;
};

class JobIntakeTest : public ::testing::Test {
 protected:
  static JobSubmission Job(const std::string& name) {
    StatusOr<JobSubmission> job =
        ParseJobYaml("name: " + name + "\ncommand: [/bin/true]\n", GpuCatalog::Default());
    EXPECT_TRUE(job.ok()) << job.status().ToString();
    return job.ok() ? std::move(job).value() : JobSubmission{};
  }
  static std::vector<JobSubmission> Batch(std::vector<std::string> names) {
    std::vector<JobSubmission> jobs;
    for (const std::string& n : names) {
      jobs.push_back(Job(n));
    }
    return jobs;
  }
  static std::vector<uint64_t> Ids(const StatusOr<JobIntake::Submitted>& out) {
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    std::vector<uint64_t> ids;
    for (JobNumber id : out.ok() ? out->jobs : std::vector<JobNumber>{}) {
      ids.push_back(id.value());
    }
    return ids;
  }

  const Principal team_a_{Role::kTenant, "a", "test"};
  ManualClock clock_{1'000'000};
  FakeCore core_;
  JobIntake intake_{core_, GpuCatalog::Default(), clock_};
};

TEST_F(JobIntakeTest, KeyReusedWithAnotherBodyIsAlreadyExists) {
  StatusOr<JobIntake::Submitted> first = intake_.Submit(team_a_, Job("train"), "k1");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->shape, JobIntake::Submitted::Shape::kJob);
  EXPECT_EQ(Ids(first), (std::vector<uint64_t>{1}));
  EXPECT_FALSE(first->replayed);
  EXPECT_EQ(first->job_view, (nlohmann::json{{"id", 1}, {"name", "train"}}));

  StatusOr<JobIntake::Submitted> again = intake_.Submit(team_a_, Job("train"), "k1");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->shape, JobIntake::Submitted::Shape::kJob);
  EXPECT_EQ(Ids(again), (std::vector<uint64_t>{1}));
  EXPECT_TRUE(again->replayed);
  EXPECT_EQ(again->job_view, first->job_view);  // the first job's view again

  StatusOr<JobIntake::Submitted> other = intake_.Submit(team_a_, Job("eval"), "k1");
  EXPECT_EQ(other.status().code(), StatusCode::kAlreadyExists);
  EXPECT_NE(other.status().message().find("with a different body"), std::string::npos)
      << other.status().message();
  EXPECT_EQ(core_.jobs(), 1u);
}

TEST_F(JobIntakeTest, FailedBatchCommitLeavesNothingStaged) {
  core_.AnswerCommits(UnavailableError("disk gone"));
  StatusOr<JobIntake::Submitted> out = intake_.SubmitBatch(team_a_, Batch({"a", "b", "c"}), "k");
  EXPECT_EQ(out.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(out.status().message().find("could not make the jobs durable"), std::string::npos)
      << out.status().message();
  EXPECT_EQ(core_.jobs(), 0u);
  EXPECT_EQ(core_.keys(), 0u);
  EXPECT_FALSE(core_.healthy());  // the store failed: no change accepted any more
  EXPECT_EQ(intake_.Submit(team_a_, Job("d"), "").status().code(), StatusCode::kUnavailable);
}

TEST_F(JobIntakeTest, BatchTooLargeForTheStoreIsTheClientsAndLeavesTheStoreHealthy) {
  core_.AnswerCommits(InvalidArgumentError("too many rows"));
  StatusOr<JobIntake::Submitted> out = intake_.SubmitBatch(team_a_, Batch({"a", "b"}), "");
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(core_.jobs(), 0u);
  EXPECT_TRUE(core_.healthy());
}

TEST_F(JobIntakeTest, PendingBoundRefusesWithResourceExhausted) {
  core_.SetBound(/*max_pending=*/2, /*pending=*/2);
  StatusOr<JobIntake::Submitted> one = intake_.Submit(team_a_, Job("x"), "");
  EXPECT_EQ(one.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(one.status().message().find("maxPending"), std::string::npos) << one.status().message();

  core_.SetBound(/*max_pending=*/2, /*pending=*/0);
  StatusOr<JobIntake::Submitted> three = intake_.SubmitBatch(team_a_, Batch({"a", "b", "c"}), "");
  EXPECT_EQ(three.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(core_.jobs(), 0u);
  EXPECT_EQ(core_.next_id(), 1u);  // refused before any id was taken
  EXPECT_EQ(intake_.MaxPending("q-a", "queues:\n  - name: q-a\n    maxPending: 7\n"), 7);
  EXPECT_EQ(Ids(intake_.SubmitBatch(team_a_, Batch({"a", "b"}), "")).size(), 2u);
}

TEST_F(JobIntakeTest, RetryOfABatchReturnsTheFirstIds) {
  StatusOr<JobIntake::Submitted> first = intake_.SubmitBatch(team_a_, Batch({"a", "b", "c"}), "k");
  EXPECT_EQ(Ids(first), (std::vector<uint64_t>{1, 2, 3}));  // consecutive
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->shape, JobIntake::Submitted::Shape::kBatch);
  EXPECT_FALSE(first->replayed);
  EXPECT_TRUE(first->job_view.is_null());

  StatusOr<JobIntake::Submitted> retry = intake_.SubmitBatch(team_a_, Batch({"a", "b", "c"}), "k");
  EXPECT_EQ(Ids(retry), (std::vector<uint64_t>{1, 2, 3}));
  ASSERT_TRUE(retry.ok());
  EXPECT_EQ(retry->shape, JobIntake::Submitted::Shape::kBatch);
  EXPECT_TRUE(retry->replayed);
  EXPECT_EQ(core_.jobs(), 3u);

  // Another batch under the key: a changed job, a shorter batch.
  EXPECT_EQ(intake_.SubmitBatch(team_a_, Batch({"a", "x", "c"}), "k").status().code(),
            StatusCode::kAlreadyExists);
  EXPECT_EQ(intake_.SubmitBatch(team_a_, Batch({"a", "b"}), "k").status().code(),
            StatusCode::kAlreadyExists);
  EXPECT_EQ(core_.jobs(), 3u);
}

TEST_F(JobIntakeTest, ArrayIsOneBatchAndItsErrorsNameNoBatchJob) {
  JobSubmission array = Job("sweep");
  array.array = "0-3";
  StatusOr<JobIntake::Submitted> out = intake_.Submit(team_a_, array, "k");
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->shape, JobIntake::Submitted::Shape::kArray);
  EXPECT_EQ(Ids(out), (std::vector<uint64_t>{1, 2, 3, 4}));
  EXPECT_FALSE(out->replayed);

  // Resent under its key: the same elements, replayed, still an array.
  StatusOr<JobIntake::Submitted> again = intake_.Submit(team_a_, array, "k");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->shape, JobIntake::Submitted::Shape::kArray);
  EXPECT_EQ(Ids(again), (std::vector<uint64_t>{1, 2, 3, 4}));
  EXPECT_TRUE(again->replayed);
  EXPECT_EQ(core_.jobs(), 4u);

  array.array = "not an array";
  StatusOr<JobIntake::Submitted> bad = intake_.Submit(team_a_, array, "");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message().rfind("array: 'not an array'", 0), 0u) << bad.status().message();

  JobSubmission other = Job("theirs");
  other.spec.queue = "q-b";
  EXPECT_EQ(intake_.SubmitBatch(team_a_, {Job("mine"), other}, "").status().message(),
            "jobs[1]: queue 'q-b' belongs to another tenant");
}

TEST_F(JobIntakeTest, AgentsCannotSubmit) {
  EXPECT_EQ(intake_.Submit(Principal{Role::kAgent, "", "node-1"}, Job("x"), "").status().code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(core_.next_id(), 1u);
}

// Two submissions under one key: the first is made durable while the second waits for
// its commit, then answers as its replay.
TEST_F(JobIntakeTest, ResendRacingItsFirstTryWaitsAndReplays) {
  core_.HoldCommits(true);
  StatusOr<JobIntake::Submitted> first = Status::Ok();
  std::thread t([&] { first = intake_.Submit(team_a_, Job("train"), "race"); });
  core_.WaitForCommits(1);  // staged, its commit under way

  StatusOr<JobIntake::Submitted> second = Status::Ok();
  std::thread u([&] { second = intake_.Submit(team_a_, Job("train"), "race"); });
  while (core_.in_flight_seen() == 0) {  // the resend found the key in flight: it waits
    std::this_thread::yield();
  }
  core_.HoldCommits(false);
  t.join();
  u.join();
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_FALSE(first->replayed);
  EXPECT_TRUE(second->replayed);
  EXPECT_EQ(Ids(second), Ids(first));
  EXPECT_EQ(core_.jobs(), 1u);
}

}  // namespace job_intake_test
}  // namespace tessera
