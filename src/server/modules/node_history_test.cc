// NodeHistory without a controller, through a fake step and an in-memory store: a
// record only when a node's spec first appears or changes, and when it is removed; the
// last record of each node read back after a restart.
#include "server/modules/node_history.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "sched/testing/scheduler_harness.h"
#include "server/modules/fake_module_step.h"

namespace tessera {
namespace {

NodeInventory HistoryNode(const std::string& name, int gpus) {
  NodeInventory inv;
  inv.spec = testing::GpuNode(name, gpus);
  return inv;
}

class NodeHistoryTest : public ::testing::Test {
 protected:
  // The step's records made durable, as Publish would; how many there were.
  size_t Commit() {
    const size_t n = step_.written.kv.size();
    EXPECT_TRUE(store_.Commit(std::move(step_.written)).ok());
    step_.written = WriteBatch{};
    return n;
  }
  nlohmann::json Records(Micros until = 1'000'000'000) {
    StatusOr<nlohmann::json> r = NodeHistory::Records(store_, until);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : nlohmann::json::array();
  }

  InMemoryStore store_;
  FakeModuleStep step_;
  NodeHistory history_{GpuCatalog::Default()};
};

TEST_F(NodeHistoryTest, ARecordOnlyWhenASpecFirstAppearsOrChangesAndOnRemoval) {
  step_.now_us = 100;
  history_.OnNodeJoined(HistoryNode("n1", 8), step_);
  EXPECT_EQ(Commit(), 1u);
  step_.now_us = 200;
  history_.OnNodeJoined(HistoryNode("n1", 8), step_);  // registered again, unchanged
  EXPECT_EQ(Commit(), 0u);
  step_.now_us = 300;
  history_.OnNodeJoined(HistoryNode("n1", 4), step_);  // came back with fewer GPUs
  history_.OnNodeJoined(HistoryNode("n2", 8), step_);
  EXPECT_EQ(Commit(), 2u);
  step_.now_us = 400;
  history_.OnNodeRemoved("n1", step_);
  EXPECT_EQ(Commit(), 1u);
  ASSERT_NE(history_.Last("n1"), nullptr);
  EXPECT_FALSE(history_.Last("n1")->has_value());
  step_.now_us = 500;
  history_.OnNodeJoined(HistoryNode("n1", 4), step_);  // the same spec, after a removal
  EXPECT_EQ(Commit(), 1u);

  // By node, then time; "until" leaves out what came after.
  const nlohmann::json all = Records();
  ASSERT_EQ(all.size(), 5u) << all;
  EXPECT_EQ(all[0]["at_us"], 100);
  EXPECT_EQ(all[1]["inventory"]["gpus"].size(), 4u);
  EXPECT_EQ(all[2]["event"], "leave");
  EXPECT_EQ(all[3]["at_us"], 500);
  EXPECT_EQ(all[4]["name"], "n2");
  EXPECT_EQ(Records(/*until=*/300).size(), 1u);  // before it, not at it
  EXPECT_EQ(Records(301).size(), 3u);
}

TEST_F(NodeHistoryTest, TheLastRecordOfEachNodeIsReadBackAfterARestart) {
  history_.OnNodeJoined(HistoryNode("n1", 8), step_);
  history_.OnNodeJoined(HistoryNode("n2", 8), step_);
  step_.now_us = 10;
  history_.OnNodeJoined(HistoryNode("n1", 2), step_);
  history_.OnNodeRemoved("n2", step_);
  Commit();

  NodeHistory restarted(GpuCatalog::Default());
  ASSERT_TRUE(restarted.Load(store_).ok());
  ASSERT_NE(restarted.Last("n1"), nullptr);
  ASSERT_TRUE(restarted.Last("n1")->has_value());
  EXPECT_EQ(**restarted.Last("n1"), HistoryNode("n1", 2).spec);
  ASSERT_NE(restarted.Last("n2"), nullptr);
  EXPECT_FALSE(restarted.Last("n2")->has_value());
  EXPECT_EQ(restarted.Last("n3"), nullptr);

  step_.now_us = 20;
  restarted.OnNodeJoined(HistoryNode("n1", 2), step_);  // as it was: nothing new
  EXPECT_EQ(Commit(), 0u);
  restarted.OnNodeJoined(HistoryNode("n2", 8), step_);  // back after its removal
  EXPECT_EQ(Commit(), 1u);
}

TEST_F(NodeHistoryTest, AMalformedRecordIsIgnored) {
  WriteBatch b;
  b.kv.emplace_back(std::string(NodeHistory::kKeyPrefix) + "x/1", "not json");
  ASSERT_TRUE(store_.Commit(std::move(b)).ok());
  ASSERT_TRUE(history_.Load(store_).ok());
  EXPECT_EQ(history_.Last("x"), nullptr);
}

}  // namespace
}  // namespace tessera
