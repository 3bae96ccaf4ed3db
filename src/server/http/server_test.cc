// The controller's HTTP API in process, on loopback: authentication, authorisation,
// bad input (400 with a clear message and no state change), the job lifecycle with
// an agent that is only this test, recovery after a restart.
#include "server/http/server.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>

#include "api/agent_protocol.h"
#include "api/job_batch.h"
#include "server/http/server_fixture.h"
#include "store/sqlite_store.h"

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

// A stored row the controller cannot read does not keep it from starting: the row is
// quarantined, /healthz says "degraded" and names it, every other job is served.
TEST_F(ServerTest, AnUnreadableStoredJobIsQuarantinedAndHealthzSaysSo) {
  httplib::Result r = SubmitJson(team_a_, kJob);
  ASSERT_EQ(r->status, 201);
  const uint64_t id = nlohmann::json::parse(r->body)["id"];
  server_->Stop();
  server_.reset();
  {
    auto store = SqliteStore::Open(dir_ + "/state.db");
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    WriteBatch bad;
    JobRow row;
    row.id = id + 1;
    row.tenant = row.queue = "team-a";
    row.spec_json = R"({"command": ["x"], "array": ")" + std::string(70000, '1') + R"("})";
    row.state = "pending";
    bad.jobs.push_back(row);
    ASSERT_TRUE((*store)->Commit(std::move(bad)).ok());
  }
  StartServer();
  r = Client("").Get("/healthz");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  nlohmann::json health = nlohmann::json::parse(r->body);
  EXPECT_EQ(health["status"], "degraded") << r->body;
  EXPECT_EQ(health["quarantined_jobs"], 1) << r->body;
  EXPECT_EQ(health["quarantined"][0]["job"], id + 1) << r->body;
  r = Client(team_a_).Get(("/v1/jobs/" + std::to_string(id)).c_str());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  // The next job takes an id above the quarantined row's.
  r = SubmitJson(team_a_, kJob);
  ASSERT_EQ(r->status, 201);
  EXPECT_EQ(nlohmann::json::parse(r->body)["id"], id + 2);
}

// A job that could never run on the nodes: 400 naming what is missing, or with
// hold_if_unfit pending with that reason; a batch says which job.
TEST_F(ServerTest, JobThatNeverFitsIs400UnlessHeld) {
  const GpuCatalog& catalog = GpuCatalog::Default();
  RegisterRequest reg;
  reg.agent_id = "agent-1";
  reg.inventory.spec = MakeUniformNode("n1", MilliCpu(32000), MiB(256 * 1024),
                                       catalog.Find("H100-80GB").value(), 8, SharingMode::kShared);
  for (int g = 0; g < 8; ++g) {
    reg.inventory.gpu_uuids.push_back("GPU-test-" + std::to_string(g));
    reg.inventory.mig_instances.emplace_back();
  }
  httplib::Result r = Client(server_->join_token())
                          .Post("/v1/agents/register", ToJson(reg, catalog).dump(),
                                "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;

  const std::string never =
      "never fits: a task asks 90 GiB of GPU memory per GPU; the largest GPU has 79.6 GiB "
      "(H100-80GB)";
  r = SubmitJson(team_a_, R"({"command": ["/bin/true"], "hold_if_unfit": true,
                             "resources": {"gpu_fraction": 0.5, "gpu_memory": "90GiB"}})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 201) << r->body;
  const std::string path =
      "/v1/jobs/" + std::to_string(nlohmann::json::parse(r->body)["id"].get<uint64_t>());
  std::string reason;
  for (int i = 0; i < 500 && reason != never; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    r = Client(team_a_).Get(path.c_str());
    ASSERT_TRUE(r);
    reason = nlohmann::json::parse(r->body)["reason"].get<std::string>();
  }
  EXPECT_EQ(reason, never);
  EXPECT_EQ(nlohmann::json::parse(r->body)["state"], "pending");

  const size_t jobs = JobCount();
  r = SubmitJson(team_a_, R"({"command": ["/bin/true"],
                             "resources": {"gpu_fraction": 0.5, "gpu_memory": "90GiB"}})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_EQ(ErrorMessage(r).rfind(never, 0), 0u) << r->body;
  EXPECT_NE(ErrorMessage(r).find("hold_if_unfit"), std::string::npos) << r->body;
  r = Client(team_a_).Post("/v1/jobs/batch", R"({"jobs": [{"command": ["/bin/true"]},
      {"command": ["/bin/true"], "resources": {"gpus": 16}}]})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_EQ(ErrorMessage(r).rfind("jobs[1]: never fits: a task asks 16 GPUs on one node", 0), 0u)
      << r->body;
  EXPECT_EQ(JobCount(), jobs);
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

// {"jobs": [...]} of n one-GPU jobs; `bad` >= 0 asks for 65 GPUs in that one.
std::string BatchBody(int n, int bad = -1, const std::string& queue = "") {
  std::string body = R"({"jobs": [)";
  for (int i = 0; i < n; ++i) {
    body += std::string(i > 0 ? "," : "") + R"({"name": "b)" + std::to_string(i) +
            (queue.empty() ? "" : R"(", "queue": ")" + queue) +
            R"(", "command": ["/bin/true"], "resources": {"gpus": )" + (i == bad ? "65" : "1") +
            "}}";
  }
  return body + "]}";
}

std::vector<uint64_t> BatchIds(const httplib::Result& r) {
  return nlohmann::json::parse(r->body)["ids"].get<std::vector<uint64_t>>();
}

TEST_F(ServerTest, ABatchSubmitsEveryJobOnceInOrder) {
  httplib::Client c = Client(team_a_);
  httplib::Result r = c.Post("/v1/jobs/batch", BatchBody(5), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 201) << r->body;
  const std::vector<uint64_t> ids = BatchIds(r);
  ASSERT_EQ(ids.size(), 5u);
  for (size_t i = 0; i < ids.size(); ++i) {
    r = c.Get(("/v1/jobs/" + std::to_string(ids[i])).c_str());
    ASSERT_EQ(r->status, 200);
    const nlohmann::json job = nlohmann::json::parse(r->body);
    EXPECT_EQ(job["name"], "b" + std::to_string(i));
    EXPECT_EQ(job["tenant"], "team-a");
    EXPECT_EQ(job["state"], "pending");
  }
  EXPECT_EQ(JobCount(), 5u);
  // YAML, a `jobs:` list, as the single endpoint takes YAML.
  r = c.Post("/v1/jobs/batch", "jobs:\n  - command: [/bin/true]\n  - command: [/bin/true]\n",
             "application/yaml");
  ASSERT_EQ(r->status, 201) << r->body;
  EXPECT_EQ(BatchIds(r), (std::vector<uint64_t>{ids[4] + 1, ids[4] + 2}));
  EXPECT_EQ(JobCount(), 7u);
}

TEST_F(ServerTest, OneBadJobRefusesTheWholeBatchNamingIt) {
  httplib::Client c = Client(team_a_);
  httplib::Result r = c.Post("/v1/jobs/batch", BatchBody(6, 3), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(ErrorMessage(r).rfind("jobs[3].resources.gpus: must be between 0 and 64", 0), 0u)
      << ErrorMessage(r);
  // Another tenant's queue in one job: checked before anything is committed.
  r = c.Post("/v1/jobs/batch",
             R"({"jobs": [{"command": "true"}, {"command": "true", "queue": "team-b"}]})",
             "application/json");
  EXPECT_EQ(r->status, 403);
  EXPECT_EQ(ErrorMessage(r), "jobs[1]: queue 'team-b' belongs to another tenant");
  r = c.Post("/v1/jobs/batch", R"({"jobs": [{"command": "true", "queue": "nope"}]})",
             "application/json");
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(ErrorMessage(r), "jobs[0].queue: no queue named 'nope'");
  r = c.Post("/v1/jobs/batch", "jobs:\n  - command: [x]\n  - {command: [x], replicas: 0}\n",
             "application/yaml");
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(ErrorMessage(r).rfind("jobs[1].replicas: ", 0), 0u) << ErrorMessage(r);
  EXPECT_EQ(JobCount(), 0u);
}

TEST_F(ServerTest, ABatchRetriedWithItsKeyGetsTheSameIds) {
  httplib::Client c = Client(team_a_);
  const httplib::Headers key = {{"Idempotency-Key", "nightly-1"}};
  httplib::Result first = c.Post("/v1/jobs/batch", key, BatchBody(4), "application/json");
  ASSERT_EQ(first->status, 201) << first->body;
  httplib::Result again = c.Post("/v1/jobs/batch", key, BatchBody(4), "application/json");
  ASSERT_EQ(again->status, 200) << again->body;
  EXPECT_EQ(BatchIds(first), BatchIds(again));
  EXPECT_EQ(JobCount(), 4u);
  // Other jobs under the key, or fewer or more of them, are a client's mistake.
  for (const std::string& body :
       {BatchBody(3), BatchBody(5), std::string(R"({"jobs": [{"command": "other"}]})")}) {
    httplib::Result r = c.Post("/v1/jobs/batch", key, body, "application/json");
    EXPECT_EQ(r->status, 422) << body;
  }
  // The key is the tenant's: team B's batch under it is its own.
  httplib::Result b = Client(team_b_).Post("/v1/jobs/batch", key, BatchBody(4), "application/json");
  EXPECT_EQ(b->status, 201);
  EXPECT_EQ(JobCount(), 8u);
  // Acknowledged means durable: after a restart the jobs and the key are still there.
  server_->Stop();
  server_.reset();
  StartServer();
  httplib::Result after =
      Client(team_a_).Post("/v1/jobs/batch", key, BatchBody(4), "application/json");
  ASSERT_EQ(after->status, 200) << after->body;
  EXPECT_EQ(BatchIds(after), BatchIds(first));
  EXPECT_EQ(JobCount(), 8u);
}

TEST_F(ServerTest, ABatchOverItsBoundsIs413) {
  std::string body = R"({"jobs": [)";
  for (size_t i = 0; i <= kMaxBatchJobs; ++i) {
    body += std::string(i > 0 ? "," : "") + R"({"command": "x"})";
  }
  httplib::Client c = Client(team_a_);
  c.set_read_timeout(60, 0);  // a debug build under a parallel test run reads it slowly
  httplib::Result r = c.Post("/v1/jobs/batch", body + "]}", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_NE(ErrorMessage(r).find("10001 jobs in one batch, more than 10000"), std::string::npos)
      << ErrorMessage(r);
  r = Client(team_a_).Post("/v1/jobs/batch", R"({"jobs": []})", "application/json");
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(JobCount(), 0u);
}

class ServerRateTest : public ServerFixture {
 protected:
  ServerRateTest() : ServerFixture("server-rate-test") {}
  void Tune(ServerOptions& o) override {
    o.rate_per_second = 1;
    o.rate_burst = 40;
    o.batch_jobs_per_token = 10;
    o.refusal_pause_ms = kPauseMs;
  }
  static constexpr int kPauseMs = 20;
};

// A client that ignores Retry-After and asks again at once is paced by the server: each
// 429 is answered refusal_pause_ms late, so one connection gets a few dozen refusals a
// second instead of thousands (one tenant's flood once held another's p99 at 16x quiet),
// and what is not refused is not held back.
TEST_F(ServerRateTest, RefusalsAreAnsweredLateSoAFloodIsPaced) {
  httplib::Client c = Client(team_a_);
  ASSERT_EQ(c.Post("/v1/jobs/batch", BatchBody(400), "application/json")->status, 201);
  int refused = 0;
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(500)) {
    const auto t0 = std::chrono::steady_clock::now();
    httplib::Result r = c.Post("/v1/jobs/batch", BatchBody(1), "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 429);
    EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(kPauseMs));
    ++refused;
  }
  EXPECT_LE(refused, 500 / kPauseMs + 1);
  EXPECT_EQ(Client(team_b_).Post("/v1/jobs/batch", BatchBody(1), "application/json")->status, 201);
}

TEST_F(ServerRateTest, ABatchCostsInProportionToItsJobs) {
  httplib::Client c = Client(team_a_);
  // 300 jobs cost 31 tokens of the 40: what is left pays for a few requests, not 40.
  ASSERT_EQ(c.Post("/v1/jobs/batch", BatchBody(300), "application/json")->status, 201);
  int ok = 0;
  for (int i = 0; i < 20; ++i) {
    ok += c.Get("/v1/jobs/1")->status == 200 ? 1 : 0;
  }
  EXPECT_LE(ok, 10);
  httplib::Result r = c.Post("/v1/jobs/batch", BatchBody(1), "application/json");
  EXPECT_EQ(r->status, 429);
  // Tenant B's bucket is its own.
  EXPECT_EQ(Client(team_b_).Post("/v1/jobs/batch", BatchBody(1), "application/json")->status, 201);
}

// An array is the jobs it makes, not one request: eight 1,000-element arrays once went
// through a limit that refused eight batches of 1,000.
TEST_F(ServerRateTest, AnArrayCostsItsElementsAsABatchDoes) {
  httplib::Client c = Client(team_a_);
  const std::string array =
      R"({"command": ["/bin/true"], "resources": {"gpus": 1}, "array": "0-299"})";
  ASSERT_EQ(c.Post("/v1/jobs", array, "application/json")->status, 201);
  int ok = 0;
  for (int i = 0; i < 20; ++i) {
    ok += c.Get("/v1/jobs/1")->status == 200 ? 1 : 0;
  }
  EXPECT_LE(ok, 10);
  EXPECT_EQ(c.Post("/v1/jobs", array, "application/json")->status, 429);
  // In a batch too: its arrays' elements are counted. The first leaves 9 of the 40
  // tokens, the second takes the bucket into debt, the third is refused (counted as one
  // request each, all three would pass).
  httplib::Client b = Client(team_b_);
  const std::string batch = R"({"jobs": [)" + array + "]}";
  ASSERT_EQ(b.Post("/v1/jobs/batch", batch, "application/json")->status, 201);
  ASSERT_EQ(b.Post("/v1/jobs/batch", batch, "application/json")->status, 201);
  EXPECT_EQ(b.Post("/v1/jobs/batch", batch, "application/json")->status, 429);
}

TEST_F(ServerRateTest, ListingsCostInProportionToTheirRows) {
  // As the admin, whose bucket is not team A's.
  ASSERT_EQ(Client(server_->admin_token())
                .Post("/v1/jobs/batch", BatchBody(300, -1, "team-a"), "application/json")
                ->status,
            201);
  // The bucket (burst 40) pays for a 300-row listing (31 tokens), not the 40 requests
  // their count alone would allow.
  httplib::Client c = Client(team_a_);
  int ok = 0;
  for (int i = 0; i < 40; ++i) {
    ok += c.Get("/v1/jobs?limit=1000")->status == 200 ? 1 : 0;
  }
  EXPECT_LT(ok, 3);
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
