// A controller driven directly by tests: a manual clock, a SQLite store in a scratch
// directory, and a node agent played by the test through Register and Heartbeat.
// Thread safety: one test thread.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "api/job_codec.h"
#include "server/controller.h"
#include "server/http/server.h"
#include "server/http/server_fixture.h"
#include "server/services/cluster_views.h"
#include "server/services/job_actions.h"
#include "server/services/job_reads.h"
#include "server/services/node_actions.h"
#include "server/services/validation_service.h"
#include "store/sqlite_store.h"

namespace tessera {

constexpr Micros kSecond = 1'000'000;
constexpr Micros kMinute = 60 * kSecond;
constexpr Micros kHour = 60 * kMinute;
constexpr Micros kT0 = 1'800'000'000LL * kSecond;  // 2027-01-15

class ControllerTest : public ScratchDirTest {
 protected:
  ControllerTest() : ScratchDirTest("controller-test") {}

  void SetUp() override {
    ScratchDirTest::SetUp();
    if (HasFatalFailure()) {
      return;
    }
    Reopen();
  }
  void TearDown() override {
    controller_.reset();
    validation_.reset();  // after the controller, which calls its module
    store_.reset();
    ScratchDirTest::TearDown();
  }

  // Opens (again) the controller on the same store file, as after a restart.
  void Reopen() {
    controller_.reset();
    validation_.reset();
    store_.reset();
    auto store = SqliteStore::Open(dir_ + "/state.db");
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
    ControllerOptions options;
    options.data_dir = dir_;
    options.node_timeout = 1000 * kHour;  // the test's agent never times out
    Tune(options);
    auto c = Controller::Open(options, store_.get(), catalog(), clock_, DefaultQueuesYaml());
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    controller_ = std::move(c).value();
    auto v = ValidationService::Open(*controller_);  // attached as the server attaches it
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    validation_ = std::move(v).value();
  }

  // Changes to the options of every (re)opened controller.
  virtual void Tune(ControllerOptions& /*options*/) {}

  static const GpuCatalog& catalog() { return GpuCatalog::Default(); }

  // node-1: GPUs 0-1 whole H100s, 2 an A100 in MIG mode, 3 an A100 for shares.
  RegisterRequest Inventory() const {
    RegisterRequest r;
    r.agent_id = agent_id_;
    NodeSpec& spec = r.inventory.spec;
    spec.name = "node-1";
    spec.cpu = MilliCpu(64000);
    spec.memory = MiB(512 * 1024);
    const GpuModelId h100 = catalog().Find("H100-80GB").value();
    const GpuModelId a100 = catalog().Find("A100-80GB").value();
    spec.gpus = {GpuSpec{h100, SharingMode::kExclusive, 0, 0}, GpuSpec{h100, SharingMode::kExclusive, 0, 0},
                 GpuSpec{a100, SharingMode::kMig, 0, -1}, GpuSpec{a100, SharingMode::kShared, 0, -1}};
    r.inventory.gpu_uuids = {"GPU-0", "GPU-1", "GPU-2", "GPU-3"};
    r.inventory.mig_instances.resize(4);
    return r;
  }

  void Register() {
    RegisterRequest request = Inventory();
    request.tasks = Running();
    auto r = controller_->Register(request, "127.0.0.1");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }

  uint64_t Submit(const std::string& tenant, const std::string& yaml) {
    StatusOr<JobSubmission> job = ParseJobYaml(yaml, catalog());
    EXPECT_TRUE(job.ok()) << job.status().ToString();
    auto out = controller_->intake().Submit(Principal{Role::kTenant, tenant, "test"},
                                            std::move(job).value(), "");
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    return out.ok() ? out->jobs.front().value() : 0;  // an array's: its first element's
  }

  // One cycle, then a heartbeat that takes the launches; returns them.
  std::vector<TaskLaunch> CycleAndTake(std::vector<GpuTelemetry> telemetry = {}) {
    EXPECT_TRUE(controller_->RunCycle().ok());
    HeartbeatRequest hb{"node-1", agent_id_, Running(), std::move(telemetry)};
    auto r = controller_->Heartbeat(hb);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    for (const TaskLaunch& l : r->launch) {
      running_[l.key.job] = l.key;
    }
    return r.ok() ? r->launch : std::vector<TaskLaunch>{};
  }

  // A pass of the scheduling loop with the validation runs: the cycle, then the
  // validation pass (two seconds later, past its once-a-second throttle), then a
  // heartbeat that takes the launches.
  std::vector<TaskLaunch> ValidationPass() {
    clock_.Advance(2 * kSecond);
    EXPECT_TRUE(controller_->RunCycle().ok());
    validation_->Step();
    return CycleAndTake();
  }

  std::vector<TaskReport> Running() const {
    std::vector<TaskReport> out;
    for (const auto& [job, key] : running_) {
      TaskReport t;
      t.key = key;
      out.push_back(t);
    }
    return out;
  }

  // The job's task exits with `code`.
  void Exit(uint64_t job, int code = 0) {
    TaskReport t;
    t.key = running_.at(job);
    t.state = TaskState::kExited;
    t.exit_code = code;
    running_.erase(job);
    std::vector<TaskReport> reports = Running();
    reports.push_back(t);
    auto r = controller_->Heartbeat(HeartbeatRequest{"node-1", agent_id_, reports, {}});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }

  std::map<std::string, double> UsageByTenant(Micros since, Micros until) {
    auto u = Views().Usage(since, until, "tenant");
    EXPECT_TRUE(u.ok()) << u.status().ToString();
    std::map<std::string, double> out;
    for (const auto& row : (*u)["rows"]) {
      out[row["key"].get<std::string>()] = row["gpu_hours"].get<double>();
    }
    return out;
  }

  std::vector<GpuTelemetry> Healthy() const {
    std::vector<GpuTelemetry> out(4);
    for (int g = 0; g < 4; ++g) {
      out[static_cast<size_t>(g)].index = g;
      out[static_cast<size_t>(g)].uuid = "GPU-" + std::to_string(g);
      out[static_cast<size_t>(g)].temp_c = 40;
    }
    return out;
  }

  // Users' actions on jobs (cancel, hold, release, requeue) over the open controller.
  JobActions Actions() { return JobActions(*controller_); }
  // The API's job reads (a job, the listing, logs, a terminal).
  JobReads Reads() { return JobReads(*controller_); }
  // The admin's actions on nodes (drain, resume, fence, loss, removal).
  NodeActions NodeAdmin() { return NodeActions(*controller_); }
  // The cluster-wide reads (nodes, queues, tenants, metrics, usage, history).
  ClusterViews Views() { return ClusterViews(*controller_, *store_); }

  ManualClock clock_{kT0};
  std::string agent_id_ = "agent-1";
  std::unique_ptr<SqliteStore> store_;
  std::unique_ptr<ValidationService> validation_;  // the validation runs (attached)
  std::unique_ptr<Controller> controller_;
  std::map<uint64_t, TaskKey> running_;
};

}  // namespace tessera
