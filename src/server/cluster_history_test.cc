// The cluster's recorded history, page by page (cluster_history.h), on an in-memory store.
#include "server/cluster_history.h"

#include <gtest/gtest.h>

namespace tessera {
namespace cluster_history_test {

JobRow Row(uint64_t id, Micros submit, const std::string& spec = "{\"tasks\": []}") {
  JobRow row;
  row.id = id;
  row.name = "job" + std::to_string(id);
  row.tenant = "team-a";
  row.queue = "a";
  row.state = "succeeded";
  row.submit_us = submit;
  row.spec_json = spec;
  return row;
}

class ClusterHistoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteBatch batch;
    for (uint64_t id = 1; id <= 5; ++id) {
      batch.jobs.push_back(Row(id, static_cast<Micros>(id) * 100));
    }
    batch.jobs.push_back(Row(6, 600, "not json"));
    // Job 2 ran twice; its first run ended before the window, the second within it.
    batch.usage.push_back(UsageRow{2, "team-a", "a", 150, 180, 1000});
    batch.usage.push_back(UsageRow{2, "team-a", "a", 250, 400, 1000});
    batch.usage.push_back(UsageRow{3, "team-a", "a", 300, 0, 1000});  // still running
    ASSERT_TRUE(store_.Commit(std::move(batch)).ok());
    policy_.policy = {{"name", "tessera"}};
    policy_.queues_yaml = "queues: []\n";
  }
  InMemoryStore store_;
  HistoryPolicy policy_;
};

TEST_F(ClusterHistoryTest, APageHoldsTheWindowsJobsAndNamesTheNext) {
  StatusOr<nlohmann::json> page = ClusterHistoryPage(store_, policy_, 200, 700, 0, 2);
  ASSERT_TRUE(page.ok()) << page.status().message();
  ASSERT_EQ((*page)["jobs"].size(), 2u);
  EXPECT_EQ((*page)["jobs"][0]["id"], 2);
  EXPECT_EQ((*page)["jobs"][1]["id"], 3);
  EXPECT_EQ((*page)["next_after"], 3);
  EXPECT_EQ((*page)["policy"]["name"], "tessera");
  EXPECT_EQ((*page)["queues_yaml"], "queues: []\n");
  // Only the ended run that reaches into the window.
  ASSERT_EQ((*page)["jobs"][0]["runs"].size(), 1u);
  EXPECT_EQ((*page)["jobs"][0]["runs"][0]["start_us"], 250);
  EXPECT_TRUE((*page)["jobs"][1]["runs"].empty());

  StatusOr<nlohmann::json> last = ClusterHistoryPage(store_, policy_, 200, 700, 3, 10);
  ASSERT_TRUE(last.ok());
  // Jobs 4 and 5; job 6's row is not a submission this controller wrote.
  ASSERT_EQ((*last)["jobs"].size(), 2u);
  EXPECT_EQ((*last)["jobs"][1]["id"], 5);
  EXPECT_TRUE((*last)["next_after"].is_null());
}

TEST_F(ClusterHistoryTest, AnEmptyWindowOrABadLimitIsRefused) {
  EXPECT_EQ(ClusterHistoryPage(store_, policy_, 700, 700, 0, 10).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ClusterHistoryPage(store_, policy_, 0, 700, 0, 0).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ClusterHistoryPage(store_, policy_, 0, 700, 0, 10'001).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace cluster_history_test
}  // namespace tessera
