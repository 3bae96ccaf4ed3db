// Node labels from the agents' registrations: they reach the scheduler's NodeSpec (a
// rack-hard gang keeps within one rack), a changed label set on re-registration
// regroups the nodes without draining them, and they show in the nodes' view and the
// metrics. On a manual clock, no sleeps.
#include <gtest/gtest.h>

#include "api/node_labels.h"
#include "server/controller_fixture.h"

namespace tessera {
namespace {

// Two tasks of two H100s each: one node holds one task (node-1 and node-2 have two H100s).
constexpr const char* kRackGang =
    "name: gang\nreplicas: 2\nresources: {gpus: 2, gpu_model: H100-80GB}\n"
    "topology: {scope: rack, hard: true}\ncommand: [x]\n";

class ControllerLabelsTest : public ControllerTest {
 protected:
  void Tune(ControllerOptions& o) override { o.history_interval = 0; }

  RegisterRequest Labelled(const std::string& node, const std::string& agent, NodeLabels labels) {
    RegisterRequest r = Inventory();
    r.agent_id = agent;
    r.inventory.spec.name = node;
    r.inventory.spec.labels = std::move(labels);
    if (node == "node-1") {
      r.tasks = Running();
    }
    return r;
  }
  void Join(const std::string& node, const std::string& agent, NodeLabels labels) {
    auto r = controller_->Register(Labelled(node, agent, std::move(labels)), "127.0.0.1");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  std::string State(uint64_t id) {
    auto j = Reads().GetJob(Principal{Role::kAdmin, "", "test"}, JobNumber(id));
    EXPECT_TRUE(j.ok()) << j.status().ToString();
    return j.ok() ? (*j)["state"].get<std::string>() : "";
  }
  nlohmann::json NodeView(const std::string& name) {
    nlohmann::json nodes = Views().Nodes(Principal{Role::kAdmin, "", "test"})["nodes"];
    for (const nlohmann::json& n : nodes) {
      if (n["name"] == name) {
        return n;
      }
    }
    ADD_FAILURE() << "no node " << name;
    return nlohmann::json();
  }
};

TEST_F(ControllerLabelsTest, ARackHardGangWaitsUntilRelabelledNodesShareARack) {
  Join("node-1", agent_id_, {{"block", "b1"}, {"rack", "r1"}});
  Join("node-2", "agent-2", {{"block", "b1"}, {"rack", "r2"}});
  EXPECT_EQ(NodeView("node-1")["labels"], (nlohmann::json{{"block", "b1"}, {"rack", "r1"}}));
  EXPECT_EQ(NodeView("node-2")["labels"]["rack"], "r2");

  // It never fits the racks as they are: held rather than refused.
  const uint64_t gang = Submit("team-a", std::string(kRackGang) + "hold_if_unfit: true\n");
  EXPECT_TRUE(CycleAndTake().empty());
  EXPECT_EQ(State(gang), "pending") << "the gang spread over two racks";

  // node-2's agent restarts with node-1's rack: the nodes regroup, the gang starts.
  Join("node-2", "agent-2b", {{"block", "b1"}, {"rack", "r1"}});
  EXPECT_EQ(NodeView("node-2")["labels"]["rack"], "r1");
  ASSERT_EQ(CycleAndTake().size(), 1u);  // node-1's task; node-2's goes to its agent
  EXPECT_EQ(State(gang), "running");
  const std::string metrics = Views().Metrics();
  EXPECT_NE(metrics.find("tessera_node_info{node=\"node-2\",block=\"b1\",rack=\"r1\"} 1"),
            std::string::npos)
      << metrics;

  // A label change while the node runs work applies at once: it is not drained.
  Join("node-1", agent_id_, {{"block", "b1"}, {"nvlink-domain", "c/1"}, {"rack", "r1"}});
  EXPECT_TRUE(NodeView("node-1")["schedulable"].get<bool>());
  EXPECT_EQ(State(gang), "running");
  EXPECT_NE(Views().Metrics().find("nvlink_domain=\"c/1\""), std::string::npos);
  std::vector<std::string> broken = controller_->CheckInvariants();
  EXPECT_TRUE(broken.empty()) << broken.front();
}

TEST_F(ControllerLabelsTest, LabelsSurviveAControllerRestart) {
  Join("node-1", agent_id_, {{"rack", "r7"}});
  Reopen();
  EXPECT_EQ(NodeView("node-1")["labels"], (nlohmann::json{{"rack", "r7"}}));
}

TEST_F(ControllerLabelsTest, ABadLabelIsRefusedNamingIt) {
  auto r = controller_->Register(Labelled("node-1", agent_id_, {{"Rack", "r1"}}), "127.0.0.1");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("inventory.label 'Rack=r1'"), std::string::npos)
      << r.status().message();
  r = controller_->Register(Labelled("node-1", agent_id_, {{"node", "x"}}), "127.0.0.1");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("reserved"), std::string::npos);
}

}  // namespace
}  // namespace tessera
