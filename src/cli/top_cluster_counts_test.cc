// `tessera top` as a tenant: the cluster's job counts come from GET /v1/queues (every
// tenant's, as counts), not from the tenant's own job list.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "cli/testing/fake_controller.h"
#include "cli/top_command.h"

namespace tessera {
namespace {

using json = nlohmann::json;
using namespace ::tessera::cli_testing;  // NOLINT: the fake controller and its helpers

const json kNodes = json::parse(R"({"nodes": [{"name": "node-a", "state": "up",
    "cpu_milli": 64000, "cpu_used_milli": 0, "memory_mib": 1024, "memory_used_mib": 0,
    "gpus": [{"index": 0, "model": "H100-80GB", "mode": "exclusive", "used_milli": 1000,
              "holders": [{"job": 3, "tenant": "team-a", "milli": 1000}]}]}]})");
// What team-a's token lists: its own running job and its own pending job.
const json kTenantJobs = json::parse(R"({"jobs": [
    {"id": 3, "name": "mine", "tenant": "team-a", "queue": "team-a", "state": "running", "gpus": 1},
    {"id": 9, "name": "next", "tenant": "team-a", "queue": "team-a", "state": "pending", "gpus": 1,
     "reason": "waiting for quota"}]})");
// Every queue's counts: team-b has 2 running and 4 pending that team-a cannot list.
const json kQueues = json::parse(R"({"queues": [
    {"name": "org", "kind": "cohort", "pending": 0, "running": 0},
    {"name": "team-a", "kind": "queue", "pending": 1, "running": 1},
    {"name": "team-b", "kind": "queue", "pending": 4, "running": 2}]})");

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(TopClusterCountsTest, HeaderCountsEveryTenantsJobsFromTheQueues) {
  TopOptions options;
  const std::string frame = RenderTop(kNodes, kTenantJobs, kQueues, options);
  EXPECT_TRUE(Has(frame, "jobs 3 running, 5 pending")) << frame;
  EXPECT_TRUE(Has(frame, "pending jobs: 1 (and 4 more in the cluster, not listed)")) << frame;
  EXPECT_TRUE(Has(frame, "9  team-a  next")) << frame;

  // Without the queues (an older controller): what the listing holds.
  const std::string listed = RenderTop(kNodes, kTenantJobs, options);
  EXPECT_TRUE(Has(listed, "jobs 1 running, 1 pending")) << listed;
  EXPECT_TRUE(Has(listed, "pending jobs: 1\n")) << listed;
}

TEST(TopClusterCountsTest, NoPendingJobOfOneselfButOthersWait) {
  json jobs = kTenantJobs;
  jobs["jobs"].erase(1);
  json queues = kQueues;
  queues["queues"][1]["pending"] = 0;
  TopOptions options;
  const std::string frame = RenderTop(kNodes, jobs, queues, options);
  EXPECT_TRUE(Has(frame, "pending jobs: none (and 4 more in the cluster, not listed)")) << frame;
}

TEST(TopClusterCountsTest, RunTopAsksForTheQueues) {
  FakeController ctl;
  ctl.Reply("GET", "/v1/nodes", 200, kNodes.dump());
  ctl.Reply("GET", "/v1/jobs", 200, kTenantJobs.dump());
  ctl.Reply("GET", "/v1/queues", 200, kQueues.dump());
  ManualClock clock(1'793'534'400'000'000);
  TopOptions options;
  options.once = true;
  std::ostringstream out, err;
  ASSERT_EQ(RunTop(ctl.Config(), options, clock, out, err), 0) << err.str();
  EXPECT_TRUE(Has(out.str(), "jobs 3 running, 5 pending")) << out.str();
}

}  // namespace
}  // namespace tessera
