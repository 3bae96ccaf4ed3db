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

TEST(NodeRegistryTest, ARegistrationAddsANewNodeOrTakesOverTheKnownOne) {
  NodeRegistry nodes;
  nodes.Add("first");
  NodeInventory inventory;
  inventory.spec.name = "n";
  NodeInfo& n = nodes.Register(inventory, "a0", "10.0.0.1:7000", 5);
  EXPECT_EQ(nodes.Find("n"), &n);
  EXPECT_GT(n.seq, nodes.Find("first")->seq);  // numbered after every other
  EXPECT_TRUE(n.up);
  n.launches.emplace_back().key = TaskKey{1, 0, 1};
  NodeInfo& again = nodes.Register(inventory, "a1", "10.0.0.2:7000", 9);  // a new agent
  EXPECT_EQ(&again, &n);
  EXPECT_EQ(n.agent_id, "a1");
  EXPECT_EQ(n.address, "10.0.0.2:7000");
  EXPECT_EQ(n.last_seen, 9);
  EXPECT_TRUE(n.launches.empty());
  EXPECT_EQ(nodes.all().size(), 2u);
}

TEST(NodeRegistryTest, AHeartbeatIsTakenOnlyFromTheNodesRegisteredAgent) {
  NodeRegistry nodes;
  NodeRegistry::Registered(nodes.Add("n"), NodeInventory{}, "a1", "10.0.0.1:7000", 5);
  EXPECT_EQ(nodes.Heard("n", "a0", 7), nullptr);  // replaced by a1
  EXPECT_EQ(nodes.Heard("m", "a1", 7), nullptr);  // unknown
  EXPECT_EQ(nodes.Find("n")->last_seen, 5);
  EXPECT_EQ(nodes.Heard("n", "a1", 8), nodes.Find("n"));
  EXPECT_EQ(nodes.Find("n")->last_seen, 8);
  nodes.Find("n")->up = false;
  EXPECT_EQ(nodes.Heard("n", "a1", 9), nullptr);  // down: it registers again
  EXPECT_EQ(nodes.Find("n")->last_seen, 8);
}

TEST(NodeRegistryTest, TheHeartbeatIntervalSpreadsTheFleetWithinTheTimeout) {
  constexpr Micros kFloor = 500'000;
  constexpr Micros kTimeout = 60'000'000;
  NodeRegistry nodes;
  for (int i = 0; i < 3000; ++i) {
    nodes.Add("n" + std::to_string(i));
  }
  // No rate: the floor. 3000 nodes at 2000 a second: 1.5 s between beats.
  EXPECT_EQ(nodes.HeartbeatInterval(kFloor, kTimeout, 0), kFloor);
  EXPECT_EQ(nodes.HeartbeatInterval(kFloor, kTimeout, 2000), 1'500'000);
  // A small fleet keeps the floor; a slow rate is capped at a quarter of the timeout,
  // unless the floor is above that.
  EXPECT_EQ(nodes.HeartbeatInterval(kFloor, kTimeout, 1'000'000), kFloor);
  EXPECT_EQ(nodes.HeartbeatInterval(kFloor, kTimeout, 10), kTimeout / 4);
  EXPECT_EQ(nodes.HeartbeatInterval(20'000'000, kTimeout, 10), 20'000'000);
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

TEST(NodeRegistryTest, StoredInventoriesComeBackWaitingForTheirAgents) {
  NodeInventory inv;
  inv.spec.name = "gpu-7";
  const auto row = NodeRegistry::InventoryRow(inv, GpuCatalog::Default());
  EXPECT_EQ(row.first, "node/gpu-7");
  NodeRegistry nodes;
  ASSERT_TRUE(nodes.RestoreInventories({row}, GpuCatalog::Default(), 77).ok());
  nodes.AwaitAgent("gpu-7", 99);  // known already: unchanged
  nodes.AwaitAgent("only-in-a-job", 88);
  const NodeInfo* n = nodes.Find("gpu-7");
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->inventory.spec.name, "gpu-7");
  EXPECT_FALSE(n->up);
  EXPECT_EQ(n->last_seen, 77);
  EXPECT_NE(n->reason.find("waiting for its agent"), std::string::npos);
  const NodeInfo* other = nodes.Find("only-in-a-job");
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(other->inventory.spec.name, "only-in-a-job");
  EXPECT_EQ(other->last_seen, 88);
  EXPECT_GT(other->seq, n->seq);
  NodeRegistry broken;
  EXPECT_EQ(broken.RestoreInventories({{"node/x", "not json"}}, GpuCatalog::Default(), 1).code(),
            StatusCode::kInternal);
}

TEST(NodeRegistryTest, SilentNodesAreThoseUpOrAwaitedPastTheTimeout) {
  NodeRegistry nodes;
  nodes.AwaitAgent("awaited", 0);  // waiting since 0
  NodeInfo& up = nodes.Add("up");
  up.up = true;
  up.last_seen = 0;
  NodeInfo& fresh = nodes.Add("fresh");
  fresh.up = true;
  fresh.last_seen = 50;
  NodeInfo& down = nodes.Add("down");  // down for another reason: not taken down again
  down.reason = "lost";
  EXPECT_EQ(nodes.Silent(100, 60), (std::vector<std::string>{"awaited", "up"}));
  EXPECT_TRUE(nodes.Silent(100, 100).empty());  // exactly the timeout is not past it
}

TEST(NodeRegistryTest, SilentNodesAreLookedForAtMostEveryTenthOfTheTimeoutOrSecond) {
  NodeRegistry nodes;
  NodeInfo& up = nodes.Add("up");
  up.up = true;
  const Micros timeout = 5'000'000;                      // a walk every 0.5 s
  EXPECT_TRUE(nodes.SilentDue(1'000, timeout).empty());  // walked: none silent yet
  up.last_seen = -10'000'000;
  EXPECT_TRUE(nodes.SilentDue(500'999, timeout).empty());  // silent, but not due
  EXPECT_EQ(nodes.SilentDue(501'000, timeout), (std::vector<std::string>{"up"}));
  EXPECT_TRUE(nodes.SilentDue(501'001, timeout).empty());
  // A long timeout: still walked every second.
  EXPECT_TRUE(nodes.SilentDue(1'001'000, 60'000'000).empty());  // walked, none silent
  up.last_seen = -61'000'000;
  EXPECT_TRUE(nodes.SilentDue(2'000'999, 60'000'000).empty());
  EXPECT_EQ(nodes.SilentDue(2'001'000, 60'000'000), (std::vector<std::string>{"up"}));
}

TEST(NodeRegistryTest, ANodeTakenDownDropsItsWaitingCommands) {
  NodeRegistry nodes;
  NodeInfo& node = nodes.Add("n1");
  node.up = true;
  node.launches.emplace_back().key = TaskKey{1, 0, 1};
  node.stops.push_back(TaskStop{TaskKey{2, 0, 1}, 0, 15});
  node.gpu_drains[0] = DrainInfo{"xid", "health", "xid", 5};
  NodeRegistry::TakeDown(node, "no heartbeat");
  EXPECT_FALSE(node.up);
  EXPECT_EQ(node.reason, "no heartbeat");
  EXPECT_TRUE(node.launches.empty());
  EXPECT_TRUE(node.stops.empty());
  EXPECT_EQ(node.gpu_drains.size(), 1u);  // kept
}

TEST(NodeRegistryTest, CommandsAreQueuedOnceForKnownNodesAndCurrentAttempts) {
  NodeRegistry nodes;
  nodes.Add("n1");
  nodes.Add("n2");
  std::vector<std::pair<std::string, TaskLaunch>> launches(3);
  launches[0] = {"n1", TaskLaunch{}};
  launches[0].second.key = TaskKey{1, 0, 1};
  launches[1] = {"n1", TaskLaunch{}};
  launches[1].second.key = TaskKey{2, 0, 1};  // not running any more
  launches[2] = {"gone", TaskLaunch{}};
  launches[2].second.key = TaskKey{1, 1, 1};
  const std::vector<std::pair<std::string, TaskStop>> stops = {
      {"n2", TaskStop{{3, 0, 1}, 10, 15}},
      {"n2", TaskStop{{3, 0, 1}, 10, 15}},  // queued already
      {"gone", TaskStop{{3, 1, 1}, 10, 15}}};
  auto running = [](const TaskKey& key) { return key.job != 2; };
  auto queued = nodes.Deliver(launches, stops, running, /*collect=*/true);
  ASSERT_EQ(nodes.Find("n1")->launches.size(), 1u);
  EXPECT_EQ(nodes.Find("n1")->launches[0].key, (TaskKey{1, 0, 1}));
  ASSERT_EQ(nodes.Find("n2")->stops.size(), 1u);
  ASSERT_EQ(queued.size(), 2u);
  EXPECT_EQ(queued["n1"].launch.size(), 1u);
  EXPECT_EQ(queued["n2"].stop.size(), 1u);
  // Again, not collected: the stop is not queued twice, the launch is (a new decision).
  EXPECT_TRUE(nodes.Deliver(launches, stops, running, /*collect=*/false).empty());
  EXPECT_EQ(nodes.Find("n2")->stops.size(), 1u);
  EXPECT_EQ(nodes.Find("n1")->launches.size(), 2u);
}

TEST(NodeRegistryTest, ARemovedNodeIsForgottenAndItsMarkerSaysSo) {
  NodeRegistry nodes;
  nodes.Add("n1").gpu_drains[0] = DrainInfo{"hot", "health", "thermal", 5};
  nodes.Add("n2");
  const std::pair<std::string, std::string> marker = NodeRegistry::RemovedRow("n1", 42);
  EXPECT_EQ(marker.first, "removed_node/n1");
  EXPECT_EQ(marker.second, R"({"at_us":42})");
  EXPECT_EQ(nodes.Remove("n1"), NodeRegistry::NoDrainsRow("n1"));
  EXPECT_EQ(nodes.Find("n1"), nullptr);
  EXPECT_NE(nodes.Find("n2"), nullptr);
}

TEST(NodeRegistryTest, StoredMarkersForgetTheirNodesUntilTheNameRegistersAgain) {
  InMemoryStore store;
  WriteBatch batch;
  batch.kv.push_back(NodeRegistry::RemovedRow("n1", 42));
  batch.kv.emplace_back("removed_node/n2", "");  // registered again since
  ASSERT_TRUE(store.Commit(std::move(batch)).ok());
  NodeRegistry nodes;
  nodes.Add("n1");
  nodes.Add("n2");
  nodes.Add("n3");
  StatusOr<std::vector<std::pair<std::string, std::string>>> rows =
      store.ListKv(NodeRegistry::RemovedKeyPrefix());
  ASSERT_TRUE(rows.ok());
  EXPECT_TRUE(nodes.ForgetRemoved(rows.value()));
  EXPECT_EQ(nodes.Find("n1"), nullptr);
  EXPECT_NE(nodes.Find("n2"), nullptr);
  EXPECT_NE(nodes.Find("n3"), nullptr);
  EXPECT_FALSE(nodes.ForgetRemoved({{"removed_node/n2", ""}}));

  // n1 registers again: its marker is cleared, durably; n3 has none to clear.
  ASSERT_TRUE(NodeRegistry::ClearRemoved(store, "n1").ok());
  EXPECT_EQ(store.GetKv("removed_node/n1").value(), std::optional<std::string>(""));
  ASSERT_TRUE(NodeRegistry::ClearRemoved(store, "n3").ok());
  EXPECT_EQ(store.GetKv("removed_node/n3").value(), std::nullopt);
  rows = store.ListKv(NodeRegistry::RemovedKeyPrefix());
  ASSERT_TRUE(rows.ok());
  EXPECT_FALSE(nodes.ForgetRemoved(rows.value()));
}

}  // namespace node_registry_test
}  // namespace tessera
