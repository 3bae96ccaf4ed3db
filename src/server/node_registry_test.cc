// The node registry (node_registry.h) on its own: its durable drains, and what a
// registration and a telemetry sample change of a node.
#include "server/node_registry.h"

#include <gtest/gtest.h>

namespace tessera {
namespace node_registry_test {

TEST(NodeRegistryTest, DrainsRoundTripThroughTheirStoreRow) {
  NodeRegistry nodes;
  NodeInfo& n1 = nodes.Add("n1");
  n1.inventory.spec.name = "n1";
  (void)nodes.SetDrain(n1, -1, DrainInfo{"maintenance", "admin", "admin", 100});
  (void)nodes.SetDrain(n1, 3, DrainInfo{"xid 79", "health", "xid", 200});
  auto row = nodes.SetDrain(n1, 5, DrainInfo{"hot", "health", "temperature", 300});
  EXPECT_EQ(row.first, "drain/n1");

  NodeRegistry restored;
  ASSERT_TRUE(restored.RestoreDrains({row}, 999).ok());
  const NodeInfo* back = restored.Find("n1");
  ASSERT_NE(back, nullptr);
  ASSERT_TRUE(back->drain.has_value());
  EXPECT_EQ(back->drain->reason, "maintenance");
  EXPECT_EQ(back->drain->since, 100);
  ASSERT_EQ(back->gpu_drains.size(), 2u);
  EXPECT_EQ(back->gpu_drains.at(3).kind, "xid");
  EXPECT_EQ(back->gpu_drains.at(3).by, "health");
  EXPECT_EQ(back->gpu_drains.at(5).reason, "hot");
  EXPECT_EQ(back->gpu_drains.at(5).since, 300);
  // Not registered since the restart: known, waiting for its agent.
  EXPECT_FALSE(back->up);
  EXPECT_EQ(back->last_seen, 999);
  EXPECT_NE(back->reason.find("waiting for its agent"), std::string::npos);
}

TEST(NodeRegistryTest, ALiftedDrainLeavesTheRowWithoutIt) {
  NodeRegistry nodes;
  NodeInfo& n = nodes.Add("n");
  n.inventory.spec.name = "n";
  (void)nodes.SetDrain(n, 1, DrainInfo{"x", "admin", "admin", 1});
  (void)nodes.SetDrain(n, -1, DrainInfo{"y", "admin", "admin", 2});
  (void)nodes.SetDrain(n, 1, std::nullopt);
  auto row = nodes.SetDrain(n, -1, std::nullopt);
  EXPECT_TRUE(n.gpu_drains.empty());
  EXPECT_FALSE(n.drain.has_value());
  EXPECT_EQ(row.second, NodeRegistry::NoDrainsRow("n").second);
  NodeRegistry restored;
  ASSERT_TRUE(restored.RestoreDrains({row}, 1).ok());
  EXPECT_FALSE(restored.Find("n")->drain.has_value());
  EXPECT_TRUE(restored.Find("n")->gpu_drains.empty());
}

TEST(NodeRegistryTest, AnUnreadableRowIsRefusedNamingTheNode) {
  for (const char* text : {"not json", R"({"node": {"reason": 3, "since_us": 1}})",
                           R"({"gpus": {"x": {"reason": "r", "since_us": 1}}})",
                           R"({"gpus": {"-1": {"reason": "r", "since_us": 1}}})"}) {
    NodeRegistry nodes;
    Status s = nodes.RestoreDrains({{"drain/bad-node", text}}, 1);
    EXPECT_EQ(s.code(), StatusCode::kInternal) << text;
    EXPECT_NE(s.message().find("bad-node"), std::string::npos) << s.message();
  }
}

TEST(NodeRegistryTest, RestoredNodesAreNumberedInTheOrderTheyBecameKnown) {
  NodeRegistry nodes;
  ASSERT_TRUE(nodes.RestoreDrains({{"drain/b", R"({"node":null,"gpus":{}})"},
                                   {"drain/a", R"({"node":null,"gpus":{}})"}},
                                  1)
                  .ok());
  NodeInfo& c = nodes.FindOrAdd("c");
  EXPECT_LT(nodes.Find("b")->seq, nodes.Find("a")->seq);
  EXPECT_LT(nodes.Find("a")->seq, c.seq);
}

TEST(NodeRegistryTest, ARegistrationBringsTheNodeUpWithoutThePreviousAgentsCommands) {
  NodeRegistry nodes;
  NodeInfo& n = nodes.Add("n");
  n.reason = "silent for 30s";
  n.agent_id = "old";
  n.launches.emplace_back().key = TaskKey{1, 0, 1};
  n.stops.push_back(TaskStop{TaskKey{2, 0, 1}, 0, 9});
  n.drain = DrainInfo{"maintenance", "admin", "admin", 1};
  n.telemetry_agent = "old";
  NodeInventory inventory;
  inventory.spec.name = "n";
  inventory.gpu_uuids = {"GPU-a"};
  NodeRegistry::Registered(n, inventory, "new", "10.0.0.1:7000", 500);
  EXPECT_TRUE(n.up);
  EXPECT_EQ(n.agent_id, "new");
  EXPECT_EQ(n.address, "10.0.0.1:7000");
  EXPECT_EQ(n.inventory.gpu_uuids, std::vector<std::string>{"GPU-a"});
  EXPECT_EQ(n.last_seen, 500);
  EXPECT_TRUE(n.reason.empty());
  EXPECT_TRUE(n.launches.empty());
  EXPECT_TRUE(n.stops.empty());
  // Kept: what is the node's, not its agent's connection.
  ASSERT_TRUE(n.drain.has_value());
  EXPECT_EQ(n.telemetry_agent, "old");
}

TEST(NodeRegistryTest, TelemetryIsTakenByGpuIndexWithMissingGpusLost) {
  NodeInfo n;
  n.inventory.spec.gpus.resize(3);
  n.inventory.gpu_uuids = {"GPU-0", "GPU-1"};  // none known for GPU 2
  std::vector<GpuTelemetry> sample(4);
  sample[0].index = 2;
  sample[0].util_pct = 50;
  sample[1].index = 0;
  sample[1].uuid = "GPU-0";
  sample[1].util_pct = 10;
  sample[2].index = 7;  // not in the inventory
  sample[3].index = -1;
  std::vector<GpuTelemetry> by_index = NodeRegistry::ByGpuIndex(n, sample);
  ASSERT_EQ(by_index.size(), 3u);
  EXPECT_EQ(by_index[0].util_pct, 10);
  EXPECT_FALSE(by_index[0].lost);
  EXPECT_EQ(by_index[1].index, 1);
  EXPECT_EQ(by_index[1].uuid, "GPU-1");
  EXPECT_TRUE(by_index[1].lost);
  EXPECT_EQ(by_index[2].index, 2);
  EXPECT_EQ(by_index[2].util_pct, 50);
  EXPECT_FALSE(by_index[2].lost);

  sample.resize(1);  // only GPU 2: GPU 0 and 1 lost, GPU 2 with no UUID to name
  sample[0].index = 2;
  by_index = NodeRegistry::ByGpuIndex(n, sample);
  EXPECT_TRUE(by_index[0].lost);
  EXPECT_EQ(by_index[0].uuid, "GPU-0");
  EXPECT_FALSE(by_index[2].lost);
  n.inventory.gpu_uuids.clear();
  EXPECT_EQ(NodeRegistry::ByGpuIndex(n, {})[1].uuid, "");
}

TEST(NodeRegistryTest, ASampleContinuesTheLastOneOfTheSameAgentAndGpus) {
  NodeInfo n;
  n.inventory.spec.gpus.resize(2);
  EXPECT_FALSE(NodeRegistry::ContinuesTelemetry(n, "a"));  // none yet
  NodeRegistry::NoteTelemetry(n, NodeRegistry::ByGpuIndex(n, {}), "a", 70);
  EXPECT_EQ(n.telemetry.size(), 2u);
  EXPECT_EQ(n.telemetry_agent, "a");
  EXPECT_EQ(n.telemetry_at, 70);
  EXPECT_TRUE(NodeRegistry::ContinuesTelemetry(n, "a"));
  EXPECT_FALSE(NodeRegistry::ContinuesTelemetry(n, "b"));  // a new agent's counters
  n.inventory.spec.gpus.resize(3);                          // the inventory changed
  EXPECT_FALSE(NodeRegistry::ContinuesTelemetry(n, "a"));
}

}  // namespace node_registry_test
}  // namespace tessera
