#include "server/modules/usage_report.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tessera {
// Named, not anonymous: its kHour would meet controller_fixture.h's in a unity batch.
namespace usage_report_test {

constexpr Micros kHour = 3'600'000'000;

UsageRow Row(uint64_t job, const std::string& tenant, Micros start, Micros end, int64_t milli) {
  return UsageRow{job, tenant, tenant + "-q", start, end, milli};
}

TEST(UsageReportTest, SumsGpuHoursInsideTheWindowPerKey) {
  const std::vector<UsageRow> rows = {
      Row(10, "a", 0, 2 * kHour, 2000),          // 2 GPUs, half inside [1h, 3h): 2 GPU-hours
      Row(9, "a", kHour, 2 * kHour, 500),        // a half share for an hour: 0.5
      Row(11, "b", 3 * kHour, 4 * kHour, 8000),  // outside the window
      Row(12, "b", 2 * kHour, 5 * kHour, 1000),  // 1 GPU for the hour inside
  };
  nlohmann::json by_tenant = SumUsage(rows, kHour, 3 * kHour, "tenant", "");
  ASSERT_EQ(by_tenant["rows"].size(), 2u);
  EXPECT_EQ(by_tenant["rows"][0]["key"], "a");
  EXPECT_DOUBLE_EQ(by_tenant["rows"][0]["gpu_hours"].get<double>(), 2.5);
  EXPECT_EQ(by_tenant["rows"][0]["jobs"], 2);
  EXPECT_DOUBLE_EQ(by_tenant["rows"][1]["gpu_hours"].get<double>(), 1.0);
  EXPECT_EQ(by_tenant["rows"][1]["jobs"], 1);  // job 11 lies outside

  // Job ids sort as numbers: 9 before 10.
  nlohmann::json by_job = SumUsage(rows, kHour, 3 * kHour, "job", "a");
  ASSERT_EQ(by_job["rows"].size(), 2u);
  EXPECT_EQ(by_job["rows"][0]["key"], "9");
  EXPECT_EQ(by_job["rows"][1]["key"], "10");
  EXPECT_EQ(by_job["by"], "job");

  nlohmann::json by_queue = SumUsage(rows, kHour, 3 * kHour, "queue", "b");
  ASSERT_EQ(by_queue["rows"].size(), 1u);
  EXPECT_EQ(by_queue["rows"][0]["key"], "b-q");
}

TEST(UsageReportTest, EfficiencyIsUsedOverMeasuredGpuHours) {
  std::vector<UsageRow> rows = {
      Row(1, "a", 0, kHour, 2000),  // 2 GPU-hours at 25 %: 0.5 used
      Row(2, "a", 0, kHour, 1000),  // 1 GPU-hour not measured (no telemetry)
      Row(3, "b", 0, kHour, 1000),  // not measured at all
  };
  rows[0].used_gpu_milli = 500;
  nlohmann::json u = SumUsage(rows, 0, kHour, "tenant", "");
  ASSERT_EQ(u["rows"].size(), 2u);
  EXPECT_DOUBLE_EQ(u["rows"][0]["gpu_hours"].get<double>(), 3.0);
  EXPECT_DOUBLE_EQ(u["rows"][0]["measured_gpu_hours"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(u["rows"][0]["used_gpu_hours"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(u["rows"][0]["efficiency"].get<double>(), 0.25);
  EXPECT_TRUE(u["rows"][1]["efficiency"].is_null());
  EXPECT_DOUBLE_EQ(u["rows"][1]["used_gpu_hours"].get<double>(), 0.0);
  // Clipped to the window like the GPU-hours: half of job 1's hour.
  u = SumUsage(rows, kHour / 2, kHour, "job", "a");
  EXPECT_DOUBLE_EQ(u["rows"][0]["used_gpu_hours"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(u["rows"][0]["efficiency"].get<double>(), 0.25);
}

TEST(UsageReportTest, RefusesBadQueriesBeforeAnyRowIsRead) {
  EXPECT_TRUE(CheckUsageQuery(0, 1, "tenant").ok());
  Status by = CheckUsageQuery(0, 1, "account");
  EXPECT_EQ(by.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(by.message().find("tenant, queue, job or user"), std::string::npos);
  EXPECT_FALSE(CheckUsageQuery(5, 5, "job").ok());
  EXPECT_TRUE(CheckUsageSeriesQuery(0, kHour, kHour / 1000).ok());
  EXPECT_FALSE(CheckUsageSeriesQuery(0, kHour, 0).ok());
  EXPECT_FALSE(CheckUsageSeriesQuery(kHour, 0, 1).ok());
  Status buckets = CheckUsageSeriesQuery(0, kHour, kHour / 1001);
  EXPECT_NE(buckets.message().find("at most 1000"), std::string::npos) << buckets.message();
}

TEST(UsageReportTest, SeriesAverageTheGpusHeldPerBucket) {
  const std::vector<UsageRow> rows = {
      Row(1, "a", 0, kHour / 2, 1000),                  // 1 GPU for half of the first hour
      Row(2, "b", kHour, 2 * kHour + kHour / 4, 4000),  // 4 GPUs over the second hour and on
  };
  const std::map<std::string, double> quota = {{"a", 8.0}, {"c", 2.0}};
  // Three buckets of an hour over [0, 2.5h): the last one is half an hour long.
  nlohmann::json s = UsageSeries(rows, 0, 2 * kHour + kHour / 2, kHour, "", quota);
  ASSERT_EQ(s["times"].size(), 3u);
  ASSERT_EQ(s["series"].size(), 3u);  // a and c from the quota, b from its rows
  const nlohmann::json& a = s["series"][0];
  EXPECT_EQ(a["key"], "a");
  EXPECT_DOUBLE_EQ(a["gpus"][0].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(a["gpus"][1].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(a["quota_gpus"].get<double>(), 8.0);
  const nlohmann::json& b = s["series"][1];
  EXPECT_EQ(b["key"], "b");
  EXPECT_DOUBLE_EQ(b["gpus"][1].get<double>(), 4.0);
  EXPECT_DOUBLE_EQ(b["gpus"][2].get<double>(), 2.0);  // a quarter hour of a half-hour bucket
  EXPECT_TRUE(b["quota_gpus"].is_null());
  const nlohmann::json& c = s["series"][2];
  EXPECT_DOUBLE_EQ(c["gpus"][0].get<double>(), 0.0);

  nlohmann::json only_b = UsageSeries(rows, 0, 2 * kHour, kHour, "b", quota);
  ASSERT_EQ(only_b["series"].size(), 1u);
  EXPECT_EQ(only_b["series"][0]["key"], "b");
}

TEST(UsageReportTest, ByUserAddsUpEachUsersJobsWithinItsTenant) {
  const std::vector<UsageRow> rows = {
      Row(1, "a", 0, kHour, 1000),      // alice@a: 1
      Row(2, "a", 0, kHour, 2000),      // bob@a: 2
      Row(3, "a", 0, 2 * kHour, 1000),  // alice@a: 2 more
      Row(4, "b", 0, kHour, 4000),      // alice@b: 4, another tenant's alice
      Row(5, "b", 0, kHour, 500),       // not in the owners: b's user ""
  };
  const std::map<uint64_t, JobOwner> owners = {
      {1, {"a", "alice"}}, {2, {"a", "bob"}}, {3, {"a", "alice"}}, {4, {"b", "alice"}}};
  nlohmann::json by_user = UsageByUser(SumUsage(rows, 0, 2 * kHour, "job", ""), owners);
  EXPECT_EQ(by_user["by"], "user");
  const nlohmann::json& r = by_user["rows"];
  ASSERT_EQ(r.size(), 4u) << by_user.dump();
  EXPECT_EQ(r[0]["tenant"], "");  // job 5's owner unknown
  EXPECT_EQ(r[1]["tenant"], "a");
  EXPECT_EQ(r[1]["key"], "alice");
  EXPECT_DOUBLE_EQ(r[1]["gpu_hours"].get<double>(), 3.0);
  EXPECT_EQ(r[1]["jobs"], 2);
  EXPECT_EQ(r[2]["key"], "bob");
  EXPECT_DOUBLE_EQ(r[2]["gpu_hours"].get<double>(), 2.0);
  EXPECT_EQ(r[3]["tenant"], "b");
  EXPECT_EQ(r[3]["key"], "alice");
  EXPECT_DOUBLE_EQ(r[3]["gpu_hours"].get<double>(), 4.0);
  EXPECT_TRUE(CheckUsageQuery(0, kHour, "user").ok());
}

}  // namespace usage_report_test
}  // namespace tessera
