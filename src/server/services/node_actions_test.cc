// NodeActions (services/node_actions.h): the admin's drain, resume, fence, loss and
// removal of nodes through the controller's transactions, on a manual clock with the test
// playing node-1's agent.
#include "server/services/node_actions.h"

#include <optional>
#include <string>

#include "server/controller_fixture.h"

namespace tessera {
namespace node_actions_test {

constexpr const char* kOneGpu =
    "queue: team-a\ncommand: [true]\nresources: {gpus: 1, gpu_model: H100-80GB}\n";

class NodeActionsTest : public ControllerTest {
 protected:
  nlohmann::json View(uint64_t id) {
    auto job = Reads().GetJob(Principal{Role::kAdmin, "", "test"}, JobNumber(id));
    EXPECT_TRUE(job.ok()) << job.status().ToString();
    return job.ok() ? *job : nlohmann::json();
  }
  std::string State(uint64_t id) { return View(id).value("state", "?"); }
  // node-1 as GET /v1/nodes shows it; null once it is not known.
  nlohmann::json Node1() {
    const nlohmann::json nodes = Views().Nodes();
    for (const nlohmann::json& node : nodes["nodes"]) {
      if (node["name"] == "node-1") {
        return node;
      }
    }
    return nullptr;
  }
  // A job started on node-1 (its launch taken by the test's agent).
  uint64_t StartOne() {
    const uint64_t id = Submit("team-a", kOneGpu);
    EXPECT_EQ(CycleAndTake().size(), 1u);
    EXPECT_EQ(State(id), "running");
    return id;
  }
};

TEST_F(NodeActionsTest, FencingDrainsTheWholeNodeWithTheReasonAndStartsNothingNewThere) {
  Register();
  const uint64_t first = StartOne();
  ASSERT_TRUE(NodeAdmin().FenceNode("node-1", "its credential was revoked").ok());
  const nlohmann::json node = Node1();
  EXPECT_EQ(node["drain"]["reason"], "its credential was revoked");
  EXPECT_EQ(node["drain"]["by"], "admin");
  EXPECT_FALSE(node["schedulable"].get<bool>());
  // What runs there keeps running; nothing new starts though three GPUs are free.
  const uint64_t second = Submit("team-a", kOneGpu);
  EXPECT_TRUE(CycleAndTake().empty());
  EXPECT_EQ(State(first), "running");
  EXPECT_EQ(State(second), "pending");

  const Status unknown = NodeAdmin().FenceNode("nope", "x");
  EXPECT_EQ(unknown.code(), StatusCode::kNotFound);
  EXPECT_EQ(unknown.message(), "no node 'nope'");
}

TEST_F(NodeActionsTest, DeclaringANodeLostRequeuesItsRunningJobAndASecondTimeIsRefused) {
  Register();
  const uint64_t id = StartOne();
  ASSERT_TRUE(NodeAdmin().DeclareNodeLost("node-1", "powered off").ok());
  EXPECT_EQ(State(id), "pending");  // requeued, waiting for a node
  EXPECT_EQ(Node1()["state"], "down");
  EXPECT_TRUE(CycleAndTake().empty()) << "nothing starts on a node that is down";

  const Status again = NodeAdmin().DeclareNodeLost("node-1", "powered off");
  EXPECT_EQ(again.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(again.message(), "node 'node-1' is down already");
  const Status unknown = NodeAdmin().DeclareNodeLost("nope", "x");
  EXPECT_EQ(unknown.code(), StatusCode::kNotFound);
  EXPECT_EQ(unknown.message(), "no node 'nope'");

  // Its agent comes back: the job runs again there.
  running_.clear();
  Register();
  EXPECT_EQ(CycleAndTake().size(), 1u);
  EXPECT_EQ(State(id), "running");
}

TEST_F(NodeActionsTest, ARemovalIsRefusedWhileTheNodeIsUpAndRunsAJob) {
  Register();
  const uint64_t id = StartOne();
  StatusOr<nlohmann::json> refused = NodeAdmin().RemoveNode("node-1", WriteBatch{});
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.status().message(),
            "node 'node-1' is up and runs 1 job(s) (" + std::to_string(id) +
                "); drain it and let them finish, or remove it once it is down");
  EXPECT_FALSE(Node1().is_null());  // nothing changed
  EXPECT_EQ(State(id), "running");
  EXPECT_EQ(NodeAdmin().RemoveNode("nope", WriteBatch{}).status().code(), StatusCode::kNotFound);
}

TEST_F(NodeActionsTest, ARemovedNodeIsForgottenDurablyWithWhatTheCallerAdded) {
  Register();
  const uint64_t id = StartOne();
  ASSERT_TRUE(NodeAdmin().DeclareNodeLost("node-1", "powered off").ok());
  WriteBatch extra;
  extra.kv.emplace_back("node_actions_test/extra", "kept");
  StatusOr<nlohmann::json> removed = NodeAdmin().RemoveNode("node-1", extra);
  ASSERT_TRUE(removed.ok()) << removed.status().ToString();
  EXPECT_EQ(*removed, (nlohmann::json{{"removed", "node-1"}}));
  EXPECT_TRUE(Node1().is_null());
  EXPECT_EQ(State(id), "pending");
  EXPECT_EQ(NodeAdmin().RemoveNode("node-1", WriteBatch{}).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(NodeAdmin().Drain("node-1", -1, "x").status().code(), StatusCode::kNotFound);
  // One batch: the caller's row and the removal's marker.
  StatusOr<std::optional<std::string>> kept = store_->GetKv("node_actions_test/extra");
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->value_or(""), "kept");
  StatusOr<std::optional<std::string>> marker = store_->GetKv("removed_node/node-1");
  ASSERT_TRUE(marker.ok());
  EXPECT_FALSE(marker->value_or("").empty());

  // After a restart the core forgets it again (the marker), until it registers afresh.
  Reopen();
  ASSERT_TRUE(controller_->ForgetRemovedNodes().ok());
  EXPECT_TRUE(Node1().is_null());
}

TEST_F(NodeActionsTest, AnIdleNodeThatIsUpMayBeRemoved) {
  Register();
  ASSERT_TRUE(NodeAdmin().RemoveNode("node-1", WriteBatch{}).ok());
  EXPECT_TRUE(Node1().is_null());
  Submit("team-a", kOneGpu);
  EXPECT_TRUE(controller_->RunCycle().ok());
  EXPECT_TRUE(Views().Nodes()["nodes"].empty());
}

TEST_F(NodeActionsTest, DrainAndResumeOfOneGpu) {
  Register();
  StatusOr<nlohmann::json> drained = NodeAdmin().Drain("node-1", 1, "xid 79");
  ASSERT_TRUE(drained.ok()) << drained.status().ToString();
  EXPECT_EQ((*drained)["gpus"][1]["health"], "drained");
  EXPECT_EQ((*drained)["gpus"][1]["drain"]["reason"], "xid 79");
  EXPECT_EQ((*drained)["gpus"][0]["health"], "ok");
  EXPECT_TRUE((*drained)["schedulable"].get<bool>());  // the node's other GPUs take work

  const StatusOr<nlohmann::json> no_gpu = NodeAdmin().Drain("node-1", 4, "x");
  EXPECT_EQ(no_gpu.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(no_gpu.status().message(), "node node-1 has 4 GPUs; no GPU 4");
  EXPECT_EQ(NodeAdmin().Drain("node-1", 0, "").status().message(), "a drain needs a reason");
  EXPECT_EQ(NodeAdmin().Resume("nope", 0).status().code(), StatusCode::kNotFound);

  StatusOr<nlohmann::json> resumed = NodeAdmin().Resume("node-1", 1);
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  EXPECT_EQ((*resumed)["gpus"][1]["health"], "ok");
  // Resuming what is not drained changes nothing and is no error.
  ASSERT_TRUE(NodeAdmin().Resume("node-1", 1).ok());
  ASSERT_TRUE(NodeAdmin().Resume("node-1", -1).ok());
}

}  // namespace node_actions_test
}  // namespace tessera
