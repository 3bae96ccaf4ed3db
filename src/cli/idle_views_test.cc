// What users see of idle and hung jobs and of efficiency: `tessera jobs`, `show`,
// `queues` and `usage`, from the controller's JSON.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "base/time_format.h"
#include "cli/cluster_commands.h"
#include "cli/cluster_views.h"
#include "cli/testing/fake_controller.h"

namespace tessera {
namespace {

using namespace ::tessera::cli_testing;  // NOLINT: the fake controller and its helpers
using json = nlohmann::json;

json Job(uint64_t id, const char* idle_since, bool hung) {
  return {{"id", id},
          {"name", "train"},
          {"tenant", "team-a"},
          {"queue", "team-a"},
          {"state", "running"},
          {"gpus", 1},
          {"gpu_milli", 1000},
          {"submit_time", "2026-11-29T20:00:00Z"},
          {"start_time", "2026-11-29T20:00:00Z"},
          {"attempt_start_time", "2026-11-29T20:00:00Z"},
          {"idle_since", idle_since != nullptr ? json(idle_since) : json(nullptr)},
          {"hung", hung},
          {"utilisation_window",
           {{"mean_pct", 1.5},
            {"window", "30m"},
            {"attempt_mean_pct", 40.25},
            {"observed_seconds", 4200},
            {"last_output_time", "2026-11-29T20:30:00Z"}}},
          {"tasks", json::array()}};
}

TEST(IdleViewsTest, JobsTableFlagsIdleAndHungJobsInTheirState) {
  const Micros now = *ParseRfc3339("2026-11-29T21:10:00Z");
  const std::string table =
      JobsTable(json::array({Job(1, nullptr, false), Job(2, "2026-11-29T21:00:00Z", false),
                             Job(3, "2026-11-29T21:00:00Z", true)}),
                false, now);
  EXPECT_NE(table.find(" 1  train  team-a  team-a  running         1 "), std::string::npos) << table;
  EXPECT_NE(table.find(" 2  train  team-a  team-a  running (idle)  1 "), std::string::npos) << table;
  EXPECT_NE(table.find(" 3  train  team-a  team-a  running (hung)  1 "), std::string::npos) << table;
}

TEST(IdleViewsTest, ShowGivesTheUtilisationAndSinceWhenItIsIdleOrHung) {
  const Micros now = *ParseRfc3339("2026-11-29T21:10:00Z");
  std::string text = JobDetails(Job(1, nullptr, false), now);
  EXPECT_NE(text.find("GPU utilisation:  1.5% over the last 30m (this attempt: 40.2%)\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("Idle:"), std::string::npos);
  text = JobDetails(Job(1, "2026-11-29T21:00:00Z", false), now);
  EXPECT_NE(text.find("Idle:             since 2026-11-29T21:00:00Z (10m ago)\n"), std::string::npos)
      << text;
  text = JobDetails(Job(1, "2026-11-29T21:00:00Z", true), now);
  EXPECT_NE(text.find("Hung:             since 2026-11-29T21:00:00Z (10m ago) (idle GPUs and no "
                      "output since 2026-11-29T20:30:00Z (40m ago))\n"),
            std::string::npos)
      << text;
}

TEST(IdleViewsTest, QueuesListTheirIdlePolicies) {
  const json queues = json::array(
      {{{"name", "team-a"}, {"tenant", "team-a"}, {"weight", 1}, {"resources", json::array()},
        {"idle", {{"below_pct", 5}, {"for", "30m"}, {"action", "notify"},
                  {"text", "below 5% for 30m: notify"}}}},
       {{"name", "org"}, {"weight", 1}, {"resources", json::array()}, {"idle", nullptr}}});
  const std::string text = QueuesTable(queues);
  EXPECT_NE(text.find("\nQUEUE   IDLE POLICY\nteam-a  below 5% for 30m: notify\n"), std::string::npos)
      << text;
  EXPECT_EQ(text.find("org  "), text.find("org  "));  // cohorts have none
  EXPECT_EQ(text.find("\norg "), text.rfind("\norg "));
}

TEST(IdleViewsTest, UsageShowsEfficiencyWhenTheControllerMeasuresIt) {
  FakeController ctl;
  ctl.Reply("GET", "/v1/usage", 200, R"({"since": "2026-11-01T00:00:00Z",
    "until": "2026-11-29T21:10:00Z", "by": "tenant", "rows": [
    {"key": "team-a", "gpu_hours": 12.5, "jobs": 3, "used_gpu_hours": 5.0,
     "measured_gpu_hours": 10.0, "efficiency": 0.5},
    {"key": "team-b", "gpu_hours": 2, "jobs": 1, "used_gpu_hours": 0,
     "measured_gpu_hours": 0, "efficiency": null}]})");
  ManualClock clock = TestClock();
  UsageOptions o;
  std::ostringstream out, err;
  EXPECT_EQ(RunUsage(ctl.Config(), o, clock, out, err), 0) << err.str();
  EXPECT_EQ(out.str(),
            "GPU usage from 2026-11-01T00:00:00Z to 2026-11-29T21:10:00Z by tenant\n"
            "TENANT  GPU-HOURS  JOBS  USED-GPU-HOURS  EFFICIENCY\n"
            "team-a      12.50     3            5.00       50.0%\n"
            "team-b       2.00     1            0.00           -\n"
            "TOTAL       14.50     4            5.00       50.0%\n");
  o.output = "csv";
  std::ostringstream csv;
  EXPECT_EQ(RunUsage(ctl.Config(), o, clock, csv, err), 0) << err.str();
  EXPECT_EQ(csv.str(),
            "tenant,gpu_hours,jobs,used_gpu_hours,efficiency\nteam-a,12.5,3,5.0,0.5\nteam-b,2,1,0,\n");
}

}  // namespace
}  // namespace tessera
