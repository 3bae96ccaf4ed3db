// End to end: node labels given to real `tessera agent` processes (--label) reach the
// controller, its node view and its metrics, and the scheduler keeps a rack-hard gang
// within one rack. Four agents with 4 fake GPUs each, two per rack:
//
//   rack r1: a1 a2      rack r2: b1 b2      (all in block k1)
//
// One blocker busies a1 and another b1; a gang of 2 tasks x 4 GPUs with
// `topology: {scope: rack, hard: true}` then waits (8 GPUs are free, but in two racks)
// rather than spreading, and starts on a1+a2 once a1's blocker is cancelled.
// Every wait is bounded; the test takes a few seconds.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "e2e/cluster_fixture.h"
#include "e2e/process.h"

namespace tessera::e2e {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

class TopologyTest : public ServerAndAgentsTest {
 protected:
  std::string Prefix() const override { return "topology"; }

  void StartRackAgent(const std::string& name, const std::string& rack) {
    // Two --label flags: one label each, as an admin may write them.
    StartAgent(name, "4xH100-80GB", {"--label", "rack=" + rack, "--label", "block=k1"});
  }

  uint64_t Submit(const json& spec) {
    auto r = ApiClient(url_, admin_).Post("/v1/jobs", spec.dump(), "application/json");
    EXPECT_TRUE(r && (r->status == 200 || r->status == 201)) << (r ? r->body : "no answer");
    return r && (r->status == 200 || r->status == 201)
               ? json::parse(r->body)["id"].get<uint64_t>()
               : 0;
  }

  bool WaitState(uint64_t id, const std::string& state, std::chrono::milliseconds timeout) {
    return WaitFor([&] { return Job(id).value("state", "") == state; }, timeout);
  }

  // The nodes a job's tasks run on, in task order.
  std::vector<std::string> NodesOf(uint64_t id) {
    std::vector<std::string> nodes;
    for (const json& t : Job(id).value("tasks", json::array())) {
      nodes.push_back(t.value("node", ""));
    }
    return nodes;
  }

  static json Blocker(const std::string& name) {
    return {{"name", name}, {"queue", "team-a"}, {"command", "sleep 120"},
            {"resources", {{"gpus", 4}}}};
  }

};

TEST_F(TopologyTest, ARackHardGangWaitsForRoomInOneRackRatherThanSpreading) {
  // The blockers land where they must: a1 is the only node when the first comes, b1
  // the only free one when the second comes.
  StartRackAgent("a1", "r1");
  const uint64_t block_a = Submit(Blocker("block-a"));
  ASSERT_TRUE(WaitState(block_a, "running", 20s)) << Job(block_a).dump();
  StartRackAgent("b1", "r2");
  const uint64_t block_b = Submit(Blocker("block-b"));
  ASSERT_TRUE(WaitState(block_b, "running", 20s)) << Job(block_b).dump();
  ASSERT_EQ(NodesOf(block_a), std::vector<std::string>{"a1"});
  ASSERT_EQ(NodesOf(block_b), std::vector<std::string>{"b1"});
  StartRackAgent("a2", "r1");
  StartRackAgent("b2", "r2");

  // The labels reach the API's node view and the metrics.
  std::map<std::string, std::string> rack_of;
  const json listed = Get("/v1/nodes");
  for (const json& n : listed.value("nodes", json::array())) {
    EXPECT_EQ(n["labels"]["block"], "k1") << n.dump();
    rack_of[n["name"]] = n["labels"].value("rack", "");
  }
  EXPECT_EQ(rack_of, (std::map<std::string, std::string>{
                         {"a1", "r1"}, {"a2", "r1"}, {"b1", "r2"}, {"b2", "r2"}}));
  auto metrics = ApiClient(url_, admin_).Get("/metrics");
  ASSERT_TRUE(metrics && metrics->status == 200);
  EXPECT_NE(metrics->body.find("tessera_node_info{node=\"b2\",block=\"k1\",rack=\"r2\"} 1"),
            std::string::npos)
      << metrics->body.substr(0, 4000);

  // 8 GPUs are free (a2 and b2) but not in one rack: the gang waits.
  json gang = {{"name", "gang"},
               {"queue", "team-a"},
               {"command", "sleep 1"},
               {"replicas", 2},
               {"resources", {{"gpus", 4}}},
               {"topology", {{"scope", "rack"}, {"hard", true}}}};
  const uint64_t g = Submit(gang);
  ASSERT_NE(g, 0u);
  // Heartbeats every 100 ms and a cycle on every change: 2 s is many chances to spread.
  EXPECT_FALSE(WaitFor([&] { return Job(g).value("state", "") != "pending"; }, 2s))
      << Job(g).dump();

  // Room in rack r1: the gang starts there, on both of its nodes.
  auto cancel = ApiClient(url_, admin_)
                    .Post(("/v1/jobs/" + std::to_string(block_a) + "/cancel").c_str(), "",
                          "application/json");
  ASSERT_TRUE(cancel && cancel->status == 200) << (cancel ? cancel->body : "no answer");
  ASSERT_TRUE(WaitFor(
      [&] {
        const std::string s = Job(g).value("state", "");
        return s == "running" || s == "succeeded";
      },
      20s))
      << Job(g).dump();
  std::vector<std::string> nodes = NodesOf(g);
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(std::set<std::string>(nodes.begin(), nodes.end()),
            (std::set<std::string>{"a1", "a2"}))
      << Job(g).dump();
  for (const std::string& n : nodes) {
    EXPECT_EQ(rack_of[n], "r1") << n;
  }
  EXPECT_TRUE(WaitState(g, "succeeded", 20s)) << Job(g).dump();
  EXPECT_EQ(Job(block_b).value("state", ""), "running");
}

TEST_F(TopologyTest, AnAgentRefusesABadLabelNamingIt) {
  Process agent({TESSERA_BINARY, "agent", "--containers", "off", "--server", url_, "--token-file",
                 dir_ + "/server/join.token", "--node", "x", "--data", dir_ + "/agent-x",
                 "--fake-gpus", "1xH100-80GB", "--label", "rack=r1,Block=b2"},
                dir_ + "/agent-x.log");
  const std::optional<int> code = agent.Wait(10s);
  ASSERT_TRUE(code.has_value()) << "the agent started with a bad label";
  EXPECT_NE(*code, 0);
  EXPECT_NE(agent.Output().find("label 'Block=b2'"), std::string::npos) << agent.Output();
}

}  // namespace
}  // namespace tessera::e2e
