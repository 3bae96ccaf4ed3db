#include "metrics/exposition.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <thread>
#include <vector>

namespace tessera {
namespace {

TEST(MetricsWriterTest, WritesFamiliesWithHelpTypeAndEscapedLabels) {
  MetricsWriter w;
  w.Family("tessera_jobs", MetricType::kGauge, "Jobs by state.\nSecond line \\ here");
  w.Sample({{"queue", "team-a"}, {"state", "pending"}}, 3);
  w.Sample({{"queue", "we\"ird\\q\nx"}, {"state", "running"}}, 0.25);
  w.Family("tessera_cycles_total", MetricType::kCounter, "Cycles.");
  w.Sample({}, 12);
  EXPECT_EQ(w.text(),
            "# HELP tessera_jobs Jobs by state.\\nSecond line \\\\ here\n"
            "# TYPE tessera_jobs gauge\n"
            "tessera_jobs{queue=\"team-a\",state=\"pending\"} 3\n"
            "tessera_jobs{queue=\"we\\\"ird\\\\q\\nx\",state=\"running\"} 0.25\n"
            "# HELP tessera_cycles_total Cycles.\n"
            "# TYPE tessera_cycles_total counter\n"
            "tessera_cycles_total 12\n");
}

TEST(MetricsWriterTest, HistogramHasCumulativeBucketsSumAndCount) {
  Histogram h({0.01, 0.001, 0.1});  // unsorted on purpose
  h.Observe(0.0005);
  h.Observe(0.001);  // on the bound: le is inclusive
  h.Observe(0.05);
  h.Observe(7);
  MetricsWriter w;
  w.Family("tessera_cycle_seconds", MetricType::kHistogram, "Cycle time.");
  w.Sample({{"kind", "x"}}, h.Read());
  EXPECT_EQ(w.text(),
            "# HELP tessera_cycle_seconds Cycle time.\n"
            "# TYPE tessera_cycle_seconds histogram\n"
            "tessera_cycle_seconds_bucket{kind=\"x\",le=\"0.001\"} 2\n"
            "tessera_cycle_seconds_bucket{kind=\"x\",le=\"0.01\"} 2\n"
            "tessera_cycle_seconds_bucket{kind=\"x\",le=\"0.1\"} 3\n"
            "tessera_cycle_seconds_bucket{kind=\"x\",le=\"+Inf\"} 4\n"
            "tessera_cycle_seconds_sum{kind=\"x\"} 7.0515\n"
            "tessera_cycle_seconds_count{kind=\"x\"} 4\n");
}

TEST(MetricsWriterTest, HistogramCountsEveryObservationFromManyThreads) {
  Histogram h({1, 2});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&h] {
      for (int i = 0; i < 1000; ++i) {
        h.Observe(1.5);
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  const Histogram::Snapshot s = h.Read();
  EXPECT_EQ(s.count, 4000u);
  EXPECT_EQ(s.cumulative, (std::vector<uint64_t>{0, 4000, 4000}));
  EXPECT_DOUBLE_EQ(s.sum, 6000);
}

TEST(MetricsWriterTest, FormatsValuesAsPrometheusFloats) {
  EXPECT_EQ(FormatMetricValue(0), "0");
  EXPECT_EQ(FormatMetricValue(-3), "-3");
  EXPECT_EQ(FormatMetricValue(1e21), "1e+21");
  EXPECT_EQ(FormatMetricValue(0.1), "0.1");
  EXPECT_EQ(FormatMetricValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatMetricValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatMetricValue(std::nan("")), "NaN");
}

TEST(MetricsWriterTest, ChecksNames) {
  EXPECT_TRUE(ValidMetricName("DCGM_FI_DEV_GPU_UTIL"));
  EXPECT_TRUE(ValidMetricName("a:b_c9"));
  EXPECT_FALSE(ValidMetricName("9lives"));
  EXPECT_FALSE(ValidMetricName("has-dash"));
  EXPECT_FALSE(ValidMetricName(""));
  EXPECT_TRUE(ValidLabelName("modelName"));
  EXPECT_FALSE(ValidLabelName("a:b"));
  MetricsWriter w;
  w.Family("bad-name", MetricType::kGauge, "x");
  w.Sample({{"bad label", "v"}}, 1);
  EXPECT_EQ(w.text(),
            "# HELP invalid_name x\n# TYPE invalid_name gauge\ninvalid_name{invalid_name=\"v\"} 1\n");
}

}  // namespace
}  // namespace tessera
