// Users inside tenants over HTTP, in process on loopback: user tokens (admin only), who
// a token is (GET /v1/whoami), a user token's jobs are its user's whatever the file says,
// listings by user, the history of finished jobs with where they ran, usage by user.
#include <gtest/gtest.h>
#include <httplib.h>

#include <map>
#include <set>
#include <string>

#include "api/agent_protocol.h"
#include "server/http/server_fixture.h"

namespace tessera {
namespace {

class ServerAccountsTest : public ServerFixture {
 protected:
  ServerAccountsTest() : ServerFixture("server-accounts") {}

  // A new token of `user` in team-a (201), or the error's status.
  std::string UserToken(const std::string& user) {
    httplib::Result r =
        Client(server_->admin_token())
            .Post("/v1/tokens", nlohmann::json{{"tenant", "team-a"}, {"user", user}}.dump(),
                  "application/json");
    EXPECT_TRUE(r);
    EXPECT_EQ(r->status, 201) << r->body;
    return r->status == 201 ? nlohmann::json::parse(r->body)["token"].get<std::string>() : "";
  }

  uint64_t Submit(const std::string& token, const std::string& body) {
    httplib::Result r = Client(token).Post("/v1/jobs", body, "application/json");
    EXPECT_TRUE(r);
    EXPECT_EQ(r->status, 201) << r->body;
    return r->status == 201 ? nlohmann::json::parse(r->body)["id"].get<uint64_t>() : 0;
  }

  nlohmann::json GetJson(const std::string& token, const std::string& path) {
    httplib::Result r = Client(token).Get(path.c_str());
    EXPECT_TRUE(r);
    EXPECT_EQ(r->status, 200) << path << ": " << r->body;
    return r->status == 200 ? nlohmann::json::parse(r->body) : nlohmann::json();
  }
};

TEST_F(ServerAccountsTest, OnlyTheAdminMakesUserTokensAndWhoamiSaysWhoTheyAre) {
  httplib::Result r = Client(team_a_).Post("/v1/tokens", R"({"tenant": "team-a", "user": "eve"})",
                                           "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 403);
  r = Client(server_->admin_token())
          .Post("/v1/tokens", R"({"tenant": "team-a", "user": "no spaces"})", "application/json");
  EXPECT_EQ(r->status, 400) << r->body;
  r = Client(server_->admin_token())
          .Post("/v1/tokens", R"({"tenant": "nobody", "user": "alice"})", "application/json");
  EXPECT_EQ(r->status, 400) << r->body;

  const std::string alice = UserToken("alice");
  nlohmann::json me = GetJson(alice, "/v1/whoami");
  EXPECT_EQ(me["role"], "tenant");
  EXPECT_EQ(me["tenant"], "team-a");
  EXPECT_EQ(me["user"], "alice");
  EXPECT_EQ(me["name"], "alice@team-a");
  EXPECT_EQ(GetJson(server_->admin_token(), "/v1/whoami")["role"], "admin");

  const nlohmann::json tokens = GetJson(server_->admin_token(), "/v1/tokens")["tokens"];
  bool listed = false;
  for (const nlohmann::json& t : tokens) {
    EXPECT_FALSE(t.contains("hash"));
    listed = listed || (t["user"] == "alice" && t["tenant"] == "team-a");
  }
  EXPECT_TRUE(listed) << tokens.dump();

  // The user survives a restart (from the store).
  server_.reset();
  StartServer();
  EXPECT_EQ(GetJson(alice, "/v1/whoami")["user"], "alice");
}

// The agent side played by the test: jobs of two users run on 8 GPUs of node n1 and end.
TEST_F(ServerAccountsTest, JobsAreTheirUsersAndHistoryAndUsageFollowThem) {
  const std::string alice = UserToken("alice");
  const std::string bob = UserToken("bob");
  const std::string cmd = R"("command": ["x"], "resources": {"gpus": 2})";
  const std::string one = R"("command": ["x"], "resources": {"gpus": 1})";
  // The file's user does not stand against the token's.
  const uint64_t a1 = Submit(alice, R"({"name": "a1", "user": "mallory", )" + cmd + "}");
  const uint64_t a2 = Submit(alice, R"({"name": "a2", )" + cmd + "}");
  const uint64_t b1 = Submit(bob, R"({"name": "b1", )" + cmd + "}");
  // A tenant token keeps the file's user, else its own name.
  const uint64_t t1 = Submit(team_a_, R"({"name": "t1", "user": "carol", )" + one + "}");
  const uint64_t t2 = Submit(team_a_, R"({"name": "t2", )" + one + "}");
  EXPECT_EQ(GetJson(alice, "/v1/jobs/" + std::to_string(a1))["user"], "alice");
  EXPECT_EQ(GetJson(alice, "/v1/jobs/" + std::to_string(t1))["user"], "carol");
  EXPECT_EQ(GetJson(alice, "/v1/jobs/" + std::to_string(t2))["user"], "a");

  std::set<uint64_t> listed;
  const nlohmann::json alices = GetJson(bob, "/v1/jobs?user=alice");
  for (const nlohmann::json& j : alices["jobs"]) {
    listed.insert(j["id"].get<uint64_t>());
  }
  EXPECT_EQ(listed, (std::set<uint64_t>{a1, a2}));

  const GpuCatalog& catalog = GpuCatalog::Default();
  RegisterRequest reg;
  reg.agent_id = "agent-1";
  reg.inventory.spec =
      MakeUniformNode("n1", MilliCpu(32000), MiB(256 * 1024), catalog.Find("H100-80GB").value(), 8,
                      SharingMode::kExclusive);
  for (int g = 0; g < 8; ++g) {
    reg.inventory.gpu_uuids.push_back("GPU-test-" + std::to_string(g));
    reg.inventory.mig_instances.emplace_back();
  }
  httplib::Result r =
      Client(server_->join_token())
          .Post("/v1/agents/register", ToJson(reg, catalog).dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  httplib::Client agent =
      Client(RegisterResponseFromJson(nlohmann::json::parse(r->body))->credential);
  HeartbeatRequest hb;
  hb.node = "n1";
  hb.agent_id = "agent-1";
  HeartbeatResponse resp;
  // The five jobs fill the node's 8 GPUs.
  for (int i = 0; i < 300 && resp.launch.size() < 5; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    r = agent.Post("/v1/agents/heartbeat", ToJson(hb).dump(), "application/json");
    ASSERT_EQ(r->status, 200) << r->body;
    HeartbeatResponse more = HeartbeatResponseFromJson(nlohmann::json::parse(r->body)).value();
    resp.launch.insert(resp.launch.end(), more.launch.begin(), more.launch.end());
  }
  ASSERT_EQ(resp.launch.size(), 5u);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // some run time to count
  for (const TaskLaunch& l : resp.launch) {
    TaskReport rep;
    rep.key = l.key;
    rep.state = TaskState::kExited;
    rep.exit_code = l.key.job == b1 ? 7 : 0;
    hb.tasks.push_back(rep);
  }
  r = agent.Post("/v1/agents/heartbeat", ToJson(hb).dump(), "application/json");
  ASSERT_EQ(r->status, 200);

  nlohmann::json history = GetJson(bob, "/v1/history");
  ASSERT_EQ(history["jobs"].size(), 5u) << history.dump();
  std::set<int> gpus;
  for (const nlohmann::json& j : history["jobs"]) {
    EXPECT_EQ(j["nodes"], nlohmann::json::array({"n1"}));
    EXPECT_EQ(j["gpus"], j["id"] == t1 || j["id"] == t2 ? 1 : 2);
    for (const nlohmann::json& g : j["attempts"].back()["tasks"][0]["gpus"]) {
      gpus.insert(g.get<int>());
    }
    if (j["id"] == b1) {
      EXPECT_EQ(j["state"], "failed");
      EXPECT_EQ(j["exit_code"], 7);
      EXPECT_EQ(j["user"], "bob");
    }
  }
  EXPECT_EQ(gpus.size(), 8u);  // each GPU index once
  nlohmann::json mine = GetJson(bob, "/v1/history?user=alice&state=succeeded");
  ASSERT_EQ(mine["jobs"].size(), 2u) << mine.dump();
  EXPECT_EQ(mine["jobs"][0]["id"], a1);
  EXPECT_EQ(mine["jobs"][0]["user"], "alice");
  EXPECT_TRUE(GetJson(team_b_, "/v1/history")["jobs"].empty());  // another tenant's
  r = Client(bob).Get("/v1/history?state=running");
  EXPECT_EQ(r->status, 400);

  nlohmann::json usage = GetJson(alice, "/v1/usage?by=user");
  EXPECT_EQ(usage["by"], "user");
  std::map<std::string, int> jobs_of;
  for (const nlohmann::json& row : usage["rows"]) {
    EXPECT_EQ(row["tenant"], "team-a");
    EXPECT_GT(row["gpu_hours"].get<double>(), 0.0);
    jobs_of[row["key"]] = row["jobs"];
  }
  EXPECT_EQ(jobs_of,
            (std::map<std::string, int>{{"a", 1}, {"alice", 2}, {"bob", 1}, {"carol", 1}}));
}

}  // namespace
}  // namespace tessera
