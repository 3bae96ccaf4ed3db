// The controller's views on typed inputs (views/*.h), without a controller.
#include <gtest/gtest.h>

#include "api/queue_config.h"
#include "server/job_rows.h"
#include "server/modules/job_gates.h"
#include "server/testing/queue_trees.h"
#include "server/testing/stored_rows.h"
#include "server/views/job_json.h"
#include "server/views/metrics_views.h"
#include "server/views/node_views.h"
#include "server/views/queue_views.h"

namespace tessera {
namespace views_test {

const GpuCatalog& Catalog() { return GpuCatalog::Default(); }

NodeInfo TwoGpuNode(const std::string& name) {
  NodeInfo node;
  node.up = true;
  node.inventory.spec.name = name;
  node.inventory.spec.cpu = MilliCpu(32'000);
  node.inventory.spec.memory = MiB(256'000);
  const GpuModelId h100 = Catalog().Find("H100-80GB").value();
  node.inventory.spec.gpus = {GpuSpec{h100, SharingMode::kShared}, GpuSpec{h100, SharingMode::kMig}};
  node.inventory.gpu_uuids = {"GPU-0", "GPU-1"};
  return node;
}

class NodeViewsTest : public ::testing::Test {
 protected:
  NodeViewsTest() {
    nodes_.emplace("n1", TwoGpuNode("n1"));
    theirs_.name = "their-train";
    theirs_.tenant = "team-b";
    theirs_.queue = "b";
    holds_[{"n1", 0}].push_back(GpuHold{JobNumber(7), &theirs_, &share_});
    used_["n1"] = {4'000, 16'000};
    nodes_.at("n1").gpu_drains[1] = DrainInfo{"xid 79", "health", "xid", 1'000'000};
  }
  nlohmann::json Node(const Principal* viewer) {
    return NodesJson(NodeViewInputs{nodes_, holds_, used_, Catalog(), module_holds_}, "",
                     viewer)
        .at(0);
  }
  std::map<std::string, NodeInfo> nodes_;
  JobRow theirs_;
  GpuGrant share_{0, MilliGpu(500), MiB(20'000)};
  GpuHolds holds_;
  std::map<std::string, std::pair<int64_t, int64_t>> used_;
  std::map<std::string, std::string> module_holds_;
};

TEST_F(NodeViewsTest, ATenantSeesWhoHoldsAGpuButNotAnotherTenantsJob) {
  const Principal a{Role::kTenant, "team-a", "t"};
  nlohmann::json node = Node(&a);
  const nlohmann::json& holder = node["gpus"][0]["holders"][0];
  EXPECT_TRUE(holder["job"].is_null());
  EXPECT_EQ(holder["job_name"], "(another tenant's job)");
  EXPECT_EQ(holder["tenant"], "team-b");
  EXPECT_EQ(node["gpus"][0]["used_milli"], 500);
  const Principal b{Role::kTenant, "team-b", "t"};
  EXPECT_EQ(Node(&b)["gpus"][0]["holders"][0]["job"], 7);
  EXPECT_EQ(Node(nullptr)["gpus"][0]["holders"][0]["job_name"], "their-train");
}

TEST_F(NodeViewsTest, DrainsHoldsAndUseAreShown) {
  nlohmann::json node = Node(nullptr);
  EXPECT_EQ(node["state"], "up");
  EXPECT_TRUE(node["schedulable"].get<bool>());
  EXPECT_EQ(node["cpu_used_milli"], 4'000);
  EXPECT_EQ(node["memory_used_mib"], 16'000);
  EXPECT_EQ(node["gpus"][0]["health"], "ok");
  EXPECT_EQ(node["gpus"][1]["health"], "drained");
  EXPECT_EQ(node["gpus"][1]["drain"]["kind"], "xid");
  EXPECT_EQ(node["gpus"][1]["mode"], "mig");
  // A module holding the node (a validation run): its reason, and no new work.
  module_holds_["n1"] = "held for a validation run";
  node = Node(nullptr);
  EXPECT_EQ(node["reason"], "held for a validation run");
  EXPECT_FALSE(node["schedulable"].get<bool>());
  EXPECT_TRUE(NodesJson(NodeViewInputs{nodes_, holds_, used_, Catalog(), module_holds_}, "n2",
                        nullptr)
                  .empty());
}

TEST_F(NodeViewsTest, GpuMetricsLabelEachMigInstanceWithItsHolder) {
  NodeInfo& n1 = nodes_.at("n1");
  n1.telemetry.resize(2);
  n1.telemetry[0].uuid = "GPU-0";
  n1.telemetry[0].util_pct = 40;
  n1.telemetry[1].uuid = "GPU-1";
  n1.telemetry[1].mig = {MigTelemetry{"MIG-a", "3g.40gb", 0, 1, 100, 200},
                         MigTelemetry{"MIG-b", "3g.40gb", 4, 2, 300, 400}};
  const GpuModel& model = Catalog().Get(n1.inventory.spec.gpus[1].model);
  int profile = -1;
  for (size_t p = 0; p < model.mig_profiles.size(); ++p) {
    profile = model.mig_profiles[p].name == "3g.40gb" ? static_cast<int>(p) : profile;
  }
  ASSERT_GE(profile, 0);
  GpuGrant mig{1, MilliGpu(428), MiB(40'000), profile, 4};
  holds_[{"n1", 1}].push_back(GpuHold{JobNumber(9), &theirs_, &mig});
  const std::string text = GpuMetricsText(nodes_, holds_, Catalog());
  EXPECT_NE(text.find("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-0\""), std::string::npos) << text;
  // The instance at start 4 is job 9's; the one at start 0 is nobody's.
  EXPECT_NE(text.find("GPU_I_ID=\"2\",tenant=\"team-b\",job_id=\"9\"} 300"), std::string::npos)
      << text;
  EXPECT_NE(text.find("GPU_I_ID=\"1\",tenant=\"\",job_id=\"\"} 100"), std::string::npos) << text;
}

TEST(QueueViewsTest, EachQueueShowsItsJobsBoundsAndQuota) {
  StatusOr<QueueTreeSpec> spec = ParseQueueTreeText(R"(cohorts:
  - name: all
queues:
  - name: a
    cohort: all
    tenant: team-a
    quota:
      gpu: 4
)",
                                                    Catalog());
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  StatusOr<QueueTree> tree = QueueTree::Create(std::move(spec).value(), Catalog());
  ASSERT_TRUE(tree.ok());
  const std::map<std::string, std::pair<int64_t, int64_t>> jobs = {{"a", {3, 1}}};
  const std::map<std::string, int64_t> max_pending = {{"a", 50}};
  std::vector<nlohmann::json> fair_share(tree->size(), nullptr);
  const size_t a = static_cast<size_t>(tree->FindQueue("a").value().value());
  fair_share[a] = {{"factor", 0.5}};
  nlohmann::json out =
      QueuesJson(QueueViewInputs{*tree, nullptr, Catalog(), jobs, max_pending, fair_share});
  ASSERT_EQ(out.size(), tree->size());
  const nlohmann::json& queue = out[a];
  EXPECT_EQ(queue["name"], "a");
  EXPECT_EQ(queue["kind"], "queue");
  EXPECT_EQ(queue["parent"], "all");
  EXPECT_EQ(queue["tenant"], "team-a");
  EXPECT_EQ(queue["pending"], 3);
  EXPECT_EQ(queue["running"], 1);
  EXPECT_EQ(queue["max_pending"], 50);
  EXPECT_EQ(queue["fair_share"]["factor"], 0.5);
  EXPECT_EQ(queue["resources"][0]["nominal"], 4000);
  EXPECT_EQ(queue["resources"][0]["used"], 0);  // no ledger: nothing in use
  const nlohmann::json& cohort = out[1 - a];
  EXPECT_EQ(cohort["kind"], "cohort");
  EXPECT_TRUE(cohort["max_pending"].is_null());
  EXPECT_TRUE(cohort["tenant"].is_null());
}

TEST(MetricsViewsTest, EveryQueueAndStateAppearsWithZeros) {
  StatusOr<QueueTreeSpec> spec = ParseQueueTreeText("queues:\n  - name: a\n    quota:\n      gpu: 2\n",
                                                    Catalog());
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  StatusOr<QueueTree> tree = QueueTree::Create(std::move(spec).value(), Catalog());
  ASSERT_TRUE(tree.ok());
  ControllerCounters counters;
  counters.submitted["a"] = 5;
  counters.finished[{"a", "failed"}] = 2;
  MetricsWriter w;
  WriteJobMetrics(w, *tree, {{{"a", "running"}, 1}}, counters);
  WriteQuotaMetrics(w, *tree, nullptr, Catalog());
  const std::string& text = w.text();
  EXPECT_NE(text.find("tessera_jobs{queue=\"a\",tenant=\"a\",state=\"pending\"} 0"), std::string::npos)
      << text;
  EXPECT_NE(text.find("tessera_jobs{queue=\"a\",tenant=\"a\",state=\"running\"} 1"), std::string::npos);
  EXPECT_NE(text.find("tessera_jobs_submitted_total{queue=\"a\"} 5"), std::string::npos);
  EXPECT_NE(text.find("tessera_jobs_finished_total{queue=\"a\",state=\"failed\"} 2"), std::string::npos);
  EXPECT_NE(text.find("tessera_jobs_finished_total{queue=\"a\",state=\"succeeded\"} 0"), std::string::npos);
  EXPECT_NE(text.find("tessera_queue_quota{queue=\"a\",resource=\"gpu\",kind=\"nominal\"} 2"),
            std::string::npos)
      << text;
}

// The API's text of a submission's answer (as SendJson writes it).
std::string SubmittedText(const JobIntake::Submitted& submitted) {
  return SubmittedJson(submitted).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

JobIntake::Submitted MadeJobs(JobIntake::Submitted::Shape shape, std::vector<uint64_t> ids) {
  JobIntake::Submitted out;
  out.shape = shape;
  for (uint64_t id : ids) {
    out.jobs.push_back(JobNumber(id));
  }
  return out;
}

// The texts the API sent when the intake answered in JSON: a job is its view, an array
// is named by its first element, a batch is its ids; a replay answers alike.
TEST(SubmittedJsonTest, AJobIsItsViewAnArrayAndABatchTheirIds) {
  JobIntake::Submitted one = MadeJobs(JobIntake::Submitted::Shape::kJob, {6});
  one.job_view = {{"id", 6}, {"name", "one"}, {"state", "pending"}};
  EXPECT_EQ(SubmittedText(one), R"({"id":6,"name":"one","state":"pending"})");

  JobIntake::Submitted array = MadeJobs(JobIntake::Submitted::Shape::kArray, {1, 2, 3});
  EXPECT_EQ(SubmittedText(array), R"({"array_job":1,"id":1,"ids":[1,2,3]})");
  array.replayed = true;
  EXPECT_EQ(SubmittedText(array), R"({"array_job":1,"id":1,"ids":[1,2,3]})");

  JobIntake::Submitted batch = MadeJobs(JobIntake::Submitted::Shape::kBatch, {4, 5});
  EXPECT_EQ(SubmittedText(batch), R"({"ids":[4,5]})");
}

// A stored row of a two-task job with one whole GPU per task in queue "main".
JobRow TwoTaskRow(uint64_t id, const std::string& state) {
  return testing::StoredJobRow(
      id, state,
      "name: two\nresources: {gpus: 1, gpu_model: H100-80GB}\ncommand: [x]\nreplicas: 2\n");
}

TEST(JobJsonTest, TheModulesHeldTheReasonAndTheSpecAreAddedWhenAsked) {
  JobRow row = TwoTaskRow(3, "pending");
  row.reason = HeldReason();
  const LiveJob job = JobTable::FromArchive(row, Catalog());
  const std::map<std::string, NodeInfo> nodes;
  // An archived job (no record): its GPU demand from its spec, nothing held.
  JobJsonInputs in{job, nullptr, JobState::kPending, nodes, Catalog(), "/ckpt", std::nullopt};
  nlohmann::json out = JobJson(in);
  EXPECT_EQ(out["gpu_milli"], 2'000);
  EXPECT_TRUE(out["held"].get<bool>());
  EXPECT_FALSE(out.contains("reason"));
  EXPECT_FALSE(out.contains("spec"));
  EXPECT_EQ(out["checkpoint_dir"], "/ckpt");

  JobRecord rec;
  rec.gpu_milli = 500;
  in.rec = &rec;
  in.describe = [](nlohmann::json& j) { j["restart"] = "described"; };
  in.reason = [] { return std::string("waits"); };
  in.with_spec = true;
  out = JobJson(in);
  EXPECT_EQ(out["gpu_milli"], 500);
  EXPECT_EQ(out["restart"], "described");
  EXPECT_EQ(out["reason"], "waits");
  EXPECT_EQ(out["spec"]["name"], "two");
  in.state = JobState::kRunning;  // held only while pending
  EXPECT_FALSE(JobJson(in)["held"].get<bool>());

  LiveJob broken = JobTable::FromArchive(row, Catalog());
  broken.row.spec_json = std::string("{not json");
  JobJsonInputs bad{broken, nullptr, JobState::kPending, nodes, Catalog(), "", std::nullopt};
  bad.with_spec = true;
  EXPECT_TRUE(JobJson(bad)["spec"].is_null());
}

TEST(JobJsonTest, AViewIsTheBodyWithoutItsBraceAndTheSpecTextWhenItIsJson) {
  const LiveJob job = JobTable::FromArchive(TwoTaskRow(4, "running"), Catalog());
  const JobView view = JobViewOf(job, JobState::kRunning, {{"id", 4}, {"name", "two"}});
  EXPECT_EQ(view.id, JobNumber(4));
  EXPECT_EQ(view.tasks, 2);
  EXPECT_EQ(view.tenant, "team-a");
  EXPECT_EQ(view.queue, "main");
  EXPECT_EQ(view.state, "running");
  EXPECT_EQ(view.body, R"({"id":4,"name":"two")");
  EXPECT_EQ(view.spec.str(), job.row.spec_json.str());
  EXPECT_EQ(job.spec_text_ok, 1);

  LiveJob broken = JobTable::FromArchive(TwoTaskRow(5, "running"), Catalog());
  broken.row.spec_json = std::string("{not json");
  EXPECT_TRUE(JobViewOf(broken, JobState::kRunning, nlohmann::json::object()).spec.str().empty());
  EXPECT_EQ(broken.spec_text_ok, 0);
}

TEST(NodeUseTest, RunningTasksThatHaveNotExitedHoldTheirGpusCpuAndMemory) {
  const QueueTree tree = testing::TreeFromYaml(
      "queues:\n  - name: main\n    tenant: team-a\n    quota:\n      gpu: 4\n");
  Allocation a;
  a.cpu = MilliCpu(1000);
  a.memory = MiB(1024);
  a.gpus.push_back(GpuGrant{2, kWholeGpu, MiB(0)});
  JobRow running = TwoTaskRow(7, "running");
  // Task 0 runs on n1; task 1 exited on n2.
  running.placement_json =
      job_rows::PlacementJson({a, a}, {{"n1", false, 0, 0}, {"n2", true, 3, 0}}, 5'000, "").dump();
  JobTable jobs;
  ASSERT_TRUE(jobs.Restore(running, Catalog(), tree).ok());
  ASSERT_TRUE(jobs.Restore(TwoTaskRow(8, "pending"), Catalog(), tree).ok());

  NodeUse use = NodeUseOf(jobs, "");
  ASSERT_EQ(use.holds.size(), 1u);
  const std::vector<GpuHold>& held = use.holds.at({"n1", 2});
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(held[0].job, JobNumber(7));
  EXPECT_EQ(held[0].row->name, "two");
  EXPECT_EQ(held[0].grant->milli, kWholeGpu);
  EXPECT_EQ(use.used, (std::map<std::string, std::pair<int64_t, int64_t>>{{"n1", {1000, 1024}}}));
  EXPECT_TRUE(NodeUseOf(jobs, "n2").holds.empty());
  EXPECT_TRUE(NodeUseOf(jobs, "n2").used.empty());
  EXPECT_EQ(NodeUseOf(jobs, "n1").used.size(), 1u);
}

TEST(NodeUseTest, ModuleHoldsNameOnlyTheNodesAModuleHolds) {
  std::map<std::string, NodeInfo> nodes;
  nodes.emplace("n1", TwoGpuNode("n1"));
  nodes.emplace("n2", TwoGpuNode("n2"));
  auto hold = [](const std::string& node) {
    return node == "n2" ? std::string("validating") : std::string();
  };
  EXPECT_EQ(ModuleHoldsOf(nodes, "", hold),
            (std::map<std::string, std::string>{{"n2", "validating"}}));
  EXPECT_TRUE(ModuleHoldsOf(nodes, "n1", hold).empty());
  EXPECT_EQ(ModuleHoldsOf(nodes, "n2", hold).size(), 1u);
}

}  // namespace views_test
}  // namespace tessera
