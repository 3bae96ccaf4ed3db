// The agent's two heartbeat transports (agent/heartbeat_transport.h) against one loopback
// controller stand-in (FakeController, with its FakeAgentChannel for the stream) and the
// same expectations: the agent channel (AgentChannelClient, protobuf messages) and HTTP
// (HttpHeartbeatTransport, JSON). Then an agent over each: a launch, and its task's end
// reported.
#include "agent/heartbeat_transport.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <ostream>
#include <string>
#include <thread>

#include "agent/agent.h"
#include "agent/agent_channel_client.h"
#include "agent/controller_links.h"
#include "agent/testing/fake_agent_channel.h"
#include "agent/testing/fake_controller.h"
#include "api/testing/heartbeat_samples.h"
#include "base/testing/temp_dir.h"

namespace tessera {

namespace {

enum class Transport { kHttp, kChannel };

std::string TransportText(Transport t) { return t == Transport::kHttp ? "http" : "channel"; }
std::string TransportTestName(const ::testing::TestParamInfo<Transport>& info) {
  return TransportText(info.param);
}
void PrintTo(Transport t, std::ostream* os) { *os << TransportText(t); }

constexpr Micros kTransportWait = 5'000'000;


class HeartbeatTransportTest : public ::testing::TestWithParam<Transport> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(controller_->ok());
    if (!stream()) {
      ControllerLinksOptions o;
      o.answer_timeout = kTransportWait;
      StatusOr<std::unique_ptr<ControllerLinks>> links =
          ControllerLinks::Create(controller_->url(), o);
      ASSERT_TRUE(links.ok()) << links.status().ToString();
      links_ = std::move(links).value();
      transport_ = std::make_unique<HttpHeartbeatTransport>(links_.get());
      return;
    }
    channel_ = std::make_unique<FakeAgentChannel>(*controller_);
    ASSERT_TRUE(channel_->ok());
    auto client = std::make_unique<AgentChannelClient>([](const HeartbeatResponse&) {}, [] {});
    AgentChannelTarget target;
    target.host = "127.0.0.1";
    target.port = channel_->port();
    target.credential = "credential";
    target.node = "n1";
    target.agent_id = "agent-1";
    StatusOr<HeartbeatResponse> hello = client->Open(target, kTransportWait);
    ASSERT_TRUE(hello.ok()) << hello.status().ToString();
    EXPECT_EQ(*hello, HeartbeatResponse{});
    client_ = client.get();
    transport_ = std::move(client);
  }

  bool stream() const { return GetParam() == Transport::kChannel; }
  HeartbeatResult Beat(const HeartbeatRequest& request) {
    return transport_->Exchange(request, kTransportWait);
  }
  // The controller (and its channel) go away.
  void StopController() {
    channel_.reset();
    controller_.reset();
  }

  std::unique_ptr<FakeController> controller_ = std::make_unique<FakeController>();
  std::unique_ptr<FakeAgentChannel> channel_;  // for the stream only
  std::unique_ptr<ControllerLinks> links_;
  AgentChannelClient* client_ = nullptr;
  std::unique_ptr<HeartbeatTransport> transport_;  // last: goes first
};

TEST_P(HeartbeatTransportTest, CarriesEveryFieldBothWays) {
  controller_->Answer(FullHeartbeatResponse());
  HeartbeatResult r = Beat(FullHeartbeatRequest());
  ASSERT_TRUE(r.answer.ok()) << r.answer.status().ToString();
  EXPECT_EQ(*r.answer, FullHeartbeatResponse());
  EXPECT_FALSE(r.store_failed);
  EXPECT_FALSE(r.lost);
  ASSERT_EQ(controller_->requests().size(), 1u);
  EXPECT_EQ(controller_->requests()[0], FullHeartbeatRequest());
  // Nothing queued: an empty answer.
  r = Beat(FullHeartbeatRequest());
  ASSERT_TRUE(r.answer.ok()) << r.answer.status().ToString();
  EXPECT_EQ(*r.answer, HeartbeatResponse{});
  EXPECT_EQ(controller_->requests().size(), 2u);
  if (stream()) {
    EXPECT_EQ(channel_->heartbeats(), 2);
  }
}

TEST_P(HeartbeatTransportTest, StoreFailureKeepsTheTransport) {
  controller_->FailNext();
  HeartbeatResult r = Beat(FullHeartbeatRequest());
  ASSERT_FALSE(r.answer.ok());
  EXPECT_EQ(r.answer.status().code(), StatusCode::kUnavailable) << r.answer.status().ToString();
  EXPECT_TRUE(r.store_failed);
  EXPECT_FALSE(r.lost);
  EXPECT_TRUE(controller_->requests().empty());
  // The same transport takes the next one.
  r = Beat(FullHeartbeatRequest());
  ASSERT_TRUE(r.answer.ok()) << r.answer.status().ToString();
  EXPECT_EQ(controller_->requests().size(), 1u);
  if (stream()) {
    EXPECT_TRUE(client_->open());
    EXPECT_EQ(channel_->streams(), 1);
  }
}

TEST_P(HeartbeatTransportTest, ReregisterComesThrough) {
  HeartbeatResponse again;
  again.reregister = true;
  controller_->Answer(again);
  HeartbeatResult r = Beat(FullHeartbeatRequest());
  ASSERT_TRUE(r.answer.ok()) << r.answer.status().ToString();
  EXPECT_TRUE(r.answer->reregister);
}

// A controller's answer that its codec refuses (a stop with no signal) is refused on both
// transports, naming the field; the stream that carried it is dropped.
TEST_P(HeartbeatTransportTest, RefusesAnAnswerThatDoesNotDecode) {
  HeartbeatResponse bad;
  bad.stop = {TaskStop{{8, 0, 1}, 100, 0}};
  controller_->Answer(bad);
  HeartbeatResult r = Beat(FullHeartbeatRequest());
  ASSERT_FALSE(r.answer.ok());
  EXPECT_EQ(r.answer.status().code(), StatusCode::kInvalidArgument) << r.answer.status().ToString();
  EXPECT_NE(r.answer.status().message().find("stop[0].signal"), std::string::npos)
      << r.answer.status().ToString();
  EXPECT_FALSE(r.store_failed);
  EXPECT_EQ(r.lost, stream());
  if (stream()) {
    EXPECT_FALSE(client_->open());
  }
}

TEST_P(HeartbeatTransportTest, ControllerGoneIsUnavailable) {
  StopController();
  HeartbeatResult r = Beat(FullHeartbeatRequest());
  ASSERT_FALSE(r.answer.ok());
  EXPECT_EQ(r.answer.status().code(), StatusCode::kUnavailable) << r.answer.status().ToString();
  EXPECT_FALSE(r.store_failed);
  EXPECT_EQ(r.lost, stream());  // a stream must be opened again; HTTP tries afresh each time
}

INSTANTIATE_TEST_SUITE_P(AgentTransports, HeartbeatTransportTest,
                         ::testing::Values(Transport::kHttp, Transport::kChannel),
                         TransportTestName);

// An agent over each transport: it registers, gets a launch in a heartbeat's answer, and
// reports its task's exit code until the controller has it.
class AgentOverTransportTest : public ::testing::TestWithParam<Transport> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(controller_.ok());
    if (GetParam() == Transport::kChannel) {
      channel_ = std::make_unique<FakeAgentChannel>(controller_);
      ASSERT_TRUE(channel_->ok());
    }
    ASSERT_TRUE(dir_.ok());
  }
  void TearDown() override { agent_.reset(); }  // before its data directory goes

  FakeController controller_;
  std::unique_ptr<FakeAgentChannel> channel_;
  testing::TempDir dir_{"tessera_agent_transport_"};
  std::unique_ptr<Agent> agent_;
};

TEST_P(AgentOverTransportTest, LaunchesAndReportsTheExit) {
  AgentOptions o;
  o.server_url = controller_.url();
  o.token = "join-token";
  o.node_name = "n1";
  o.data_dir = dir_.path();
  o.fake_gpus = "1xH100-80GB";
  o.use_cgroups = false;
  o.telemetry_interval = 0;
  o.allow_root_tasks = true;  // the stand-in gives no uid
  StatusOr<std::unique_ptr<Agent>> agent = Agent::Create(o, GpuCatalog::Default());
  ASSERT_TRUE(agent.ok()) << agent.status().ToString();
  agent_ = std::move(agent).value();
  ASSERT_TRUE(agent_->RunOnce().ok());  // registers (and opens the stream)

  TaskLaunch launch;
  launch.key = {5, 0, 1};
  launch.job_name = "exit3";
  launch.command = {"sh", "-c", "exit 3"};
  launch.gpus = {0};
  launch.gpu_milli = 1000;
  controller_.AnswerWithLaunch(launch);
  bool reported = false;
  for (int i = 0; i < 200 && !reported; ++i) {
    Status s = agent_->RunOnce();
    ASSERT_TRUE(s.ok()) << s.ToString();
    for (const HeartbeatRequest& hb : controller_.requests()) {
      for (const TaskReport& t : hb.tasks) {
        if (t.key == launch.key && t.state == TaskState::kExited) {
          EXPECT_EQ(t.exit_code, 3);
          reported = true;
        }
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(reported);
  if (channel_ != nullptr) {
    EXPECT_EQ(static_cast<size_t>(channel_->heartbeats()), controller_.requests().size())
        << "heartbeats went over HTTP, not the channel";
    EXPECT_EQ(channel_->streams(), 1);
  }
}

INSTANTIATE_TEST_SUITE_P(AgentTransports, AgentOverTransportTest,
                         ::testing::Values(Transport::kHttp, Transport::kChannel),
                         TransportTestName);

}  // namespace
}  // namespace tessera
