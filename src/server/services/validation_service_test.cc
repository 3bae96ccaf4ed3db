// ValidationService over a controller driven by the test (controller_fixture.h, which
// attaches the service as the server does): checks added and listed, a run asked for
// holds its node and starts the check there, refusals of unknown checks and nodes, and
// the results a pass records.
#include "server/services/validation_service.h"

#include <gtest/gtest.h>

#include "server/controller_fixture.h"

namespace tessera {
namespace validation_service_test {

class ValidationServiceTest : public ControllerTest {
 protected:
  void AddBurn() {
    auto r = validation_->Add({{"name", "burn"}, {"command", "burn"}, {"threshold", "10%"}});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  nlohmann::json NodeOne() { return Views().Nodes()["nodes"][0]; }
};

TEST_F(ValidationServiceTest, AddedCheckIsListedAndANameInUseIsRefused) {
  AddBurn();
  nlohmann::json list = validation_->List();
  ASSERT_EQ(list["checks"].size(), 1U) << list.dump();
  EXPECT_EQ(list["checks"][0]["name"], "burn");
  EXPECT_EQ(validation_->Add({{"name", "burn"}, {"command", "true"}}).status().code(),
            StatusCode::kAlreadyExists);
  EXPECT_EQ(validation_->Add({{"name", "x"}}).status().code(), StatusCode::kInvalidArgument);
  // Kept across a restart: the module's rows are loaded when it is attached again.
  Reopen();
  EXPECT_EQ(validation_->List()["checks"].size(), 1U);
}

TEST_F(ValidationServiceTest, RunQueuesTheCheckOnTheNodeWhichIsHeldForIt) {
  Register();
  AddBurn();
  auto queued = validation_->Run("burn", "");
  ASSERT_TRUE(queued.ok()) << queued.status().ToString();
  EXPECT_EQ(*queued, (nlohmann::json{{"check", "burn"}, {"nodes", {"node-1"}}}));
  std::vector<TaskLaunch> launches = ValidationPass();  // the node is idle: held, the check starts
  ASSERT_EQ(launches.size(), 1U);
  EXPECT_EQ(launches[0].env.at("TESSERA_VALIDATION"), "burn");
  EXPECT_EQ(NodeOne()["schedulable"], false) << NodeOne().dump();
  EXPECT_EQ(validation_->List()["checks"][0]["node_states"][0]["state"], "running");
  // A job submitted now waits: the node is the check's.
  Submit("team-a", "name: one\nresources: {gpus: 1, gpu_model: H100-80GB}\ncommand: [x]\n");
  EXPECT_TRUE(ValidationPass().empty());
}

TEST_F(ValidationServiceTest, UnknownCheckOrNodeIsNotFound) {
  Register();
  auto removed = validation_->Remove("nope");
  EXPECT_EQ(removed.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(removed.status().message(), "no validation check 'nope'");
  EXPECT_EQ(validation_->Run("nope", "").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(validation_->Results("nope", "", 10).status().code(), StatusCode::kNotFound);
  AddBurn();
  auto run = validation_->Run("burn", "node-9");
  EXPECT_EQ(run.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(run.status().message(), "no node 'node-9'");
}

TEST_F(ValidationServiceTest, ResultsAfterAPassJudgeTheCheckOutput) {
  Register();
  AddBurn();
  ASSERT_TRUE(validation_->Run("burn", "node-1").ok());
  std::vector<TaskLaunch> launches = ValidationPass();
  ASSERT_EQ(launches.size(), 1U);
  auto none = validation_->Results("burn", "node-1", 10);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE((*none)["runs"].empty());

  // The check's task exits, having printed its results; the next pass judges them.
  TaskReport t;
  t.key = running_.at(launches[0].key.job);
  t.state = TaskState::kExited;
  t.log_chunk = "{\"gpu\":0,\"metric\":\"tflops\",\"value\":300}\n";
  running_.erase(t.key.job);
  ASSERT_TRUE(controller_->Heartbeat(HeartbeatRequest{"node-1", agent_id_, {t}, {}}).ok());
  clock_.Advance(2 * kSecond);
  validation_->Step();

  auto results = validation_->Results("burn", "node-1", 10);
  ASSERT_TRUE(results.ok()) << results.status().ToString();
  ASSERT_EQ((*results)["runs"].size(), 1U) << results->dump();
  const nlohmann::json& run = (*results)["runs"][0];
  EXPECT_EQ(run["outcome"], "passed");
  EXPECT_EQ(run["job"], launches[0].key.job);
  ASSERT_EQ(run["results"].size(), 1U);
  EXPECT_EQ(run["results"][0]["value"], 300.0);
  EXPECT_EQ(NodeOne()["schedulable"], true);  // let go
}

}  // namespace validation_service_test
}  // namespace tessera
