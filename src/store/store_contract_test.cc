// The Store contract's tests: see store_contract_test.h.
#include "store/store_contract_test.h"

#include <optional>
#include <string_view>
#include <thread>
#include <utility>

namespace tessera::store_contract {

JobRow MakeJob(uint64_t id, std::string tenant, std::string key) {
  JobRow job;
  job.id = id;
  job.tenant = std::move(tenant);
  job.queue = "research";
  job.name = "job-" + std::to_string(id);
  job.idempotency_key = std::move(key);
  job.spec_json = R"({"tasks":[{"gpu_milli":1000}]})";
  job.state = "pending";
  job.submit_us = 1000 + static_cast<int64_t>(id);
  return job;
}

UsageRow MakeUsage(uint64_t job, int64_t start_us, int64_t end_us) {
  return UsageRow{job, "team-a", "research", start_us, end_us, 500};
}

std::vector<uint64_t> Ids(const std::vector<JobRow>& jobs) {
  std::vector<uint64_t> ids;
  for (const JobRow& job : jobs) {
    ids.push_back(job.id);
  }
  return ids;
}

TEST_P(StoreTest, RoundTripsEveryRowKind) {
  JobRow job = MakeJob(7, "team-a", "submit-1");
  job.state = "failed";
  job.start_us = 2000;
  job.end_us = 3000;
  job.attempts = 2;
  job.preemptions = 1;
  job.exit_code = -9;
  job.reason = "OOM on rank 3";
  job.placement_json = R"({"node":"n1","gpus":[0,1]})";
  job.progress_us = 1500;
  UsageRow usage{7, "team-a", "research", 2000, 3000, 2000, 1500};
  TokenRow token{"ab12", "tenant", "team-a", "ci", 42, "alice"};
  WriteBatch batch;
  batch.jobs = {job};
  batch.usage = {usage};
  batch.tokens = {token};
  batch.kv = {{"queues", "yaml: 1"}, {"binary", std::string("a\0b", 3)}, {"empty", ""}};
  ASSERT_TRUE(store_->Commit(batch).ok());

  auto jobs = store_->LoadJobs();
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0], job);
  auto all_usage = store_->LoadUsage(0, 10000);
  ASSERT_TRUE(all_usage.ok());
  ASSERT_EQ(all_usage->size(), 1u);
  EXPECT_EQ((*all_usage)[0], usage);
  auto tokens = store_->LoadTokens();
  ASSERT_TRUE(tokens.ok());
  ASSERT_EQ(tokens->size(), 1u);
  EXPECT_EQ((*tokens)[0], token);
  auto queues = store_->GetKv("queues");
  ASSERT_TRUE(queues.ok());
  EXPECT_EQ(*queues, std::optional<std::string>("yaml: 1"));
  auto binary = store_->GetKv("binary");
  ASSERT_TRUE(binary.ok());
  EXPECT_EQ(*binary, std::optional<std::string>(std::string("a\0b", 3)));
  auto empty = store_->GetKv("empty");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(*empty, std::optional<std::string>(""));
  auto missing = store_->GetKv("nope");
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value());
}

TEST_P(StoreTest, UpsertsJobsTokensAndKvAndAppendsUsage) {
  WriteBatch first;
  first.jobs = {MakeJob(1), MakeJob(2)};
  first.usage = {MakeUsage(1, 10, 20)};
  first.tokens = {TokenRow{"h1", "admin", "", "root", 1, ""}};
  first.kv = {{"k", "v1"}};
  ASSERT_TRUE(store_->Commit(first).ok());

  WriteBatch second;
  JobRow running = MakeJob(1);
  running.state = "running";
  running.start_us = 50;
  second.jobs = {running};
  second.usage = {MakeUsage(1, 10, 20)};  // the same interval twice: appended, not merged
  second.tokens = {TokenRow{"h1", "tenant", "team-a", "renamed", 2, "bob"}};
  second.kv = {{"k", "v2"}};
  ASSERT_TRUE(store_->Commit(second).ok());

  auto jobs = store_->LoadJobs();
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 2u);
  EXPECT_EQ((*jobs)[0], running);
  EXPECT_EQ((*jobs)[1], MakeJob(2));
  auto usage = store_->LoadUsage(0, 100);
  ASSERT_TRUE(usage.ok());
  EXPECT_EQ(usage->size(), 2u);
  auto tokens = store_->LoadTokens();
  ASSERT_TRUE(tokens.ok());
  ASSERT_EQ(tokens->size(), 1u);
  EXPECT_EQ((*tokens)[0], (TokenRow{"h1", "tenant", "team-a", "renamed", 2, "bob"}));
  auto value = store_->GetKv("k");
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(*value, std::optional<std::string>("v2"));
}

TEST_P(StoreTest, ListsKvByPrefix) {
  WriteBatch b;
  b.kv = {{"node/b", "2"}, {"node/a", "1"}, {"nodes", "x"},
          {"node", "y"},   {"nodf", "z"},   {"other", "w"}};
  ASSERT_TRUE(store_->Commit(b).ok());
  auto listed = store_->ListKv("node/");
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  using KV = std::pair<std::string, std::string>;
  EXPECT_EQ(*listed, (std::vector<KV>{{"node/a", "1"}, {"node/b", "2"}}));
  auto all = store_->ListKv("");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 6u);
  EXPECT_TRUE(store_->ListKv("zzz")->empty());
}

TEST_P(StoreTest, LaterUpsertInOneBatchWins) {
  WriteBatch batch;
  JobRow done = MakeJob(3);
  done.state = "succeeded";
  batch.jobs = {MakeJob(3), done};
  batch.kv = {{"k", "a"}, {"k", "b"}};
  ASSERT_TRUE(store_->Commit(batch).ok());
  auto jobs = store_->LoadJobs();
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].state, "succeeded");
  EXPECT_EQ(*store_->GetKv("k").value(), "b");
}

TEST_P(StoreTest, LoadsJobsById) {
  for (uint64_t id : {5u, 1u, 3u}) {
    WriteBatch batch;
    batch.jobs = {MakeJob(id)};
    ASSERT_TRUE(store_->Commit(batch).ok());
  }
  auto jobs = store_->LoadJobs();
  ASSERT_TRUE(jobs.ok());
  EXPECT_EQ(Ids(*jobs), (std::vector<uint64_t>{1, 3, 5}));
}

TEST_P(StoreTest, LoadsOneJobByIdWithEveryField) {
  WriteBatch batch;
  JobRow row = MakeJob(7, "team-b", "retry-key");
  row.state = "failed";
  row.exit_code = 3;
  row.reason = "task 0 exited with code 3";
  row.progress_us = 1234;
  batch.jobs = {MakeJob(6), row};
  ASSERT_TRUE(store_->Commit(batch).ok());
  auto one = store_->LoadJob(7);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  ASSERT_TRUE(one->has_value());
  EXPECT_EQ(**one, row);
  auto none = store_->LoadJob(8);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

TEST_P(StoreTest, LoadsTokensByHash) {
  WriteBatch batch;
  batch.tokens = {TokenRow{"c", "agent", "", "n1", 1, ""}, TokenRow{"a", "admin", "", "root", 1, ""},
                  TokenRow{"b", "tenant", "t", "ci", 1, ""}};
  ASSERT_TRUE(store_->Commit(batch).ok());
  auto tokens = store_->LoadTokens();
  ASSERT_TRUE(tokens.ok());
  ASSERT_EQ(tokens->size(), 3u);
  EXPECT_EQ((*tokens)[0].hash, "a");
  EXPECT_EQ((*tokens)[1].hash, "b");
  EXPECT_EQ((*tokens)[2].hash, "c");
}

TEST_P(StoreTest, LoadUsageReturnsIntervalsOverlappingTheWindow) {
  WriteBatch batch;
  batch.usage = {MakeUsage(1, 100, 200),
                 MakeUsage(2, 0, 100),
                 MakeUsage(3, 200, 300),
                 MakeUsage(4, 150, 160),
                 MakeUsage(5, 50, 0) /* still open */,
                 MakeUsage(6, 300, 0) /* opens at the window's end */};
  ASSERT_TRUE(store_->Commit(batch).ok());
  auto usage = store_->LoadUsage(100, 200);  // [100, 200)
  ASSERT_TRUE(usage.ok());
  std::vector<uint64_t> jobs;
  for (const UsageRow& row : *usage) {
    jobs.push_back(row.job);
  }
  // By start: 5 (50, open), 1 (100..200), 4 (150..160). Job 2 ends at 100 and job 3
  // starts at 200: half-open intervals that only touch the window do not overlap it.
  EXPECT_EQ(jobs, (std::vector<uint64_t>{5, 1, 4}));
  auto later = store_->LoadUsage(1000, 2000);
  ASSERT_TRUE(later.ok());
  ASSERT_EQ(later->size(), 2u);
  EXPECT_EQ((*later)[0].job, 5u);
  EXPECT_EQ((*later)[1].job, 6u);
  auto none = store_->LoadUsage(0, 0);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST_P(StoreTest, LoadsAPageOfJobsByIdWithinASubmitWindow) {
  WriteBatch batch;
  for (uint64_t id = 1; id <= 8; ++id) {
    batch.jobs.push_back(MakeJob(id));  // submitted at 1000 + id
  }
  ASSERT_TRUE(store_->Commit(batch).ok());
  // Submitted in [1002, 1007): ids 2..6.
  EXPECT_EQ(Ids(store_->LoadJobsPage(0, 1002, 1007, 0).value()),
            (std::vector<uint64_t>{2, 3, 4, 5, 6}));
  EXPECT_EQ(Ids(store_->LoadJobsPage(0, 1002, 1007, 2).value()), (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(Ids(store_->LoadJobsPage(3, 1002, 1007, 2).value()), (std::vector<uint64_t>{4, 5}));
  EXPECT_EQ(Ids(store_->LoadJobsPage(5, 1002, 1007, 2).value()), (std::vector<uint64_t>{6}));
  EXPECT_TRUE(store_->LoadJobsPage(6, 1002, 1007, 2).value().empty());
  const std::vector<JobRow> one = store_->LoadJobsPage(6, 0, 2000, 1).value();
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0], MakeJob(7));  // every field
}

TEST_P(StoreTest, LoadsTheUsageOfARangeOfJobsByJobThenStart) {
  WriteBatch first;
  first.usage = {MakeUsage(3, 500, 600), MakeUsage(2, 300, 0) /* open */, MakeUsage(1, 10, 20),
                 MakeUsage(3, 100, 200), MakeUsage(4, 50, 60)};
  ASSERT_TRUE(store_->Commit(first).ok());
  WriteBatch second;
  second.usage = {MakeUsage(3, 100, 150)};  // same start: after the earlier row
  ASSERT_TRUE(store_->Commit(second).ok());
  auto usage = store_->LoadUsageOfJobs(2, 3);
  ASSERT_TRUE(usage.ok()) << usage.status().ToString();
  std::vector<UsageRow> expected = {MakeUsage(2, 300, 0), MakeUsage(3, 100, 200),
                                    MakeUsage(3, 100, 150), MakeUsage(3, 500, 600)};
  EXPECT_EQ(*usage, expected);
  EXPECT_TRUE(store_->LoadUsageOfJobs(5, 9).value().empty());
}

TEST_P(StoreTest, IdempotencyKeyIsUniquePerTenant) {
  WriteBatch first;
  first.jobs = {MakeJob(1, "team-a", "k1"), MakeJob(2, "team-b", "k1"), MakeJob(3, "team-a"),
                MakeJob(4, "team-a")};  // empty keys never conflict
  ASSERT_TRUE(store_->Commit(first).ok());

  // Re-upserting a job with its own key is fine.
  JobRow again = MakeJob(1, "team-a", "k1");
  again.state = "running";
  WriteBatch update;
  update.jobs = {again};
  ASSERT_TRUE(store_->Commit(update).ok());

  // Another job of team-a with k1 is refused, and nothing of its batch is applied.
  WriteBatch duplicate;
  duplicate.jobs = {MakeJob(10, "team-a", "other"), MakeJob(11, "team-a", "k1")};
  duplicate.kv = {{"side", "effect"}};
  Status status = store_->Commit(duplicate);
  EXPECT_EQ(status.code(), StatusCode::kAlreadyExists) << status.ToString();
  EXPECT_NE(status.message().find("k1"), std::string::npos) << status.ToString();
  auto jobs = store_->LoadJobs();
  ASSERT_TRUE(jobs.ok());
  EXPECT_EQ(Ids(*jobs), (std::vector<uint64_t>{1, 2, 3, 4}));
  EXPECT_FALSE(store_->GetKv("side").value().has_value());

  // The failed batch did not reserve "other": it is free.
  WriteBatch other;
  other.jobs = {MakeJob(12, "team-a", "other")};
  EXPECT_TRUE(store_->Commit(other).ok());

  // Once job 1 drops its key, another job may take it, in the same batch.
  WriteBatch move;
  move.jobs = {MakeJob(1, "team-a", ""), MakeJob(13, "team-a", "k1")};
  EXPECT_TRUE(store_->Commit(move).ok());
  jobs = store_->LoadJobs();
  ASSERT_TRUE(jobs.ok());
  EXPECT_EQ(Ids(*jobs), (std::vector<uint64_t>{1, 2, 3, 4, 12, 13}));
  EXPECT_EQ((*jobs)[0].state, "pending");
  EXPECT_EQ((*jobs)[0].idempotency_key, "");
}

TEST_P(StoreTest, RejectsMalformedRowsAndAppliesNothing) {
  auto expect_invalid = [this](WriteBatch batch) {
    batch.kv.emplace_back("side", "effect");
    Status status = store_->Commit(std::move(batch));
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.ToString();
  };
  WriteBatch zero_id;
  zero_id.jobs = {MakeJob(0)};
  expect_invalid(zero_id);
  WriteBatch bad_state;
  bad_state.jobs = {MakeJob(1)};
  bad_state.jobs[0].state = "paused";
  expect_invalid(bad_state);
  WriteBatch bad_usage;
  bad_usage.usage = {MakeUsage(1, 200, 100)};
  expect_invalid(bad_usage);
  WriteBatch no_job_usage;
  no_job_usage.usage = {MakeUsage(0, 1, 2)};
  expect_invalid(no_job_usage);
  WriteBatch empty_hash;
  empty_hash.tokens = {TokenRow{"", "admin", "", "x", 0, ""}};
  expect_invalid(empty_hash);
  WriteBatch empty_key;
  empty_key.kv = {{"", "v"}};
  expect_invalid(empty_key);

  EXPECT_TRUE(store_->LoadJobs().value().empty());
  EXPECT_TRUE(store_->LoadUsage(0, 1000).value().empty());
  EXPECT_TRUE(store_->LoadTokens().value().empty());
  EXPECT_FALSE(store_->GetKv("side").value().has_value());
}

TEST_P(StoreTest, EveryJobStateIsAccepted) {
  WriteBatch batch;
  uint64_t id = 1;
  for (std::string_view state : kJobStates) {
    JobRow job = MakeJob(id++);
    job.state = std::string(state);
    batch.jobs.push_back(job);
  }
  ASSERT_TRUE(store_->Commit(batch).ok());
  EXPECT_EQ(store_->LoadJobs().value().size(), kJobStates.size());
}

TEST_P(StoreTest, EmptyBatchCommits) {
  EXPECT_TRUE(WriteBatch{}.empty());
  EXPECT_TRUE(store_->Commit(WriteBatch{}).ok());
  EXPECT_TRUE(store_->LoadJobs().value().empty());
}

TEST_P(StoreTest, CloseIsIdempotentAndRefusesLaterCalls) {
  WriteBatch batch;
  batch.jobs = {MakeJob(1)};
  ASSERT_TRUE(store_->Commit(batch).ok());
  EXPECT_TRUE(store_->Close().ok());
  EXPECT_TRUE(store_->Close().ok());
  EXPECT_EQ(store_->Commit(batch).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->Commit(WriteBatch{}).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->LoadJobs().status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->LoadUsage(0, 1).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->LoadTokens().status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->GetKv("k").status().code(), StatusCode::kFailedPrecondition);
}

TEST_P(StoreTest, ConcurrentCommitsAllLand) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 40;
  std::vector<std::thread> threads;
  std::vector<int> failures(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([this, t, &failures] {
      for (int i = 0; i < kPerThread; ++i) {
        WriteBatch batch;
        uint64_t id = static_cast<uint64_t>(t * kPerThread + i + 1);
        batch.jobs = {MakeJob(id)};
        batch.usage = {MakeUsage(id, 1, 2)};
        if (!store_->Commit(std::move(batch)).ok()) {
          ++failures[t];
        }
      }
    });
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(failures[t], 0) << "thread " << t;
  }
  auto jobs = store_->LoadJobs();
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), static_cast<size_t>(kThreads * kPerThread));
  for (size_t i = 0; i < jobs->size(); ++i) {
    EXPECT_EQ((*jobs)[i], MakeJob(i + 1));
  }
  EXPECT_EQ(store_->LoadUsage(0, 10).value().size(), static_cast<size_t>(kThreads * kPerThread));
}

}  // namespace tessera::store_contract
