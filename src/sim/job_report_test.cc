#include "sim/job_report.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "base/testing/time_units.h"
#include "sim/policy_fingerprint.h"

namespace tessera {
namespace {

using testing::kHour;
using testing::kSecond;

JobOutcome Job(const std::string& name, const std::string& tenant, int gpus, Micros submit_s,
               Micros start_s, Micros finish_s, Micros service_s) {
  JobOutcome j;
  j.name = name;
  j.tenant = tenant;
  j.gpus = gpus;
  j.submit = submit_s * kSecond;
  j.first_start = start_s < 0 ? -1 : start_s * kSecond;
  j.finish = finish_s < 0 ? -1 : finish_s * kSecond;
  j.service = service_s * kSecond;
  return j;
}

// Six jobs on a 16-GPU cluster (times in seconds):
//
//   job tenant gpus submit start finish service  JCT wait  notes
//   A   a      2    0      0     100    100      100  0
//   B   a      4    10     30    130    100      120  20
//   C   b      1    20     60    260    150      240  40    preempted once, 50 GPU-s lost
//   D   b      2    40     100   400    300      360  60
//   E   c      8    50     150   -      200      -    100   preempted once, 400 GPU-s lost
//   F   d      1    60     -     -      0        -    -     never started
//
// Predictions (predicted / actual, seconds): A 100/100 (error 0), B 50/100 (1, under),
// C 1200/150 (3, over), D none, E 400/800 (1, under), F none / 50.
JobRun SmallRun() {
  JobRun run;
  run.policy = "fifo";
  run.trace = "hand";
  run.tenants = {"a", "b", "c", "d"};
  run.tenant_quota_milli = {8000, 4000, 0, 0};
  run.cluster_gpus = 16;
  run.quota_violations = 3;
  run.events = 1000;
  run.wall_seconds = 0.5;
  run.jobs = {
      Job("A", "a", 2, 0, 0, 100, 100),   Job("B", "a", 4, 10, 30, 130, 100),
      Job("C", "b", 1, 20, 60, 260, 150), Job("D", "b", 2, 40, 100, 400, 300),
      Job("E", "c", 8, 50, 150, -1, 200), Job("F", "d", 1, 60, -1, -1, 0),
  };
  run.jobs[2].preemptions = 1;
  run.jobs[2].lost_gpu_seconds = 50;
  run.jobs[4].preemptions = 1;
  run.jobs[4].lost_gpu_seconds = 400;
  auto predict = [&](size_t i, Micros predicted_s, Micros actual_s) {
    run.jobs[i].predicted = predicted_s * kSecond;
    run.jobs[i].actual = actual_s * kSecond;
  };
  predict(0, 100, 100);
  predict(1, 50, 100);
  predict(2, 1200, 150);
  predict(3, 0, 300);
  predict(4, 400, 800);
  predict(5, 0, 50);
  return run;
}

// The points of every <polyline> in an SVG, in order.
std::vector<std::vector<std::pair<double, double>>> Polylines(const std::string& svg) {
  std::vector<std::vector<std::pair<double, double>>> out;
  size_t pos = 0;
  while ((pos = svg.find("<polyline", pos)) != std::string::npos) {
    size_t begin = svg.find("points=\"", pos) + 8;
    size_t end = svg.find('"', begin);
    std::istringstream in(svg.substr(begin, end - begin));
    std::vector<std::pair<double, double>> points;
    std::string point;
    while (in >> point) {
      size_t comma = point.find(',');
      points.emplace_back(std::strtod(point.substr(0, comma).c_str(), nullptr),
                          std::strtod(point.substr(comma + 1).c_str(), nullptr));
    }
    out.push_back(std::move(points));
    pos = end;
  }
  return out;
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) {
    ++n;
  }
  return n;
}

void ExpectSvgShape(const std::string& svg) {
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
  EXPECT_EQ(Count(svg, "<svg"), 1u);
  // No NaN or infinity printed as a number ("against" and "info" are fine).
  for (const std::string word : {"nan", "inf"}) {
    for (size_t pos = svg.find(word); pos != std::string::npos; pos = svg.find(word, pos + 1)) {
      EXPECT_TRUE(pos > 0 && std::isalpha(static_cast<unsigned char>(svg[pos - 1])))
          << svg.substr(pos > 20 ? pos - 20 : 0, 40);
    }
  }
}

TEST(JobReportTest, PercentileIsNearestRank) {
  // Nearest rank: the ceil(p / 100 x n)-th smallest value.
  std::vector<double> v = {50, 15, 40, 35, 20};  // sorted: 15 20 35 40 50
  EXPECT_EQ(Percentile(v, 0), 15);
  EXPECT_EQ(Percentile(v, 5), 15);   // ceil(0.25) = 1
  EXPECT_EQ(Percentile(v, 30), 20);  // ceil(1.5) = 2
  EXPECT_EQ(Percentile(v, 40), 20);  // ceil(2.0) = 2: no rounding up past an exact rank
  EXPECT_EQ(Percentile(v, 50), 35);  // ceil(2.5) = 3
  EXPECT_EQ(Percentile(v, 100), 50);
  EXPECT_EQ(Percentile({}, 50), 0);
  std::vector<double> twenty;
  for (int i = 1; i <= 20; ++i) {
    twenty.push_back(i);
  }
  EXPECT_EQ(Percentile(twenty, 95), 19);  // 95 x 20 / 100 = 19 exactly, not 19.000001
  EXPECT_EQ(Percentile(twenty, 96), 20);
}

TEST(JobReportTest, JainIndex) {
  EXPECT_DOUBLE_EQ(JainIndex({1, 1, 1}), 1);
  EXPECT_DOUBLE_EQ(JainIndex({0.3, 0.3}), 1);
  EXPECT_DOUBLE_EQ(JainIndex({1, 0}), 0.5);
  EXPECT_DOUBLE_EQ(JainIndex({3, 1}), 0.8);  // 16 / (2 x 10)
  EXPECT_DOUBLE_EQ(JainIndex({}), 0);
}

TEST(JobReportTest, SummarizeHandMadeRun) {
  JobSummary s = Summarize(SmallRun());
  EXPECT_EQ(s.policy, "fifo");
  EXPECT_EQ(s.jobs, 4);        // A B C D
  EXPECT_EQ(s.unfinished, 2);  // E F
  EXPECT_EQ(s.never_started, 1);  // F
  // The table says what its averages leave out.
  const std::string table = JobSummaryTable({s});
  EXPECT_NE(table.find("fifo: 2 jobs never finished (1 never started); the JCT figures leave "
                       "them out"),
            std::string::npos)
      << table;
  JobSummary all_done = s;
  all_done.unfinished = 0;
  all_done.never_started = 0;
  EXPECT_EQ(JobSummaryTable({all_done}).find("never finished"), std::string::npos);
  // JCT over A B C D: 100 120 240 360.
  EXPECT_DOUBLE_EQ(s.avg_jct_s, 205);     // 820 / 4
  EXPECT_DOUBLE_EQ(s.median_jct_s, 120);  // rank ceil(2) = 2
  EXPECT_DOUBLE_EQ(s.p95_jct_s, 360);     // rank ceil(3.8) = 4
  EXPECT_DOUBLE_EQ(s.p99_jct_s, 360);
  // Wait over the started A B C D E: 0 20 40 60 100 (F never started).
  EXPECT_DOUBLE_EQ(s.avg_wait_s, 44);  // 220 / 5
  EXPECT_DOUBLE_EQ(s.median_wait_s, 40);
  EXPECT_DOUBLE_EQ(s.p99_wait_s, 100);
  EXPECT_DOUBLE_EQ(s.makespan_s, 400);  // submit of A (0) to finish of D (400)
  // gpus x service: 2x100 + 4x100 + 1x150 + 2x300 + 8x200 + 0 = 2950 over 16 x 400 = 6400.
  EXPECT_DOUBLE_EQ(s.utilization, 2950.0 / 6400.0);
  // Shares over finished jobs: a = (200 + 400) / (2x100 + 4x120) = 600/680 = 15/17,
  // b = (150 + 600) / (1x240 + 2x360) = 750/960 = 25/32; c and d have no finished job
  // and are left out (with a zero share each the index would be far lower).
  // (x + y)^2 / (2 (x^2 + y^2)) = 32761/32882.
  EXPECT_NEAR(s.jain, 32761.0 / 32882.0, 1e-12);
  EXPECT_EQ(s.preemptions, 2);
  EXPECT_DOUBLE_EQ(s.lost_gpu_hours, 450.0 / 3600.0);
  EXPECT_EQ(s.quota_violations, 3);
  // |log2(predicted / actual)| over A B C E: 0 1 3 1 -> sorted 0 1 1 3, median rank 2 = 1;
  // underestimated: B and E, 2 of 4.
  EXPECT_DOUBLE_EQ(s.predictor_median_abs_log2_error, 1);
  EXPECT_DOUBLE_EQ(s.predictor_underestimate_fraction, 0.5);
  EXPECT_EQ(s.events, 1000);
  EXPECT_DOUBLE_EQ(s.wall_seconds, 0.5);
  EXPECT_DOUBLE_EQ(s.events_per_second, 2000);
}

TEST(JobReportTest, SummarizeEqualSharesAndEmptyRuns) {
  // Tenants whose jobs never wait: every share is 1, so Jain is 1.
  JobRun run;
  run.cluster_gpus = 4;
  run.jobs = {Job("x", "a", 1, 0, 0, 10, 10), Job("y", "b", 3, 0, 0, 20, 20),
              // No GPUs: no GPU-seconds either way, so tenant c has no share (not 0/0).
              Job("z", "c", 0, 0, 5, 10, 5)};
  JobSummary s = Summarize(run);
  EXPECT_EQ(s.jobs, 3);
  EXPECT_DOUBLE_EQ(s.jain, 1);
  EXPECT_DOUBLE_EQ(s.utilization, 70.0 / 80.0);  // (10 + 60) / (4 x 20)
  EXPECT_DOUBLE_EQ(s.predictor_median_abs_log2_error, 0);

  JobSummary empty = Summarize(JobRun{});
  EXPECT_EQ(empty.jobs, 0);
  EXPECT_EQ(empty.unfinished, 0);
  EXPECT_DOUBLE_EQ(empty.avg_jct_s, 0);
  EXPECT_DOUBLE_EQ(empty.makespan_s, 0);
  EXPECT_DOUBLE_EQ(empty.utilization, 0);
  EXPECT_DOUBLE_EQ(empty.events_per_second, 0);  // wall 0: no division

  // Nothing finished: makespan and utilization stay 0, the waits still count.
  JobRun stuck;
  stuck.cluster_gpus = 8;
  stuck.jobs = {Job("q", "a", 8, 5, 15, -1, 30)};
  JobSummary st = Summarize(stuck);
  EXPECT_EQ(st.jobs, 0);
  EXPECT_EQ(st.unfinished, 1);
  EXPECT_DOUBLE_EQ(st.avg_wait_s, 10);
  EXPECT_DOUBLE_EQ(st.makespan_s, 0);
  EXPECT_DOUBLE_EQ(st.utilization, 0);
  EXPECT_DOUBLE_EQ(st.jain, 0);  // no tenant with a finished job
}

TEST(JobReportTest, JsonParsesBackWithEveryField) {
  JobSummary fifo = Summarize(SmallRun());
  JobSummary other = fifo;
  other.policy = "drf \"x\"";
  other.utilization = 0.1 + 0.2;
  nlohmann::json j = nlohmann::json::parse(JobSummaryJson({fifo, other}));
  ASSERT_TRUE(j.is_object());
  ASSERT_EQ(j.size(), 1u);
  ASSERT_TRUE(j["summary"].is_array());
  ASSERT_EQ(j["summary"].size(), 2u);
  const nlohmann::json& row = j["summary"][0];
  const std::vector<std::string> keys = {"policy",
                                         "jobs",
                                         "unfinished",
                                         "never_started",
                                         "avg_jct_s",
                                         "median_jct_s",
                                         "p95_jct_s",
                                         "p99_jct_s",
                                         "avg_wait_s",
                                         "median_wait_s",
                                         "p99_wait_s",
                                         "makespan_s",
                                         "utilization",
                                         "jain",
                                         "preemptions",
                                         "lost_gpu_hours",
                                         "quota_violations",
                                         "predictor_median_abs_log2_error",
                                         "predictor_underestimate_fraction",
                                         "events",
                                         "events_per_second",
                                         "wall_seconds"};
  // In this order in the text, as the issue lists them.
  std::vector<std::string> got;
  nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(JobSummaryJson({fifo}));
  for (const auto& [key, value] : ordered["summary"][0].items()) {
    got.push_back(key);
    if (key != "policy") {
      EXPECT_TRUE(value.is_number()) << key;
    }
  }
  EXPECT_EQ(got, keys);
  EXPECT_EQ(row["policy"], "fifo");
  EXPECT_TRUE(row["jobs"].is_number_integer());
  EXPECT_EQ(row["jobs"], 4);
  EXPECT_EQ(row["unfinished"], 2);
  EXPECT_EQ(row["never_started"], 1);
  EXPECT_DOUBLE_EQ(row["avg_jct_s"].get<double>(), 205);
  EXPECT_DOUBLE_EQ(row["median_jct_s"].get<double>(), 120);
  EXPECT_DOUBLE_EQ(row["p95_jct_s"].get<double>(), 360);
  EXPECT_DOUBLE_EQ(row["avg_wait_s"].get<double>(), 44);
  EXPECT_DOUBLE_EQ(row["makespan_s"].get<double>(), 400);
  EXPECT_DOUBLE_EQ(row["utilization"].get<double>(), 0.460938);  // rounded to 6 places
  EXPECT_NEAR(row["jain"].get<double>(), 32761.0 / 32882.0, 1e-6);
  EXPECT_EQ(row["preemptions"], 2);
  EXPECT_DOUBLE_EQ(row["lost_gpu_hours"].get<double>(), 0.125);
  EXPECT_EQ(row["quota_violations"], 3);
  EXPECT_DOUBLE_EQ(row["predictor_median_abs_log2_error"].get<double>(), 1);
  EXPECT_DOUBLE_EQ(row["predictor_underestimate_fraction"].get<double>(), 0.5);
  EXPECT_EQ(row["events"], 1000);
  EXPECT_DOUBLE_EQ(row["events_per_second"].get<double>(), 2000);
  EXPECT_DOUBLE_EQ(row["wall_seconds"].get<double>(), 0.5);
  EXPECT_EQ(j["summary"][1]["policy"], "drf \"x\"");
  EXPECT_DOUBLE_EQ(j["summary"][1]["utilization"].get<double>(), 0.3);
}

TEST(JobReportTest, TableIsAlignedWithUnits) {
  JobSummary fifo = Summarize(SmallRun());
  JobSummary long_policy = fifo;
  long_policy.policy = "a-rather-long-policy";
  std::string table = JobSummaryTable({fifo, long_policy});
  std::istringstream in(table);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    lines.push_back(line);
  }
  // The header, a row per policy, then a line per policy that left jobs unfinished.
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[3].rfind("fifo: 2 jobs never finished", 0), 0u);
  EXPECT_EQ(lines[4].rfind("a-rather-long-policy: 2 jobs never finished", 0), 0u);
  EXPECT_NE(lines[0].find("policy"), std::string::npos);
  EXPECT_NE(lines[0].find("p99JCT(s)"), std::string::npos);  // the run lasts 400 s
  EXPECT_NE(lines[0].find("util%"), std::string::npos);
  EXPECT_NE(lines[0].find("jain"), std::string::npos);
  EXPECT_EQ(lines[0].size(), lines[1].size());
  EXPECT_EQ(lines[1].size(), lines[2].size());
  EXPECT_EQ(lines[1].rfind("fifo ", 0), 0u);
  EXPECT_NE(lines[1].find(" 205.0 "), std::string::npos);  // avg JCT
  EXPECT_NE(lines[1].find(" 46.1 "), std::string::npos);   // util %
  EXPECT_NE(lines[1].find(" 0.996 "), std::string::npos);  // jain
  // Same values in hours once a run is long.
  JobSummary day = fifo;
  day.makespan_s = 86400;
  day.avg_jct_s = 7200;
  std::string hours = JobSummaryTable({day});
  EXPECT_NE(hours.find("avgJCT(h)"), std::string::npos);
  EXPECT_NE(hours.find(" 2.00 "), std::string::npos);
  EXPECT_NE(hours.find(" 24.00 "), std::string::npos);
}

TEST(JobReportTest, JctCdfSvgHasOnePolylinePerPolicy) {
  JobRun fifo = SmallRun();
  JobRun odd = SmallRun();
  odd.policy = "a<b&c";
  odd.jobs[3].finish = 40 * kSecond + 2 * kHour;  // D: JCT 2 h
  std::string svg = JctCdfSvg({fifo, odd});
  ExpectSvgShape(svg);
  auto lines = Polylines(svg);
  ASSERT_EQ(lines.size(), 2u);
  // Starts at 0, one point per finished job, ends at 1 (the top of the plot).
  ASSERT_EQ(lines[0].size(), 5u);
  EXPECT_GT(lines[0].front().second, lines[0].back().second);
  for (size_t i = 1; i < lines[0].size(); ++i) {
    EXPECT_GE(lines[0][i].first, lines[0][i - 1].first);    // x grows
    EXPECT_LE(lines[0][i].second, lines[0][i - 1].second);  // y grows (SVG y points down)
  }
  EXPECT_NE(svg.find("a&lt;b&amp;c"), std::string::npos);
  EXPECT_EQ(svg.find("a<b&c"), std::string::npos);
  EXPECT_NE(svg.find(">1 min<"), std::string::npos);
  EXPECT_NE(svg.find(">1 h<"), std::string::npos);
  EXPECT_NE(svg.find(">fifo</text>"), std::string::npos);
  EXPECT_NE(svg.find(">p50 2.0 min, 4 jobs<"), std::string::npos);  // rank 2 of 4: 120 s

  // No finished jobs anywhere: still a valid picture, with no lines.
  JobRun none;
  none.policy = "idle";
  std::string empty = JctCdfSvg({none});
  ExpectSvgShape(empty);
  EXPECT_EQ(Count(empty, "<polyline"), 0u);
  EXPECT_NE(empty.find(">idle</text>"), std::string::npos);
  EXPECT_NE(empty.find(">no finished jobs<"), std::string::npos);
}

TEST(JobReportTest, JctCdfSvgStaysSmallForLargeRuns) {
  std::vector<JobRun> runs;
  for (const char* policy : {"fifo", "drf", "fgd"}) {
    JobRun run;
    run.policy = policy;
    for (int i = 0; i < 100'000; ++i) {
      JobOutcome j;
      j.gpus = 1;
      j.submit = i * kSecond;
      j.first_start = j.submit;
      j.finish = j.submit + (1 + (i * 7919) % 200'000) * kSecond;
      run.jobs.push_back(j);
    }
    runs.push_back(std::move(run));
  }
  std::string svg = JctCdfSvg(runs);
  ExpectSvgShape(svg);
  auto lines = Polylines(svg);
  ASSERT_EQ(lines.size(), 3u);
  for (const auto& line : lines) {
    EXPECT_LE(line.size(), 501u);
    EXPECT_GE(line.size(), 400u);
  }
  EXPECT_LT(svg.size(), 50'000u);
}

JobRun UsageRun() {
  JobRun run;
  run.policy = "drf";
  run.tenants = {"a<b&c", "plain", "q2", "rest"};
  run.tenant_quota_milli = {4000, 0, 2000, 0};
  run.cluster_gpus = 8;
  // a: 0 -> 2 GPUs at 1 h -> 0 at 2 h; the others idle, then 1 GPU each.
  run.usage = {{0, {0, 0, 0, 0}}, {kHour, {2000, 0, 0, 0}}, {2 * kHour, {0, 1000, 500, 1000}}};
  return run;
}

TEST(JobReportTest, TenantUsageSvgPanelsPerQuota) {
  std::string svg = TenantUsageSvg(UsageRun());
  ExpectSvgShape(svg);
  auto lines = Polylines(svg);
  // Panels: a<b&c and q2 (with quotas), then plain + rest together.
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(Count(svg, "stroke-dasharray"), 2u);  // one quota line per quota panel
  EXPECT_NE(svg.find("a&lt;b&amp;c (quota 4, peak 2 GPUs)"), std::string::npos);
  EXPECT_NE(svg.find("q2 (quota 2, peak 0.5 GPUs)"), std::string::npos);
  EXPECT_NE(svg.find("tenants without quota (2) (peak 2 GPUs)"), std::string::npos);
  EXPECT_EQ(svg.find("a<b&c"), std::string::npos);
  // Exact steps for a: (0,0) (0,0) (1h,0) (1h,2) (2h,2) (2h,0) (end,0).
  ASSERT_EQ(lines[0].size(), 7u);
  EXPECT_DOUBLE_EQ(lines[0][2].first, lines[0][3].first);  // vertical at 1 h
  EXPECT_LT(lines[0][3].second, lines[0][2].second);       // up to 2 GPUs
  // The combined panel: 0 until 2 h, then 2 GPUs.
  std::set<double> ys;
  for (const auto& p : lines[2]) {
    ys.insert(p.second);
  }
  EXPECT_EQ(ys.size(), 2u);

  // No quotas at all: one combined panel and no quota line.
  JobRun flat = UsageRun();
  flat.tenant_quota_milli.clear();
  std::string one = TenantUsageSvg(flat);
  ExpectSvgShape(one);
  EXPECT_EQ(Count(one, "<polyline"), 1u);
  EXPECT_EQ(Count(one, "stroke-dasharray"), 0u);
}

TEST(JobReportTest, TenantUsageSvgKeepsPeaksWhenDownSampling) {
  JobRun run;
  run.policy = "fifo";
  run.tenants = {"a", "b", "c"};
  run.tenant_quota_milli = {4000, 4000, 0};
  run.cluster_gpus = 16;
  // 200,000 changes a second apart; a alternates 1 and 2 GPUs except one 9-GPU second.
  for (int i = 0; i < 200'000; ++i) {
    int64_t a = i == 123'457 ? 9000 : 1000 + 1000 * (i % 2);
    run.usage.push_back({i * kSecond, {a, 1000 * (i % 3), 500}});
  }
  std::string svg = TenantUsageSvg(run);
  ExpectSvgShape(svg);
  auto lines = Polylines(svg);
  ASSERT_EQ(lines.size(), 3u);
  for (const auto& line : lines) {
    EXPECT_LE(line.size(), 402u);
  }
  EXPECT_NE(svg.find("a (quota 4, peak 9 GPUs)"), std::string::npos);
  // Bucket maxima of a: 2 GPUs everywhere but the 9-GPU bucket; without the max the
  // spike would vanish into the 1-2 alternation.
  std::set<double> ys;
  for (const auto& p : lines[0]) {
    ys.insert(p.second);
  }
  EXPECT_EQ(ys.size(), 2u);
  EXPECT_LT(svg.size(), 40'000u);
}

// Finish-time fairness: tenant a (quota 8) and b (quota 4) have runs alone; c has no
// quota. Times in seconds; demand over the submission span 0..100 s.
//
//   job tenant gpus runtime submit finish-shared finish-alone
//   A1  a      4    100     0      300           100
//   A2  a      4    100     100    200           300        (faster shared)
//   A3  a      2    100     50     400           -          (not finished alone: left out)
//   B1  b      1    100     10     -             110        (never finished shared)
//   C1  c      8    100     20     120           -
JobRun FairnessRun(const std::string& policy, bool shared) {
  JobRun run;
  run.policy = policy;
  run.tenants = {"a", "b", "c"};
  run.tenant_quota_milli = {8000, 4000, 0};
  auto job = [](const std::string& name, const std::string& tenant, int gpus, Micros submit_s,
                Micros finish_s) {
    JobOutcome j = Job(name, tenant, gpus, submit_s, submit_s, finish_s, 100);
    j.actual = 100 * kSecond;
    return j;
  };
  if (shared) {
    run.jobs = {job("A1", "a", 4, 0, 300), job("A2", "a", 4, 100, 200), job("A3", "a", 2, 50, 400),
                job("B1", "b", 1, 10, -1), job("C1", "c", 8, 20, 120)};
  } else {
    run.jobs = {job("A1", "a", 4, 0, 100), job("A2", "a", 4, 100, 300), job("A3", "a", 2, 50, -1),
                job("B1", "b", 1, 10, 110)};
  }
  return run;
}

TEST(JobReportTest, RhoIsEachTenantsJctAgainstItsJctAloneOnItsQuota) {
  const JobRun shared = FairnessRun("tessera", true);
  JobRun alone_a = FairnessRun("tessera", false);
  JobRun alone_b = alone_a;
  alone_a.jobs.pop_back();                                             // a's jobs
  alone_b.jobs.erase(alone_b.jobs.begin(), alone_b.jobs.begin() + 3);  // b's
  std::vector<TenantRho> rho = FinishTimeFairness(shared, {alone_a, alone_b});
  ASSERT_EQ(rho.size(), 2u);  // c has no quota
  const TenantRho& a = rho[0];
  EXPECT_EQ(a.tenant, "a");
  EXPECT_DOUBLE_EQ(a.quota_gpus, 8);
  EXPECT_EQ(a.jobs, 2);
  EXPECT_DOUBLE_EQ(a.avg_jct_s, 200);        // (300 + 100) / 2
  EXPECT_DOUBLE_EQ(a.alone_avg_jct_s, 150);  // (100 + 200) / 2
  EXPECT_DOUBLE_EQ(a.rho, 400.0 / 300.0);
  EXPECT_EQ(a.jobs_over_1, 1);
  // 1000 GPU-seconds (A3's included) over the 100 s span: 10 GPUs, above the quota.
  EXPECT_DOUBLE_EQ(a.demand_gpus, 10);
  EXPECT_FALSE(a.within_quota);
  const TenantRho& b = rho[1];
  EXPECT_EQ(b.tenant, "b");
  EXPECT_DOUBLE_EQ(b.demand_gpus, 1);
  EXPECT_TRUE(b.within_quota);
  EXPECT_TRUE(std::isinf(b.rho));  // never finished shared: infinitely late
  EXPECT_EQ(b.jobs_over_1, 1);
  EXPECT_TRUE(std::isinf(MaxRho(rho)));
  EXPECT_DOUBLE_EQ(MaxRho({a}), 400.0 / 300.0);
  EXPECT_DOUBLE_EQ(MaxRho({}), 0);
  // Without runs alone there is nothing to compare.
  EXPECT_TRUE(FinishTimeFairness(shared, {}).empty());
  // Every job at once: no span, so no demand can be said to fit a quota.
  JobRun batch = shared;
  for (JobOutcome& j : batch.jobs) {
    j.submit = 0;
  }
  EXPECT_FALSE(FinishTimeFairness(batch, {alone_a})[0].within_quota);
}

TEST(JobReportTest, RhoBesideJainInTheTableAndTheJson) {
  const JobRun shared = FairnessRun("tessera", true);
  JobRun alone = FairnessRun("tessera", false);
  JobSummary s = Summarize(shared);
  s.rho = FinishTimeFairness(shared, {alone});
  s.rho[1].rho = 1.5;  // b finite, so that the JSON shows a number
  JobSummary none = Summarize(shared);
  none.policy = "fifo";
  const std::string table = JobSummaryTable({s, none});
  std::istringstream in(table);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    lines.push_back(line);
  }
  ASSERT_GE(lines.size(), 5u);
  EXPECT_NE(lines[0].find("jain  maxRho"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find(" 1.50 "), std::string::npos) << lines[1];
  EXPECT_NE(lines[2].find("      - "), std::string::npos) << lines[2];
  EXPECT_EQ(lines[3].rfind("rho per tenant with a quota", 0), 0u);
  EXPECT_EQ(lines[4], "  tessera: a 1.33 b* 1.50");
  nlohmann::json j = nlohmann::json::parse(JobSummaryJson({s, none}));
  const nlohmann::json& row = j["summary"][0];
  EXPECT_DOUBLE_EQ(row["rho_max"].get<double>(), 1.5);
  ASSERT_EQ(row["tenant_rho"].size(), 2u);
  EXPECT_EQ(row["tenant_rho"][0]["tenant"], "a");
  EXPECT_NEAR(row["tenant_rho"][0]["rho"].get<double>(), 4.0 / 3, 1e-6);
  EXPECT_EQ(row["tenant_rho"][1]["within_quota"], true);
  EXPECT_FALSE(j["summary"][1].contains("rho_max"));
  EXPECT_FALSE(j["summary"][1].contains("tenant_rho"));
  // Infinity has no JSON form: null, never a number that looks fair.
  s.rho[1].rho = std::numeric_limits<double>::infinity();
  nlohmann::json inf = nlohmann::json::parse(JobSummaryJson({s}));
  EXPECT_TRUE(inf["summary"][0]["rho_max"].is_null());
  EXPECT_TRUE(inf["summary"][0]["tenant_rho"][1]["rho"].is_null());
  EXPECT_NE(JobSummaryTable({s}).find("b* inf"), std::string::npos);
}

DefaultSimModel FingerprintModel() {
  DefaultSimModel m;
  m.placement = "tessera";
  m.restart_overhead = 60 * kSecond;
  m.checkpoint_wait = 1800 * kSecond;
  m.checkpoint_interval = 1800 * kSecond;
  return m;
}

TEST(PolicyFingerprintTest, StableAndMovedByOptionsAndBehaviour) {
  const GpuCatalog& catalog = GpuCatalog::Default();
  StatusOr<PolicyFingerprint> a = DefaultPolicyFingerprint(FingerprintModel(), catalog);
  StatusOr<PolicyFingerprint> again = DefaultPolicyFingerprint(FingerprintModel(), catalog);
  ASSERT_TRUE(a.ok() && again.ok()) << a.status().message();
  EXPECT_EQ(a->fingerprint, again->fingerprint);
  EXPECT_EQ(a->fingerprint.size(), 16u);
  EXPECT_EQ(a->options.size(), SchedulerPresetNames().size() + 1);
  EXPECT_EQ(a->options.front().rfind("fifo: job_order=fifo ", 0), 0u);
  EXPECT_EQ(a->options.back().rfind("model: placement=tessera restart_overhead=60000000 ", 0), 0u);
  // The probe's schedules change with what preemption costs: its presets do preempt
  // (a probe without preemption would miss every change to the preemption rules).
  DefaultSimModel costly = FingerprintModel();
  costly.restart_overhead = 600 * kSecond;
  StatusOr<PolicyFingerprint> b = DefaultPolicyFingerprint(costly, catalog);
  ASSERT_TRUE(b.ok());
  EXPECT_NE(a->probe_hash, b->probe_hash);
  EXPECT_NE(a->options_hash, b->options_hash);
  EXPECT_NE(a->fingerprint, b->fingerprint);
  // And with the placement, a model of its own.
  DefaultSimModel packed = FingerprintModel();
  packed.placement = "bestfit";
  StatusOr<PolicyFingerprint> c = DefaultPolicyFingerprint(packed, catalog);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_NE(a->probe_hash, c->probe_hash);
}

TEST(PolicyFingerprintTest, EveryOptionIsInTheLine) {
  StatusOr<SchedulerPolicy> p = ParseSchedulerPolicy("tessera");
  ASSERT_TRUE(p.ok());
  const std::string base = PolicyOptionsLine(*p);
  // One change per kind of field: each must show.
  std::vector<SchedulerPolicy> changed(6, *p);
  changed[0].options.las_thresholds.push_back(1e6);
  changed[1].options.sjf_gpu_exponent = 0.75;
  changed[2].options.victim_hold = 1;
  changed[3].options.backfill = Backfill::kEasy;
  changed[4].queue_order = "drf";
  changed[5].options.max_victim_candidates = 7;
  for (const SchedulerPolicy& c : changed) {
    EXPECT_NE(PolicyOptionsLine(c), base);
  }
}
}  // namespace
}  // namespace tessera
