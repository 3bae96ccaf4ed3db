// The cluster commands against a fake controller: an httplib server on 127.0.0.1 that
// serves canned JSON and records each request.
#include "cli/cluster_commands.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
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

namespace tessera {
namespace {

using nlohmann::json;

struct SeenRequest {
  std::string method;
  std::string path;
  std::multimap<std::string, std::string> params;
  std::string authorization;
  std::string content_type;
  std::string idempotency_key;
  std::string body;

  std::string Param(const std::string& key) const {
    auto it = params.find(key);
    return it == params.end() ? "<absent>" : it->second;
  }
};

class FakeController {
 public:
  explicit FakeController(std::unique_ptr<httplib::Server> server = nullptr)
      : server_(server ? std::move(server) : std::make_unique<httplib::Server>()) {
    port_ = server_->bind_to_any_port("127.0.0.1");
    EXPECT_GT(port_, 0);
    thread_ = std::thread([this] { server_->listen_after_bind(); });
    // stop() is a no-op until the accept loop runs: wait (bounded) for it.
    for (int i = 0; i < 5000 && !server_->is_running(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_TRUE(server_->is_running());
  }
  ~FakeController() {
    server_->stop();
    thread_.join();
  }

  // Serves `method` `pattern` with `handler`, recording each request first.
  void On(const std::string& method, const std::string& pattern,
          std::function<void(const httplib::Request&, httplib::Response&)> handler) {
    auto wrapped = [this, handler](const httplib::Request& req, httplib::Response& res) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        SeenRequest seen;
        seen.method = req.method;
        seen.path = req.path;
        seen.params.insert(req.params.begin(), req.params.end());
        seen.authorization = req.get_header_value("Authorization");
        seen.content_type = req.get_header_value("Content-Type");
        seen.idempotency_key = req.get_header_value("Idempotency-Key");
        seen.body = req.body;
        seen_.push_back(std::move(seen));
      }
      handler(req, res);
    };
    if (method == "GET") {
      server_->Get(pattern, wrapped);
    } else if (method == "POST") {
      server_->Post(pattern, wrapped);
    } else {
      server_->Put(pattern, wrapped);
    }
  }

  // Answers `method` `pattern` with `status` and a JSON `body`.
  void Reply(const std::string& method, const std::string& pattern, int status,
             const std::string& body) {
    On(method, pattern, [status, body](const httplib::Request&, httplib::Response& res) {
      res.status = status;
      res.set_content(body, "application/json");
    });
  }

  std::vector<SeenRequest> requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }

  ClientConfig Config(const std::string& scheme = "http") const {
    ClientConfig config;
    config.server = scheme + "://127.0.0.1:" + std::to_string(port_);
    config.token = "tok-123";
    config.connect_timeout_ms = 2000;
    config.read_timeout_ms = 10000;
    return config;
  }

 private:
  std::unique_ptr<httplib::Server> server_;
  int port_ = 0;
  std::thread thread_;
  mutable std::mutex mu_;
  std::vector<SeenRequest> seen_;
};

std::string Error(const std::string& code, const std::string& message) {
  return json{{"error", {{"code", code}, {"message", message}}}}.dump();
}

// 2026-11-29T21:10:00Z
ManualClock TestClock() { return ManualClock(*ParseRfc3339("2026-11-29T21:10:00Z")); }

const json kRunningJob = json::parse(R"({
  "id": 42, "name": "train-llama", "tenant": "team-a", "queue": "team-a", "state": "running",
  "priority": 5, "submit_time": "2026-11-29T21:00:00Z", "start_time": "2026-11-29T21:01:00Z",
  "end_time": null, "attempts": 2, "preemptions": 1, "exit_code": null, "reason": "",
  "gpus": 4, "gpu_milli": 4000, "replicas": 2, "checkpoint_dir": "/ckpt/42",
  "tasks": [
    {"index": 0, "node": "node-a", "state": "running", "exit_code": null, "gpus": [
      {"index": 0, "uuid": "GPU-a0", "model": "H100-80GB", "milli": 1000, "mig_profile": null},
      {"index": 1, "uuid": "GPU-a1", "model": "H100-80GB", "milli": 1000, "mig_profile": null}]},
    {"index": 1, "node": "node-b", "state": "running", "exit_code": null, "gpus": [
      {"index": 2, "uuid": "GPU-b2", "model": "H100-80GB", "milli": 1000, "mig_profile": null},
      {"index": 3, "uuid": "GPU-b3", "model": "H100-80GB", "milli": 1000, "mig_profile": null}]}],
  "spec": {"name": "train-llama", "command": ["torchrun", "train.py", "--note", "two words"],
           "replicas": 2, "resources": {"gpus": 2, "gpu_model": "H100-80GB"},
           "checkpoint": {"interval": "30m"}}
})");

const json kPendingJob = json::parse(R"js({
  "id": 43, "name": "a-very-long-job-name-that-goes-on-and-on", "tenant": "team-b",
  "queue": "team-b", "state": "pending", "priority": 0, "submit_time": "2026-11-29T20:00:00Z",
  "start_time": null, "end_time": null, "attempts": 0, "preemptions": 0, "exit_code": null,
  "reason": "queue team-b is over its GPU quota (nominal 4, borrowing limit 0)",
  "gpus": 1, "gpu_milli": 500, "replicas": 1, "checkpoint_dir": "", "tasks": [],
  "spec": {"command": ["python", "serve.py"], "resources": {"gpu_fraction": 0.5}}
})js");

// A port on 127.0.0.1 that refuses connections: bound (so nobody else takes it) but
// not listening.
class ClosedPort {
 public:
  ClosedPort() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    socklen_t len = sizeof(addr);
    EXPECT_EQ(getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    port_ = ntohs(addr.sin_port);
  }
  ~ClosedPort() { close(fd_); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

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
  EXPECT_EQ(err2.str(), "tessera: expected a job id (a positive integer), got 'seven'\n");
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

// ---------------------------------------------------------------------------------
// nodes

const char* kNodes = R"({"nodes": [
  {"name": "node-a", "state": "up", "reason": "", "last_heartbeat": "2026-11-29T21:09:55Z",
   "cpu_milli": 64000, "cpu_used_milli": 8000, "memory_mib": 1048576, "memory_used_mib": 262144,
   "gpus": [
     {"index": 0, "uuid": "GPU-a0", "model": "H100-80GB", "mode": "exclusive", "used_milli": 1000,
      "holders": [{"job": 42, "tenant": "team-a", "milli": 1000, "mig_profile": null}]},
     {"index": 1, "uuid": "GPU-a1", "model": "H100-80GB", "mode": "shared", "used_milli": 300,
      "holders": [{"job": 43, "tenant": "team-b", "milli": 200, "mig_profile": null},
                  {"job": 44, "tenant": "team-c", "milli": 100, "mig_profile": null}]},
     {"index": 2, "uuid": "GPU-a2", "model": "H100-80GB", "mode": "mig", "used_milli": 571,
      "holders": [{"job": 45, "tenant": "team-a", "milli": 428, "mig_profile": "3g.40gb"},
                  {"job": 46, "tenant": "team-b", "milli": 143, "mig_profile": "1g.10gb"}]},
     {"index": 3, "uuid": "GPU-a3", "model": "H100-80GB", "mode": "exclusive", "used_milli": 0,
      "holders": []}]},
  {"name": "node-b", "state": "down", "reason": "no heartbeat for 2m",
   "last_heartbeat": "2026-11-29T21:08:00Z", "cpu_milli": 32000, "cpu_used_milli": 0,
   "memory_mib": 524288, "memory_used_mib": 0,
   "gpus": [{"index": 0, "uuid": "GPU-b0", "model": "A100-40GB", "mode": "mig", "used_milli": 0,
             "holders": []}]}
]})";

TEST(NodesTest, TableAndGpuMap) {
  FakeController ctl;
  ctl.Reply("GET", "/v1/nodes", 200, kNodes);
  ManualClock clock = TestClock();
  NodesOptions o;
  o.gpus = true;
  std::ostringstream out, err;
  EXPECT_EQ(RunNodes(ctl.Config(), o, clock, out, err), 0) << err.str();
  EXPECT_EQ(out.str(),
            "NAME    STATE  GPUS     MODEL      CPU   MEMORY       HEARTBEAT  REASON\n"
            "node-a  up     1.871/4  H100-80GB  8/64  256GiB/1TiB  5s\n"
            "node-b  down   0/1      A100-40GB  0/32  0MiB/512GiB  2m         no heartbeat for 2m\n"
            "\n"
            "GPU map: [###.......] tenths of a GPU in use, [m:3g,1g...] MIG instances; then the "
            "jobs holding it\n"
            "node-a  [##########]42  [###.......]43,44  [m:3g,1g...]45,46  [..........]\n"
            "node-b  [m:........]  (down)\n"
            "jobs: 42=team-a 43=team-b 44=team-c 45=team-a 46=team-b\n");
  ASSERT_EQ(ctl.requests().size(), 1u);
  EXPECT_EQ(ctl.requests()[0].path, "/v1/nodes");
}

TEST(NodesTest, BarsRoundToTenthsButShowAnyUseAndAnyFreeSpace) {
  FakeController ctl;
  ctl.Reply("GET", "/v1/nodes", 200, R"({"nodes": [{"name": "n", "state": "up", "gpus": [
    {"index": 0, "mode": "shared", "used_milli": 10, "holders": [{"job": 1, "tenant": "t"}]},
    {"index": 1, "mode": "shared", "used_milli": 990, "holders": [{"job": 2, "tenant": "t"}]},
    {"index": 2, "mode": "shared", "used_milli": 550, "holders": []},
    {"index": 3, "mode": "mig", "used_milli": 1000, "holders": [
      {"job": 3, "mig_profile": "1g.10gb"}, {"job": 4, "mig_profile": "1g.10gb"},
      {"job": 5, "mig_profile": "2g.20gb"}, {"job": 6, "mig_profile": "3g.40gb"}]}]}]})");
  ManualClock clock = TestClock();
  NodesOptions o;
  o.gpus = true;
  std::ostringstream out, err;
  EXPECT_EQ(RunNodes(ctl.Config(), o, clock, out, err), 0) << err.str();
  EXPECT_NE(out.str().find("n  [#.........]1  [#########.]2  [######....]  [m:1gx2,2g+]3,4,5,6\n"),
            std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("jobs: 1=t 2=t 3=? 4=? 5=? 6=?\n"), std::string::npos) << out.str();
}

// ---------------------------------------------------------------------------------
// queues

TEST(QueuesTest, TableInGpusAndBinaryUnits) {
  FakeController ctl;
  ctl.Reply("GET", "/v1/queues", 200, R"({"queues": [
    {"name": "team-a", "parent": "root", "tenant": "team-a", "weight": 1, "pending": 3,
     "running": 2, "resources": [
       {"resource": "gpu", "nominal": 8000, "borrowing_limit": null, "lending_limit": null,
        "used": 4500},
       {"resource": "memory", "nominal": 524288, "borrowing_limit": null,
        "lending_limit": 262144, "used": 1536}]},
    {"name": "team-b", "parent": "root", "tenant": "team-b", "weight": 2.5, "pending": 0,
     "running": 0, "resources": [
       {"resource": "gpu:H100-80GB", "nominal": 1500, "borrowing_limit": 2000,
        "lending_limit": 0, "used": 1}]},
    {"name": "root", "parent": "", "tenant": "", "weight": 1, "pending": 0, "running": 0,
     "resources": []}]})");
  std::ostringstream out, err;
  EXPECT_EQ(RunQueues(ctl.Config(), QueuesOptions{}, out, err), 0) << err.str();
  EXPECT_EQ(out.str(),
            "NAME    PARENT  TENANT  WEIGHT  PENDING  RUNNING  RESOURCE       NOMINAL  USED    "
            "BORROWING-LIMIT  LENDING-LIMIT\n"
            "team-a  root    team-a  1       3        2        gpu            8        4.5     -"
            "                -\n"
            "                                                  memory         512GiB   1.5GiB  -"
            "                256GiB\n"
            "team-b  root    team-b  2.5     0        0        gpu:H100-80GB  1.5      0.001   2"
            "                0\n"
            "root                    1       0        0        -              -        -       -"
            "                -\n");
}

TEST(QueuesTest, SetSendsTheYamlAsIsAndNeedsAnAdmin) {
  char tmpl[] = "/tmp/tessera_cli_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const std::string yaml = "queues:\n  - name: team-a\n    quota: {gpu: 8}\n";
  std::ofstream(dir + "/queues.yaml") << yaml;

  FakeController ctl;
  auto allowed = std::make_shared<bool>(true);
  ctl.On("PUT", "/v1/queues", [allowed](const httplib::Request&, httplib::Response& res) {
    if (*allowed) {
      res.set_content(R"({"queues": [{"name": "team-a"}, {"name": "root"}]})", "application/json");
    } else {
      res.status = 403;
      res.set_content(Error("PermissionDenied", "only admins may change queues"),
                      "application/json");
    }
  });
  QueuesSetOptions o;
  o.file = dir + "/queues.yaml";
  std::ostringstream out, err;
  EXPECT_EQ(RunQueuesSet(ctl.Config(), o, out, err), 0) << err.str();
  EXPECT_EQ(out.str(), "queue configuration replaced (2 queues)\n");
  *allowed = false;
  std::ostringstream err2;
  EXPECT_EQ(RunQueuesSet(ctl.Config(), o, out, err2), 4);
  EXPECT_EQ(err2.str(), "tessera: only admins may change queues (PermissionDenied)\n");

  const std::vector<SeenRequest> seen = ctl.requests();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].method, "PUT");
  EXPECT_EQ(seen[0].content_type, "application/yaml");
  EXPECT_EQ(seen[0].body, yaml);

  o.file = dir + "/missing.yaml";
  std::ostringstream err3;
  EXPECT_EQ(RunQueuesSet(ctl.Config(), o, out, err3), 2);
  EXPECT_EQ(ctl.requests().size(), 2u);
  std::filesystem::remove_all(dir);
}

// ---------------------------------------------------------------------------------
// usage

const char* kUsage = R"({"since": "2026-11-01T00:00:00Z", "until": "2026-11-29T21:10:00Z",
  "by": "tenant", "rows": [{"key": "team-a", "gpu_hours": 12.5, "jobs": 3},
                           {"key": "team,b", "gpu_hours": 0.25, "jobs": 1}]})";

TEST(UsageTest, TableWithTotalAndTheTimesInTheQuery) {
  FakeController ctl;
  ctl.Reply("GET", "/v1/usage", 200, kUsage);
  ManualClock clock = TestClock();
  UsageOptions o;
  o.since = "2026-11-01";
  std::ostringstream out, err;
  EXPECT_EQ(RunUsage(ctl.Config(), o, clock, out, err), 0) << err.str();
  EXPECT_EQ(out.str(),
            "GPU usage from 2026-11-01T00:00:00Z to 2026-11-29T21:10:00Z by tenant\n"
            "TENANT  GPU-HOURS  JOBS\n"
            "team-a      12.50     3\n"
            "team,b       0.25     1\n"
            "TOTAL       12.75     4\n");
  const std::vector<SeenRequest> seen = ctl.requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].Param("since"), "2026-11-01T00:00:00Z");
  EXPECT_EQ(seen[0].Param("until"), "2026-11-29T21:10:00Z");
  EXPECT_EQ(seen[0].Param("by"), "tenant");
}

TEST(UsageTest, CsvAndRelativeTimes) {
  FakeController ctl;
  ctl.Reply("GET", "/v1/usage", 200, kUsage);
  ManualClock clock = TestClock();
  UsageOptions o;
  o.since = "24h";
  o.until = "1h";
  o.by = "queue";
  o.output = "csv";
  std::ostringstream out, err;
  EXPECT_EQ(RunUsage(ctl.Config(), o, clock, out, err), 0) << err.str();
  EXPECT_EQ(out.str(), "queue,gpu_hours,jobs\nteam-a,12.5,3\n\"team,b\",0.25,1\n");
  const std::vector<SeenRequest> seen = ctl.requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].Param("since"), "2026-11-28T21:10:00Z");
  EXPECT_EQ(seen[0].Param("until"), "2026-11-29T20:10:00Z");
  EXPECT_EQ(seen[0].Param("by"), "queue");
}

TEST(UsageTest, BadArgumentsExit2AndRateLimitExits6) {
  FakeController ctl;
  ctl.Reply("GET", "/v1/usage", 429, Error("ResourceExhausted", "slow down"));
  ManualClock clock = TestClock();
  for (const auto& [since, until, by] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"tomorrow", "now", "tenant"}, {"1h", "2h", "tenant"}, {"24h", "now", "gpu"}}) {
    UsageOptions o;
    o.since = since;
    o.until = until;
    o.by = by;
    std::ostringstream out, err;
    EXPECT_EQ(RunUsage(ctl.Config(), o, clock, out, err), 2) << since << " " << until << " " << by;
    EXPECT_EQ(err.str().rfind("tessera: ", 0), 0u);
  }
  EXPECT_TRUE(ctl.requests().empty());
  std::ostringstream out, err;
  EXPECT_EQ(RunUsage(ctl.Config(), UsageOptions{}, clock, out, err), 6);
  EXPECT_EQ(err.str(), "tessera: slow down (ResourceExhausted)\n");
}

// ---------------------------------------------------------------------------------
// Transport: a URL prefix, TLS.

TEST(TransportTest, UrlPrefixIsPutBeforeEveryPath) {
  FakeController ctl;
  ctl.Reply("GET", "/tessera/v1/queues", 200, R"({"queues": []})");
  ClientConfig config = ctl.Config();
  config.server += "/tessera/";
  std::ostringstream out, err;
  EXPECT_EQ(RunQueues(config, QueuesOptions{}, out, err), 0) << err.str();
  ASSERT_EQ(ctl.requests().size(), 1u);
  EXPECT_EQ(ctl.requests()[0].path, "/tessera/v1/queues");
}

// Writes a self-signed certificate for 127.0.0.1 and its key into `dir`.
bool WriteSelfSignedCert(const std::string& cert_path, const std::string& key_path) {
  EVP_PKEY* key = EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256");
  if (key == nullptr) {
    return false;
  }
  X509* cert = X509_new();
  X509_set_version(cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert), 3600);
  X509_set_pubkey(cert, key);
  X509_NAME* name = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("127.0.0.1"), -1, -1, 0);
  X509_set_issuer_name(cert, name);
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);
  bool ok = true;
  for (auto [nid, value] : {std::pair{NID_subject_alt_name, "IP:127.0.0.1"},
                            std::pair{NID_basic_constraints, "critical,CA:TRUE"}}) {
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
    ok = ok && ext != nullptr && X509_add_ext(cert, ext, -1) == 1;
    X509_EXTENSION_free(ext);
  }
  ok = ok && X509_sign(cert, key, EVP_sha256()) > 0;
  FILE* c = std::fopen(cert_path.c_str(), "w");
  FILE* k = std::fopen(key_path.c_str(), "w");
  ok = ok && c != nullptr && k != nullptr && PEM_write_X509(c, cert) == 1 &&
       PEM_write_PrivateKey(k, key, nullptr, nullptr, 0, nullptr, nullptr) == 1;
  if (c != nullptr) {
    std::fclose(c);
  }
  if (k != nullptr) {
    std::fclose(k);
  }
  X509_free(cert);
  EVP_PKEY_free(key);
  return ok;
}

TEST(TransportTest, HttpsVerifiesAgainstTheGivenCaOrSkipsWithInsecure) {
  char tmpl[] = "/tmp/tessera_cli_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const std::string cert = dir + "/cert.pem";
  const std::string key = dir + "/key.pem";
  ASSERT_TRUE(WriteSelfSignedCert(cert, key));
  {
    FakeController ctl(std::make_unique<httplib::SSLServer>(cert.c_str(), key.c_str()));
    ctl.Reply("GET", "/v1/queues", 200, R"({"queues": []})");

    // Not trusted by the system's CAs: unreachable, with a hint.
    ClientConfig config = ctl.Config("https");
    std::ostringstream out, err;
    EXPECT_EQ(RunQueues(config, QueuesOptions{}, out, err), 5);
    EXPECT_NE(err.str().find("--ca-cert"), std::string::npos) << err.str();

    config.ca_cert = cert;
    std::ostringstream err2;
    EXPECT_EQ(RunQueues(config, QueuesOptions{}, out, err2), 0) << err2.str();

    ClientConfig insecure = ctl.Config("https");
    insecure.insecure = true;
    std::ostringstream err3;
    EXPECT_EQ(RunQueues(insecure, QueuesOptions{}, out, err3), 0) << err3.str();

    const std::vector<SeenRequest> seen = ctl.requests();
    ASSERT_EQ(seen.size(), 2u);
    EXPECT_EQ(seen[0].authorization, "Bearer tok-123");
  }
  std::filesystem::remove_all(dir);
}

// ---------------------------------------------------------------------------------
// The command line itself: flags reach the options.

TEST(CommandLineTest, SubmitFlagsAndCommandAfterDoubleDash) {
  FakeController ctl;
  ctl.Reply("POST", "/v1/jobs", 201, kRunningJob.dump());
  CLI::App app{"tessera"};
  int exit_code = -1;
  AddClusterCommands(app, &exit_code);
  const std::string server = ctl.Config().server;
  std::vector<std::string> args = {"tessera", "submit", "--server", server,  "--token", "abc",
                                   "--env",   "A=1",    "--env",    "B=2",   "--gpus",  "1",
                                   "--",      "python", "-m",       "train", "--lr",    "3"};
  std::vector<char*> argv;
  for (std::string& a : args) {
    argv.push_back(a.data());
  }
  testing::internal::CaptureStdout();
  app.parse(static_cast<int>(argv.size()), argv.data());
  const std::string printed = testing::internal::GetCapturedStdout();
  EXPECT_EQ(exit_code, 0);
  EXPECT_EQ(printed, "42\n");
  const std::vector<SeenRequest> seen = ctl.requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].authorization, "Bearer abc");
  // The directory it ran in goes with the job.
  json body = json::parse(seen[0].body);
  const std::string submit_dir = body.value("submit_dir", "");
  ASSERT_FALSE(submit_dir.empty()) << body.dump();
  EXPECT_TRUE(std::filesystem::equivalent(submit_dir, std::filesystem::current_path()))
      << submit_dir;
  body.erase("submit_dir");
  EXPECT_EQ(body,
            json::parse(R"({"command": ["python", "-m", "train", "--lr", "3"],
                            "env": {"A": "1", "B": "2"}, "resources": {"gpus": 1}})"));
}

TEST(CommandLineTest, EnvTakesOneValueSoTheCommandMayFollowWithoutDoubleDash) {
  FakeController ctl;
  ctl.Reply("POST", "/v1/jobs", 201, kRunningJob.dump());
  CLI::App app{"tessera"};
  int exit_code = -1;
  AddClusterCommands(app, &exit_code);
  std::vector<std::string> args = {"tessera", "submit", "--server", ctl.Config().server,
                                   "--env",   "A=1",    "python",   "train.py"};
  std::vector<char*> argv;
  for (std::string& a : args) {
    argv.push_back(a.data());
  }
  testing::internal::CaptureStdout();
  app.parse(static_cast<int>(argv.size()), argv.data());
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "42\n");
  EXPECT_EQ(exit_code, 0);
  ASSERT_EQ(ctl.requests().size(), 1u);
  json body = json::parse(ctl.requests()[0].body);
  body.erase("submit_dir");
  EXPECT_EQ(body, json::parse(R"({"command": ["python", "train.py"], "env": {"A": "1"}})"));
}

}  // namespace
}  // namespace tessera
