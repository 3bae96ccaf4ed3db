// `tessera show` after a preemption: run time from the current attempt, the total,
// and one row per attempt; a finished job's last placement.
#include "cli/attempt_views.h"

#include <gtest/gtest.h>

#include <string>

#include "base/time_format.h"
#include "cli/cluster_views.h"

namespace tessera {
namespace {

using json = nlohmann::json;

Micros At(const char* rfc3339) { return ParseRfc3339(rfc3339).value(); }

// Preempted after 4m30s on node-a (signal 15), running again since 21:10 on node-b.
json Requeued() {
  return json::parse(R"({
    "id": 7, "name": "train", "state": "running", "attempts": 2, "preemptions": 1,
    "start_time": "2026-11-29T21:00:00Z", "end_time": null,
    "attempt_start_time": "2026-11-29T21:10:00Z",
    "ended_attempts_run_seconds": 270,
    "attempt_history": [
      {"attempt": 1, "start_time": "2026-11-29T21:00:00Z", "end_time": "2026-11-29T21:04:30Z",
       "run_seconds": 270, "ended": "preempted", "exit_code": 0, "signal": 15,
       "tasks": [{"node": "node-a", "exit_code": 0, "signal": 15,
                  "gpus": [{"index": 0, "model": "H100-80GB", "milli": 1000},
                           {"index": 1, "model": "H100-80GB", "milli": 1000}]}]}],
    "tasks": [{"index": 0, "node": "node-b", "state": "running", "exit_code": null,
               "gpus": [{"index": 2, "model": "A100-80GB", "milli": 1000, "mig_profile": null},
                        {"index": 3, "model": "A100-80GB", "milli": 1000, "mig_profile": null}]}]
  })");
}

TEST(AttemptViewsTest, RunTimeIsTheCurrentAttemptsAndTheTotalIsShownApart) {
  const json job = Requeued();
  const Micros now = At("2026-11-29T21:12:00Z");
  EXPECT_EQ(AttemptRunTime(job, now), "2m");  // not 12m from the first start
  EXPECT_EQ(TotalRunTime(job, now), "6m30s");
  EXPECT_EQ(RunTimeWithTotal(job, now), "2m (6m30s over 2 attempts)");
  EXPECT_EQ(
      AttemptsTable(job, now),
      "Attempt history:\n"
      "  #  START                 END                     RUN  NODES   GPUS         ENDED\n"
      "  1  2026-11-29T21:00:00Z  2026-11-29T21:04:30Z  4m30s  node-a  2 H100-80GB  preempted\n"
      "  2  2026-11-29T21:10:00Z  -                        2m  node-b  2 A100-80GB  running\n");
  const std::string details = JobDetails(job, now);
  EXPECT_NE(details.find("  Run time:     2m (6m30s over 2 attempts)\n"), std::string::npos)
      << details;
  EXPECT_NE(details.find("Attempt history:\n"), std::string::npos) << details;
}

TEST(AttemptViewsTest, PendingAfterAPreemptionHasNoCurrentRunTime) {
  json job = Requeued();
  job["state"] = "pending";
  job["attempts"] = 1;
  job["attempt_start_time"] = nullptr;
  job["tasks"] = json::array();
  const Micros now = At("2026-11-29T21:12:00Z");
  EXPECT_EQ(AttemptRunTime(job, now), "-");
  EXPECT_EQ(TotalRunTime(job, now), "4m30s");
}

TEST(AttemptViewsTest, AFinishedJobShowsItsLastAttempt) {
  json job = Requeued();
  job["state"] = "failed";
  job["end_time"] = "2026-11-29T21:11:00Z";
  job["attempt_start_time"] = nullptr;
  job["ended_attempts_run_seconds"] = 330;
  job["attempt_history"].push_back(json::parse(R"(
      {"attempt": 2, "start_time": "2026-11-29T21:10:00Z", "end_time": "2026-11-29T21:11:00Z",
       "run_seconds": 60, "ended": "failed", "exit_code": 3, "signal": 0,
       "tasks": [{"node": "node-b", "exit_code": 3, "signal": 0,
                  "gpus": [{"index": 0, "mig_profile": "3g.40gb", "model": "A100-80GB",
                            "milli": 428}]}]})"));
  const Micros now = At("2026-11-29T22:00:00Z");
  EXPECT_EQ(AttemptRunTime(job, now), "1m");
  EXPECT_EQ(RunTimeWithTotal(job, now), "1m (5m30s over 2 attempts)");
  const std::string table = AttemptsTable(job, now);
  EXPECT_NE(table.find("node-b  1 3g.40gb    failed (exit 3)\n"), std::string::npos) << table;
}

TEST(AttemptViewsTest, AGpuFaultNamesTheFindingAndTheRestartsAreCounted) {
  json job = Requeued();
  job["attempt_history"][0]["ended"] = "gpu-fault";
  job["attempt_history"][0]["detail"] = "XID 79 (GPU has fallen off the bus) on node node-a GPU 0";
  job["restart"] = json::parse(R"({"max": 3, "on": ["node-lost", "gpu-fault"], "used": 1,
                                   "left": 2, "restart_at": null})");
  const std::string table = AttemptsTable(job, At("2026-11-29T21:12:00Z"));
  EXPECT_NE(table.find("2 H100-80GB  gpu-fault: XID 79 (GPU has fallen off the bus) on node "
                       "node-a GPU 0\n"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("Restarts: 1 of 3 used (on node-lost, gpu-fault)\n"), std::string::npos)
      << table;
  job["restart"]["restart_at"] = "2026-11-29T21:13:00Z";
  EXPECT_NE(AttemptsTable(job, At("2026-11-29T21:12:00Z"))
                .find("used (on node-lost, gpu-fault); next attempt at 2026-11-29T21:13:00Z\n"),
            std::string::npos);
}

TEST(AttemptViewsTest, AnOlderControllerCountsFromTheFirstStart) {
  const json job = json::parse(R"({"state": "running", "attempts": 2,
      "start_time": "2026-11-29T21:00:00Z", "end_time": null})");
  EXPECT_EQ(AttemptRunTime(job, At("2026-11-29T21:12:00Z")), "12m");
  EXPECT_EQ(RunTimeWithTotal(job, At("2026-11-29T21:12:00Z")), "12m");
  EXPECT_EQ(AttemptsTable(job, At("2026-11-29T21:12:00Z")), "");
}

}  // namespace
}  // namespace tessera
