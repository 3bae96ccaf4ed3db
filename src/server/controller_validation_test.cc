// Validation runs driven through the controller and its ValidationService on a manual
// clock: when a check is due, the node held for it (a job submitted meanwhile does not
// land there, a running one is not preempted), the check job pinned to the node, its
// results judged, drains on a regression or a failure, and everything kept across a
// restart.
#include <gtest/gtest.h>

#include "server/controller_fixture.h"

namespace tessera {
namespace {

constexpr const char* kOneGpu =
    "name: one\nresources: {gpus: 1, gpu_model: H100-80GB}\ncommand: [x]\n";

class ControllerValidationTest : public ControllerTest {
 protected:
  void AddCheck(const std::string& every = "1h") {
    auto r = validation_->Add({{"name", "burn"},
                               {"command", "burn --seconds 60"},
                               {"every", every},
                               {"threshold", "10%"}});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  // The validation pass, past its once-a-second throttle.
  void Step() {
    clock_.Advance(2 * kSecond);
    validation_->Step();
  }
  // The task of `job` exits with `code`, having printed `output`.
  void ExitWith(uint64_t job, int code, const std::string& output) {
    TaskReport t;
    t.key = running_.at(job);
    t.state = TaskState::kExited;
    t.exit_code = code;
    t.log_chunk = output;
    running_.erase(job);
    std::vector<TaskReport> reports = Running();
    reports.push_back(t);
    auto r = controller_->Heartbeat(HeartbeatRequest{"node-1", agent_id_, reports, {}});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  std::string NodeState() {
    nlohmann::json list = validation_->List();
    return list["checks"][0]["node_states"][0]["state"].get<std::string>();
  }
  nlohmann::json Node() { return Views().Nodes()["nodes"][0]; }
  // Runs the check now and returns the check job's launch.
  TaskLaunch RunNow() {
    auto r = validation_->Run("burn", "");
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    std::vector<TaskLaunch> l = ValidationPass();
    EXPECT_EQ(l.size(), 1U) << validation_->List().dump() << Views().Nodes().dump();
    return l.empty() ? TaskLaunch{} : l[0];
  }
};

TEST_F(ControllerValidationTest, DueNodeIsHeldUntilItsJobsEndThenRunsTheCheckAlone) {
  Register();
  const uint64_t busy = Submit("team-a", kOneGpu);
  ASSERT_EQ(ValidationPass().size(), 1U);
  AddCheck("1h");
  clock_.Advance(30 * kMinute);
  EXPECT_TRUE(ValidationPass().empty());
  EXPECT_EQ(NodeState(), "scheduled");

  clock_.Advance(31 * kMinute);  // past created + 1h: due, the node is held
  EXPECT_TRUE(ValidationPass().empty());
  EXPECT_EQ(NodeState(), "waiting");
  EXPECT_EQ(Node()["reason"], "held for validation burn: takes no new work until its jobs end");
  EXPECT_EQ(Node()["schedulable"], false);
  auto job = Reads().GetJob(Principal{Role::kAdmin, "", "admin"}, JobNumber(busy));
  ASSERT_TRUE(job.ok());
  EXPECT_EQ((*job)["state"], "running");  // not preempted for the check
  // Work submitted while the check waits does not land on the held node.
  const uint64_t later = Submit("team-a", kOneGpu);
  EXPECT_TRUE(ValidationPass().empty());
  EXPECT_EQ(NodeState(), "waiting");

  Exit(busy);  // the node's last job ends: the check starts, alone
  std::vector<TaskLaunch> launches = ValidationPass();
  ASSERT_EQ(launches.size(), 1U);
  const TaskLaunch check = launches[0];
  EXPECT_NE(check.key.job, later);
  EXPECT_EQ(check.command, (std::vector<std::string>{"/bin/sh", "-c", "burn --seconds 60"}));
  EXPECT_EQ(check.gpus, (std::vector<int>{0, 1, 3}));  // every GPU not in MIG mode
  EXPECT_EQ(check.cpu_milli, 64000);
  EXPECT_EQ(check.env.at("TESSERA_VALIDATION"), "burn");
  EXPECT_EQ(NodeState(), "running");
  // Held and charged like any running job: the core's ledgers and quotas agree.
  EXPECT_EQ(controller_->CheckInvariants(), std::vector<std::string>{});
  auto shown = Reads().GetJob(Principal{Role::kAdmin, "", "admin"}, JobNumber(check.key.job));
  ASSERT_TRUE(shown.ok());
  EXPECT_EQ((*shown)["tenant"], "_validation");
  EXPECT_EQ((*shown)["state"], "running");
  EXPECT_TRUE(ValidationPass().empty());  // the waiting job still waits

  ExitWith(check.key.job, 0,
           "warming up\n{\"gpu\":0,\"metric\":\"tflops\",\"value\":300}\n"
           "{\"gpu\":1,\"metric\":\"tflops\",\"value\":310}\n");
  Step();
  launches = ValidationPass();  // the node is let go: the waiting job starts
  ASSERT_EQ(launches.size(), 1U);
  EXPECT_EQ(launches[0].key.job, later);
  EXPECT_EQ(NodeState(), "scheduled");
  EXPECT_EQ(controller_->CheckInvariants(), std::vector<std::string>{});

  auto results = validation_->Results("burn", "", 10);
  ASSERT_TRUE(results.ok());
  ASSERT_EQ((*results)["runs"].size(), 1U);
  const nlohmann::json& run = (*results)["runs"][0];
  EXPECT_EQ(run["outcome"], "passed");
  EXPECT_EQ(run["job"], check.key.job);
  ASSERT_EQ(run["results"].size(), 2U);
  EXPECT_EQ(run["results"][0]["value"], 300.0);
  EXPECT_TRUE(run["results"][0]["baseline"].is_null());
  EXPECT_TRUE(Node()["drain"].is_null());

  // The next run is due an hour after this one started, not before.
  Exit(later);
  clock_.Advance(50 * kMinute);
  EXPECT_TRUE(ValidationPass().empty());
  EXPECT_EQ(NodeState(), "scheduled");
  clock_.Advance(15 * kMinute);
  EXPECT_TRUE(controller_->RunCycle().ok());
  Step();                        // holds the idle node and starts the check at once
  EXPECT_EQ(ValidationPass().size(), 1U);  // the agent's heartbeat takes its launch
  EXPECT_EQ(NodeState(), "running");
}

TEST_F(ControllerValidationTest, BusyNodeIsLetGoAfterMaxWait) {
  Register();
  const uint64_t busy = Submit("team-a", kOneGpu);
  ASSERT_EQ(ValidationPass().size(), 1U);
  auto r = validation_->Add(
      {{"name", "burn"}, {"command", "true"}, {"every", "1h"}, {"max_wait", "30m"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  clock_.Advance(61 * kMinute);
  ValidationPass();
  EXPECT_EQ(NodeState(), "waiting");
  const uint64_t later = Submit("team-a", kOneGpu);
  clock_.Advance(31 * kMinute);
  std::vector<TaskLaunch> l = ValidationPass();  // skipped: the node takes work again
  EXPECT_EQ(NodeState(), "scheduled");
  if (l.empty()) {
    l = ValidationPass();
  }
  ASSERT_EQ(l.size(), 1U);
  EXPECT_EQ(l[0].key.job, later);
  auto results = validation_->Results("burn", "node-1", 10);
  ASSERT_TRUE(results.ok());
  ASSERT_EQ((*results)["runs"].size(), 1U);
  EXPECT_EQ((*results)["runs"][0]["outcome"], "skipped");
  EXPECT_NE((*results)["runs"][0]["reason"].get<std::string>().find("stayed busy for 30m"),
            std::string::npos);
  (void)busy;
}

TEST_F(ControllerValidationTest, RegressionDrainsTheGpuAndFailureTheNodeAcrossARestart) {
  Register();
  AddCheck("24h");
  TaskLaunch first = RunNow();
  ExitWith(first.key.job, 0, "{\"gpu\":0,\"metric\":\"tflops\",\"value\":300}\n");
  Step();
  EXPECT_TRUE(Node()["gpus"][0]["drain"].is_null());

  Reopen();  // the check, its results and the baseline survive
  Register();
  TaskLaunch second = RunNow();
  ExitWith(second.key.job, 0,
           "{\"gpu\":0,\"metric\":\"tflops\",\"value\":210}\n"
           "{\"gpu\":1,\"metric\":\"tflops\",\"value\":305}\n");
  Step();
  const nlohmann::json node = Node();
  ASSERT_FALSE(node["gpus"][0]["drain"].is_null()) << node.dump();
  EXPECT_EQ(node["gpus"][0]["drain"]["reason"],
            "validation burn: tflops 210 is 30 % below baseline 300 (threshold 10 %)");
  EXPECT_EQ(node["gpus"][0]["drain"]["by"], "validation");
  EXPECT_TRUE(node["gpus"][1]["drain"].is_null());  // GPU 1 had no baseline: it sets one
  EXPECT_TRUE(node["drain"].is_null());
  const std::string metrics = Views().Metrics();
  EXPECT_NE(metrics.find("tessera_validation_result{node=\"node-1\",gpu=\"0\",check=\"burn\","
                         "metric=\"tflops\"} 210\n"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("tessera_validation_regressions_total 1\n"), std::string::npos);

  // A failed check (non-zero exit) drains the whole node with its exit code.
  TaskLaunch third = RunNow();
  ExitWith(third.key.job, 3, "diag: PCIe replay errors\n");
  Step();
  EXPECT_EQ(Node()["drain"]["reason"], "validation burn: check failed with exit code 3");
  auto results = validation_->Results("burn", "node-1", 10);
  ASSERT_TRUE(results.ok());
  ASSERT_EQ((*results)["runs"].size(), 3U);
  EXPECT_EQ((*results)["runs"][0]["outcome"], "failed");
  EXPECT_EQ((*results)["runs"][1]["outcome"], "regressed");
  EXPECT_EQ((*results)["runs"][2]["outcome"], "passed");

  auto removed = validation_->Remove("burn");
  ASSERT_TRUE(removed.ok());
  Reopen();
  EXPECT_TRUE(validation_->List()["checks"].empty());
  EXPECT_EQ(validation_->Results("burn", "", 10).status().code(), StatusCode::kNotFound);
  // Added again, it starts afresh: its first result sets a new baseline.
  AddCheck("24h");
  EXPECT_TRUE((*validation_->Results("burn", "", 10))["runs"].empty());
  EXPECT_TRUE(validation_->Remove("burn").ok());
  EXPECT_EQ(validation_->Remove("burn").status().code(), StatusCode::kNotFound);
}

TEST_F(ControllerValidationTest, AHeldNodeStaysHeldAcrossARestartAndItsCheckIsJudged) {
  Register();
  const uint64_t busy = Submit("team-a", kOneGpu);
  ASSERT_EQ(ValidationPass().size(), 1U);
  AddCheck("1h");
  ASSERT_TRUE(validation_->Run("burn", "node-1").ok());
  EXPECT_TRUE(ValidationPass().empty());
  EXPECT_EQ(NodeState(), "waiting");

  Reopen();  // the hold is durable: the node comes back held
  Register();
  const uint64_t later = Submit("team-a", kOneGpu);
  EXPECT_TRUE(ValidationPass().empty());
  EXPECT_EQ(NodeState(), "waiting");
  Exit(busy);
  std::vector<TaskLaunch> l = ValidationPass();
  ASSERT_EQ(l.size(), 1U);
  EXPECT_EQ(l[0].env.at("TESSERA_VALIDATION"), "burn");

  Reopen();  // the check job runs across a restart and is judged when it ends
  Register();
  EXPECT_EQ(NodeState(), "running");
  ExitWith(l[0].key.job, 0, "{\"gpu\":0,\"metric\":\"tflops\",\"value\":300}\n");
  l = ValidationPass();  // judged after the first cycle rebuilt the core; the node is let go
  auto results = validation_->Results("burn", "node-1", 10);
  ASSERT_TRUE(results.ok());
  ASSERT_EQ((*results)["runs"].size(), 1U);
  EXPECT_EQ((*results)["runs"][0]["outcome"], "passed");
  ASSERT_EQ(l.size(), 1U);
  EXPECT_EQ(l[0].key.job, later);
}

TEST_F(ControllerValidationTest, TimeoutFailsTheCheckAndDrainsTheNode) {
  Register();
  auto r = validation_->Add({{"name", "burn"}, {"command", "sleep 1000"}, {"timeout", "5m"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  TaskLaunch check = RunNow();
  clock_.Advance(6 * kMinute);
  Step();  // past the timeout: the task is told to stop
  // The stop is answered by the task's exit: the check failed.
  ExitWith(check.key.job, 0, "");
  Step();
  EXPECT_EQ(Node()["drain"]["reason"], "validation burn: timed out after 5m");
}

}  // namespace
}  // namespace tessera
