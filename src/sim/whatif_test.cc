// The recorded history read back (AddHistoryPage), a job's actual work, the replay's
// nodes over the window, and the errors that name what is wrong.
#include "sim/whatif.h"

#include <gtest/gtest.h>

#include <string>

#include "api/agent_protocol.h"
#include "api/queue_config.h"
#include "model/testing/test_catalog.h"

namespace tessera {
// Named, not anonymous: its Job would meet job_report_test.cc's in a unity batch.
namespace whatif_test {

constexpr Micros kS = 1'000'000;

using testing::Catalog;

nlohmann::json Node(const std::string& name, Micros at, const std::string& event, int gpus) {
  nlohmann::json n = {{"name", name}, {"at_us", at}, {"event", event}};
  if (event == "join") {
    NodeInventory inv;
    inv.spec = MakeUniformNode(name, MilliCpu(64000), MiB(512 * 1024),
                               Catalog().Find("H100-80GB").value(), gpus,
                               SharingMode::kExclusive);
    inv.gpu_uuids.assign(static_cast<size_t>(gpus), "");
    inv.mig_instances.resize(static_cast<size_t>(gpus));
    n["inventory"] = ToJson(inv, Catalog());
  }
  return n;
}

nlohmann::json Job(uint64_t id, const std::string& tenant, Micros submit,
                   std::vector<std::pair<Micros, Micros>> runs, Micros progress) {
  nlohmann::json r = nlohmann::json::array();
  for (auto [s, e] : runs) {
    r.push_back({{"start_us", s}, {"end_us", e}, {"gpu_milli", 1000}});
  }
  return {{"id", id},
          {"name", "job-" + std::to_string(id)},
          {"tenant", tenant},
          {"queue", tenant},
          {"state", runs.empty() ? "cancelled" : "succeeded"},
          {"submit_us", submit},
          {"start_us", runs.empty() ? 0 : runs.front().first},
          {"end_us", runs.empty() ? submit + 5 * kS : runs.back().second},
          {"attempts", static_cast<int>(runs.size())},
          {"preemptions", runs.empty() ? 0 : static_cast<int>(runs.size()) - 1},
          {"exit_code", 0},
          {"progress_us", progress},
          {"spec", {{"name", "job-" + std::to_string(id)}, {"queue", tenant},
                    {"command", {"true"}}, {"resources", {{"gpus", 1}}}}},
          {"runs", r}};
}

nlohmann::json Page(nlohmann::json nodes, nlohmann::json jobs, nlohmann::json next) {
  return {{"since_us", 100 * kS},
          {"until_us", 10'000 * kS},
          {"policy", {{"name", "fifo"}, {"placement", "bestfit"}, {"seed", 1},
                      {"restart_overhead_us", 60 * kS}, {"checkpoint_wait_us", 0},
                      {"min_run_before_reclaim_us", 60 * kS}, {"grace_us", 30 * kS}}},
          {"queues_yaml", "queues:\n  - name: a\n  - name: b\n"},
          {"nodes", std::move(nodes)},
          {"jobs", std::move(jobs)},
          {"next_after", std::move(next)}};
}

TEST(WhatIfHistoryTest, ActualWorkIsTheLastAttemptFromItsCheckpointLessItsStartUp) {
  RecordedHistory h;
  StatusOr<uint64_t> next = AddHistoryPage(
      Page(nlohmann::json::array({Node("n1", 0, "join", 2)}),
           nlohmann::json::array({Job(1, "a", 200 * kS, {{300 * kS, 900 * kS}}, 0),
                                  // Preempted at 1000 s with a checkpoint at 600 s of work;
                                  // resumed at 1200 s, 60 s start-up, done at 1800 s.
                                  Job(2, "b", 210 * kS,
                                      {{250 * kS, 1000 * kS}, {1200 * kS, 1800 * kS}}, 600 * kS),
                                  Job(3, "b", 220 * kS, {}, 0)}),
           nullptr),
      Catalog(), &h);
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_EQ(*next, 0u);
  ASSERT_EQ(h.jobs.size(), 3u);
  EXPECT_EQ(ActualWork(h.jobs[0], h.policy.restart_overhead), 600 * kS);
  EXPECT_EQ(ActualWork(h.jobs[1], h.policy.restart_overhead), (600 + 600 - 60) * kS);
  EXPECT_EQ(ActualWork(h.jobs[2], h.policy.restart_overhead), -1);  // never ran
  RecordedJob instant = h.jobs[0];  // cancelled the instant it started
  instant.runs.clear();
  EXPECT_EQ(ActualWork(instant, h.policy.restart_overhead), 0);
  RecordedJob running = h.jobs[0];
  running.end = 0;
  EXPECT_EQ(ActualWork(running, h.policy.restart_overhead), -1);

  StatusOr<QueueTreeSpec> spec = ParseQueueTreeText(h.queues_yaml, Catalog());
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  QueueTree tree = QueueTree::Create(*spec, Catalog()).value();
  StatusOr<Replay> replay = BuildReplay(h, tree);
  ASSERT_TRUE(replay.ok()) << replay.status().ToString();
  EXPECT_EQ(replay->origin, 200 * kS);
  ASSERT_EQ(replay->jobs.size(), 2u);
  EXPECT_EQ(replay->jobs[1].spec.submit_time, 10 * kS);
  EXPECT_EQ(replay->never_ran, 1);
  EXPECT_EQ(replay->actual.jobs[1].service, (750 + 600) * kS);
  EXPECT_EQ(replay->actual.jobs[1].finish, 1600 * kS);
}

TEST(WhatIfHistoryTest, NodesPresentInTheWindowWithTheirLastSpec) {
  RecordedHistory h;
  auto nodes = nlohmann::json::array({
      Node("gone", 0, "join", 8), Node("gone", 50 * kS, "leave", 0),        // left before
      Node("grew", 0, "join", 2), Node("grew", 500 * kS, "join", 4),         // changed
      Node("late", 20'000 * kS, "join", 8),                                  // after
      Node("left", 0, "join", 1), Node("left", 5'000 * kS, "leave", 0)});    // left within
  ASSERT_TRUE(AddHistoryPage(Page(nodes, nlohmann::json::array(
                                             {Job(1, "a", 200 * kS, {{300 * kS, 900 * kS}}, 0)}),
                                  nullptr),
                             Catalog(), &h)
                  .ok());
  StatusOr<QueueTreeSpec> spec = ParseQueueTreeText(h.queues_yaml, Catalog());
  QueueTree tree = QueueTree::Create(*spec, Catalog()).value();
  StatusOr<Replay> replay = BuildReplay(h, tree);
  ASSERT_TRUE(replay.ok()) << replay.status().ToString();
  ASSERT_EQ(replay->nodes.size(), 2u);
  EXPECT_EQ(replay->nodes[0].name, "grew");
  EXPECT_EQ(replay->nodes[0].gpus.size(), 4u);
  EXPECT_EQ(replay->nodes[1].name, "left");
  EXPECT_EQ(replay->actual.cluster_gpus, 5);
}

TEST(WhatIfHistoryTest, PagesAppendJobsAndMalformedFieldsAreNamed) {
  RecordedHistory h;
  StatusOr<uint64_t> next = AddHistoryPage(
      Page(nlohmann::json::array(), nlohmann::json::array({Job(1, "a", 200 * kS, {}, 0)}), 1),
      Catalog(), &h);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(*next, 1u);
  nlohmann::json second = {{"jobs", nlohmann::json::array({Job(2, "a", 300 * kS, {}, 0)})},
                           {"next_after", nullptr}};
  ASSERT_TRUE(AddHistoryPage(second, Catalog(), &h).ok());
  EXPECT_EQ(h.jobs.size(), 2u);

  nlohmann::json bad = Page(nlohmann::json::array(),
                            nlohmann::json::array({Job(1, "a", 200 * kS, {}, 0)}), nullptr);
  bad["jobs"][0].erase("submit_us");
  RecordedHistory h2;
  StatusOr<uint64_t> r = AddHistoryPage(bad, Catalog(), &h2);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("jobs[0].submit_us"), std::string::npos)
      << r.status().message();
}

}  // namespace whatif_test
}  // namespace tessera
