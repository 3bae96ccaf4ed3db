// Job history from the store (sacct-like): filters, pages bounded in rows read, the
// first page found by submission time, and where each attempt ran.
#include "server/job_history.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/job_attempts.h"

namespace tessera {
// Named, not anonymous: its kSecond would meet controller_fixture.h's in a unity batch.
namespace job_history_test {

constexpr Micros kSecond = 1'000'000;

// Job `id` submitted at id seconds, by `user` of `tenant`, ended in `state`; a job that
// ran has one attempt on node "n<id % 2>" with GPUs id % 4 and id % 4 + 1.
JobRow Finished(uint64_t id, const std::string& tenant, const std::string& user,
                const std::string& state) {
  JobRow row;
  row.id = id;
  row.tenant = tenant;
  row.queue = tenant;
  row.name = "job-" + std::to_string(id);
  row.spec_json =
      user.empty() ? R"({"command":["x"]})" : R"({"command":["x"],"user":")" + user + R"("})";
  row.state = state;
  row.submit_us = static_cast<Micros>(id) * kSecond;
  if (state != "cancelled") {
    row.start_us = row.submit_us + kSecond;
    row.end_us = row.start_us + 10 * kSecond;
    row.exit_code = state == "failed" ? 3 : 0;
    const int g = static_cast<int>(id % 4);
    nlohmann::json task = {
        {"node", "n" + std::to_string(id % 2)},
        {"gpus", {{{"index", g}, {"milli", 1000}}, {{"index", g + 1}, {"milli", 1000}}}}};
    row.placement_json = AppendAttempt("", {{"attempt", 1},
                                            {"start", row.start_us},
                                            {"end", row.end_us},
                                            {"ended", state},
                                            {"exit_code", row.exit_code},
                                            {"tasks", {task}}});
  }
  return row;
}

class JobHistoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteBatch batch;
    for (uint64_t id = 1; id <= 40; ++id) {
      const std::string tenant = id % 2 == 0 ? "team-a" : "team-b";
      const std::string user = id % 3 == 0 ? "alice" : "bob";
      const std::string state = id % 5 == 0 ? "failed" : id % 7 == 0 ? "cancelled" : "succeeded";
      batch.jobs.push_back(Finished(id, tenant, user, state));
    }
    JobRow running = Finished(41, "team-a", "alice", "succeeded");
    running.state = "running";
    batch.jobs.push_back(running);
    ASSERT_TRUE(store_.Commit(batch).ok());
  }

  HistoryQuery Everything() const {
    HistoryQuery q;
    q.since = 0;
    q.until = 1000 * kSecond;
    q.limit = 1000;
    return q;
  }

  InMemoryStore store_;
};

TEST_F(JobHistoryTest, AnEntryHasItsUserTimesAndWhereEachAttemptRan) {
  nlohmann::json e = HistoryEntry(Finished(6, "team-a", "alice", "failed"));
  EXPECT_EQ(e["id"], 6);
  EXPECT_EQ(e["user"], "alice");
  EXPECT_EQ(e["tenant"], "team-a");
  EXPECT_EQ(e["state"], "failed");
  EXPECT_EQ(e["exit_code"], 3);
  EXPECT_DOUBLE_EQ(e["elapsed_seconds"].get<double>(), 10.0);
  EXPECT_EQ(e["gpus"], 2);
  EXPECT_EQ(e["gpu_milli"], 2000);
  EXPECT_EQ(e["nodes"], nlohmann::json::array({"n0"}));
  ASSERT_EQ(e["attempts"].size(), 1u);
  EXPECT_EQ(e["attempts"][0]["tasks"][0]["gpus"], nlohmann::json::array({2, 3}));
  EXPECT_EQ(e["attempts"][0]["ended"], "failed");
  // A job cancelled before it ran: no exit code, no nodes.
  nlohmann::json c = HistoryEntry(Finished(7, "team-b", "", "cancelled"));
  EXPECT_TRUE(c["exit_code"].is_null());
  EXPECT_TRUE(c["nodes"].empty());
  EXPECT_EQ(c["user"], "");
}

TEST_F(JobHistoryTest, FiltersByTenantUserAndStateAndLeavesUnfinishedJobsOut) {
  HistoryQuery q = Everything();
  StatusOr<HistoryPage> all = ReadHistory(store_, q, 5000);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(all->jobs.size(), 40u);  // not the running job 41
  EXPECT_EQ(all->next, 0u);

  q.tenant = "team-a";
  q.user = "alice";
  q.states = {"succeeded"};
  StatusOr<HistoryPage> some = ReadHistory(store_, q, 5000);
  ASSERT_TRUE(some.ok());
  std::vector<uint64_t> ids;
  for (const nlohmann::json& j : some->jobs) {
    ids.push_back(j["id"]);
  }
  // Even ids, multiples of 3, not of 5 or 7.
  EXPECT_EQ(ids, (std::vector<uint64_t>{6, 12, 18, 24, 36}));

  q.states = {"running"};
  EXPECT_EQ(ReadHistory(store_, q, 5000).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(JobHistoryTest, PagesGoOnFromTheirCursorAndEachReadsAtMostItsShareOfRows) {
  HistoryQuery q = Everything();
  q.user = "alice";  // ids 3, 6, ..., 39: 13 jobs
  std::vector<uint64_t> ids;
  int pages = 0;
  for (; pages < 50; ++pages) {
    StatusOr<HistoryPage> page = ReadHistory(store_, q, /*max_scan=*/4);
    ASSERT_TRUE(page.ok());
    EXPECT_LE(page->jobs.size(), 4u);
    for (const nlohmann::json& j : page->jobs) {
      ids.push_back(j["id"]);
    }
    if (page->next == 0) {
      break;
    }
    q.after = page->next;
  }
  std::vector<uint64_t> want;
  for (uint64_t id = 3; id <= 39; id += 3) {
    want.push_back(id);
  }
  EXPECT_EQ(ids, want);
  EXPECT_GE(pages, 9);  // 41 rows, 4 a page

  // A page limit below the matches: the cursor is the last job given.
  q = Everything();
  q.limit = 5;
  StatusOr<HistoryPage> first = ReadHistory(store_, q, 5000);
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->jobs.size(), 5u);
  EXPECT_EQ(first->next, 5u);
}

TEST_F(JobHistoryTest, TheWindowIsBySubmissionAndTheFirstPageStartsThere) {
  HistoryQuery q = Everything();
  q.since = 30 * kSecond;
  q.until = 35 * kSecond;
  // Reading at most 6 rows finds ids 30..34: the scan starts at the window, not at id 1.
  StatusOr<HistoryPage> page = ReadHistory(store_, q, 6);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->jobs.size(), 5u);
  EXPECT_EQ(page->jobs.front()["id"], 30);
  EXPECT_EQ(page->jobs.back()["id"], 34);
  EXPECT_EQ(page->next, 0u);  // job 35 was submitted at the window's end
}

TEST_F(JobHistoryTest, OwnersComeFromTheStoredSpecs) {
  StatusOr<std::map<uint64_t, JobOwner>> owners = LoadJobOwners(store_, {3, 4, 40, 99});
  ASSERT_TRUE(owners.ok());
  ASSERT_EQ(owners->size(), 3u);
  EXPECT_EQ(owners->at(3).tenant, "team-b");
  EXPECT_EQ(owners->at(3).user, "alice");
  EXPECT_EQ(owners->at(4).user, "bob");
  EXPECT_EQ(owners->at(40).tenant, "team-a");
}

}  // namespace job_history_test
}  // namespace tessera
