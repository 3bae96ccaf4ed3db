// GpuHealthModule through a fake step: drains from the samples, the work on a failed GPU
// stopped, a temperature drain that lifts itself.
#include "server/modules/gpu_health_module.h"

#include <gtest/gtest.h>

#include "server/modules/fake_module_step.h"

namespace tessera {
namespace {

class GpuHealthModuleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    NodeInfo& n = step_.nodes["n1"];
    n.inventory.spec.name = "n1";
    n.up = true;
    n.telemetry = Sample();
    step_.now_us = 5'000'000;
  }
  static std::vector<GpuTelemetry> Sample() {
    std::vector<GpuTelemetry> s(2);
    s[0].index = 0;
    s[1].index = 1;
    return s;
  }
  // Job `id` running one task on GPU `gpu` of n1.
  FakeModuleStep::Job& OnGpu(uint64_t id, int gpu) {
    FakeModuleStep::Job& j = step_.jobs[id];
    Allocation a;
    a.gpus.push_back(GpuGrant{gpu, MilliGpu(1000), MiB(0)});
    j.record.allocations.push_back(a);
    j.record.attempt.tasks.resize(1);
    j.task_nodes = {"n1"};
    return j;
  }
  void Send(const std::vector<GpuTelemetry>& sample) {
    NodeInfo& n = step_.nodes["n1"];
    health_.OnTelemetry(n, sample, /*comparable=*/true, step_);
    n.telemetry = sample;
  }
  FakeModuleStep step_;
  GpuHealthModule health_{GpuHealthOptions{90, 85}};
};

TEST_F(GpuHealthModuleTest, AnXidThatEndsWorkDrainsTheGpuThenStopsOnlyTheJobsOnIt) {
  OnGpu(1, 0);
  OnGpu(2, 1);
  FakeModuleStep::Job& exited = OnGpu(3, 0);
  exited.record.attempt.tasks[0].exited = true;  // its task on the GPU has ended already
  std::vector<GpuTelemetry> s = Sample();
  s[0].xid_count = 1;
  s[0].last_xid = 79;
  Send(s);
  ASSERT_EQ(step_.drains.size(), 1u);
  EXPECT_EQ(step_.drains[0].gpu, 0);
  ASSERT_TRUE(step_.drains[0].drain.has_value());
  EXPECT_EQ(step_.drains[0].drain->by, "health");
  EXPECT_EQ(step_.drains[0].drain->kind, "xid");
  ASSERT_EQ(step_.stops.size(), 1u);
  EXPECT_EQ(step_.stops[0].job, JobNumber(1));
  EXPECT_EQ(step_.stops[0].request.after, AttemptEnd::kRequeue);
  EXPECT_EQ(step_.stops[0].request.cause, RequeueCause::kGpuFault);
  EXPECT_EQ(step_.stops[0].request.grace, step_.grace);
  Send(s);  // the same sample again: drained already, nothing new
  EXPECT_EQ(step_.drains.size(), 1u);
  EXPECT_EQ(step_.stops.size(), 1u);
  MetricsWriter w;
  health_.WriteMetrics(step_, w);
  EXPECT_NE(w.Take().find("tessera_job_gpu_faults_total{kind=\"xid\"} 1"), std::string::npos);
}

TEST_F(GpuHealthModuleTest, AJobWhoseEndIsDecidedIsNeitherStoppedAgainNorCounted) {
  OnGpu(1, 0).record.attempt.after = AttemptEnd::kCancel;
  std::vector<GpuTelemetry> s = Sample();
  s[0].lost = true;
  Send(s);
  EXPECT_EQ(step_.drains.size(), 1u);
  EXPECT_TRUE(step_.stops.empty());
  MetricsWriter w;
  health_.WriteMetrics(step_, w);
  EXPECT_NE(w.Take().find("tessera_job_gpu_faults_total{kind=\"lost\"} 0"), std::string::npos);
}

TEST_F(GpuHealthModuleTest, HeatDrainsWithoutStoppingWorkAndLiftsOnceCooled) {
  OnGpu(1, 0);
  std::vector<GpuTelemetry> s = Sample();
  s[0].temp_c = 95;
  Send(s);
  ASSERT_EQ(step_.drains.size(), 1u);
  EXPECT_EQ(step_.drains[0].drain->kind, "temperature");
  EXPECT_TRUE(step_.stops.empty()) << "heat alone does not end the work";
  s[0].temp_c = 87;  // below the limit, above the resume threshold: still drained
  Send(s);
  EXPECT_EQ(step_.drains.size(), 1u);
  s[0].temp_c = 85;
  Send(s);
  ASSERT_EQ(step_.drains.size(), 2u);
  EXPECT_FALSE(step_.drains[1].drain.has_value());
}

TEST_F(GpuHealthModuleTest, AWorseFindingReplacesAHeatDrainButAnAdminDrainStays) {
  OnGpu(1, 0);
  OnGpu(2, 1);
  step_.nodes["n1"].gpu_drains[0] = DrainInfo{"hot", "health", "temperature", 1};
  step_.nodes["n1"].gpu_drains[1] = DrainInfo{"maintenance", "admin", "admin", 1};
  std::vector<GpuTelemetry> s = Sample();
  s[0].lost = true;
  s[1].lost = true;
  Send(s);
  ASSERT_EQ(step_.drains.size(), 1u);
  EXPECT_EQ(step_.drains[0].gpu, 0);
  EXPECT_EQ(step_.drains[0].drain->kind, "lost");
  ASSERT_EQ(step_.stops.size(), 1u);
  EXPECT_EQ(step_.stops[0].job, JobNumber(1)) << "the admin's drain is the admin's to lift";
}

}  // namespace
}  // namespace tessera
