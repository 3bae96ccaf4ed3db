// The controller's HTTP API in process, on loopback: authentication, authorisation,
// bad input (400 with a clear message and no state change), the job lifecycle with
// an agent that is only this test, recovery after a restart.
#include "server/server.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <stdlib.h>

#include <filesystem>

#include "api/agent_protocol.h"
#include "server/server_fixture.h"

namespace tessera {
namespace {

class ServerTest : public ServerFixture {
 protected:
  ServerTest() : ServerFixture("server-test") {}

  httplib::Result SubmitJson(const std::string& token, const std::string& body,
                             const std::string& key = "") {
    httplib::Client c = Client(token);
    httplib::Headers h;
    if (!key.empty()) {
      h.emplace("Idempotency-Key", key);
    }
    return c.Post("/v1/jobs", h, body, "application/json");
  }

  size_t JobCount() {
    httplib::Client c = Client(server_->admin_token());
    httplib::Result r = c.Get("/v1/jobs");
    EXPECT_TRUE(r);
    return nlohmann::json::parse(r->body)["jobs"].size();
  }

  static std::string ErrorMessage(const httplib::Result& r) {
    return nlohmann::json::parse(r->body)["error"]["message"].get<std::string>();
  }

};

constexpr const char* kJob =
    R"({"name": "hello", "command": ["/bin/true"], "resources": {"gpus": 1}})";

TEST_F(ServerTest, HealthNeedsNoToken) {
  httplib::Result r = Client("").Get("/healthz");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(nlohmann::json::parse(r->body)["status"], "ok");
}

TEST_F(ServerTest, NoOrBadTokenIs401) {
  httplib::Result r = Client("").Get("/v1/jobs");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  EXPECT_EQ(nlohmann::json::parse(r->body)["error"]["code"], "Unauthenticated");
  r = Client("tsr_not_a_token").Get("/v1/jobs");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  r = SubmitJson("", kJob);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  EXPECT_EQ(JobCount(), 0u);
}

TEST_F(ServerTest, TenantSeesOnlyItsOwnJobs) {
  httplib::Result r = SubmitJson(team_a_, kJob);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 201) << r->body;
  nlohmann::json job = nlohmann::json::parse(r->body);
  EXPECT_EQ(job["tenant"], "team-a");
  EXPECT_EQ(job["queue"], "team-a");
  const std::string path = "/v1/jobs/" + std::to_string(job["id"].get<uint64_t>());

  r = Client(team_b_).Get(path.c_str());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  r = Client(team_b_).Post((path + "/cancel").c_str());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  r = Client(team_b_).Get("/v1/jobs");
  EXPECT_EQ(nlohmann::json::parse(r->body)["jobs"].size(), 0u);

  r = Client(team_a_).Get(path.c_str());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  r = Client(server_->admin_token()).Get(path.c_str());
  EXPECT_EQ(r->status, 200);

  // Another tenant's queue is not usable either.
  r = SubmitJson(team_b_, R"({"name": "x", "queue": "team-a", "command": "true"})");
  EXPECT_EQ(r->status, 403);
}

TEST_F(ServerTest, OnlyAdminsChangeQueues) {
  httplib::Result r =
      Client(team_a_).Put("/v1/queues", "queues:\n  - name: team-a\n", "application/yaml");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 403);
  r = Client(server_->admin_token())
          .Put("/v1/queues", "queues: [ {name: team-a, quota: {gpu: -3}} ]", "application/yaml");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  r = Client(server_->admin_token())
          .Put("/v1/queues",
               "cohorts: [{name: c}]\nqueues:\n  - {name: team-a, cohort: c, quota: {gpu: 4}}\n"
               "  - {name: team-b, cohort: c, quota: {gpu: 4}}\n  - {name: default, cohort: c}\n",
               "application/yaml");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  r = Client(team_a_).Get("/v1/queues");
  nlohmann::json queues = nlohmann::json::parse(r->body)["queues"];
  bool found = false;
  for (const nlohmann::json& q : queues) {
    if (q["name"] == "team-a") {
      found = true;
      EXPECT_EQ(q["resources"][0]["nominal"], 4000);
    }
  }
  EXPECT_TRUE(found);
}

TEST_F(ServerTest, BadInputIs400WithAClearMessageAndNoStateChange) {
  struct Case {
    const char* body;
    const char* type;
    const char* says;
  };
  const Case cases[] = {
      {"{not json", "application/json", "parse error"},
      {"name: [unclosed", "application/yaml", ""},
      {R"({"name": "n", "command": "true", "resources": {"gpus": -1}})", "application/json", "gpus"},
      {R"({"name": "n", "command": "true", "resources": {"gpus": 100000}})", "application/json",
       "gpus"},
      {R"({"name": "n", "command": "true", "resources": {"gpus": 1, "gpu_model": "Z80-1MB"}})",
       "application/json", "Z80-1MB"},
      {R"({"name": "n", "command": "true", "resources": {"mig": "9g.999gb"}})", "application/json",
       "9g.999gb"},
      {R"({"name": "n", "command": "true", "resources": {"memory": "-5GiB"}})", "application/json",
       "memory"},
      {R"({"name": "n", "command": "true", "replicas": 0})", "application/json", "replicas"},
      {R"({"name": "n"})", "application/json", "command"},
      {R"({"name": "n", "command": "true", "gpus": 1})", "application/json", "gpus"},
      {R"({"name": "n", "command": "true", "queue": "nope"})", "application/json", "nope"},
  };
  for (const Case& c : cases) {
    httplib::Client client = Client(team_a_);
    httplib::Result r = client.Post("/v1/jobs", c.body, c.type);
    ASSERT_TRUE(r) << c.body;
    EXPECT_EQ(r->status, 400) << c.body << " -> " << r->body;
    nlohmann::json err = nlohmann::json::parse(r->body, nullptr, false);
    ASSERT_FALSE(err.is_discarded()) << r->body;
    EXPECT_EQ(err["error"]["code"], "InvalidArgument") << r->body;
    EXPECT_NE(err["error"]["message"].get<std::string>().find(c.says), std::string::npos)
        << c.body << " -> " << r->body;
  }
  EXPECT_EQ(JobCount(), 0u);
}

TEST_F(ServerTest, OversizedBodyIsRefused) {
  std::string big = R"({"name": "n", "command": "true", "env": {"X": ")" +
                    std::string(2 << 20, 'x') + "\"}}";
  httplib::Result r = SubmitJson(team_a_, big);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_EQ(JobCount(), 0u);
}

TEST_F(ServerTest, UnknownJobAndEndpointAre404) {
  httplib::Result r = Client(team_a_).Get("/v1/jobs/99");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  r = Client(team_a_).Get("/v1/jobs/abc");
  EXPECT_EQ(r->status, 404);
  r = Client(team_a_).Get("/v1/nothing");
  EXPECT_EQ(r->status, 404);
}

TEST_F(ServerTest, IdempotencyKeyGivesTheSameJob) {
  httplib::Result a = SubmitJson(team_a_, kJob, "key-1");
  httplib::Result b = SubmitJson(team_a_, kJob, "key-1");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->status, 201);
  EXPECT_EQ(b->status, 200);
  EXPECT_EQ(nlohmann::json::parse(a->body)["id"], nlohmann::json::parse(b->body)["id"]);
  // The same key from another tenant is another job.
  httplib::Result c = SubmitJson(team_b_, kJob, "key-1");
  EXPECT_EQ(c->status, 201);
  EXPECT_EQ(JobCount(), 2u);
}

TEST_F(ServerTest, AgentTokenCannotSubmitAndTenantCannotHeartbeat) {
  httplib::Result r = SubmitJson(server_->join_token(), kJob);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 403);
  r = Client(team_a_).Post("/v1/agents/heartbeat", "{}", "application/json");
  EXPECT_EQ(r->status, 403);
}

TEST_F(ServerTest, JobsSurviveARestart) {
  httplib::Result r = SubmitJson(team_a_, kJob, "k");
  ASSERT_EQ(r->status, 201);
  const uint64_t id = nlohmann::json::parse(r->body)["id"];
  server_->Stop();
  server_.reset();
  StartServer();
  r = Client(team_a_).Get(("/v1/jobs/" + std::to_string(id)).c_str());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(nlohmann::json::parse(r->body)["state"], "pending");
  // The idempotency key survives too; a new job gets a new id.
  r = SubmitJson(team_a_, kJob, "k");
  EXPECT_EQ(r->status, 200);
  r = SubmitJson(team_a_, kJob);
  EXPECT_EQ(nlohmann::json::parse(r->body)["id"], id + 1);
}

// The agent side of the protocol played by the test: register 8 GPUs, receive the
// launch, report the exit; the job succeeds and its log arrives.
TEST_F(ServerTest, JobRunsThroughTheAgentProtocol) {
  const GpuCatalog& catalog = GpuCatalog::Default();
  RegisterRequest reg;
  reg.agent_id = "agent-1";
  reg.inventory.spec = MakeUniformNode("n1", MilliCpu(32000), MiB(256 * 1024),
                                       catalog.Find("H100-80GB").value(), 8, SharingMode::kExclusive);
  for (int g = 0; g < 8; ++g) {
    reg.inventory.gpu_uuids.push_back("GPU-test-" + std::to_string(g));
    reg.inventory.mig_instances.emplace_back();
  }
  httplib::Client joining = Client(server_->join_token());
  httplib::Result r = joining.Post("/v1/agents/register", ToJson(reg, catalog).dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  // The first registration hands out the node's credential; heartbeats need it.
  const std::string credential = RegisterResponseFromJson(nlohmann::json::parse(r->body))->credential;
  ASSERT_FALSE(credential.empty());
  httplib::Client agent = Client(credential);

  r = SubmitJson(team_a_, R"({"name": "gang", "command": ["sh", "-c", "echo hi"], "replicas": 2,
                             "resources": {"gpus": 4}})");
  ASSERT_EQ(r->status, 201) << r->body;
  const uint64_t id = nlohmann::json::parse(r->body)["id"];

  HeartbeatRequest hb;
  hb.node = "n1";
  hb.agent_id = "agent-1";
  HeartbeatResponse resp;
  for (int i = 0; i < 200 && resp.launch.size() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    r = agent.Post("/v1/agents/heartbeat", ToJson(hb).dump(), "application/json");
    ASSERT_EQ(r->status, 200) << r->body;
    resp = HeartbeatResponseFromJson(nlohmann::json::parse(r->body)).value();
  }
  ASSERT_EQ(resp.launch.size(), 2u);
  std::set<int> gpus;
  for (const TaskLaunch& l : resp.launch) {
    EXPECT_EQ(l.key.job, id);
    EXPECT_EQ(l.gpus.size(), 4u);
    gpus.insert(l.gpus.begin(), l.gpus.end());
    EXPECT_EQ(l.env.at("WORLD_SIZE"), "2");
    EXPECT_EQ(l.env.at("RANK"), std::to_string(l.key.task));
    EXPECT_EQ(l.env.at("LOCAL_RANK"), std::to_string(l.key.task));
    EXPECT_EQ(l.env.at("NODE_RANK"), "0");
    EXPECT_EQ(l.env.at("MASTER_ADDR"), "127.0.0.1");
    EXPECT_EQ(l.env.at("TESSERA_JOB_ID"), std::to_string(id));
    EXPECT_FALSE(l.env.at("TESSERA_CHECKPOINT_DIR").empty());
  }
  EXPECT_EQ(gpus.size(), 8u);  // no GPU twice

  for (const TaskLaunch& l : resp.launch) {
    TaskReport rep;
    rep.key = l.key;
    rep.state = TaskState::kExited;
    rep.log_chunk = "hi from " + std::to_string(l.key.task) + "\n";
    hb.tasks.push_back(rep);
  }
  r = agent.Post("/v1/agents/heartbeat", ToJson(hb).dump(), "application/json");
  ASSERT_EQ(r->status, 200);
  r = Client(team_a_).Get(("/v1/jobs/" + std::to_string(id)).c_str());
  nlohmann::json job = nlohmann::json::parse(r->body);
  EXPECT_EQ(job["state"], "succeeded") << r->body;
  EXPECT_EQ(job["exit_code"], 0);
  r = Client(team_a_).Get(("/v1/jobs/" + std::to_string(id) + "/logs?task=1").c_str());
  EXPECT_EQ(r->body, "hi from 1\n");
  EXPECT_EQ(r->get_header_value("X-Job-State"), "succeeded");
  r = Client(team_a_).Get("/v1/usage?by=job");
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(nlohmann::json::parse(r->body)["rows"].size(), 1u);
}

TEST_F(ServerTest, IdempotencyKeyWithADifferentBodyIs422) {
  httplib::Result a = SubmitJson(team_a_, kJob, "key-x");
  ASSERT_EQ(a->status, 201);
  httplib::Result b = SubmitJson(
      team_a_, R"({"name": "other", "command": ["/bin/false"], "resources": {"gpus": 1}})", "key-x");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->status, 422) << b->body;
  EXPECT_NE(ErrorMessage(b).find("different body"), std::string::npos) << b->body;
  // The same body again is a retry: the first job.
  httplib::Result c = SubmitJson(team_a_, kJob, "key-x");
  EXPECT_EQ(c->status, 200);
  EXPECT_EQ(nlohmann::json::parse(c->body)["id"], nlohmann::json::parse(a->body)["id"]);
  EXPECT_EQ(JobCount(), 1u);
}

TEST_F(ServerTest, JobListsArePaginated) {
  for (int i = 0; i < 250; ++i) {
    ASSERT_EQ(SubmitJson(team_a_, kJob)->status, 201);
  }
  httplib::Client c = Client(team_a_);
  std::vector<uint64_t> ids;
  std::string after;
  int pages = 0;
  for (;; ++pages) {
    httplib::Result r = c.Get("/v1/jobs" + (after.empty() ? "" : "?after=" + after));
    ASSERT_EQ(r->status, 200) << r->body;
    nlohmann::json page = nlohmann::json::parse(r->body);
    EXPECT_LE(page["jobs"].size(), 100u);  // the default page
    for (const auto& j : page["jobs"]) {
      ids.push_back(j["id"].get<uint64_t>());
    }
    if (page["next"].is_null()) {
      break;
    }
    after = page["next"].get<std::string>();
  }
  EXPECT_EQ(pages, 2);  // 100, 100, 50
  ASSERT_EQ(ids.size(), 250u);
  for (size_t i = 1; i < ids.size(); ++i) {
    EXPECT_GT(ids[i - 1], ids[i]);  // newest first, none twice
  }
  // Larger asks get the largest page (1000); 0 and junk are refused.
  nlohmann::json all = nlohmann::json::parse(c.Get("/v1/jobs?limit=5000")->body);
  EXPECT_EQ(all["jobs"].size(), 250u);
  EXPECT_TRUE(all["next"].is_null());
  EXPECT_EQ(c.Get("/v1/jobs?limit=0")->status, 400);
  EXPECT_EQ(c.Get("/v1/jobs?after=abc")->status, 400);
  // A listed job is its own view, spec included (a listing streams the spec's stored text).
  for (size_t i : {size_t{0}, size_t{137}, size_t{249}}) {
    const nlohmann::json& listed = all["jobs"][i];
    const std::string id = std::to_string(listed["id"].get<uint64_t>());
    EXPECT_EQ(listed, nlohmann::json::parse(c.Get("/v1/jobs/" + id)->body)) << id;
    EXPECT_EQ(listed["spec"]["command"], nlohmann::json::array({"/bin/true"}));
  }
  // Another tenant's listing is not affected by this one's.
  EXPECT_EQ(nlohmann::json::parse(Client(team_b_).Get("/v1/jobs")->body)["jobs"].size(), 0u);
}

TEST_F(ServerTest, ListingsCostInProportionToTheirRows) {
  for (int i = 0; i < 300; ++i) {
    ASSERT_EQ(SubmitJson(team_a_, kJob)->status, 201);
  }
  // The default bucket (burst 400) pays for a few 300-row listings (31 tokens each), not
  // the hundreds of requests their count alone would allow.
  httplib::Client c = Client(team_a_);
  int ok = 0;
  for (int i = 0; i < 40; ++i) {
    ok += c.Get("/v1/jobs?limit=1000")->status == 200 ? 1 : 0;
  }
  EXPECT_LT(ok, 20);
  httplib::Result r = c.Get("/v1/jobs?limit=1000");
  EXPECT_EQ(r->status, 429);
  EXPECT_EQ(r->get_header_value("Retry-After"), "1");
  // Tenant B's bucket is its own.
  EXPECT_EQ(Client(team_b_).Get("/v1/jobs")->status, 200);
}

TEST_F(ServerTest, FailedAuthenticationIsThrottledPerAddress) {
  for (int i = 0; i < 11; ++i) {
    httplib::Result r = Client("tsr_guess_" + std::to_string(i)).Get("/v1/jobs");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401) << i;
  }
  // Blocked now: wrong tokens get 429 at once, without counting as attempts...
  httplib::Result r = Client("tsr_guess_x").Get("/v1/jobs");
  EXPECT_EQ(r->status, 429);
  EXPECT_FALSE(r->get_header_value("Retry-After").empty());
  EXPECT_GE(std::stoi(r->get_header_value("Retry-After")), 1);
  // ...but valid credentials from the same address still work: a guesser (a task on a
  // node) must not be able to cut its neighbours or its own agent off.
  EXPECT_EQ(Client(team_a_).Get("/v1/jobs")->status, 200);
  // No token at all is not a guess; the health check needs none.
  EXPECT_EQ(Client("").Get("/healthz")->status, 200);
}

}  // namespace
}  // namespace tessera
