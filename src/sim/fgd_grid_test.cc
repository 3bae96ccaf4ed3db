#include "sim/fgd_grid.h"

#include <gtest/gtest.h>

#include <cmath>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "model/gpu_catalog.h"
#include "plugins/fgd.h"
#include "sim/fgd_experiment.h"
#include "sim/openb_trace.h"
#include "sim/testing/sim_testing.h"
#include "state/cluster_state.h"

namespace tessera {
namespace {

using ::tessera::testing::ExpectSameRun;

// Two small traces of small shares (50..200 milli, so every run has samples near
// 100 % arrived) on four nodes with 6 GPUs, with enough CPU-only pods that placement
// differs between policies and seeds.
class FgdGridTest : public ::testing::Test {
 protected:
  FgdGridTest()
      : cluster_(*ClusterState::Create(
            {MakeUniformNode("n0", MilliCpu(16000), MiB(65536), T4(), 2, SharingMode::kShared),
             MakeUniformNode("n1", MilliCpu(16000), MiB(65536), T4(), 2, SharingMode::kShared),
             MakeUniformNode("n2", MilliCpu(8000), MiB(65536), T4(), 1, SharingMode::kShared),
             MakeUniformNode("n3", MilliCpu(4000), MiB(65536), T4(), 1, SharingMode::kShared)},
            GpuCatalog::Default())),
        t1_(MakeTrace("t1", 0)),
        t2_(MakeTrace("t2", 1)),
        typical1_(FindTypicalTasks(t1_.Requests())),
        typical2_(FindTypicalTasks(t2_.Requests())) {}

  static GpuModelId T4() { return *GpuCatalog::Default().Find("T4"); }

  static PodList MakeTrace(const std::string& name, int variant) {
    PodList list;
    list.trace = name;
    for (int i = 0; i < 40; ++i) {
      TracePod p;
      p.name = name + "-pod-" + std::to_string(100 + i);
      p.request.cpu = MilliCpu(500 + 250 * ((i + variant) % 5));
      p.request.memory = MiB(1024);
      if ((i + variant) % 6 != 0) {
        p.request.gpu_count = 1;
        p.request.gpu_milli = MilliGpu(50 * (1 + (i * (variant + 1)) % 4));
      }
      list.pods.push_back(p);
    }
    return list;
  }

  FgdGridSpec Spec(int jobs) const {
    FgdGridSpec spec;
    spec.cluster = &cluster_;
    spec.traces = {&t1_, &t2_};
    spec.typical = {&typical1_, &typical2_};
    spec.policies = {"random", "bestfit", "fgd"};
    spec.seeds = {42, 43, 44};
    spec.tune_ratio = 1.3;
    spec.jobs = jobs;
    return spec;
  }

  ClusterState cluster_;
  PodList t1_;
  PodList t2_;
  FragmentationModel typical1_;
  FragmentationModel typical2_;
};

TEST_F(FgdGridTest, ResultsComeBackInGridOrderForAnyThreadCount) {
  const FgdGridSpec spec = Spec(1);
  // Each run on its own, in grid order: traces, then policies, then seeds.
  std::vector<FgdRunResult> direct;
  for (size_t t = 0; t < spec.traces.size(); ++t) {
    for (const std::string& policy : spec.policies) {
      for (uint64_t seed : spec.seeds) {
        FgdRunSpec one{spec.cluster, spec.traces[t],  spec.typical[t], policy,
                       seed,         spec.tune_ratio, spec.tie_break};
        StatusOr<FgdRunResult> r = RunFgdExperiment(one);
        ASSERT_TRUE(r.ok()) << r.status().ToString();
        direct.push_back(std::move(*r));
      }
    }
  }
  ASSERT_EQ(direct.size(), 18u);
  // The runs differ, so an order mix-up would show.
  std::set<std::vector<double>> distinct;
  for (const FgdRunResult& r : direct) {
    std::vector<double> v = r.alloc_pct;
    for (double& x : v) {
      x = std::isnan(x) ? -1 : x;
    }
    distinct.insert(v);
  }
  EXPECT_GE(distinct.size(), 6u);

  for (int jobs : {1, 2, 4, 0}) {
    SCOPED_TRACE("jobs " + std::to_string(jobs));
    StatusOr<std::vector<FgdRunResult>> grid = RunFgdGrid(Spec(jobs));
    ASSERT_TRUE(grid.ok()) << grid.status().ToString();
    ASSERT_EQ(grid->size(), direct.size());
    for (size_t i = 0; i < direct.size(); ++i) {
      SCOPED_TRACE("run " + std::to_string(i));
      ExpectSameRun((*grid)[i], direct[i]);
    }
  }
  EXPECT_EQ(direct[0].trace, "t1");
  EXPECT_EQ(direct[0].policy, "random");
  EXPECT_EQ(direct[0].seed, 42u);
  EXPECT_EQ(direct[1].seed, 43u);
  EXPECT_EQ(direct[3].policy, "bestfit");
  EXPECT_EQ(direct[9].trace, "t2");
  EXPECT_EQ(direct[17].policy, "fgd");
  EXPECT_EQ(direct[17].seed, 44u);
}

TEST_F(FgdGridTest, ProgressIsReportedOncePerRunCountingUp) {
  for (int jobs : {1, 3}) {
    SCOPED_TRACE("jobs " + std::to_string(jobs));
    std::mutex mu;  // the grid serialises calls; the lock only guards the test's own data
    std::vector<size_t> done;
    std::vector<size_t> totals;
    std::set<std::tuple<std::string, std::string, uint64_t>> seen;
    StatusOr<std::vector<FgdRunResult>> grid =
        RunFgdGrid(Spec(jobs), [&](const FgdGridProgress& p) {
          std::lock_guard<std::mutex> lock(mu);
          done.push_back(p.done);
          totals.push_back(p.total);
          ASSERT_NE(p.run, nullptr);
          seen.insert({p.run->trace, p.run->policy, p.run->seed});
          EXPECT_EQ(p.run->alloc_pct.size(), static_cast<size_t>(kArrivedBins));
        });
    ASSERT_TRUE(grid.ok()) << grid.status().ToString();
    ASSERT_EQ(done.size(), 18u);
    for (size_t i = 0; i < done.size(); ++i) {
      EXPECT_EQ(done[i], i + 1);
      EXPECT_EQ(totals[i], 18u);
    }
    EXPECT_EQ(seen.size(), 18u);  // every run reported, none twice
  }
}

TEST_F(FgdGridTest, UnknownPolicyFailsTheGrid) {
  for (int jobs : {1, 2}) {
    SCOPED_TRACE("jobs " + std::to_string(jobs));
    FgdGridSpec spec = Spec(jobs);
    spec.policies = {"bestfit", "no-such-policy", "fgd"};
    size_t calls = 0;
    StatusOr<std::vector<FgdRunResult>> grid =
        RunFgdGrid(spec, [&](const FgdGridProgress&) { ++calls; });
    ASSERT_FALSE(grid.ok());
    EXPECT_EQ(grid.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(grid.status().message().find("no-such-policy"), std::string::npos)
        << grid.status().message();
    EXPECT_LT(calls, 18u);
  }
}

TEST_F(FgdGridTest, OtherErrorsAndEmptyGrid) {
  FgdGridSpec spec = Spec(2);
  spec.typical.pop_back();  // one typical model for two traces
  StatusOr<std::vector<FgdRunResult>> mismatch = RunFgdGrid(spec);
  ASSERT_FALSE(mismatch.ok());
  EXPECT_EQ(mismatch.status().code(), StatusCode::kInvalidArgument);

  FgdGridSpec no_cluster = Spec(2);
  no_cluster.cluster = nullptr;
  StatusOr<std::vector<FgdRunResult>> none = RunFgdGrid(no_cluster);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);

  FgdGridSpec empty = Spec(2);
  empty.seeds.clear();
  size_t calls = 0;
  StatusOr<std::vector<FgdRunResult>> nothing =
      RunFgdGrid(empty, [&](const FgdGridProgress&) { ++calls; });
  ASSERT_TRUE(nothing.ok()) << nothing.status().ToString();
  EXPECT_TRUE(nothing->empty());
  EXPECT_EQ(calls, 0u);
}

}  // namespace
}  // namespace tessera
