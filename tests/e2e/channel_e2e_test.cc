// The agent channel in process: a controller (Server) and an agent (fake GPUs, real task
// processes) on loopback. Heartbeats are 30 s apart, longer than any test waits, so
// whatever happens in a test travelled on the channel: launches pushed once durable, exits
// reported as they happen. Tasks append to a file in their checkpoint directory, which
// shows how many times each ran.
#include <gtest/gtest.h>
#include <httplib.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/agent.h"
#include "agent/agent_channel_client.h"
#include "server/agent_channel_server.h"
#include "server/http/server.h"

namespace tessera {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr Micros kHeartbeat = 30'000'000;

bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds limit) {
  const auto until = Clock::now() + limit;
  while (Clock::now() < until) {
    if (done()) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return done();
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class ChannelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = "/tmp/tessera-channel-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    StartServer(0);
    ASSERT_GT(server_->agent_port(), 0);
  }
  void TearDown() override {
    if (agent_ != nullptr) {
      agent_->Stop();
    }
    agent_.reset();
    server_.reset();
    std::filesystem::remove_all(dir_);
  }

  void StartServer(int port) {
    ServerOptions o;
    o.data_dir = dir_ + "/server";
    o.port = port;
    o.fsync = false;
    o.threads = 4;
    o.controller.cycle_interval = 1'000'000;  // decisions come from wake-ups, not the period
    o.controller.heartbeat_interval = kHeartbeat;
    o.controller.node_timeout = 120'000'000;
    o.controller.identities.run_as["team-a"] = {::getuid(), ::getgid()};
    StatusOr<std::unique_ptr<Server>> s = Server::Create(o, GpuCatalog::Default());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(s).value();
    ASSERT_TRUE(server_->Start().ok());
    if (team_a_.empty()) {
      team_a_ = server_->CreateTenantToken("team-a", "a").value();
    }
  }

  // `servers`: the agent's controller addresses; "": the server's URL.
  void StartAgent(const std::string& servers = "") {
    AgentOptions o;
    o.server_url = servers.empty() ? server_->url() : servers;
    o.token = server_->join_token();
    o.node_name = "n1";
    o.data_dir = dir_ + "/agent";
    o.fake_gpus = "1xH100-80GB";
    o.use_cgroups = false;
    o.allow_root_tasks = true;  // the tests may run as root; tasks run as the test's uid
    o.telemetry_interval = 0;
    StatusOr<std::unique_ptr<Agent>> a = Agent::Create(o, GpuCatalog::Default());
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    agent_ = std::move(a).value();
    agent_->Start();
    ASSERT_TRUE(WaitFor([&] { return server_->channel_streams() == 1; }, std::chrono::seconds(10)))
        << "the agent opened no stream";
  }

  // Submits a 1-GPU job whose task appends "ran" to runs.txt in its checkpoint directory
  // and then runs `tail` (shell); returns its id.
  uint64_t Submit(const std::string& tail = "true") {
    json spec = {{"resources", {{"gpus", 1}}},
                 {"command",
                  {"/bin/sh", "-c", "echo ran >> \"$TESSERA_CHECKPOINT_DIR/runs.txt\"; " + tail}}};
    httplib::Client c("127.0.0.1", server_->port());
    c.set_bearer_token_auth(team_a_.c_str());
    httplib::Result r = c.Post("/v1/jobs", spec.dump(), "application/json");
    EXPECT_TRUE(r && r->status == 201) << (r ? r->body : "no answer");
    return r && r->status == 201 ? json::parse(r->body)["id"].get<uint64_t>() : 0;
  }

  std::string State(uint64_t id) {
    httplib::Client c("127.0.0.1", server_->port());
    c.set_bearer_token_auth(team_a_.c_str());
    httplib::Result r = c.Get("/v1/jobs/" + std::to_string(id));
    return r && r->status == 200 ? json::parse(r->body).value("state", "") : "";
  }

  int Runs(uint64_t id) {
    const std::string text =
        ReadAll(dir_ + "/server/checkpoints/" + std::to_string(id) + "/runs.txt");
    int n = 0;
    for (size_t at = text.find("ran"); at != std::string::npos; at = text.find("ran", at + 1)) {
      ++n;
    }
    return n;
  }

  std::string dir_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<Agent> agent_;
  std::string team_a_;
};

TEST_F(ChannelTest, LaunchesArePushedAndExitsReportedWithoutWaitingForAHeartbeat) {
  StartAgent();
  // One GPU: each job starts only once the one before it was reported ended.
  std::vector<uint64_t> ids;
  for (int i = 0; i < 10; ++i) {
    ids.push_back(Submit());
  }
  const auto start = Clock::now();
  ASSERT_TRUE(WaitFor([&] { return State(ids.back()) == "succeeded"; }, std::chrono::seconds(20)))
      << "last job: " << State(ids.back());
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (uint64_t id : ids) {
    EXPECT_EQ(State(id), "succeeded") << "job " << id;
    EXPECT_EQ(Runs(id), 1) << "job " << id;
  }
  // Ten launches and ten exits in a row, each far quicker than one heartbeat.
  EXPECT_LT(seconds, 20.0);
  EXPECT_GE(server_->channel_pushes(), 10U);

  // The channel's own figures on /metrics.
  httplib::Client c("127.0.0.1", server_->port());
  c.set_bearer_token_auth(server_->metrics_token().c_str());
  httplib::Result m = c.Get("/metrics");
  ASSERT_TRUE(m && m->status == 200) << (m ? m->body : "no answer");
  EXPECT_NE(m->body.find("\ntessera_agent_channel_streams 1\n"), std::string::npos);
  auto value = [&](const std::string& name) {
    size_t at = m->body.find("\n" + name + " ");
    return at == std::string::npos ? -1.0 : std::stod(m->body.substr(at + name.size() + 2));
  };
  EXPECT_GE(value("tessera_agent_channel_pushes_total"), 10.0);
  // Each job's exit report and its hello and launch answers at least.
  EXPECT_GE(value("tessera_agent_channel_answer_seconds_count"), 10.0);
}

TEST_F(ChannelTest, AStopIsPushedAtOnce) {
  StartAgent();
  const uint64_t id = Submit("sleep 600");
  ASSERT_TRUE(WaitFor([&] { return Runs(id) == 1; }, std::chrono::seconds(10)));
  httplib::Client c("127.0.0.1", server_->port());
  c.set_bearer_token_auth(team_a_.c_str());
  httplib::Result r =
      c.Post("/v1/jobs/" + std::to_string(id) + "/cancel", "{}", "application/json");
  ASSERT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
  EXPECT_TRUE(WaitFor([&] { return State(id) == "cancelled"; }, std::chrono::seconds(10)))
      << State(id);
  EXPECT_EQ(agent_->running_tasks(), 0U);
}

TEST_F(ChannelTest, AfterAControllerRestartTheAgentReconnectsAndNothingRunsTwice) {
  StartAgent();
  const uint64_t id = Submit("sleep 2");
  ASSERT_TRUE(WaitFor([&] { return Runs(id) == 1; }, std::chrono::seconds(10)));
  const int port = server_->port();
  server_->Stop();
  server_.reset();
  StartServer(port);
  // The agent re-registers (its HTTP heartbeat hears "reregister" once its stream broke),
  // opens a stream to the new channel port and reports the task's end there.
  ASSERT_TRUE(WaitFor([&] { return State(id) == "succeeded"; }, std::chrono::seconds(60)))
      << State(id);
  EXPECT_EQ(Runs(id), 1);
  EXPECT_TRUE(WaitFor([&] { return server_->channel_streams() == 1; }, std::chrono::seconds(10)));
  const uint64_t next = Submit();
  EXPECT_TRUE(WaitFor([&] { return State(next) == "succeeded"; }, std::chrono::seconds(10)));
  EXPECT_EQ(Runs(next), 1);
}

// High availability: the agent has two addresses, the controller it registered with and
// a follower that redirects to whichever controller leads. The first goes away and a new
// controller on the same store takes over elsewhere: the agent registers again through
// the follower's redirect, its running task is re-attached (it runs once) and its end
// is reported to the new leader, on the new leader's channel.
TEST_F(ChannelTest, AfterAFailoverTheAgentFollowsTheFollowersRedirectAndNothingRunsTwice) {
  std::mutex mu;
  std::string leader = server_->url();
  std::atomic<int> redirects{0};
  httplib::Server follower;
  auto redirect = [&](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mu);
    ++redirects;
    res.status = 307;
    res.set_header("Location", leader + req.target);
    res.set_header("X-Tessera-Leader", leader);
  };
  follower.Post("/.*", redirect);
  follower.Get("/.*", redirect);
  follower.set_keep_alive_timeout(1);
  const int follower_port = follower.bind_to_any_port("127.0.0.1");
  std::thread front([&] { follower.listen_after_bind(); });
  ASSERT_TRUE(WaitFor([&] { return follower.is_running(); }, std::chrono::seconds(5)));

  StartAgent(server_->url() + ",http://127.0.0.1:" + std::to_string(follower_port));
  const uint64_t id = Submit("sleep 4");
  ASSERT_TRUE(WaitFor([&] { return Runs(id) == 1; }, std::chrono::seconds(10)));
  server_->Stop();
  server_.reset();
  StartServer(0);
  {
    std::lock_guard<std::mutex> lock(mu);
    leader = server_->url();
  }
  ASSERT_TRUE(WaitFor([&] { return server_->channel_streams() == 1; }, std::chrono::seconds(20)))
      << "the agent opened no stream to the new leader";
  EXPECT_GE(redirects.load(), 1);
  EXPECT_TRUE(WaitFor([&] { return State(id) == "succeeded"; }, std::chrono::seconds(20)))
      << State(id);
  EXPECT_EQ(Runs(id), 1);
  const uint64_t next = Submit();
  EXPECT_TRUE(WaitFor([&] { return State(next) == "succeeded"; }, std::chrono::seconds(10)));
  EXPECT_EQ(Runs(next), 1);
  agent_->Stop();
  follower.stop();
  front.join();
}

TEST_F(ChannelTest, OnlyANodesOwnCredentialOpensItsStream) {
  StartAgent();
  AgentChannelClient client([](const HeartbeatResponse&) {}, [] {});
  AgentChannelTarget t;
  t.host = "127.0.0.1";
  t.port = server_->agent_port();
  t.node = "n1";
  t.agent_id = "intruder";
  t.credential = server_->join_token();
  StatusOr<HeartbeatResponse> joined = client.Open(t, 5'000'000);
  EXPECT_EQ(joined.status().code(), StatusCode::kPermissionDenied) << joined.status().ToString();
  t.credential = "tsr_node_not-a-credential";
  StatusOr<HeartbeatResponse> guessed = client.Open(t, 5'000'000);
  EXPECT_EQ(guessed.status().code(), StatusCode::kUnauthenticated) << guessed.status().ToString();
  const std::string credential = ReadAll(dir_ + "/agent/node.credential");
  t.credential = credential.substr(0, credential.find('\n'));
  t.node = "n2";
  StatusOr<HeartbeatResponse> other = client.Open(t, 5'000'000);
  EXPECT_EQ(other.status().code(), StatusCode::kPermissionDenied) << other.status().ToString();
  // The node's own credential with an agent the controller does not know: register first.
  t.node = "n1";
  StatusOr<HeartbeatResponse> stale = client.Open(t, 5'000'000);
  ASSERT_TRUE(stale.ok()) << stale.status().ToString();
  EXPECT_TRUE(stale->reregister);
  (void)client.Close();
  // The real agent's stream still works.
  const uint64_t id = Submit();
  EXPECT_TRUE(WaitFor([&] { return State(id) == "succeeded"; }, std::chrono::seconds(10)));
}

// After "register again" the agent's next stream rides the connection it has: a fleet
// that lost its controller sets up one connection per agent, not two. The peer address a
// stream arrives from (the client's port) tells the connections apart.
TEST_F(ChannelTest, TheNextStreamRidesTheSameConnection) {
  std::mutex mu;
  std::vector<std::string> peers;
  AgentChannelOptions o;
  o.authenticate = [&](const std::string&, const std::string& peer) -> StatusOr<std::string> {
    std::lock_guard<std::mutex> lock(mu);
    peers.push_back(peer);
    return std::string("n9");
  };
  auto channel = AgentChannelServer::Start(o, server_->controller());
  ASSERT_TRUE(channel.ok()) << channel.status().ToString();
  AgentChannelClient client([](const HeartbeatResponse&) {}, [] {});
  AgentChannelTarget t;
  t.host = "127.0.0.1";
  t.port = (*channel)->port();
  t.node = "n9";
  t.agent_id = "unknown-agent";
  t.credential = "anything";
  for (int i = 0; i < 3; ++i) {
    StatusOr<HeartbeatResponse> hello = client.Open(t, 5'000'000);
    ASSERT_TRUE(hello.ok()) << hello.status().ToString();
    EXPECT_TRUE(hello->reregister);  // the controller does not know this agent
    (void)client.Close();
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    ASSERT_EQ(peers.size(), 3U);
    EXPECT_NE(peers[0].find("127.0.0.1:"), std::string::npos) << peers[0];
    EXPECT_EQ(peers[1], peers[0]);
    EXPECT_EQ(peers[2], peers[0]);
  }
  // A channel server elsewhere: a connection of its own.
  auto other = AgentChannelServer::Start(o, server_->controller());
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  t.port = (*other)->port();
  StatusOr<HeartbeatResponse> hello = client.Open(t, 5'000'000);
  ASSERT_TRUE(hello.ok()) << hello.status().ToString();
  (void)client.Close();
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(peers.size(), 4U);
  EXPECT_NE(peers[3], peers[0]);
}

}  // namespace
}  // namespace tessera
