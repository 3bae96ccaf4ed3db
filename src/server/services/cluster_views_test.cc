// ClusterViews (services/cluster_views.h): the nodes, queues, tenants, metrics and
// history read through the controller's Read, on a manual clock with the test playing
// the agent.
#include "server/services/cluster_views.h"

#include <limits>
#include <string>
#include <vector>

#include "server/controller_fixture.h"

namespace tessera {
namespace cluster_views_test {

constexpr const char* kOneGpu =
    "queue: team-a\ncommand: [true]\nresources: {gpus: 1, gpu_model: H100-80GB}\n";
constexpr const char* kTwoGpus =
    "queue: team-b\ncommand: [true]\nresources: {gpus: 2, gpu_model: H100-80GB}\n";

class ClusterViewsTest : public ControllerTest {
 protected:
  static Principal Tenant(const std::string& t) { return Principal{Role::kTenant, t, "test"}; }

  // The holders of node-1's GPU `gpu` as `who` sees them.
  nlohmann::json Holders(const Principal& who, size_t gpu) {
    const nlohmann::json nodes = Views().Nodes(who)["nodes"];
    EXPECT_EQ(nodes.size(), 1u) << nodes.dump();
    return nodes.empty() ? nlohmann::json() : nodes[0]["gpus"][gpu]["holders"];
  }
  // The queue named `name` in GET /v1/queues.
  nlohmann::json Queue(const std::string& name) {
    const nlohmann::json queues = Views().Queues()["queues"];
    for (const nlohmann::json& q : queues) {
      if (q["name"] == name) {
        return q;
      }
    }
    ADD_FAILURE() << "no queue " << name;
    return nlohmann::json();
  }
};

TEST_F(ClusterViewsTest, ATenantSeesWhoHoldsAGpuButNotAnotherTenantsJob) {
  Register();
  const uint64_t id = Submit("team-a", kOneGpu);
  ASSERT_EQ(CycleAndTake().size(), 1u);

  const nlohmann::json own = Holders(Tenant("team-a"), 0);
  ASSERT_EQ(own.size(), 1u) << own.dump();
  EXPECT_EQ(own[0]["job"], id);
  EXPECT_EQ(own[0]["tenant"], "team-a");

  const nlohmann::json other = Holders(Tenant("team-b"), 0);
  ASSERT_EQ(other.size(), 1u) << other.dump();
  EXPECT_TRUE(other[0]["job"].is_null());
  EXPECT_EQ(other[0]["job_name"], "(another tenant's job)");
  EXPECT_EQ(other[0]["tenant"], "team-a");

  // The admin's view (no viewer) shows the job; the free GPU has no holder.
  const nlohmann::json admin = Views().Nodes()["nodes"][0]["gpus"];
  EXPECT_EQ(admin[0]["holders"][0]["job"], id);
  EXPECT_TRUE(admin[1]["holders"].empty());
}

TEST_F(ClusterViewsTest, QueuesCountPendingAndRunningJobsPerQueue) {
  Register();
  Submit("team-a", kOneGpu);
  ASSERT_EQ(CycleAndTake().size(), 1u);  // one H100 of the two left
  Submit("team-a", kOneGpu);
  Submit("team-b", kTwoGpus);            // needs both H100s: waits
  ASSERT_EQ(CycleAndTake().size(), 1u);

  const nlohmann::json a = Queue("team-a");
  EXPECT_EQ(a["kind"], "queue");
  EXPECT_EQ(a["running"], 2);
  EXPECT_EQ(a["pending"], 0);
  const nlohmann::json b = Queue("team-b");
  EXPECT_EQ(b["running"], 0);
  EXPECT_EQ(b["pending"], 1);
  EXPECT_EQ(Queue("default")["pending"], 0);
  // A cohort carries no queue-only members.
  const nlohmann::json cohort = Queue("cluster");
  EXPECT_EQ(cohort["kind"], "cohort");
  EXPECT_TRUE(cohort["idle"].is_null());
}

TEST_F(ClusterViewsTest, TenantsAreListedOnceInTheTreesOrder) {
  EXPECT_EQ(Views().Tenants(), (std::vector<std::string>{"team-a", "team-b", "default"}));
  ASSERT_TRUE(controller_
                  ->SetQueues("cohorts:\n  - name: all\nqueues:\n"
                              "  - name: a-main\n    cohort: all\n    tenant: team-a\n"
                              "    quota:\n      gpu: 4\n"
                              "  - name: b-main\n    cohort: all\n    tenant: team-b\n"
                              "    quota:\n      gpu: 4\n"
                              "  - name: a-low\n    cohort: all\n    tenant: team-a\n"
                              "    quota:\n      gpu: 1\n")
                  .ok());
  EXPECT_EQ(Views().Tenants(), (std::vector<std::string>{"team-a", "team-b"}));
}

TEST_F(ClusterViewsTest, MetricsCarryTheJobsQuotasAgentsAndGpus) {
  Register();
  Submit("team-a", kOneGpu);
  ASSERT_EQ(CycleAndTake().size(), 1u);
  Submit("team-b", kTwoGpus);
  ASSERT_TRUE(CycleAndTake(Healthy()).empty());  // the agent's GPU samples, for /metrics/gpus

  const std::string m = Views().Metrics();
  for (const char* line : {
           "tessera_jobs{queue=\"team-a\",tenant=\"team-a\",state=\"running\"} 1\n",
           "tessera_jobs{queue=\"team-b\",tenant=\"team-b\",state=\"pending\"} 1\n",
           "tessera_jobs{queue=\"team-b\",tenant=\"team-b\",state=\"running\"} 0\n",
           "tessera_jobs_submitted_total{queue=\"team-a\"} 1\n",
           "# TYPE tessera_scheduler_cycles_total counter\n",
           "# TYPE tessera_queue_quota gauge\n",
           "# TYPE tessera_agents gauge\n",
           "# TYPE tessera_gpu_allocated_ratio gauge\n",
       }) {
    EXPECT_NE(m.find(line), std::string::npos) << line << " not in\n" << m;
  }
  // The modules' families follow the core's (Accounting's per-tenant GPUs first).
  const size_t tenant_gpus = m.find("# TYPE tessera_tenant_gpus_in_use");
  ASSERT_NE(tenant_gpus, std::string::npos) << m;
  EXPECT_GT(tenant_gpus, m.find("# TYPE tessera_gpu_allocated_ratio"));

  // /metrics/gpus names the holder of the GPU in use.
  const std::string gpus = Views().GpuMetrics();
  EXPECT_NE(gpus.find("DCGM_FI_DEV_GPU_TEMP{"), std::string::npos) << gpus;
  EXPECT_NE(gpus.find("tenant=\"team-a\""), std::string::npos) << gpus;
}

class ClusterViewsHistoryTest : public ClusterViewsTest {
 protected:
  void Tune(ControllerOptions& options) override {
    options.placement = "fgd";
    options.seed = 7;
  }
};

TEST_F(ClusterViewsHistoryTest, HistoryCarriesThePolicyAsItRuns) {
  StatusOr<nlohmann::json> page =
      Views().History(1, std::numeric_limits<int64_t>::max(), 0, 10);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  const nlohmann::json& policy = (*page)["policy"];
  EXPECT_EQ(policy["name"], "tessera");
  EXPECT_EQ(policy["placement"], "fgd");
  EXPECT_EQ(policy["seed"], 7);
  EXPECT_EQ(policy["min_run_before_reclaim_us"], 60'000'000);
  EXPECT_NE((*page)["queues_yaml"].get<std::string>().find("team-b"), std::string::npos)
      << page->dump();
  EXPECT_EQ(Views().History(1, 1, 0, 10).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace cluster_views_test
}  // namespace tessera
