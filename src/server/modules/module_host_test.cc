// ModuleHost without a controller: recording modules on a fake step. Every hook reaches
// the modules in order (an attached one after the first, before the others), Stop in
// reverse; describe and metrics output is composed in that order; the node hold is the
// first non-empty one; Load stops at the first error. The modules handed to the host live
// as long as it does; CoreModules puts the core's own in their hook order.
#include "server/modules/module_host.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "api/agent_protocol.h"
#include "model/gpu_catalog.h"
#include "model/queue_tree.h"
#include "sched/job_lifecycle.h"
#include "server/modules/accounting.h"
#include "server/modules/core_modules.h"
#include "server/modules/fake_module_step.h"
#include "server/modules/gpu_health_module.h"
#include "server/modules/idle_module.h"
#include "server/modules/node_history.h"
#include "server/modules/restarts_module.h"
#include "server/modules/task_start_notes.h"
#include "server/modules/time_limits.h"

namespace tessera {
namespace module_host_test {

using Log = std::vector<std::string>;

// Writes "<name>.<hook>" to the shared log for every hook it hears.
class Recorder final : public ControllerModule {
 public:
  Recorder(std::string name, Log& log) : name_(std::move(name)), log_(&log) {}

  std::string hold;          // its NodeHold of any node
  Status load_status = Status::Ok();

  Status Load(Store& store) override {
    (void)store;
    Note("Load");
    return load_status;
  }
  void OnStoredUsage(const std::vector<UsageRow>& rows) override {
    (void)rows;
    Note("OnStoredUsage");
  }
  void BeforeCycle(ModuleStep& step) override {
    (void)step;
    Note("BeforeCycle");
  }
  void BeforeDecide(ModuleStep& step) override {
    (void)step;
    Note("BeforeDecide");
  }
  void OnJobAccepted(const JobFacts& job, ModuleStep& step) override {
    (void)job;
    (void)step;
    Note("OnJobAccepted");
  }
  void OnAttemptRunning(const JobFacts& job) override {
    (void)job;
    Note("OnAttemptRunning");
  }
  void OnOutput(JobNumber job, Micros now) override {
    (void)job;
    (void)now;
    Note("OnOutput");
  }
  void OnTelemetry(const NodeInfo& node, const std::vector<GpuTelemetry>& sample, bool comparable,
                   ModuleStep& step) override {
    (void)node;
    (void)sample;
    (void)comparable;
    (void)step;
    Note("OnTelemetry");
  }
  void OnUsage(UsageRow& row, int attempt, bool ended) override {
    (void)attempt;
    (void)ended;
    row.used_gpu_milli = static_cast<int64_t>(log_->size());
    Note("OnUsage");
  }
  void OnIntervalEnded(const UsageRow& row) override {
    (void)row;
    Note("OnIntervalEnded");
  }
  void OnAttemptEnded(const JobFacts& job, const EndedAttempt& ended,
                      nlohmann::json& stored_attempt, const ModuleStep& step) override {
    (void)job;
    (void)ended;
    (void)step;
    stored_attempt["by"].push_back(name_);
    Note("OnAttemptEnded");
  }
  void DescribeJob(const JobFacts& job, nlohmann::json& out) const override {
    (void)job;
    out["by"].push_back(name_);
  }
  void DescribeQueue(const std::string& queue, const std::string& queues_yaml,
                     nlohmann::json& out) override {
    (void)queues_yaml;
    out["by"].push_back(name_ + ":" + queue);
  }
  void WriteMetrics(const ModuleStep& step, MetricsWriter& w) const override {
    (void)step;
    w.Family("tessera_" + name_, MetricType::kGauge, "the module " + name_);
    w.Sample({}, 1);
  }
  std::string NodeHold(const std::string& node) const override {
    return hold.empty() ? "" : hold + ":" + node;
  }
  void OnJobEvent(const JobRecord& job, const LifecycleEvent& event,
                  const QueueTree& tree) override {
    (void)job;
    (void)event;
    (void)tree;
    Note("OnJobEvent");
  }
  void OnNodeJoined(const NodeInventory& inventory, ModuleStep& step) override {
    (void)inventory;
    (void)step;
    Note("OnNodeJoined");
  }
  void OnNodeRemoved(const std::string& name, ModuleStep& step) override {
    (void)name;
    (void)step;
    Note("OnNodeRemoved");
  }
  void Start() override { Note("Start"); }
  void Stop() override { Note("Stop"); }

 private:
  void Note(const std::string& hook) { log_->push_back(name_ + "." + hook); }

  std::string name_;
  Log* log_;
};

// "<name>.<hook>" for each name, in the order given.
Log Calls(const std::vector<std::string>& names, const std::string& hook) {
  Log out;
  for (const std::string& n : names) {
    out.push_back(n + "." + hook);
  }
  return out;
}

class ModuleHostTest : public ::testing::Test {
 protected:
  ModuleHostTest() { step_.jobs[7] = FakeModuleStep::Job{}; }

  // Runs `call` on the host and returns what the modules logged of it.
  template <typename F>
  Log Run(F call) {
    log_.clear();
    call();
    return log_;
  }

  Log log_;
  Recorder a_{"a", log_}, b_{"b", log_}, c_{"c", log_};
  ModuleHost host_{{&a_, &b_, &c_}};
  FakeModuleStep step_;
};

TEST_F(ModuleHostTest, EveryHookRunsInTheModulesOrder) {
  const std::vector<std::string> abc = {"a", "b", "c"};
  InMemoryStore store;
  const JobFacts job = step_.FactsOf(7);
  NodeInfo node;
  UsageRow row;
  nlohmann::json stored = nlohmann::json::object();
  const QueueTree tree = QueueTree::Unlimited(GpuCatalog::Default());
  const JobRecord record;
  EXPECT_EQ(Run([&] { EXPECT_TRUE(host_.Load(store).ok()); }), Calls(abc, "Load"));
  EXPECT_EQ(Run([&] { host_.OnStoredUsage({}); }), Calls(abc, "OnStoredUsage"));
  EXPECT_EQ(Run([&] { host_.BeforeCycle(step_); }), Calls(abc, "BeforeCycle"));
  EXPECT_EQ(Run([&] { host_.BeforeDecide(step_); }), Calls(abc, "BeforeDecide"));
  EXPECT_EQ(Run([&] { host_.OnJobAccepted(job, step_); }), Calls(abc, "OnJobAccepted"));
  EXPECT_EQ(Run([&] { host_.OnAttemptRunning(job); }), Calls(abc, "OnAttemptRunning"));
  EXPECT_EQ(Run([&] { host_.OnOutput(JobNumber(7), 5); }), Calls(abc, "OnOutput"));
  EXPECT_EQ(Run([&] { host_.OnTelemetry(node, {}, true, step_); }), Calls(abc, "OnTelemetry"));
  EXPECT_EQ(Run([&] { host_.OnAttemptEnded(job, EndedAttempt{}, stored, step_); }),
            Calls(abc, "OnAttemptEnded"));
  EXPECT_EQ(stored["by"], nlohmann::json({"a", "b", "c"}));
  EXPECT_EQ(Run([&] { host_.OnJobEvent(record, LifecycleEvent{}, tree); }),
            Calls(abc, "OnJobEvent"));
  EXPECT_EQ(Run([&] { host_.OnNodeJoined(NodeInventory{}, step_); }), Calls(abc, "OnNodeJoined"));
  EXPECT_EQ(Run([&] { host_.OnNodeRemoved("n1", step_); }), Calls(abc, "OnNodeRemoved"));
  EXPECT_EQ(Run([&] { host_.Start(); }), Calls(abc, "Start"));
  EXPECT_EQ(Run([&] { host_.OnUsage(row, 1, /*ended=*/false); }), Calls(abc, "OnUsage"));
  EXPECT_EQ(row.used_gpu_milli, 2);  // the last module's OnUsage ran last
}

TEST_F(ModuleHostTest, StopRunsInReverseOrder) {
  EXPECT_EQ(Run([&] { host_.Stop(); }), Calls({"c", "b", "a"}, "Stop"));
}

// Every module's OnUsage before any OnIntervalEnded: the row is complete when counted.
TEST_F(ModuleHostTest, AnEndedIntervalIsCountedOnceEveryModuleFilledItIn) {
  UsageRow row;
  Log want = Calls({"a", "b", "c"}, "OnUsage");
  for (const std::string& s : Calls({"a", "b", "c"}, "OnIntervalEnded")) {
    want.push_back(s);
  }
  EXPECT_EQ(Run([&] { host_.OnUsage(row, 1, /*ended=*/true); }), want);
}

TEST_F(ModuleHostTest, AttachedModulesRunAfterTheFirstAndBeforeTheOthers) {
  Recorder x{"x", log_}, y{"y", log_};
  Log after;
  host_.Attach(x, [&after] { after.push_back("x"); });
  host_.Attach(y);  // no after-cycle callback
  EXPECT_EQ(Run([&] { host_.BeforeCycle(step_); }),
            Calls({"a", "x", "y", "b", "c"}, "BeforeCycle"));
  EXPECT_EQ(Run([&] { host_.Start(); }), Calls({"a", "x", "y", "b", "c"}, "Start"));
  EXPECT_EQ(Run([&] { host_.Stop(); }), Calls({"c", "b", "y", "x", "a"}, "Stop"));
  host_.AfterCycle();
  host_.AfterCycle();
  EXPECT_EQ(after, Log({"x", "x"}));
}

TEST_F(ModuleHostTest, DescriptionsAndMetricsAreComposedInOrder) {
  Recorder x{"x", log_};
  host_.Attach(x);
  nlohmann::json job = nlohmann::json::object();
  host_.DescribeJob(step_.FactsOf(7), job);
  EXPECT_EQ(job["by"], nlohmann::json({"a", "x", "b", "c"}));
  nlohmann::json queue = nlohmann::json::object();
  host_.DescribeQueue("q1", "", queue);
  EXPECT_EQ(queue["by"], nlohmann::json({"a:q1", "x:q1", "b:q1", "c:q1"}));
  MetricsWriter w;
  host_.WriteMetrics(step_, w);
  const std::string text = w.Take();
  const size_t a = text.find("tessera_a "), x_at = text.find("tessera_x "),
               b = text.find("tessera_b "), c = text.find("tessera_c ");
  ASSERT_NE(c, std::string::npos) << text;
  EXPECT_LT(a, x_at);
  EXPECT_LT(x_at, b);
  EXPECT_LT(b, c);
}

TEST_F(ModuleHostTest, TheNodeHoldIsTheFirstModulesNonEmptyOne) {
  EXPECT_EQ(host_.NodeHold("n1"), "");
  c_.hold = "c-check";
  EXPECT_EQ(host_.NodeHold("n1"), "c-check:n1");
  b_.hold = "b-check";
  EXPECT_EQ(host_.NodeHold("n1"), "b-check:n1");
  Recorder x{"x", log_};
  x.hold = "x-check";
  host_.Attach(x);
  EXPECT_EQ(host_.NodeHold("n1"), "x-check:n1");
}

TEST_F(ModuleHostTest, LoadStopsAtTheFirstError) {
  InMemoryStore store;
  b_.load_status = InternalError("unreadable");
  Status s = Status::Ok();
  EXPECT_EQ(Run([&] { s = host_.Load(store); }), Log({"a.Load", "b.Load"}));
  EXPECT_EQ(s.message(), "unreadable");
}

// Sets `*gone` when destroyed.
class Mortal final : public ControllerModule {
 public:
  explicit Mortal(bool* gone) : gone_(gone) {}
  ~Mortal() override { *gone_ = true; }

 private:
  bool* gone_;
};

TEST(ModuleHostOwnershipTest, ModulesHandedOverLiveAsLongAsTheHost) {
  Log log;
  Recorder outside{"outside", log};
  bool gone = false;
  {
    ModuleHost host;
    host.Add(outside);
    host.Add(std::make_unique<Mortal>(&gone));
    ModuleHost moved = std::move(host);  // as the controller's constructor keeps it
    ASSERT_EQ(moved.modules().size(), 2U);
    EXPECT_EQ(moved.modules()[0], &outside);
    moved.Start();
    EXPECT_EQ(log, Log({"outside.Start"}));
    EXPECT_FALSE(gone);
  }
  EXPECT_TRUE(gone);
}

// The controller's own modules, in the order its hooks have always run them.
TEST(CoreModulesTest, TheCoresModulesInTheirHookOrder) {
  EtaModule eta({}, {});
  JobGatesModule gates;
  ModuleHost host = CoreModules(GpuHealthOptions{}, GpuCatalog::Default(), eta, gates);
  const std::vector<ControllerModule*>& m = host.modules();
  ASSERT_EQ(m.size(), 9U);
  EXPECT_NE(dynamic_cast<Accounting*>(m[0]), nullptr);
  EXPECT_NE(dynamic_cast<TimeLimits*>(m[1]), nullptr);
  EXPECT_NE(dynamic_cast<GpuHealthModule*>(m[2]), nullptr);
  EXPECT_NE(dynamic_cast<IdleModule*>(m[3]), nullptr);
  EXPECT_EQ(m[4], &eta);
  EXPECT_NE(dynamic_cast<NodeHistory*>(m[5]), nullptr);
  EXPECT_EQ(m[6], &gates);
  EXPECT_NE(dynamic_cast<RestartsModule*>(m[7]), nullptr);
  EXPECT_NE(dynamic_cast<TaskStartNotes*>(m[8]), nullptr);
  Log log;
  Recorder attached{"attached", log};
  host.Attach(attached);
  EXPECT_EQ(host.modules()[1], &attached);  // right after Accounting
}

// The launch and report hooks: every module adds to a launch and hears a report (the
// view changed when any module's did); a job's note is the first module's that has one.
class Noter final : public ControllerModule {
 public:
  explicit Noter(std::string note) : note_(std::move(note)) {}
  void OnLaunch(const std::string& tenant, const JobSubmission& job,
                TaskLaunch& launch) const override {
    (void)job;
    launch.env[note_] = tenant;
  }
  bool OnTaskReport(const TaskReport& report) override {
    ++reports;
    return report.message == note_;
  }
  std::string JobNote(JobNumber job, int attempt) const override {
    return job.value() == 1 && attempt == 0 ? note_ : "";
  }
  int reports = 0;

 private:
  std::string note_;
};

TEST(ModuleHostHooksTest, LaunchesReportsAndNotesReachEveryModuleInOrder) {
  Noter first("first"), second("second");
  ModuleHost host;
  host.Add(first);
  host.Add(second);
  TaskLaunch launch;
  host.OnLaunch("team-a", JobSubmission{}, launch);
  EXPECT_EQ(launch.env,
            (std::map<std::string, std::string>{{"first", "team-a"}, {"second", "team-a"}}));
  TaskReport report;
  report.message = "second";
  EXPECT_TRUE(host.OnTaskReport(report));
  report.message = "neither";
  EXPECT_FALSE(host.OnTaskReport(report));
  EXPECT_EQ(first.reports, 2);
  EXPECT_EQ(second.reports, 2);
  EXPECT_EQ(host.JobNote(JobNumber(1), 0), "first");
  EXPECT_EQ(host.JobNote(JobNumber(1), 1), "");
}

}  // namespace module_host_test
}  // namespace tessera
