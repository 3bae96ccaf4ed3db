// EtcdStore while etcd members die: one member down, quorum lost and regained. A cluster
// of its own (members are killed), shared by the tests of this binary, in order.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "store/etcd/etcd_store.h"
#include "store/etcd/testing/etcd_cluster.h"

namespace tessera {
namespace {

using Clock = std::chrono::steady_clock;

JobRow Job(uint64_t id) {
  JobRow job;
  job.id = id;
  job.tenant = "team-a";
  job.queue = "q";
  job.name = "job-" + std::to_string(id);
  job.state = "pending";
  job.submit_us = static_cast<int64_t>(id);
  return job;
}

class EtcdFailoverTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto cluster = testing::SharedEtcdCluster();
    if (cluster.ok()) {
      cluster_ = *cluster;
    } else {
      start_error_ = new std::string(cluster.status().ToString());
    }
  }

  void SetUp() override {
    ASSERT_NE(cluster_, nullptr) << *start_error_;
    for (int i = 0; i < cluster_->members(); ++i) {
      if (!cluster_->running(i)) {
        ASSERT_TRUE(cluster_->Restart(i).ok());
      }
    }
    EtcdStoreOptions options;
    options.endpoints = cluster_->EndpointList();
    options.prefix = "/failover/" +
                     std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) +
                     "/";
    options.deadline_ms = 3000;
    auto store = EtcdStore::Open(options);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
  }

  // Commits job `id`; records it when acknowledged.
  Status CommitJob(uint64_t id) {
    WriteBatch batch;
    batch.jobs = {Job(id)};
    Status status = store_->Commit(batch);
    if (status.ok()) {
      acknowledged_.push_back(id);
    }
    return status;
  }

  void ExpectEveryAcknowledgedJob() {
    auto jobs = store_->LoadJobs();
    ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
    std::vector<uint64_t> ids;
    for (const JobRow& job : *jobs) {
      ids.push_back(job.id);
    }
    for (uint64_t id : acknowledged_) {
      EXPECT_NE(std::find(ids.begin(), ids.end(), id), ids.end()) << "job " << id << " lost";
    }
  }

  static testing::EtcdCluster* cluster_;
  static std::string* start_error_;
  std::unique_ptr<EtcdStore> store_;
  std::vector<uint64_t> acknowledged_;
};

testing::EtcdCluster* EtcdFailoverTest::cluster_ = nullptr;
std::string* EtcdFailoverTest::start_error_ = nullptr;

TEST_F(EtcdFailoverTest, CommitsContinueWithOneMemberDown) {
  for (uint64_t id = 1; id <= 5; ++id) {
    ASSERT_TRUE(CommitJob(id).ok());
  }
  // The member the store talks to first goes; any could be the raft leader.
  for (int victim = 0; victim < cluster_->members(); ++victim) {
    ASSERT_TRUE(cluster_->Kill(victim).ok());
    for (uint64_t i = 0; i < 5; ++i) {
      const uint64_t id = 100 * static_cast<uint64_t>(victim + 1) + i;
      Status status = CommitJob(id);
      EXPECT_TRUE(status.ok()) << "member " << victim << " down, job " << id << ": "
                               << status.ToString();
    }
    ASSERT_TRUE(cluster_->Restart(victim).ok());
  }
  EXPECT_EQ(acknowledged_.size(), 20u);
  ExpectEveryAcknowledgedJob();
}

TEST_F(EtcdFailoverTest, QuorumLossIsUnavailableWithinTheDeadlineAndNothingAcknowledgedIsLost) {
  for (uint64_t id = 1; id <= 5; ++id) {
    ASSERT_TRUE(CommitJob(id).ok());
  }
  ASSERT_TRUE(cluster_->Kill(1).ok());
  ASSERT_TRUE(cluster_->Kill(2).ok());
  const auto start = Clock::now();
  Status status = CommitJob(6);
  const auto took = Clock::now() - start;
  EXPECT_EQ(status.code(), StatusCode::kUnavailable) << status.ToString();
  EXPECT_NE(status.message().find("no quorum or unreachable"), std::string::npos)
      << status.ToString();
  EXPECT_LT(took, std::chrono::milliseconds(3000 + 1500));
  EXPECT_EQ(store_->LoadJobs().status().code(), StatusCode::kUnavailable);

  ASSERT_TRUE(cluster_->Restart(1).ok());
  ASSERT_TRUE(cluster_->Restart(2).ok());
  Status again = CommitJob(7);
  EXPECT_TRUE(again.ok()) << again.ToString();
  ExpectEveryAcknowledgedJob();
  EXPECT_EQ(acknowledged_, (std::vector<uint64_t>{1, 2, 3, 4, 5, 7}));
}

}  // namespace
}  // namespace tessera
