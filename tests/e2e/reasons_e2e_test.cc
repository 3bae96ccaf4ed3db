// End to end: the three misleading pending reasons users reported, on a cluster of real
// `tessera server` and `tessera agent` processes with fake GPUs:
//
//  - a 90 GiB share on 80 GB cards is refused at submission (400 naming the GPU memory),
//    or, with hold_if_unfit, pending with that reason;
//  - a 16-GPU job on two 8-GPU nodes with one GPU drained and nothing running waits for
//    the drain, naming the 15 schedulable GPUs and the drain, and starts once it is
//    lifted (17 GPUs are refused);
//  - a queue whose quota is lent to a borrower says so (it uses none of its own) and names
//    the borrowing queue and reclaim, not "no unused quota".
// Every wait is bounded; each test takes a few seconds.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "e2e/cluster_fixture.h"
#include "e2e/process.h"

namespace tessera::e2e {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

class ReasonsTest : public ServerAndAgentsTest {
 protected:
  std::string Prefix() const override { return "reasons"; }

  // POST /v1/jobs: the status and the body.
  std::pair<int, json> Post(const std::string& path, const json& body) {
    auto r = ApiClient(url_, admin_).Post(path, body.dump(), "application/json");
    if (!r) {
      ADD_FAILURE() << "no answer to POST " << path;
      return {0, json()};
    }
    json parsed = json::parse(r->body, nullptr, false);
    return {r->status, parsed.is_discarded() ? json(r->body) : parsed};
  }

};

TEST_F(ReasonsTest, AShareAskingMoreMemoryThanAnyCardIsRefusedOrHeldWithThatReason) {
  StartAgent("n1", "8xH100-80GB:shared");
  json spec = {{"name", "big-share"},
               {"queue", "team-a"},
               {"command", "true"},
               {"resources", {{"gpu_fraction", 0.5}, {"gpu_memory", "90GiB"}}}};
  auto [status, body] = Post("/v1/jobs", spec);
  EXPECT_EQ(status, 400) << body.dump();
  EXPECT_NE(body.dump().find("90 GiB of GPU memory"), std::string::npos) << body.dump();

  spec["hold_if_unfit"] = true;
  auto [held_status, held] = Post("/v1/jobs", spec);
  ASSERT_TRUE(held_status == 200 || held_status == 201) << held.dump();
  const uint64_t id = held["id"].get<uint64_t>();
  // Pending with the reason, checked again after cycles have run.
  std::string reason;
  ASSERT_TRUE(WaitFor(
      [&] {
        const json job = Job(id);
        reason = job.value("reason", "");
        return job.value("state", "") == "pending" &&
               reason.find("never fits: a task asks 90 GiB") != std::string::npos;
      },
      10s))
      << reason;
}

// A drain ends: 16 GPUs asked of 16 with one drained is accepted and waits for the drain,
// naming it; 17 are refused at once.
TEST_F(ReasonsTest, SixteenGpusWithOneDrainedWaitForTheDrainNamingIt) {
  StartAgent("n1", "8xH100-80GB");
  StartAgent("n2", "8xH100-80GB");
  auto [drain_status, drained] =
      Post("/v1/nodes/n2/drain", json{{"reason", "fan replaced"}, {"gpu", 3}});
  ASSERT_EQ(drain_status, 200) << drained.dump();
  const json seventeen = {{"name", "seventeen"},
                          {"queue", "team-a"},
                          {"command", "true"},
                          {"replicas", 17},
                          {"resources", {{"gpus", 1}}}};
  json body;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto [status, b] = Post("/v1/jobs", seventeen);
        body = b;
        return status == 400;
      },
      5s))
      << body.dump();
  EXPECT_NE(body.dump().find("17 GPUs"), std::string::npos) << body.dump();
  const json spec = {{"name", "sixteen"},
                     {"queue", "team-a"},
                     {"command", "true"},
                     {"replicas", 2},
                     {"resources", {{"gpus", 8}}}};
  uint64_t id = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto [status, b] = Post("/v1/jobs", spec);
        if (status == 200 || status == 201) {
          id = b["id"].get<uint64_t>();
          return true;
        }
        return false;
      },
      5s));
  // The drain reaches the reasons at once or by the next cycle (50 ms).
  std::string reason;
  ASSERT_TRUE(WaitFor(
      [&] {
        reason = Job(id).value("reason", "");
        return reason.rfind("held by a drain: only drained nodes or GPUs could run it", 0) == 0;
      },
      5s))
      << reason;
  EXPECT_NE(reason.find("15 are schedulable"), std::string::npos) << reason;
  EXPECT_NE(reason.find("n2"), std::string::npos) << reason;

  // Once the drain is lifted the job starts, one task on each node. (Whether its tasks
  // then succeed is the launcher's business, not this test's.)
  auto [resume_status, resumed] = Post("/v1/nodes/n2/resume", json{{"gpu", 3}});
  ASSERT_EQ(resume_status, 200) << resumed.dump();
  ASSERT_TRUE(WaitFor([&] { return Job(id).value("state", "pending") != "pending"; }, 20s))
      << Job(id).dump();
  std::set<std::string> nodes;
  for (const json& t : Job(id).value("tasks", json::array())) {
    nodes.insert(t.value("node", ""));
  }
  EXPECT_EQ(nodes, (std::set<std::string>{"n1", "n2"})) << Job(id).dump();
}

TEST_F(ReasonsTest, AQueueWhoseQuotaIsLentNamesTheBorrowerAndReclaim) {
  // The embedded queues: team-a and team-b each hold 8 GPUs in one cohort.
  StartAgent("n1", "8xH100-80GB");
  StartAgent("n2", "8xH100-80GB");
  json borrower = {{"name", "borrower"},
                   {"queue", "team-b"},
                   {"command", "sleep 30"},
                   {"resources", {{"gpus", 8}}}};
  std::vector<uint64_t> held;
  for (int i = 0; i < 2; ++i) {
    auto [status, b] = Post("/v1/jobs", borrower);
    ASSERT_TRUE(status == 200 || status == 201) << b.dump();
    held.push_back(b["id"].get<uint64_t>());
  }
  for (uint64_t id : held) {
    ASSERT_TRUE(WaitFor([&] { return Job(id).value("state", "") == "running"; }, 20s))
        << Job(id).dump();
  }
  const json lender = {{"name", "lender"},
                       {"queue", "team-a"},
                       {"command", "true"},
                       {"resources", {{"gpus", 8}}}};
  auto [status, body] = Post("/v1/jobs", lender);
  ASSERT_TRUE(status == 200 || status == 201) << body.dump();
  const uint64_t id = body["id"].get<uint64_t>();
  std::string reason;
  ASSERT_TRUE(WaitFor(
      [&] {
        reason = Job(id).value("reason", "");
        return reason.find("lent to queue team-b") != std::string::npos;
      },
      10s))
      << reason;
  EXPECT_EQ(Job(id).value("state", ""), "pending");
  EXPECT_NE(reason.find("queue team-a"), std::string::npos) << reason;
  EXPECT_NE(reason.find("uses 0 GPUs of its nominal 8"), std::string::npos) << reason;
  EXPECT_NE(reason.find("reclaim is on"), std::string::npos) << reason;
  EXPECT_EQ(reason.find("no unused quota"), std::string::npos) << reason;
  for (uint64_t h : held) {
    auto [cancel_status, cancelled] = Post("/v1/jobs/" + std::to_string(h) + "/cancel", json{});
    EXPECT_EQ(cancel_status, 200) << cancelled.dump();
  }
  // The borrowers gone, the lender's job starts.
  EXPECT_TRUE(WaitFor([&] { return Job(id).value("state", "pending") != "pending"; }, 30s))
      << Job(id).dump();
}

}  // namespace
}  // namespace tessera::e2e
