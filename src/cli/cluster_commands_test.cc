// The cluster commands against a fake controller: an httplib server on 127.0.0.1 that
// serves canned JSON and records each request.
#include "cli/cluster_commands.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "base/time_format.h"
#include "cli/testing/fake_controller.h"

namespace tessera {
namespace {

using namespace ::tessera::cli_testing;  // NOLINT: the fake controller and its helpers

TEST(ApiClientTest, ConnectionRefusedIsUnavailableNamingTheUrl) {
  ClosedPort closed;
  ClientConfig config;
  config.server = "http://127.0.0.1:" + std::to_string(closed.port());
  StatusOr<std::unique_ptr<ApiClient>> client = ApiClient::Create(config);
  ASSERT_TRUE(client.ok());
  StatusOr<ApiResponse> response = (*client)->Get("/healthz");
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(response.status().message(),
            "cannot reach the controller at " + config.server + ": connection failed");
  EXPECT_EQ(ExitCodeFor(response.status()), 5);
}

// ---------------------------------------------------------------------------------
// submit

TEST(SubmitTest, BuildsTheJsonSpecFromFlags) {
  FakeController ctl;
  ctl.Reply("POST", "/v1/jobs", 201, kRunningJob.dump());
  SubmitOptions o;
  o.name = "train";
  o.queue = "team-a";
  o.replicas = "2";
  o.gpus = "8";
  o.gpu_model = "H100-80GB";
  o.gpu_memory = "20GiB";
  o.cpu = "16";
  o.memory = "64GiB";
  o.priority = "5";
  o.checkpoint_interval = "30m";
  o.runtime_limit = "24h";
  o.env = {"A=1", "B=x=y"};
  o.command = {"torchrun", "train.py"};
  o.idempotency_key = "key-1";
  std::ostringstream out, err;
  EXPECT_EQ(RunSubmit(ctl.Config(), o, out, err), 0) << err.str();
  EXPECT_EQ(out.str(), "42\n");
  EXPECT_EQ(err.str(), "");

  const std::vector<SeenRequest> seen = ctl.requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].method, "POST");
  EXPECT_EQ(seen[0].authorization, "Bearer tok-123");
  EXPECT_EQ(seen[0].content_type, "application/json");
  EXPECT_EQ(seen[0].idempotency_key, "key-1");
  const json expected = json::parse(R"({
    "name": "train", "queue": "team-a", "priority": 5, "command": ["torchrun", "train.py"],
    "env": {"A": "1", "B": "x=y"}, "replicas": 2,
    "resources": {"gpus": 8, "gpu_model": "H100-80GB", "gpu_memory": "20GiB", "cpu": "16",
                  "memory": "64GiB"},
    "checkpoint": {"interval": "30m"}, "runtime_limit": "24h"})");
  EXPECT_EQ(json::parse(seen[0].body), expected) << seen[0].body;
}

TEST(SubmitTest, RestartFlagsMakeTheRestartBlock) {
  SubmitOptions o;
  o.command = {"train"};
  o.restart_max = "2";
  o.restart_on = "failure,gpu-fault";
  o.restart_backoff = "10s";
  StatusOr<json> spec = BuildJobSpec(o);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ((*spec)["restart"],
            json::parse(R"({"max": 2, "on": ["failure", "gpu-fault"], "backoff": "10s"})"));
  o.restart_on = "failure,oom";
  EXPECT_NE(BuildJobSpec(o).status().message().find("--restart-on"), std::string::npos);
  o.restart_on = "";
  o.restart_max = "two";
  EXPECT_NE(BuildJobSpec(o).status().message().find("--restart-max"), std::string::npos);
  SubmitOptions plain;
  plain.command = {"train"};
  EXPECT_FALSE(BuildJobSpec(plain)->contains("restart"));
}

TEST(SubmitTest, MinimalSpecHasOnlyCommandAndEnv) {
  SubmitOptions o;
  o.command = {"echo", "hi"};
  o.gpu_fraction = "0.25";
  o.mig = "";
  StatusOr<json> spec = BuildJobSpec(o);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(*spec, json::parse(R"({"command": ["echo", "hi"], "env": {},
                                   "resources": {"gpu_fraction": "0.25"}})"));
}

TEST(SubmitTest, BadFlagsAreUsageErrorsWithoutARequest) {
  struct Case {
    const char* what;
    std::function<void(SubmitOptions&)> set;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"no command", [](SubmitOptions& o) { o.command.clear(); }, "needs a command"},
      {"env", [](SubmitOptions& o) { o.env = {"NOVALUE"}; }, "--env expects KEY=VALUE"},
      {"replicas", [](SubmitOptions& o) { o.replicas = "0"; }, "--replicas expects"},
      {"gpus", [](SubmitOptions& o) { o.gpus = "two"; }, "--gpus expects"},
      {"fraction", [](SubmitOptions& o) { o.gpu_fraction = "1.5"; }, "--gpu-fraction"},
      {"output", [](SubmitOptions& o) { o.output = "yaml"; }, "-o must be one of: json"},
      {"file and flags", [](SubmitOptions& o) { o.file = "/nonexistent.yaml"; },
       "cannot be combined"},
  };
  FakeController ctl;
  ctl.Reply("POST", "/v1/jobs", 201, kRunningJob.dump());
  for (const Case& c : cases) {
    SubmitOptions o;
    o.command = {"true"};
    c.set(o);
    std::ostringstream out, err;
    EXPECT_EQ(RunSubmit(ctl.Config(), o, out, err), 2) << c.what;
    EXPECT_NE(err.str().find(c.message), std::string::npos) << c.what << ": " << err.str();
    EXPECT_EQ(err.str().rfind("tessera: ", 0), 0u) << err.str();
    EXPECT_EQ(out.str(), "");
  }
  EXPECT_TRUE(ctl.requests().empty());
}

TEST(SubmitTest, FileIsSentAsIsWithItsContentType) {
  char tmpl[] = "/tmp/tessera_cli_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const std::string yaml = "name: train\ncommand: [python, train.py]\nresources:\n  gpus: 8\n";
  std::ofstream(dir + "/job.yaml") << yaml;
  std::ofstream(dir + "/job.json") << R"({"name": "x", "command": ["true"]})";

  FakeController ctl;
  ctl.Reply("POST", "/v1/jobs", 200, kRunningJob.dump());
  SubmitOptions o;
  o.file = dir + "/job.yaml";
  o.idempotency_key = "k";
  std::ostringstream out, err;
  EXPECT_EQ(RunSubmit(ctl.Config(), o, out, err), 0) << err.str();
  EXPECT_EQ(out.str(), "42\n");
  // 200: the idempotency key was seen before.
  EXPECT_NE(err.str().find("already submitted"), std::string::npos);

  o.file = dir + "/job.json";
  o.output = "json";
  std::ostringstream out2, err2;
  EXPECT_EQ(RunSubmit(ctl.Config(), o, out2, err2), 0) << err2.str();
  EXPECT_EQ(json::parse(out2.str()), kRunningJob);

  const std::vector<SeenRequest> seen = ctl.requests();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].body, yaml);
  EXPECT_EQ(seen[0].content_type, "application/yaml");
  EXPECT_EQ(seen[0].idempotency_key, "k");
  EXPECT_EQ(seen[1].content_type, "application/json");
  std::filesystem::remove_all(dir);
}

TEST(SubmitTest, SendsTheSubmitDirectoryWithFlagsAndFiles) {
  char tmpl[] = "/tmp/tessera_cli_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const std::string yaml = "name: train\ncommand: [python, train.py]\nresources:\n  gpus: 8";
  std::ofstream(dir + "/job.yaml") << yaml;
  std::ofstream(dir + "/job.json") << R"({"name": "x", "command": ["true"]})";
  const std::string own = "command: [true]\nsubmit_dir: /elsewhere\n";
  std::ofstream(dir + "/own.yaml") << own;
  const std::string flow = "# a flow mapping cannot take one more line\n{command: [true]}\n";
  std::ofstream(dir + "/flow.yaml") << flow;

  FakeController ctl;
  ctl.Reply("POST", "/v1/jobs", 201, kRunningJob.dump());
  const std::string submit_dir = "/home/al \"ice\"/run";
  for (const std::string& file :
       std::vector<std::string>{"", "job.yaml", "job.json", "own.yaml", "flow.yaml"}) {
    SubmitOptions o;
    o.submit_dir = submit_dir;
    if (file.empty()) {
      o.command = {"true"};
    } else {
      o.file = dir + "/" + file;
    }
    std::ostringstream out, err;
    EXPECT_EQ(RunSubmit(ctl.Config(), o, out, err), 0) << file << ": " << err.str();
  }
  const std::vector<SeenRequest> seen = ctl.requests();
  ASSERT_EQ(seen.size(), 5u);
  EXPECT_EQ(json::parse(seen[0].body)["submit_dir"], submit_dir) << seen[0].body;
  // Appended after the user's lines, which keep their numbers.
  EXPECT_EQ(seen[1].body.substr(0, yaml.size() + 1), yaml + "\n");
  EXPECT_EQ(YAML::Load(seen[1].body)["submit_dir"].as<std::string>(), submit_dir) << seen[1].body;
  EXPECT_EQ(YAML::Load(seen[1].body)["resources"]["gpus"].as<int>(), 8) << seen[1].body;
  const json sent = json::parse(seen[2].body);
  const json expected = {
      {"name", "x"}, {"command", json::array({"true"})}, {"submit_dir", submit_dir}};
  EXPECT_EQ(sent, expected) << seen[2].body;
  EXPECT_EQ(seen[3].body, own);  // the file's own submit_dir wins
  EXPECT_EQ(seen[4].body, flow);
  std::filesystem::remove_all(dir);
}

TEST(SubmitTest, HoldIfUnfitIsSentWithFlagsAndFiles) {
  char tmpl[] = "/tmp/tessera_cli_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const std::string yaml = "command: [true]\nresources:\n  gpus: 64\n";
  std::ofstream(dir + "/job.yaml") << yaml;
  std::ofstream(dir + "/job.json") << R"({"command": ["true"]})";
  std::ofstream(dir + "/batch.yaml") << "jobs:\n  - command: [true]\n  - command: [true]\n";
  FakeController ctl;
  ctl.Reply("POST", "/v1/jobs", 201, kRunningJob.dump());
  for (const std::string& file : std::vector<std::string>{"", "job.yaml", "job.json"}) {
    SubmitOptions o;
    o.hold_if_unfit = true;
    if (file.empty()) {
      o.command = {"true"};
    } else {
      o.file = dir + "/" + file;
    }
    std::ostringstream out, err;
    EXPECT_EQ(RunSubmit(ctl.Config(), o, out, err), 0) << file << ": " << err.str();
  }
  const std::vector<SeenRequest> seen = ctl.requests();
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(json::parse(seen[0].body)["hold_if_unfit"], true) << seen[0].body;
  EXPECT_EQ(seen[1].body.substr(0, yaml.size()), yaml);
  EXPECT_TRUE(YAML::Load(seen[1].body)["hold_if_unfit"].as<bool>()) << seen[1].body;
  EXPECT_EQ(json::parse(seen[2].body)["hold_if_unfit"], true) << seen[2].body;
  // Not set: not sent.
  SubmitOptions plain;
  plain.command = {"true"};
  EXPECT_FALSE(BuildJobSpec(plain)->contains("hold_if_unfit"));
  // A batch file takes it per job.
  SubmitOptions batch;
  batch.hold_if_unfit = true;
  batch.file = dir + "/batch.yaml";
  std::ostringstream out, err;
  EXPECT_NE(RunSubmit(ctl.Config(), batch, out, err), 0);
  EXPECT_NE(err.str().find("hold_if_unfit: true on each job"), std::string::npos) << err.str();
  EXPECT_EQ(ctl.requests().size(), 3u);
  std::filesystem::remove_all(dir);
}

TEST(SubmitTest, AFileOfSeveralJobsIsOneBatch) {
  char tmpl[] = "/tmp/tessera_cli_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const std::string yaml = "jobs:\n  - command: [a]\n  - command: [b]\n  - command: [c]\n";
  std::ofstream(dir + "/jobs.yaml") << yaml;
  std::ofstream(dir + "/jobs.json") << R"({"jobs": [{"command": ["a"]}]})";

  FakeController ctl;
  ctl.Reply("POST", "/v1/jobs/batch", 201, R"({"ids": [7, 8, 9]})");
  SubmitOptions o;
  o.file = dir + "/jobs.yaml";
  o.idempotency_key = "nightly";
  o.submit_dir = "/home/u";
  std::ostringstream out, err;
  EXPECT_EQ(RunSubmit(ctl.Config(), o, out, err), 0) << err.str();
  EXPECT_EQ(out.str(), "7\n8\n9\n");
  EXPECT_EQ(err.str(), "");
  o.file = dir + "/jobs.json";
  o.output = "json";
  std::ostringstream out2, err2;
  EXPECT_EQ(RunSubmit(ctl.Config(), o, out2, err2), 0) << err2.str();
  EXPECT_EQ(json::parse(out2.str()), json::parse(R"({"ids": [7, 8, 9]})"));

  const std::vector<SeenRequest> seen = ctl.requests();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].path, "/v1/jobs/batch");
  EXPECT_EQ(seen[0].content_type, "application/yaml");
  EXPECT_EQ(seen[0].idempotency_key, "nightly");
  // The batch's submit_dir, after the user's lines.
  EXPECT_EQ(seen[0].body, yaml + "submit_dir: \"/home/u\"\n");
  EXPECT_EQ(json::parse(seen[1].body)["submit_dir"], "/home/u");

  // A retry the controller had already: the same ids, and a word about it.
  FakeController again;
  again.Reply("POST", "/v1/jobs/batch", 200, R"({"ids": [7, 8, 9]})");
  o.file = dir + "/jobs.yaml";
  o.output = "";
  std::ostringstream out3, err3;
  EXPECT_EQ(RunSubmit(again.Config(), o, out3, err3), 0) << err3.str();
  EXPECT_EQ(out3.str(), "7\n8\n9\n");
  EXPECT_NE(err3.str().find("already submitted"), std::string::npos);
  // A refused batch: the controller's message, nothing on stdout.
  FakeController refuse;
  refuse.Reply("POST", "/v1/jobs/batch", 400,
               Error("InvalidArgument", "jobs[2].resources.gpus: must be between 0 and 64"));
  std::ostringstream out4, err4;
  EXPECT_EQ(RunSubmit(refuse.Config(), o, out4, err4), 2);
  EXPECT_EQ(err4.str(), "tessera: jobs[2].resources.gpus: must be between 0 and 64\n");
  EXPECT_EQ(out4.str(), "");
  std::filesystem::remove_all(dir);
}

TEST(SubmitTest, ServerRejectionPrintsTheMessageAndExits2) {
  FakeController ctl;
  ctl.Reply("POST", "/v1/jobs", 400, Error("InvalidArgument", "unknown GPU model 'H900'"));
  SubmitOptions o;
  o.command = {"true"};
  o.gpu_model = "H900";
  std::ostringstream out, err;
  EXPECT_EQ(RunSubmit(ctl.Config(), o, out, err), 2);
  EXPECT_EQ(err.str(), "tessera: unknown GPU model 'H900'\n");
  EXPECT_EQ(out.str(), "");
}

// ---------------------------------------------------------------------------------
// jobs

TEST(JobsTest, TableOfNonTerminalJobsByDefault) {
  FakeController ctl;
  ctl.Reply("GET", "/v1/jobs", 200, json{{"jobs", {kRunningJob, kPendingJob}}}.dump());
  std::ostringstream out, err;
  ManualClock clock = TestClock();
  EXPECT_EQ(RunJobs(ctl.Config(), JobsOptions{}, clock, out, err), 0) << err.str();
  EXPECT_EQ(out.str(),
            "ID  NAME                      TENANT  QUEUE   STATE    GPUS  AGE    NODES          "
            "REASON\n"
            "42  train-llama               team-a  team-a  running  4     10m    node-a,node-b\n"
            "43  a-very-long-job-name-...  team-b  team-b  pending  0.5   1h10m  -              "
            "queue team-b is over its GPU quota (nominal 4...\n");
  const std::vector<SeenRequest> seen = ctl.requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].path, "/v1/jobs");
  EXPECT_EQ(seen[0].Param("state"), "pending,running,stopping");
  EXPECT_EQ(seen[0].Param("queue"), "<absent>");
  EXPECT_EQ(seen[0].Param("limit"), "<absent>");
  EXPECT_EQ(seen[0].authorization, "Bearer tok-123");
}

TEST(JobsTest, FiltersGoToTheQuery) {
  FakeController ctl;
  ctl.Reply("GET", "/v1/jobs", 200, R"({"jobs": []})");
  ManualClock clock = TestClock();
  JobsOptions o;
  o.state = "failed,cancelled";
  o.queue = "team a";
  o.tenant = "t1";
  o.limit = 5;
  std::ostringstream out, err;
  EXPECT_EQ(RunJobs(ctl.Config(), o, clock, out, err), 0) << err.str();
  EXPECT_EQ(out.str(), "ID  NAME  TENANT  QUEUE  STATE  GPUS  AGE  NODES  REASON\n");

  JobsOptions all;
  all.all = true;
  std::ostringstream out2;
  EXPECT_EQ(RunJobs(ctl.Config(), all, clock, out2, err), 0);

  const std::vector<SeenRequest> seen = ctl.requests();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].Param("state"), "failed,cancelled");
  EXPECT_EQ(seen[0].Param("queue"), "team a");
  EXPECT_EQ(seen[0].Param("tenant"), "t1");
  EXPECT_EQ(seen[0].Param("limit"), "5");
  EXPECT_EQ(seen[1].Param("state"), "<absent>");
}

TEST(JobsTest, StartListsTheFirstPositionsNotTheLowestIds) {
  // Two pages by id; positions run the other way. --limit 2 is the first two positions.
  FakeController ctl;
  auto job = [](int64_t id, int64_t position) {
    json j = kPendingJob;
    j["id"] = id;
    j["position"] = position;
    return j;
  };
  ctl.On("GET", "/v1/jobs", [&](const httplib::Request& req, httplib::Response& res) {
    const json page = req.has_param("after")
                          ? json{{"jobs", {job(3, 2), job(4, 1)}}}
                          : json{{"jobs", {job(1, 4), job(2, 3)}}, {"next", "2"}};
    res.set_content(page.dump(), "application/json");
  });
  ManualClock clock = TestClock();
  JobsOptions o;
  o.start = true;
  o.limit = 2;
  o.output = "json";
  std::ostringstream out, err;
  ASSERT_EQ(RunJobs(ctl.Config(), o, clock, out, err), 0) << err.str();
  const json listed = json::parse(out.str());
  std::vector<int64_t> ids;
  for (const json& j : listed["jobs"]) {
    ids.push_back(j["id"].get<int64_t>());
  }
  EXPECT_EQ(ids, (std::vector<int64_t>{4, 3}));
  const std::vector<SeenRequest> seen = ctl.requests();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].Param("limit"), "<absent>");  // every pending job, then the limit
  EXPECT_EQ(seen[0].Param("state"), "pending");

  // --all (every state) does not go with --start.
  JobsOptions all;
  all.start = true;
  all.all = true;
  std::ostringstream out2, err2;
  EXPECT_NE(RunJobs(ctl.Config(), all, clock, out2, err2), 0);
  EXPECT_NE(err2.str().find("--all"), std::string::npos) << err2.str();
  EXPECT_EQ(ctl.requests().size(), 2u);
}

TEST(JobsTest, WideShowsEverythingUncutAndJsonIsTheServersJson) {
  FakeController ctl;
  const json body = {{"jobs", {kPendingJob}}};
  ctl.Reply("GET", "/v1/jobs", 200, body.dump());
  ManualClock clock = TestClock();
  JobsOptions o;
  o.output = "wide";
  std::ostringstream out, err;
  EXPECT_EQ(RunJobs(ctl.Config(), o, clock, out, err), 0) << err.str();
  EXPECT_NE(out.str().find("a-very-long-job-name-that-goes-on-and-on"), std::string::npos);
  EXPECT_NE(out.str().find("(nominal 4, borrowing limit 0)"), std::string::npos);
  EXPECT_NE(out.str().find("PREEMPTIONS"), std::string::npos);

  o.output = "json";
  std::ostringstream json_out;
  EXPECT_EQ(RunJobs(ctl.Config(), o, clock, json_out, err), 0);
  EXPECT_EQ(json::parse(json_out.str()), body);
}

TEST(JobsTest, UnauthenticatedExits4) {
  FakeController ctl;
  ctl.Reply("GET", "/v1/jobs", 401, Error("Unauthenticated", "bad token"));
  ManualClock clock = TestClock();
  std::ostringstream out, err;
  EXPECT_EQ(RunJobs(ctl.Config(), JobsOptions{}, clock, out, err), 4);
  EXPECT_EQ(err.str(), "tessera: bad token (Unauthenticated)\n");

  // Without a token the message says how to give one.
  ClientConfig anonymous = ctl.Config();
  anonymous.token.clear();
  std::ostringstream err2;
  EXPECT_EQ(RunJobs(anonymous, JobsOptions{}, clock, out, err2), 4);
  EXPECT_NE(err2.str().find("no token was given"), std::string::npos) << err2.str();
  const std::vector<SeenRequest> seen = ctl.requests();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1].authorization, "");
}

TEST(JobsTest, ServerErrorsExit1AndForbiddenExits4) {
  FakeController ctl;
  ctl.Reply("GET", "/v1/jobs", 500, Error("Internal", "store is down"));
  ctl.Reply("GET", "/v1/nodes", 403, Error("PermissionDenied", "admins only"));
  ManualClock clock = TestClock();
  std::ostringstream out, err;
  EXPECT_EQ(RunJobs(ctl.Config(), JobsOptions{}, clock, out, err), 1);
  EXPECT_EQ(err.str(), "tessera: store is down (Internal)\n");
  std::ostringstream err2;
  EXPECT_EQ(RunNodes(ctl.Config(), NodesOptions{}, clock, out, err2), 4);
  EXPECT_EQ(err2.str(), "tessera: admins only (PermissionDenied)\n");
  EXPECT_EQ(out.str(), "");
}

TEST(JobsTest, UnreachableControllerExits5) {
  ClosedPort closed;
  ClientConfig config;
  config.server = "http://127.0.0.1:" + std::to_string(closed.port());
  ManualClock clock = TestClock();
  std::ostringstream out, err;
  EXPECT_EQ(RunJobs(config, JobsOptions{}, clock, out, err), 5);
  EXPECT_EQ(err.str(),
            "tessera: cannot reach the controller at " + config.server + ": connection failed\n");
  EXPECT_EQ(out.str(), "");
}

TEST(JobsTest, AnswerThatIsNotJsonExits1) {
  FakeController ctl;
  ctl.On("GET", "/v1/jobs", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("<html>hello</html>", "text/html");
  });
  ManualClock clock = TestClock();
  std::ostringstream out, err;
  EXPECT_EQ(RunJobs(ctl.Config(), JobsOptions{}, clock, out, err), 1);
  EXPECT_EQ(err.str(), "tessera: the controller's answer to GET /v1/jobs is not JSON\n");
}

// ---------------------------------------------------------------------------------
// show, cancel

TEST(ShowTest, DetailsWithPlacementPerTask) {
  FakeController ctl;
  ctl.Reply("GET", R"(/v1/jobs/(\d+))", 200, kRunningJob.dump());
  ManualClock clock = TestClock();
  ShowOptions o;
  o.job = "42";
  std::ostringstream out, err;
  EXPECT_EQ(RunShow(ctl.Config(), o, clock, out, err), 0) << err.str();
  const std::string text = out.str();
  for (const char* line : {
           "Job 42: train-llama\n",
           "  State:        running\n",
           "  Submitted:    2026-11-29T21:00:00Z (10m ago)\n",
           "  Started:      2026-11-29T21:01:00Z (9m ago)\n",
           "  Ended:        -\n",
           "  Run time:     9m\n",
           "  Attempts:     2\n",
           "  Preemptions:  1\n",
           "  Checkpoints:  /ckpt/42\n",
           "Spec:\n",
           "  command:     torchrun train.py --note 'two words'\n",
           "  resources:   gpu_model=H100-80GB gpus=2\n",
           "  checkpoint:  interval=30m\n",
           "Tasks:\n",
           "  TASK  NODE    STATE    EXIT  GPUS\n",
           "  0     node-a  running  -     0,1 H100-80GB\n",
           "  1     node-b  running  -     2,3 H100-80GB\n",
           "  GPUs:         4\n",
       }) {
    EXPECT_NE(text.find(line), std::string::npos) << "missing: " << line << "in:\n" << text;
  }
  EXPECT_EQ(text.find("Why pending"), std::string::npos);
  const std::vector<SeenRequest> seen = ctl.requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].path, "/v1/jobs/42");
}

TEST(ShowTest, PendingJobSaysWhy) {
  FakeController ctl;
  ctl.Reply("GET", R"(/v1/jobs/(\d+))", 200, kPendingJob.dump());
  ManualClock clock = TestClock();
  ShowOptions o;
  o.job = "43";
  std::ostringstream out, err;
  EXPECT_EQ(RunShow(ctl.Config(), o, clock, out, err), 0);
  EXPECT_NE(out.str().find("  Why pending:  queue team-b is over its GPU quota (nominal 4, "
                           "borrowing limit 0)\n"),
            std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("  GPUs:         0.5 (on 1 GPU)\n"), std::string::npos) << out.str();
  EXPECT_EQ(out.str().find("Tasks:"), std::string::npos);
}

TEST(ShowTest, NotFoundExits3AndBadIdExits2) {
  FakeController ctl;
  ctl.Reply("GET", R"(/v1/jobs/(\d+))", 404, Error("NotFound", "job 7 not found"));
  ManualClock clock = TestClock();
  ShowOptions o;
  o.job = "7";
  std::ostringstream out, err;
  EXPECT_EQ(RunShow(ctl.Config(), o, clock, out, err), 3);
  EXPECT_EQ(err.str(), "tessera: job 7 not found (NotFound)\n");

  o.job = "seven";
  std::ostringstream err2;
  EXPECT_EQ(RunShow(ctl.Config(), o, clock, out, err2), 2);
  EXPECT_EQ(err2.str(), "tessera: expected a job id (a positive integer, or ARRAY_INDEX for an array's "
            "element), got 'seven'\n");
  EXPECT_EQ(ctl.requests().size(), 1u);
  EXPECT_EQ(out.str(), "");
}

TEST(CancelTest, CancelsEachJobAndExitsWithTheFirstFailure) {
  FakeController ctl;
  ctl.On("POST", R"(/v1/jobs/(\d+)/cancel)",
         [](const httplib::Request& req, httplib::Response& res) {
           const std::string id = req.matches[1];
           if (id == "1") {
             res.set_content(R"({"id": 1, "state": "stopping"})", "application/json");
           } else if (id == "2") {
             res.status = 404;
             res.set_content(Error("NotFound", "job 2 not found"), "application/json");
           } else if (id == "3") {
             res.status = 409;
             res.set_content(Error("FailedPrecondition", "job 3 already succeeded"),
                             "application/json");
           } else {
             res.set_content(R"({"id": 4, "state": "cancelled"})", "application/json");
           }
         });
  CancelOptions o;
  o.jobs = {"1", "2", "3", "4"};
  std::ostringstream out, err;
  EXPECT_EQ(RunCancel(ctl.Config(), o, out, err), 3);
  EXPECT_EQ(out.str(), "job 1 stopping\njob 4 cancelled\n");
  EXPECT_EQ(err.str(),
            "tessera: job 2 not found (NotFound)\n"
            "tessera: job 3 already succeeded (FailedPrecondition)\n");
  const std::vector<SeenRequest> seen = ctl.requests();
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen[0].method, "POST");
  EXPECT_EQ(seen[0].path, "/v1/jobs/1/cancel");
  EXPECT_EQ(seen[3].path, "/v1/jobs/4/cancel");

  CancelOptions conflict;
  conflict.jobs = {"3"};
  std::ostringstream err2;
  EXPECT_EQ(RunCancel(ctl.Config(), conflict, out, err2), 6);

  CancelOptions bad;
  bad.jobs = {"1", "x"};
  std::ostringstream err3;
  EXPECT_EQ(RunCancel(ctl.Config(), bad, out, err3), 2);
  EXPECT_EQ(ctl.requests().size(), 5u);  // nothing sent for a bad list
}

// ---------------------------------------------------------------------------------
// logs

// Serves "step 1\n" first, nothing on the second request, then the rest with the job
// succeeded.
void ServeLogs(FakeController& ctl) {
  auto count = std::make_shared<int>(0);
  ctl.On("GET", R"(/v1/jobs/(\d+)/logs)",
         [count](const httplib::Request& req, httplib::Response& res) {
           const std::string full = "step 1\nstep 2\nstep 3\n";
           const int n = ++*count;
           const size_t available = n <= 2 ? 7 : full.size();
           const size_t offset = std::stoul(req.get_param_value("offset"));
           const std::string chunk =
               offset < available ? full.substr(offset, available - offset) : std::string();
           res.set_header("X-Log-Offset", std::to_string(offset + chunk.size()));
           res.set_header("X-Job-State", n <= 2 ? "running" : "succeeded");
           res.set_content(chunk, "text/plain");
         });
}

TEST(LogsTest, FollowPollsUntilTheJobEndsAndNoBytesCome) {
  FakeController ctl;
  ServeLogs(ctl);
  LogsOptions o;
  o.job = "42";
  o.task = 1;
  o.follow = true;
  o.max_requests = 20;
  std::vector<int64_t> sleeps;
  o.sleep = [&sleeps](int64_t ms) { sleeps.push_back(ms); };
  std::ostringstream out, err;
  EXPECT_EQ(RunLogs(ctl.Config(), o, out, err), 0) << err.str();
  EXPECT_EQ(out.str(), "step 1\nstep 2\nstep 3\n");
  EXPECT_EQ(sleeps, std::vector<int64_t>({500}));
  const std::vector<SeenRequest> seen = ctl.requests();
  ASSERT_EQ(seen.size(), 4u);
  std::vector<std::string> offsets;
  for (const SeenRequest& r : seen) {
    EXPECT_EQ(r.path, "/v1/jobs/42/logs");
    EXPECT_EQ(r.Param("task"), "1");
    offsets.push_back(r.Param("offset"));
  }
  EXPECT_EQ(offsets, std::vector<std::string>({"0", "7", "7", "21"}));
}

TEST(LogsTest, WithoutFollowReadsWhatThereIsAndStops) {
  FakeController ctl;
  ServeLogs(ctl);
  LogsOptions o;
  o.job = "42";
  o.max_requests = 20;
  o.sleep = [](int64_t) { ADD_FAILURE() << "no polling without -f"; };
  std::ostringstream out, err;
  EXPECT_EQ(RunLogs(ctl.Config(), o, out, err), 0);
  EXPECT_EQ(out.str(), "step 1\n");
  EXPECT_EQ(ctl.requests().size(), 2u);
  EXPECT_EQ(ctl.requests()[0].Param("task"), "0");
}

TEST(LogsTest, UnknownJobExits3) {
  FakeController ctl;
  ctl.Reply("GET", R"(/v1/jobs/(\d+)/logs)", 404, Error("NotFound", "job 9 not found"));
  LogsOptions o;
  o.job = "9";
  o.follow = true;
  o.max_requests = 5;
  std::ostringstream out, err;
  EXPECT_EQ(RunLogs(ctl.Config(), o, out, err), 3);
  EXPECT_EQ(err.str(), "tessera: job 9 not found (NotFound)\n");
}

}  // namespace
}  // namespace tessera
