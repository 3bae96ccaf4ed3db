// Who may call what, in process on loopback: every endpoint of the API against every
// kind of caller, checked cell by cell against a table; then the attacks a holder of
// the join token or of one node's credential could try (forged exits, taking over a
// node's name, a fake node reading tenants' data), node removal and revocation.
#include <gtest/gtest.h>
#include <httplib.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <thread>

#include "api/agent_protocol.h"
#include "server/http/server.h"
#include "server/http/server_fixture.h"

namespace tessera {
namespace {

constexpr const char* kJob =
    R"({"name": "secret-name", "command": ["/bin/true"], "resources": {"gpus": 1}})";

// The callers, in the order the table's columns list them.
enum Caller { kNone, kBad, kTenantA, kTenantB, kAdmin, kMetrics, kJoin, kNode, kCallers };
constexpr const char* kCallerNames[] = {"none",  "bad",     "tenant A", "tenant B",
                                        "admin", "metrics", "join",     "node"};

class AuthzTest : public ServerFixture {
 protected:
  AuthzTest() : ServerFixture("authz-test") {}

  void Tune(ServerOptions& o) override {
    o.auth_throttle.max_failures = 0;  // the table sends many bad tokens from one address
  }

  static RegisterRequest Inventory(const std::string& name, int gpus = 8) {
    const GpuCatalog& catalog = GpuCatalog::Default();
    RegisterRequest reg;
    reg.agent_id = "agent-" + name;
    reg.inventory.spec = MakeUniformNode(name, MilliCpu(32000), MiB(256 * 1024),
                                         catalog.Find("H100-80GB").value(), gpus,
                                         SharingMode::kExclusive);
    for (int g = 0; g < gpus; ++g) {
      reg.inventory.gpu_uuids.push_back("GPU-" + name + "-" + std::to_string(g));
      reg.inventory.mig_instances.emplace_back();
    }
    return reg;
  }

  httplib::Result RegisterAs(const std::string& token, const RegisterRequest& reg) {
    return Client(token).Post("/v1/agents/register", ToJson(reg, GpuCatalog::Default()).dump(),
                              "application/json");
  }

  // Registers `name` with the join token and returns its credential.
  std::string Join(const std::string& name) {
    httplib::Result r = RegisterAs(server_->join_token(), Inventory(name));
    EXPECT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
    return RegisterResponseFromJson(nlohmann::json::parse(r->body))->credential;
  }

  httplib::Result Heartbeat(const std::string& token, const std::string& node,
                            std::vector<TaskReport> tasks = {}) {
    HeartbeatRequest hb;
    hb.node = node;
    hb.agent_id = "agent-" + node;
    hb.tasks = std::move(tasks);
    return Client(token).Post("/v1/agents/heartbeat", ToJson(hb).dump(), "application/json");
  }

  uint64_t Submit(const std::string& token, const std::string& body = kJob) {
    httplib::Result r = Client(token).Post("/v1/jobs", body, "application/json");
    EXPECT_TRUE(r);
    EXPECT_EQ(r->status, 201) << r->body;
    return nlohmann::json::parse(r->body)["id"].get<uint64_t>();
  }

  nlohmann::json Job(uint64_t id) {
    httplib::Result r = Client(server_->admin_token()).Get("/v1/jobs/" + std::to_string(id));
    EXPECT_TRUE(r);
    return nlohmann::json::parse(r->body);
  }

  // Heartbeats the nodes until one receives the launch of `job`; returns that node's
  // index in `nodes` and the launch.
  std::pair<size_t, TaskLaunch> WaitForLaunch(
      const std::vector<std::pair<std::string, std::string>>& nodes, uint64_t job) {
    for (int i = 0; i < 300; ++i) {
      for (size_t n = 0; n < nodes.size(); ++n) {
        httplib::Result r = Heartbeat(nodes[n].second, nodes[n].first);
        EXPECT_EQ(r->status, 200) << r->body;
        HeartbeatResponse resp = HeartbeatResponseFromJson(nlohmann::json::parse(r->body)).value();
        for (const TaskLaunch& l : resp.launch) {
          if (l.key.job == job) {
            return {n, l};
          }
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ADD_FAILURE() << "job " << job << " was never launched";
    return {0, TaskLaunch{}};
  }

};

TEST_F(AuthzTest, EveryEndpointTimesEveryCaller) {
  const std::string node_credential = Join("n1");
  ASSERT_FALSE(node_credential.empty());
  const uint64_t job_a = Submit(team_a_);
  const std::string tokens[kCallers] = {"",
                                        "tsr_not_a_token",
                                        team_a_,
                                        team_b_,
                                        server_->admin_token(),
                                        server_->metrics_token(),
                                        server_->join_token(),
                                        node_credential};
  const std::string ja = "/v1/jobs/" + std::to_string(job_a);
  const std::string reg = ToJson(Inventory("n1"), GpuCatalog::Default()).dump();
  HeartbeatRequest hb;
  hb.node = "n1";
  hb.agent_id = "agent-n1";
  const std::string beat = ToJson(hb).dump();

  struct Cell {
    const char* method;
    std::string path;  // "{fresh}" is replaced by a new job of tenant A for each caller
    std::string body;
    int want[kCallers];  // none, bad, A, B, admin, metrics, join, node
  };
  const std::vector<Cell> table = {
      {"GET", "/healthz", "", {200, 200, 200, 200, 200, 200, 200, 200}},
      {"GET", "/", "", {200, 200, 200, 200, 200, 200, 200, 200}},
      {"POST", "/v1/jobs", kJob, {401, 401, 201, 201, 201, 403, 403, 403}},
      {"GET", "/v1/jobs", "", {401, 401, 200, 200, 200, 403, 403, 403}},
      {"GET", ja, "", {401, 401, 200, 404, 200, 403, 403, 403}},
      {"GET", ja + "/logs", "", {401, 401, 200, 404, 200, 403, 403, 403}},
      {"POST", "{fresh}/cancel", "", {401, 401, 200, 404, 200, 403, 403, 403}},
      {"GET", "/v1/nodes", "", {401, 401, 200, 200, 200, 403, 403, 403}},
      {"GET", "/v1/queues", "", {401, 401, 200, 200, 200, 403, 403, 403}},
      {"GET", "/v1/usage", "", {401, 401, 200, 200, 200, 403, 403, 403}},
      {"GET", "/v1/usage/series", "", {401, 401, 200, 200, 200, 403, 403, 403}},
      {"POST", "/v1/nodes/n1/drain", R"({"reason": "test"})", {401, 401, 403, 403, 200, 403, 403, 403}},
      {"POST", "/v1/nodes/n1/resume", "{}", {401, 401, 403, 403, 200, 403, 403, 403}},
      {"GET", "/metrics", "", {401, 401, 403, 403, 200, 200, 403, 403}},
      {"GET", "/metrics/gpus", "", {401, 401, 403, 403, 200, 200, 403, 403}},
      {"GET", "/v1/tenants", "", {401, 401, 403, 403, 200, 403, 403, 403}},
      {"GET", "/v1/admin/history", "", {401, 401, 403, 403, 200, 403, 403, 403}},
      {"GET", "/v1/admin/validations", "", {401, 401, 403, 403, 200, 403, 403, 403}},
      {"POST", "/v1/admin/validations", R"({"name": "burn", "command": "true"})",
       {401, 401, 403, 403, 201, 403, 403, 403}},
      {"POST", "/v1/admin/validations/burn/run", "", {401, 401, 403, 403, 200, 403, 403, 403}},
      {"GET", "/v1/admin/validations/results", "", {401, 401, 403, 403, 200, 403, 403, 403}},
      {"DELETE", "/v1/admin/validations/ghost", "", {401, 401, 403, 403, 404, 403, 403, 403}},
      {"POST", "/v1/tenants", R"({"name": "team-b"})", {401, 401, 403, 403, 201, 403, 403, 403}},
      {"POST", "/v1/nodes/ghost/revoke", "", {401, 401, 403, 403, 404, 403, 403, 403}},
      {"DELETE", "/v1/nodes/ghost", "", {401, 401, 403, 403, 404, 403, 403, 403}},
      {"POST", "/v1/nodes/ghost/remove", "", {401, 401, 403, 403, 404, 403, 403, 403}},
      // n1 has a credential: the join token may not register it again.
      {"POST", "/v1/agents/register", reg, {401, 401, 403, 403, 403, 403, 403, 200}},
      {"POST", "/v1/agents/heartbeat", beat, {401, 401, 403, 403, 403, 403, 403, 200}},
  };
  for (const Cell& cell : table) {
    for (int c = 0; c < kCallers; ++c) {
      std::string path = cell.path;
      if (path.starts_with("{fresh}")) {
        path = "/v1/jobs/" + std::to_string(Submit(team_a_)) + path.substr(7);
      }
      httplib::Client client = Client(tokens[c]);
      const std::string m = cell.method;
      httplib::Result r = m == "GET"    ? client.Get(path)
                          : m == "PUT"  ? client.Put(path, cell.body, "application/json")
                          : m == "POST" ? client.Post(path, cell.body, "application/json")
                                        : client.Delete(path);
      ASSERT_TRUE(r) << m << " " << path << " as " << kCallerNames[c];
      EXPECT_EQ(r->status, cell.want[c])
          << m << " " << cell.path << " as " << kCallerNames[c] << ": " << r->body.substr(0, 300);
    }
  }
  // PUT /v1/queues: the admin only (the admin's PUT re-applies the configuration).
  for (int c = 0; c < kCallers; ++c) {
    if (c == kAdmin) {
      continue;
    }
    httplib::Result r = Client(tokens[c]).Put("/v1/queues", "queues: []\n", "application/yaml");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, c == kNone || c == kBad ? 401 : 403) << kCallerNames[c];
  }
}

TEST_F(AuthzTest, ForgedExitThroughAnotherNodesCredentialChangesNothing) {
  const std::string cred_1 = Join("n1");
  const std::string cred_2 = Join("n2");
  const uint64_t id = Submit(team_a_);
  const std::vector<std::pair<std::string, std::string>> nodes = {{"n1", cred_1}, {"n2", cred_2}};
  auto [placed, launch] = WaitForLaunch(nodes, id);
  const auto& victim = nodes[placed];
  const auto& forger = nodes[1 - placed];
  ASSERT_EQ(Job(id)["state"], "running");

  TaskReport exit;
  exit.key = launch.key;
  exit.state = TaskState::kExited;
  // The forger speaks as itself about the victim's task: ignored, and counted.
  const uint64_t before = server_->controller().foreign_reports();
  httplib::Result r = Heartbeat(forger.second, forger.first, {exit});
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(server_->controller().foreign_reports(), before + 1);
  // ... or names the victim node with its own credential: refused.
  r = Heartbeat(forger.second, victim.first, {exit});
  EXPECT_EQ(r->status, 403) << r->body;
  // ... or registers as the victim: refused with the join token and its own credential.
  RegisterRequest takeover = Inventory(victim.first);
  takeover.tasks = {exit};
  EXPECT_EQ(RegisterAs(server_->join_token(), takeover)->status, 403);
  EXPECT_EQ(RegisterAs(forger.second, takeover)->status, 403);
  EXPECT_EQ(Job(id)["state"], "running");

  // The real node's report is what ends it.
  r = Heartbeat(victim.second, victim.first, {exit});
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(Job(id)["state"], "succeeded");
}

TEST_F(AuthzTest, JoinTokenCannotTakeOverARegisteredNode) {
  const std::string cred = Join("n1");
  const uint64_t id = Submit(team_a_);
  WaitForLaunch({{"n1", cred}}, id);
  ASSERT_EQ(Job(id)["state"], "running");
  RegisterRequest takeover = Inventory("n1");
  takeover.agent_id = "intruder";
  httplib::Result r = RegisterAs(server_->join_token(), takeover);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 403);
  const std::string message = nlohmann::json::parse(r->body)["error"]["message"];
  EXPECT_NE(message.find("tessera nodes remove n1"), std::string::npos) << message;
  EXPECT_NE(message.find("credential"), std::string::npos) << message;
  // The node and its job are untouched: its own agent keeps heartbeating.
  r = Heartbeat(cred, "n1");
  ASSERT_EQ(r->status, 200);
  EXPECT_FALSE(HeartbeatResponseFromJson(nlohmann::json::parse(r->body))->reregister);
  EXPECT_EQ(Job(id)["state"], "running");
  EXPECT_EQ(Job(id)["attempts"], 1);
}

TEST_F(AuthzTest, FakeNodeReadsNoTenantData) {
  const std::string real = Join("n1");
  const uint64_t id = Submit(team_a_);
  WaitForLaunch({{"n1", real}}, id);
  // Anyone with the join token can add a node; it gets only its own credential.
  const std::string fake = Join("fake");
  ASSERT_FALSE(fake.empty());
  for (const std::string& token : {fake, server_->join_token()}) {
    for (const std::string& path : {std::string("/v1/jobs"), "/v1/jobs/" + std::to_string(id),
                                   "/v1/jobs/" + std::to_string(id) + "/logs", std::string("/v1/usage"),
                                   std::string("/v1/usage/series"), std::string("/v1/nodes"),
                                   std::string("/v1/queues"), std::string("/metrics")}) {
      httplib::Result r = Client(token).Get(path);
      ASSERT_TRUE(r);
      EXPECT_EQ(r->status, 403) << path;
      EXPECT_EQ(r->body.find("secret-name"), std::string::npos) << path;
    }
  }
  // Nor can it hear about the real node's tasks by naming it.
  EXPECT_EQ(Heartbeat(fake, "n1")->status, 403);
}

TEST_F(AuthzTest, TenantsSeeOtherTenantsJobsOnNodesWithoutTheirNames) {
  const std::string cred = Join("n1");
  const uint64_t id = Submit(team_a_);
  WaitForLaunch({{"n1", cred}}, id);
  auto holders = [&](const std::string& token) {
    nlohmann::json nodes = nlohmann::json::parse(Client(token).Get("/v1/nodes")->body)["nodes"];
    std::vector<nlohmann::json> out;
    for (const auto& gpu : nodes[0]["gpus"]) {
      for (const auto& h : gpu["holders"]) {
        out.push_back(h);
      }
    }
    return out;
  };
  for (const auto& h : holders(team_b_)) {
    EXPECT_EQ(h["tenant"], "team-a");
    EXPECT_TRUE(h["job"].is_null());
    EXPECT_EQ(h["job_name"], "(another tenant's job)");
  }
  for (const std::string& token : {team_a_, server_->admin_token()}) {
    auto seen = holders(token);
    ASSERT_EQ(seen.size(), 1u);
    EXPECT_EQ(seen[0]["job"], id);
    EXPECT_EQ(seen[0]["job_name"], "secret-name");
  }
  EXPECT_EQ(holders(team_b_).size(), 1u);
}

TEST_F(AuthzTest, RemoveRefusedWhileBusyThenRevokeAndRemoveFreeTheName) {
  const std::string cred = Join("n1");
  const uint64_t id = Submit(team_a_);
  WaitForLaunch({{"n1", cred}}, id);
  httplib::Client admin = Client(server_->admin_token());
  httplib::Result r = admin.Delete("/v1/nodes/n1");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 409) << r->body;
  EXPECT_EQ(Job(id)["state"], "running");

  // Revoked: the node's agent is refused and the node takes no new work; its job is
  // requeued only once the node is declared lost (its tasks fence themselves first).
  r = admin.Post("/v1/nodes/n1/revoke", "", "application/json");
  ASSERT_EQ(r->status, 200) << r->body;
  r = Heartbeat(cred, "n1");
  EXPECT_EQ(r->status, 403);
  EXPECT_NE(r->body.find("revoked"), std::string::npos) << r->body;
  EXPECT_EQ(RegisterAs(cred, Inventory("n1"))->status, 403);
  EXPECT_EQ(RegisterAs(server_->join_token(), Inventory("n1"))->status, 403);
  EXPECT_EQ(Job(id)["state"], "running") << "requeued while its tasks may still run";
  nlohmann::json drained = nlohmann::json::parse(admin.Get("/v1/nodes")->body)["nodes"];
  ASSERT_EQ(drained.size(), 1u);
  EXPECT_FALSE(drained[0]["drain"].is_null()) << drained.dump();

  // Revocation survives a restart.
  server_.reset();
  StartServer();
  EXPECT_EQ(Heartbeat(cred, "n1")->status, 403);
  httplib::Client admin2 = Client(server_->admin_token());
  r = admin2.Delete("/v1/nodes/n1");
  ASSERT_EQ(r->status, 200) << r->body;
  nlohmann::json nodes = nlohmann::json::parse(admin2.Get("/v1/nodes")->body)["nodes"];
  EXPECT_TRUE(nodes.empty()) << nodes.dump();
  // The requeued job would land on the node again: out of the way for the last step.
  EXPECT_EQ(admin2.Post("/v1/jobs/" + std::to_string(id) + "/cancel", "", "application/json")->status,
            200);
  // The old credential is unknown now; the name joins afresh with a new one.
  EXPECT_EQ(Heartbeat(cred, "n1")->status, 401);
  const std::string fresh = Join("n1");
  ASSERT_FALSE(fresh.empty());
  EXPECT_NE(fresh, cred);
  EXPECT_EQ(Heartbeat(fresh, "n1")->status, 200);

  // Removal survives a restart (and the new node stays).
  EXPECT_EQ(admin2.Delete("/v1/nodes/n1")->status, 200);
  server_.reset();
  StartServer();
  nodes = nlohmann::json::parse(Client(server_->admin_token()).Get("/v1/nodes")->body)["nodes"];
  EXPECT_TRUE(nodes.empty()) << nodes.dump();
  EXPECT_EQ(Heartbeat(fresh, "n1")->status, 401);
}

TEST_F(AuthzTest, InventoriesAreBoundsChecked) {
  auto refused = [&](RegisterRequest reg, const std::string& field) {
    httplib::Result r = RegisterAs(server_->join_token(), reg);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << field << ": " << r->body;
    EXPECT_NE(r->body.find(field), std::string::npos) << r->body;
  };
  RegisterRequest reg = Inventory("big");
  reg.inventory.spec.cpu = MilliCpu(int64_t{1} << 40);
  refused(reg, "cpu_milli");
  reg = Inventory("big");
  reg.inventory.spec.memory = MiB(int64_t{1} << 40);
  refused(reg, "memory_mib");
  reg = Inventory("big");
  reg.inventory.gpu_uuids[0] = std::string(200, 'u');
  refused(reg, "uuid");
  reg = Inventory("bad/name");
  refused(reg, "name");
  reg = Inventory("big", 1);
  for (int i = 0; i < 8; ++i) {
    reg.inventory.mig_instances[0].push_back({"MIG-" + std::to_string(i), "1g.10gb", i});
  }
  refused(reg, "mig_instances");
  reg = Inventory("big", 65);
  refused(reg, "gpus");
  // Nothing was registered, and no credential handed out: a sane one still joins.
  EXPECT_FALSE(Join("big").empty());
}

}  // namespace
}  // namespace tessera
