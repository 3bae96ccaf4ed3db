// ApiClient with several controller addresses, against small loopback servers that play
// the leader, a follower that redirects, a follower without a leader (503), a dead
// address (connection refused), a hung controller (accepts, never answers), a slow
// one (takes the request, answers too late) and a follower that names a dead leader
// until it leads itself. The pauses between rounds run on a fake clock where a test
// waits out the failover bound.
#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/testing/loopback_listener.h"
#include "cli/api_client.h"
#include "cli/cluster_commands.h"

namespace tessera {
namespace {

using Steady = std::chrono::steady_clock;

// An httplib server on 127.0.0.1 that counts the requests it gets and records the
// Idempotency-Key of each.
class Loopback {
 public:
  explicit Loopback(std::function<void(const httplib::Request&, httplib::Response&)> answer)
      : answer_(std::move(answer)) {
    auto handler = [this](const httplib::Request& req, httplib::Response& res) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        keys_.push_back(req.get_header_value("Idempotency-Key"));
      }
      answer_(req, res);
    };
    server_.Get("/.*", handler);
    server_.Post("/.*", handler);
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    for (int i = 0; i < 5000 && !server_.is_running(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  ~Loopback() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  size_t requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return keys_.size();
  }
  std::vector<std::string> keys() {
    std::lock_guard<std::mutex> lock(mu_);
    return keys_;
  }

 private:
  std::function<void(const httplib::Request&, httplib::Response&)> answer_;
  httplib::Server server_;
  int port_ = -1;
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::string> keys_;
};

using testing::DeadUrl;
using testing::HungListener;

// The failover's clock, pause and progress line, faked: a pause moves the clock on at
// once, and what it would print is kept.
struct FakeFailoverTime {
  static constexpr Micros kStart = 1'000'000;
  ManualClock clock{kStart};
  std::vector<Micros> pauses;
  std::vector<std::string> lines;

  void Apply(ClientConfig& config) {
    config.failover_clock = &clock;
    config.failover_sleep = [this](Micros d) {
      pauses.push_back(d);
      clock.Advance(d);
    };
    config.failover_progress = [this](const std::string& line) { lines.push_back(line); };
  }
  double Seconds() const { return static_cast<double>(clock.NowMicros() - kStart) / 1e6; }
};

// A redirect to `leader`, as a follower answers.
void RedirectTo(const std::string& leader, const httplib::Request& req, httplib::Response& res) {
  res.status = 307;
  res.set_header("Location", leader + req.target);
  res.set_header("X-Tessera-Leader", leader);
}

class FailoverTest : public ::testing::Test {
 protected:
  FailoverTest()
      : leader_([](const httplib::Request& req, httplib::Response& res) {
          if (req.method == "POST" && req.path == "/v1/jobs") {
            res.status = 201;
            res.set_content(R"({"id":7})", "application/json");
            return;
          }
          res.set_content(R"({"role":"leader","path":")" + req.path + "\"}", "application/json");
        }),
        follower_([this](const httplib::Request& req, httplib::Response& res) {
          res.status = 307;
          res.set_header("Location", leader_.url() + req.target);
          res.set_header("X-Tessera-Leader", leader_.url());
          res.set_content(R"({"error":{"code":"redirect","message":"not the leader"}})",
                          "application/json");
        }),
        leaderless_([](const httplib::Request&, httplib::Response& res) {
          res.status = 503;
          res.set_header("Retry-After", "1");
          res.set_content(
              R"({"error":{"code":"unavailable","message":"no leader: an election is under way"}})",
              "application/json");
        }) {}

  static std::unique_ptr<ApiClient> Client(const std::string& servers,
                                           FakeFailoverTime* time = nullptr) {
    ClientConfig config;
    config.server = servers;
    config.connect_timeout_ms = 2000;
    config.failover_read_timeout_ms = 500;
    config.failover_budget_ms = 5000;
    if (time != nullptr) {
      time->Apply(config);
    }
    StatusOr<std::unique_ptr<ApiClient>> client = ApiClient::Create(config);
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    return client.ok() ? std::move(client).value() : nullptr;
  }

  static double SecondsSince(Steady::time_point start) {
    return std::chrono::duration<double>(Steady::now() - start).count();
  }

  Loopback leader_;
  Loopback follower_;
  Loopback leaderless_;
};

TEST_F(FailoverTest, AFollowersRedirectLeadsToTheLeaderWhichThenGetsTheRequestsDirectly) {
  std::unique_ptr<ApiClient> client = Client(follower_.url() + "," + leader_.url());
  ASSERT_NE(client, nullptr);
  StatusOr<nlohmann::json> first = client->GetJson("/v1/nodes", {{"a", "b c"}});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ((*first)["role"], "leader");
  EXPECT_EQ((*first)["path"], "/v1/nodes");
  EXPECT_EQ(client->server(), leader_.url());
  StatusOr<nlohmann::json> second = client->GetJson("/v1/jobs");
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(follower_.requests(), 1U);
  EXPECT_EQ(leader_.requests(), 2U);
}

TEST_F(FailoverTest, AFollowerGivenAloneIsFollowedToItsLeader) {
  std::unique_ptr<ApiClient> client = Client(follower_.url());
  ASSERT_NE(client, nullptr);
  StatusOr<nlohmann::json> answer = client->GetJson("/v1/queues");
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  EXPECT_EQ((*answer)["role"], "leader");
  EXPECT_EQ(client->server(), leader_.url());
}

// Just after the leader died its followers still name it: the search goes on with the
// addresses after the follower, and the leader is not asked more than its share.
TEST_F(FailoverTest, AFollowerNamingADeadLeaderDoesNotStopTheSearch) {
  const std::string dead = DeadUrl();
  Loopback stale([dead](const httplib::Request& req, httplib::Response& res) {
    res.status = 307;
    res.set_header("Location", dead + req.target);
    res.set_header("X-Tessera-Leader", dead);
  });
  std::unique_ptr<ApiClient> client = Client(stale.url() + "," + leader_.url());
  ASSERT_NE(client, nullptr);
  StatusOr<nlohmann::json> answer = client->GetJson("/v1/nodes");
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  EXPECT_EQ((*answer)["role"], "leader");
  EXPECT_EQ(stale.requests(), 1U);

  // With no one else to ask: asked again, round after round, until the bound (5 s
  // here), then an error naming each.
  FakeFailoverTime time;
  std::unique_ptr<ApiClient> alone = Client(stale.url(), &time);
  StatusOr<ApiResponse> failed = alone->Get("/v1/nodes");
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), StatusCode::kUnavailable);
  const std::string m = failed.status().message();
  EXPECT_NE(m.find(stale.url() + ": redirects to " + dead), std::string::npos) << m;
  EXPECT_NE(m.find(dead + ": connection failed"), std::string::npos) << m;
  EXPECT_EQ(time.Seconds(), 5.0);
  EXPECT_EQ(stale.requests(), 1U + time.pauses.size() + 1U);
}

TEST_F(FailoverTest, ADeadAddressAndALeaderlessFollowerAreSkippedSilently) {
  std::unique_ptr<ApiClient> client =
      Client(DeadUrl() + "," + leaderless_.url() + "," + leader_.url());
  ASSERT_NE(client, nullptr);
  const Steady::time_point start = Steady::now();
  StatusOr<nlohmann::json> answer = client->GetJson("/v1/nodes");
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  EXPECT_EQ((*answer)["role"], "leader");
  EXPECT_EQ(leaderless_.requests(), 1U);
  EXPECT_LT(SecondsSince(start), 2.0);  // one pass over the list, no pause
}

// Nobody answers: round after round, with pauses growing to 2 s, until the bound (60 s
// by default) has passed; one line says it is waiting; then the error names each address.
TEST_F(FailoverTest, WhenEveryAddressFailsUntilTheBoundTheErrorNamesEachAndWhatItSaid) {
  const std::string dead = DeadUrl();
  FakeFailoverTime time;
  ClientConfig config;
  config.server = dead + "," + leaderless_.url();
  time.Apply(config);
  StatusOr<std::unique_ptr<ApiClient>> client = ApiClient::Create(config);
  ASSERT_TRUE(client.ok());
  StatusOr<ApiResponse> answer = (*client)->Get("/v1/nodes");
  ASSERT_FALSE(answer.ok());
  EXPECT_EQ(answer.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(ExitCodeFor(answer.status()), 5);
  const std::string m = answer.status().message();
  EXPECT_EQ(m, "no controller answered: " + dead + ": connection failed; " + leaderless_.url() +
                   ": no leader: an election is under way (Unavailable)");
  EXPECT_EQ(time.Seconds(), 60.0);
  ASSERT_GE(time.pauses.size(), 4U);
  EXPECT_EQ(time.pauses[0], 250'000);
  EXPECT_EQ(time.pauses[1], 500'000);
  EXPECT_EQ(time.pauses[3], 2'000'000);
  EXPECT_LE(*std::max_element(time.pauses.begin(), time.pauses.end()), 2'000'000);
  // The last round tries the first address, finds the bound passed and stops.
  EXPECT_EQ(leaderless_.requests(), time.pauses.size());
  ASSERT_EQ(time.lines.size(), 1U);
  EXPECT_EQ(time.lines[0], "controller at " + dead +
                               " not answering (connection failed); retrying for up to 60 s");
}

// The leader died: the survivor names it until its lease ends, then leads. The redirect
// to the dead leader sends the submission on to the other controller listed (without a
// leader), then round again, until the survivor makes the job: once, under one key.
TEST_F(FailoverTest, AFollowerNamingADeadLeaderIsAskedAgainUntilItLeadsAndTheJobIsMadeOnce) {
  const std::string dead = DeadUrl();
  std::atomic<int> redirects{4};
  std::atomic<int> created{0};
  Loopback survivor([&](const httplib::Request& req, httplib::Response& res) {
    if (redirects.fetch_sub(1) > 0) {
      RedirectTo(dead, req, res);
      return;
    }
    created.fetch_add(1);
    res.status = 201;
    res.set_content(R"({"ids":[9]})", "application/json");
  });
  FakeFailoverTime time;
  ClientConfig config;
  config.server = survivor.url() + "," + leaderless_.url();
  time.Apply(config);
  StatusOr<std::unique_ptr<ApiClient>> client = ApiClient::Create(config);
  ASSERT_TRUE(client.ok());
  StatusOr<SubmittedBatch> batch =
      SubmitJobBatch(**client, R"({"jobs":[{"command":"true"}]})", "application/json", "key-1");
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  EXPECT_EQ(batch->ids, std::vector<int64_t>{9});
  EXPECT_TRUE(batch->created);
  EXPECT_EQ(created.load(), 1);
  EXPECT_EQ(survivor.keys(), std::vector<std::string>(5, "key-1"));
  EXPECT_EQ(leaderless_.keys(), std::vector<std::string>(4, "key-1"));
  EXPECT_EQ(time.pauses.size(), 4U);
  EXPECT_LT(time.Seconds(), 5.0);
  ASSERT_EQ(time.lines.size(), 1U);
  EXPECT_EQ(time.lines[0], "controller at " + dead +
                               " not answering (connection failed); retrying for up to 60 s");
  EXPECT_EQ((*client)->server(), survivor.url());
  // A read waits for a leader the same way.
  redirects = 2;
  time.lines.clear();
  StatusOr<ApiResponse> read = (*client)->Get("/v1/jobs/9");
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(time.lines.size(), 1U);
}

TEST_F(FailoverTest, TheBudgetBoundsTheTimeSpentGoingRound) {
  ClientConfig config;
  config.server = DeadUrl() + "," + leaderless_.url();
  config.failover_budget_ms = 100;
  StatusOr<std::unique_ptr<ApiClient>> client = ApiClient::Create(config);
  ASSERT_TRUE(client.ok());
  const Steady::time_point start = Steady::now();
  StatusOr<ApiResponse> answer = (*client)->Get("/v1/nodes");
  EXPECT_FALSE(answer.ok());
  EXPECT_LT(SecondsSince(start), 1.5) << answer.status().message();
  EXPECT_EQ(leaderless_.requests(), 1U);  // the round after the pause stopped at the bound
}

TEST_F(FailoverTest, OneAddressReportsAsBefore) {
  const std::string dead = DeadUrl();
  std::unique_ptr<ApiClient> client = Client(dead);
  ASSERT_NE(client, nullptr);
  StatusOr<ApiResponse> answer = client->Get("/v1/nodes");
  ASSERT_FALSE(answer.ok());
  EXPECT_EQ(answer.status().message(),
            "cannot reach the controller at " + dead + ": connection failed");
  std::unique_ptr<ApiClient> leaderless = Client(leaderless_.url());
  StatusOr<ApiResponse> busy = leaderless->Get("/v1/nodes");
  EXPECT_EQ(busy.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(leaderless_.requests(), 1U);  // not retried: nothing else to try
}

TEST_F(FailoverTest, AHungControllerIsLeftAfterTheReadBound) {
  HungListener hung;
  std::unique_ptr<ApiClient> client = Client(hung.url() + "," + leader_.url());
  ASSERT_NE(client, nullptr);
  const Steady::time_point start = Steady::now();
  StatusOr<nlohmann::json> answer = client->GetJson("/v1/nodes");
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  EXPECT_EQ((*answer)["role"], "leader");
  EXPECT_LT(SecondsSince(start), 3.0);
}

TEST_F(FailoverTest, AnUnansweredPostWithoutAKeyIsNotSentElsewhere) {
  HungListener hung;
  std::unique_ptr<ApiClient> client = Client(hung.url() + "," + leader_.url());
  ASSERT_NE(client, nullptr);
  StatusOr<ApiResponse> answer = client->Post("/v1/jobs/1/cancel", "{}", "application/json");
  ASSERT_FALSE(answer.ok());
  EXPECT_EQ(answer.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(answer.status().message().find("it may have been carried out"), std::string::npos)
      << answer.status().message();
  EXPECT_EQ(leader_.requests(), 0U);
  // Refused connections took nothing: a POST goes on to the next address.
  std::unique_ptr<ApiClient> after_dead = Client(DeadUrl() + "," + leader_.url());
  EXPECT_TRUE(after_dead->Post("/v1/jobs/1/cancel", "{}", "application/json").ok());
  EXPECT_EQ(leader_.requests(), 1U);
}

// A leader's 503 for a write its store could not settle may have been carried out: a POST
// without a key stops there; a fenced leader's 503 carried nothing out and goes on.
TEST_F(FailoverTest, ALeadersOwn503ToAPostWithoutAKeyIsNotSentElsewhere) {
  Loopback unsettled([](const httplib::Request&, httplib::Response& res) {
    res.status = 503;
    res.set_content(
        R"({"error":{"code":"Unavailable","message":"state store: etcd: outcome unknown"}})",
        "application/json");
  });
  std::unique_ptr<ApiClient> client = Client(unsettled.url() + "," + leader_.url());
  ASSERT_NE(client, nullptr);
  StatusOr<ApiResponse> answer = client->Post("/v1/jobs/1/cancel", "{}", "application/json");
  ASSERT_FALSE(answer.ok());
  EXPECT_EQ(answer.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(answer.status().message().find("outcome unknown"), std::string::npos)
      << answer.status().message();
  EXPECT_EQ(leader_.requests(), 0U);
  Loopback fenced([](const httplib::Request&, httplib::Response& res) {
    res.status = 503;
    res.set_content(
        R"({"error":{"code":"Unavailable","message":"could not make the job durable: fenced: this controller is no longer the leader"}})",
        "application/json");
  });
  std::unique_ptr<ApiClient> after_fence = Client(fenced.url() + "," + leader_.url());
  ASSERT_NE(after_fence, nullptr);
  StatusOr<ApiResponse> resent = after_fence->Post("/v1/jobs/1/cancel", "{}", "application/json");
  ASSERT_TRUE(resent.ok()) << resent.status().ToString();
  EXPECT_EQ(resent->status, 200);
  EXPECT_EQ(leader_.requests(), 1U);
}

// A controller that took the submission and answered too late: the CLI's own key goes
// with the resend, so the leader can tell it is the same job.
TEST_F(FailoverTest, ASubmitCarriesAGeneratedKeyThatItsResendKeeps) {
  Loopback slow([](const httplib::Request&, httplib::Response& res) {
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    res.status = 201;
    res.set_content(R"({"id":6})", "application/json");
  });
  ClientConfig config;
  config.server = slow.url() + "," + leader_.url();
  config.failover_read_timeout_ms = 500;
  SubmitOptions o;
  o.command = {"true"};
  std::ostringstream out, err;
  EXPECT_EQ(RunSubmit(config, o, out, err), 0) << err.str();
  EXPECT_EQ(out.str(), "7\n");
  EXPECT_EQ(err.str(), "");
  ASSERT_EQ(slow.keys().size(), 1U);
  ASSERT_EQ(leader_.keys().size(), 1U);
  EXPECT_EQ(slow.keys()[0].rfind("cli-", 0), 0U) << slow.keys()[0];
  EXPECT_EQ(slow.keys()[0].size(), 36U);
  EXPECT_EQ(leader_.keys()[0], slow.keys()[0]);
  // Each submit its own key; the user's key wins.
  EXPECT_NE(NewIdempotencyKey(), NewIdempotencyKey());
  o.idempotency_key = "nightly";
  config.server = leader_.url();
  EXPECT_EQ(RunSubmit(config, o, out, err), 0) << err.str();
  EXPECT_EQ(leader_.keys().back(), "nightly");
}

TEST(FailoverConfigTest, ListsAreResolvedFromFlagsOrTheEnvironmentAndEachUrlIsChecked) {
  ConnectionFlags flags;
  flags.server = "http://a:7450, http://b:7450,";
  StatusOr<ClientConfig> config = ResolveClientConfig(flags, [](const std::string& name) {
    return name == "TESSERA_SERVER" ? std::optional<std::string>("http://env:1,http://env:2")
                                    : std::nullopt;
  });
  ASSERT_TRUE(config.ok());
  StatusOr<std::unique_ptr<ApiClient>> client = ApiClient::Create(*config);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  EXPECT_EQ((*client)->server(), "http://a:7450");
  config->server = "http://a:7450,ftp://b";
  StatusOr<std::unique_ptr<ApiClient>> bad = ApiClient::Create(*config);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("bad server URL 'ftp://b'"), std::string::npos)
      << bad.status().message();
  config->server = ",";
  EXPECT_FALSE(ApiClient::Create(*config).ok());
}

TEST(FailoverConfigTest, TesseraFailoverTimeoutSetsTheBoundInSeconds) {
  std::string value;
  auto env = [&value](const std::string& name) {
    return name == "TESSERA_FAILOVER_TIMEOUT" && !value.empty() ? std::optional(value)
                                                                : std::nullopt;
  };
  StatusOr<ClientConfig> config = ResolveClientConfig({}, env);
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->failover_budget_ms, 60000);
  value = " 90 ";
  config = ResolveClientConfig({}, env);
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->failover_budget_ms, 90000);
  for (const char* bad : {"soon", "-1", "1.5", "86401"}) {
    value = bad;
    config = ResolveClientConfig({}, env);
    ASSERT_FALSE(config.ok()) << bad;
    EXPECT_EQ(config.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(config.status().message().find("TESSERA_FAILOVER_TIMEOUT"), std::string::npos);
  }
}

}  // namespace
}  // namespace tessera
