// The node registry's durable drains (node_registry.h), on their own.
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

}  // namespace node_registry_test
}  // namespace tessera
