// /healthz while the state store stops answering writes (a frozen filesystem, an etcd
// without quorum): the API says "degraded", with how long a write has waited, as long as
// one waits, and "ok" again once the store answers; the submission that waited is made.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "server/http/server.h"
#include "server/http/server_fixture.h"
#include "store/sqlite_store.h"
#include "store/store.h"

namespace tessera {
namespace {

// Commits wait while the gate is closed.
class Gate {
 public:
  void Close() {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
  }
  void Open() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = false;
    }
    cv_.notify_all();
  }
  void Pass() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return !closed_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool closed_ = false;
};

class GatedStore final : public ForwardingStore {
 public:
  GatedStore(std::unique_ptr<Store> inner, std::shared_ptr<Gate> gate)
      : ForwardingStore(std::move(inner)), gate_(std::move(gate)) {}
  Status Commit(WriteBatch batch) override {
    gate_->Pass();
    return ForwardingStore::Commit(std::move(batch));
  }

 private:
  std::shared_ptr<Gate> gate_;
};

class StoreStallTest : public ServerFixture {
 protected:
  StoreStallTest() : ServerFixture("store-stall-test") {}
  void Tune(ServerOptions& o) override {
    const std::string path = dir_ + "/state.db";
    std::shared_ptr<Gate> gate = gate_;
    o.open_store = [path, gate]() -> StatusOr<std::unique_ptr<Store>> {
      TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<Store> inner, OpenSqliteStore(path, {}));
      return std::unique_ptr<Store>(std::make_unique<GatedStore>(std::move(inner), gate));
    };
  }
  nlohmann::json Health() {
    httplib::Result r = Client("").Get("/healthz");
    EXPECT_TRUE(r);
    EXPECT_EQ(r ? r->status : 0, 200);
    return r ? nlohmann::json::parse(r->body, nullptr, false) : nlohmann::json();
  }
  std::shared_ptr<Gate> gate_ = std::make_shared<Gate>();
};

TEST_F(StoreStallTest, HealthzIsDegradedWhileAWriteWaitsAndOkOnceTheStoreAnswers) {
  EXPECT_EQ(Health()["status"], "ok");
  gate_->Close();
  std::atomic<int> submitted{0};
  std::thread submit([&] {
    httplib::Client c = Client(team_a_);
    c.set_read_timeout(30, 0);
    httplib::Result r = c.Post("/v1/jobs", R"({"command": ["/bin/true"], "resources": {"gpus": 1}})",
                               "application/json");
    submitted = r ? r->status : -1;
  });
  // Degraded once a write has waited Server::kStoreStallAlert (2 s); reads still answer.
  nlohmann::json health;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (std::chrono::steady_clock::now() < until) {
    health = Health();
    if (health["status"] == "degraded") {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(health["status"], "degraded") << health.dump();
  EXPECT_GE(health.value("store_wait_s", 0.0), 2.0) << health.dump();
  EXPECT_NE(health.value("reason", "").find("state store"), std::string::npos) << health.dump();
  EXPECT_EQ(submitted, 0);  // still waiting with the store
  gate_->Open();
  submit.join();
  EXPECT_EQ(submitted, 201);
  EXPECT_EQ(Health()["status"], "ok");
}

}  // namespace
}  // namespace tessera
