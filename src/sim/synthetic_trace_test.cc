// The synthetic trace: the same seed gives the same jobs, sizes follow their weights,
// durations their log-normal, and a bad parameter is named.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "base/testing/time_units.h"
#include "sim/job_trace.h"

namespace tessera {
namespace {

using testing::kMinute;

TEST(SyntheticTraceTest, TheSameSeedGivesTheSameJobsAnotherSeedOthers) {
  StatusOr<JobTrace> a = MakeSyntheticTrace("jobs=500,seed=7,tenants=3");
  StatusOr<JobTrace> b = ReadJobTrace("synthetic:jobs=500,seed=7,tenants=3", "");
  StatusOr<JobTrace> c = MakeSyntheticTrace("jobs=500,seed=8,tenants=3");
  ASSERT_TRUE(a.ok() && b.ok() && c.ok()) << a.status().message();
  ASSERT_EQ(a->jobs.size(), 500u);
  EXPECT_EQ(a->name, "synthetic");
  bool all_same = true;
  bool any_differs = false;
  for (size_t i = 0; i < a->jobs.size(); ++i) {
    const TraceJob& x = a->jobs[i];
    const TraceJob& y = b->jobs[i];
    const TraceJob& z = c->jobs[i];
    all_same = all_same && x.submit == y.submit && x.duration == y.duration &&
               x.gpus == y.gpus && x.tenant == y.tenant && x.name == y.name;
    any_differs = any_differs || x.duration != z.duration || x.submit != z.submit;
  }
  EXPECT_TRUE(all_same);
  EXPECT_TRUE(any_differs);
}

TEST(SyntheticTraceTest, SizesFollowTheirWeightsAndDurationsTheirMedian) {
  StatusOr<JobTrace> t = MakeSyntheticTrace("jobs=20000,gpus=1:60/4:30/16:10,median=20m,"
                                            "sigma=1,max=1d,tenants=4");
  ASSERT_TRUE(t.ok()) << t.status().message();
  std::map<int, int> sizes;
  std::set<std::string> tenants;
  std::vector<Micros> durations;
  Micros last = 0;
  for (const TraceJob& j : t->jobs) {
    ++sizes[j.gpus];
    tenants.insert(j.tenant);
    durations.push_back(j.duration);
    EXPECT_GE(j.submit, last) << "not sorted by submission";
    last = j.submit;
    EXPECT_GE(j.duration, 1'000'000);
    EXPECT_LE(j.duration, 24 * 60 * kMinute);
  }
  EXPECT_EQ(t->jobs.front().submit, 0);
  ASSERT_EQ(sizes.size(), 3u);
  EXPECT_NEAR(sizes[1] / 20000.0, 0.60, 0.02);
  EXPECT_NEAR(sizes[4] / 20000.0, 0.30, 0.02);
  EXPECT_NEAR(sizes[16] / 20000.0, 0.10, 0.02);
  EXPECT_EQ(tenants, (std::set<std::string>{"t0", "t1", "t2", "t3"}));
  std::nth_element(durations.begin(), durations.begin() + 10000, durations.end());
  EXPECT_NEAR(static_cast<double>(durations[10000]) / (20.0 * kMinute), 1.0, 0.05);
  // One a minute on average (before --load rescales them).
  EXPECT_NEAR(static_cast<double>(last) / (19999.0 * kMinute), 1.0, 0.05);
}

TEST(SyntheticTraceTest, SigmaZeroGivesEveryJobTheMedian) {
  StatusOr<JobTrace> t = MakeSyntheticTrace("jobs=50,sigma=0,median=90s,gpus=8:1");
  ASSERT_TRUE(t.ok()) << t.status().message();
  for (const TraceJob& j : t->jobs) {
    EXPECT_EQ(j.duration, 90'000'000);
    EXPECT_EQ(j.gpus, 8);
    EXPECT_EQ(j.tenant, "");
  }
  StatusOr<JobTrace> defaults = ReadJobTrace("synthetic", "");
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->jobs.size(), 1000u);
}

TEST(SyntheticTraceTest, TenantWeightsSplitTheJobsInTheirProportions) {
  StatusOr<JobTrace> t = MakeSyntheticTrace("jobs=11000,seed=3,tenant_weights=10/1");
  StatusOr<JobTrace> same = MakeSyntheticTrace("jobs=11000,seed=3,tenants=2,tenant_weights=10/1");
  ASSERT_TRUE(t.ok() && same.ok()) << t.status().message();
  std::map<std::string, int> per_tenant;
  for (size_t i = 0; i < t->jobs.size(); ++i) {
    ++per_tenant[t->jobs[i].tenant];
    EXPECT_EQ(t->jobs[i].tenant, same->jobs[i].tenant);
  }
  ASSERT_EQ(per_tenant.size(), 2u);
  EXPECT_NEAR(per_tenant["t0"] / 11000.0, 10.0 / 11, 0.01);
  EXPECT_NEAR(per_tenant["t1"] / 11000.0, 1.0 / 11, 0.01);
  // The light tenant's jobs are the same kind as the heavy one's: only their number
  // differs.
  StatusOr<JobTrace> three = MakeSyntheticTrace("jobs=3000,tenant_weights=1/1/2");
  ASSERT_TRUE(three.ok());
  std::map<std::string, int> thirds;
  for (const TraceJob& j : three->jobs) {
    ++thirds[j.tenant];
  }
  EXPECT_NEAR(thirds["t2"] / 3000.0, 0.5, 0.03);
  EXPECT_NEAR(thirds["t0"] / 3000.0, 0.25, 0.03);
}

// arrival=batch: the seed's Poisson jobs, every one submitted at 0.
TEST(SyntheticTraceTest, BatchArrivalSubmitsTheSameJobsAllAtZero) {
  StatusOr<JobTrace> poisson = MakeSyntheticTrace("jobs=300,seed=5,arrival=poisson");
  StatusOr<JobTrace> batch = MakeSyntheticTrace("jobs=300,seed=5,arrival=batch");
  ASSERT_TRUE(poisson.ok() && batch.ok());
  ASSERT_EQ(batch->jobs.size(), poisson->jobs.size());
  EXPECT_GT(poisson->jobs.back().submit, 0);
  for (size_t i = 0; i < batch->jobs.size(); ++i) {
    EXPECT_EQ(batch->jobs[i].submit, 0) << i;
    EXPECT_EQ(batch->jobs[i].gpus, poisson->jobs[i].gpus) << i;
    EXPECT_EQ(batch->jobs[i].duration, poisson->jobs[i].duration) << i;
  }
  EXPECT_EQ(MakeSyntheticTrace("arrival=burst").status().code(), StatusCode::kInvalidArgument);
}

TEST(SyntheticTraceTest, ABadParameterIsNamed) {
  for (const char* bad : {"jobs=0",
                          "jobs=x",
                          "seed=-1",
                          "gpus=1:0",
                          "gpus=0:5",
                          "gpus=1",
                          "gpus=",
                          "median=0s",
                          "median=2d,max=1d",
                          "sigma=-1",
                          "sigma=9",
                          "sigma=1x",
                          "tenants=-2",
                          "colour=red",
                          "jobs",
                          "tenant_weights=10",
                          "tenant_weights=10/0",
                          "tenant_weights=10/x",
                          "tenant_weights=",
                          "tenant_weights=10//1",
                          "tenant_weights=20000/1",
                          "tenants=3,tenant_weights=10/1"}) {
    StatusOr<JobTrace> t = MakeSyntheticTrace(bad);
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(t.status().message().find("synthetic trace"), std::string::npos) << bad;
  }
  EXPECT_NE(MakeSyntheticTrace("colour=red").status().message().find("'colour'"),
            std::string::npos);
}

}  // namespace
}  // namespace tessera
