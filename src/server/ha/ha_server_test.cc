// HaServer in process: controllers on one in-memory store whose writes are fenced by the
// fake lease store's leader key, as the etcd store's are (1 s leases).
#include "server/ha/ha_server.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/ha/testing/fake_election_backend.h"
#include "server/http/server_fixture.h"

namespace tessera {
// Named, not anonymous: its WaitFor would meet leader_election_test.cc's in a unity batch.
namespace ha_server_test {

using std::chrono::milliseconds;
const char kLeaderKey[] = "/tessera/leader";

// One term's view of the shared store: it writes only while its fence is the leader key's
// create revision, and says so once when it is not.
class FencedMemoryStore final : public Store {
 public:
  FencedMemoryStore(InMemoryStore& inner, FakeElectionBackend& backend, int64_t fence,
                    std::function<void()> on_fenced)
      : inner_(inner), backend_(backend), fence_(fence), on_fenced_(std::move(on_fenced)) {}

  Status Commit(WriteBatch batch) override {
    const std::optional<LeaderRecord> holder = backend_.Holder(kLeaderKey);
    if (!holder.has_value() || holder->create_revision != fence_) {
      if (!fenced_.exchange(true)) {
        on_fenced_();
      }
      refused_.fetch_add(1);
      return UnavailableError("fenced: this controller is no longer the leader");
    }
    return inner_.Commit(std::move(batch));
  }
  StatusOr<std::vector<JobRow>> LoadJobs() override { return inner_.LoadJobs(); }
  StatusOr<std::optional<JobRow>> LoadJob(uint64_t id) override { return inner_.LoadJob(id); }
  StatusOr<std::vector<UsageRow>> LoadUsage(int64_t since, int64_t until) override {
    return inner_.LoadUsage(since, until);
  }
  StatusOr<std::vector<JobRow>> LoadJobsPage(uint64_t after, int64_t since, int64_t until,
                                             size_t limit) override {
    return inner_.LoadJobsPage(after, since, until, limit);
  }
  StatusOr<std::vector<UsageRow>> LoadUsageOfJobs(uint64_t first, uint64_t last) override {
    return inner_.LoadUsageOfJobs(first, last);
  }
  StatusOr<std::vector<TokenRow>> LoadTokens() override { return inner_.LoadTokens(); }
  StatusOr<std::optional<std::string>> GetKv(std::string_view key) override {
    return inner_.GetKv(key);
  }
  StatusOr<std::vector<std::pair<std::string, std::string>>> ListKv(
      std::string_view prefix) override {
    return inner_.ListKv(prefix);
  }
  Status Close() override { return Status::Ok(); }  // the next term's store goes on

  static std::atomic<int> refused_;

 private:
  InMemoryStore& inner_;
  FakeElectionBackend& backend_;
  const int64_t fence_;
  std::function<void()> on_fenced_;
  std::atomic<bool> fenced_{false};
};
std::atomic<int> FencedMemoryStore::refused_{0};

template <typename F>
bool WaitFor(F done, milliseconds limit = milliseconds(5000)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return true;
}

class HaServerTest : public ScratchDirTest {
 protected:
  HaServerTest() : ScratchDirTest("ha-server") {}

  std::unique_ptr<HaServer> StartController(const std::string& name) {
    HaServerOptions o;
    o.server.data_dir = dir_ + "/" + name;
    o.server.port = 0;
    o.server.fsync = false;
    o.server.threads = 4;
    o.server.controller.cycle_interval = 10'000;
    o.election.lease_ttl_s = 1;
    o.election.poll_ms = 20;
    o.open_store = [this](int64_t fence, std::function<void()> on_fenced)
        -> StatusOr<std::unique_ptr<Store>> {
      return std::unique_ptr<Store>(
          std::make_unique<FencedMemoryStore>(store_, backend_, fence, std::move(on_fenced)));
    };
    StatusOr<std::unique_ptr<HaServer>> s = HaServer::Create(o, GpuCatalog::Default(), backend_);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (!s.ok()) return nullptr;
    Status started = (*s)->Start();
    EXPECT_TRUE(started.ok()) << started.ToString();
    return std::move(s).value();
  }

  static httplib::Result Get(const HaServer& s, const std::string& path, const std::string& token) {
    httplib::Client c("127.0.0.1", s.port());
    if (!token.empty()) c.set_bearer_token_auth(token.c_str());
    return c.Get(path.c_str());
  }
  static httplib::Result Submit(const HaServer& s, const std::string& token, const std::string& name) {
    httplib::Client c("127.0.0.1", s.port());
    c.set_bearer_token_auth(token.c_str());
    const std::string spec = "name: " + name + "\ncommand: [\"true\"]\n";
    return c.Post("/v1/jobs", spec, "application/yaml");
  }
  std::string AdminToken(const std::string& name) {
    std::ifstream in(dir_ + "/" + name + "/admin.token");
    std::string token;
    std::getline(in, token);
    return token;
  }

  SystemClock clock_;
  FakeElectionBackend backend_{clock_};
  InMemoryStore store_;
};

TEST_F(HaServerTest, FollowersRedirectToTheLeaderWhichServesAndAResignationHandsOver) {
  std::unique_ptr<HaServer> a = StartController("a");
  ASSERT_NE(a, nullptr);
  ASSERT_TRUE(WaitFor([&] { return a->leading() && a->WithServer([](Server&) {}); }));
  std::unique_ptr<HaServer> b = StartController("b");
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(WaitFor([&] { return b->leader() == a->url(); }));
  const std::string admin = AdminToken("a");
  ASSERT_FALSE(admin.empty());

  httplib::Result health = Get(*b, "/healthz", "");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(nlohmann::json::parse(health->body)["role"], "follower");
  EXPECT_EQ(nlohmann::json::parse(health->body)["leader"], a->url());
  health = Get(*a, "/healthz", "");
  ASSERT_TRUE(health);
  EXPECT_EQ(nlohmann::json::parse(health->body)["role"], "leader");

  httplib::Result redirect = Get(*b, "/v1/jobs?limit=5", admin);
  ASSERT_TRUE(redirect);
  EXPECT_EQ(redirect->status, 307);
  EXPECT_EQ(redirect->get_header_value("Location"), a->url() + "/v1/jobs?limit=5");
  EXPECT_EQ(redirect->get_header_value("X-Tessera-Leader"), a->url());

  httplib::Result submitted = Submit(*a, admin, "before-failover");
  ASSERT_TRUE(submitted);
  ASSERT_EQ(submitted->status, 201) << submitted->body;
  const uint64_t id = nlohmann::json::parse(submitted->body)["id"].get<uint64_t>();

  const auto resigned = std::chrono::steady_clock::now();
  a->Stop();
  ASSERT_TRUE(WaitFor([&] { return b->leading() && b->WithServer([](Server&) {}); }));
  const auto took = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - resigned);
  EXPECT_LT(took.count(), 1000) << "a resignation frees the lead at once";
  // The new leader recovered the job from the store, and the old admin token is valid.
  httplib::Result job = Get(*b, "/v1/jobs/" + std::to_string(id), admin);
  ASSERT_TRUE(job);
  EXPECT_EQ(job->status, 200) << job->body;
  EXPECT_EQ(nlohmann::json::parse(job->body)["name"], "before-failover");
  // New ids continue above the recovered ones.
  submitted = Submit(*b, admin, "after-failover");
  ASSERT_TRUE(submitted);
  ASSERT_EQ(submitted->status, 201) << submitted->body;
  EXPECT_GT(nlohmann::json::parse(submitted->body)["id"].get<uint64_t>(), id);
}

TEST_F(HaServerTest, AFencedLeaderWritesNothingAndStepsDownAtOnce) {
  std::unique_ptr<HaServer> a = StartController("a");
  ASSERT_NE(a, nullptr);
  ASSERT_TRUE(WaitFor([&] { return a->leading() && a->WithServer([](Server&) {}); }));
  const std::string admin = AdminToken("a");
  const size_t jobs_before = store_.LoadJobs().value().size();

  backend_.Steal(kLeaderKey, "http://127.0.0.1:1");  // another controller leads now
  const int refused_before = FencedMemoryStore::refused_.load();
  httplib::Result submitted = Submit(*a, admin, "after-losing");
  ASSERT_TRUE(submitted);
  EXPECT_EQ(submitted->status, 503) << submitted->body;
  EXPECT_NE(submitted->body.find("fenced"), std::string::npos) << submitted->body;
  EXPECT_GT(FencedMemoryStore::refused_.load(), refused_before);
  EXPECT_EQ(store_.LoadJobs().value().size(), jobs_before) << "a fenced write reached the store";
  // It steps down well before its 1 s lease would have run out, and redirects.
  // (Its role changes before the step-down's reason is recorded: wait for both.)
  ASSERT_TRUE(WaitFor(
      [&] { return !a->leading() && a->last_step_down().find("fenced") != std::string::npos; },
      milliseconds(500)))
      << a->last_step_down();
  ASSERT_TRUE(WaitFor([&] {
    httplib::Result r = Get(*a, "/v1/jobs", admin);
    return r && r->status == 307;
  }));
  EXPECT_EQ(Get(*a, "/v1/jobs", admin)->get_header_value("X-Tessera-Leader"), "http://127.0.0.1:1");
}

TEST_F(HaServerTest, WithoutTheStoreThereIsNoLeaderAndEveryControllerSays503) {
  std::unique_ptr<HaServer> a = StartController("a");
  ASSERT_NE(a, nullptr);
  ASSERT_TRUE(WaitFor([&] { return a->leading() && a->WithServer([](Server&) {}); }));
  backend_.SetDown(true);
  ASSERT_TRUE(WaitFor([&] { return !a->leading(); }, milliseconds(2000)));
  ASSERT_TRUE(WaitFor([&] {
    httplib::Result r = Get(*a, "/v1/jobs", AdminToken("a"));
    return r && r->status == 503;
  }));
  httplib::Result r = Get(*a, "/v1/jobs", AdminToken("a"));
  EXPECT_EQ(r->get_header_value("Retry-After"), "1");
  EXPECT_NE(r->body.find("no leader: the store cannot be reached"), std::string::npos) << r->body;
  backend_.SetDown(false);
  ASSERT_TRUE(WaitFor([&] { return a->leading() && a->WithServer([](Server&) {}); }, milliseconds(4000)));
  EXPECT_EQ(a->terms(), 2u);
}

TEST_F(HaServerTest, ALeaderWhoseStoreFailedAWriteEndsItsTermAndTheNextRecovers) {
  std::unique_ptr<HaServer> a = StartController("a");
  ASSERT_NE(a, nullptr);
  ASSERT_TRUE(WaitFor([&] { return a->leading() && a->WithServer([](Server&) {}); }));
  const std::string admin = AdminToken("a");
  store_.InjectCommitError(UnavailableError("etcd: outcome unknown"));
  httplib::Result failed = Submit(*a, admin, "lost");
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->status, 503) << failed->body;
  // The failed controller refuses work until restarted: the term ends instead.
  ASSERT_TRUE(WaitFor([&] { return !a->leading(); }, milliseconds(1000)));
  EXPECT_NE(a->last_step_down().find("store failed"), std::string::npos) << a->last_step_down();
  store_.InjectCommitError(Status::Ok());
  ASSERT_TRUE(WaitFor([&] { return a->leading() && a->WithServer([](Server&) {}); },
                      milliseconds(4000)));
  EXPECT_EQ(a->terms(), 2u);
  httplib::Result ok = Submit(*a, admin, "after");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 201) << ok->body;
}

TEST_F(HaServerTest, ABatchTheStoreRefusesWholeIsA400AndTheLeaderStaysHealthy) {
  std::unique_ptr<HaServer> a = StartController("a");
  ASSERT_NE(a, nullptr);
  ASSERT_TRUE(WaitFor([&] { return a->leading() && a->WithServer([](Server&) {}); }));
  // What the etcd store answers for a batch over its transaction limits, before writing.
  store_.InjectCommitError(InvalidArgumentError("a batch of 20001 operations exceeds --max-txn-ops"));
  httplib::Result refused = Submit(*a, AdminToken("a"), "too-big");
  store_.InjectCommitError(Status::Ok());
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 400) << refused->body;
  EXPECT_NE(refused->body.find("max-txn-ops"), std::string::npos) << refused->body;
  bool healthy = false;
  a->WithServer([&](Server& s) { healthy = s.controller().healthy(); });
  EXPECT_TRUE(healthy);
  std::this_thread::sleep_for(milliseconds(400));  // past a health check
  EXPECT_TRUE(a->leading());
  EXPECT_EQ(a->terms(), 1u);
}

}  // namespace ha_server_test
}  // namespace tessera
