// Accounting without a controller, through a fake step on a manual clock and an
// in-memory store: ended intervals counted per tenant, the running jobs' intervals
// included up to now (in /metrics and in the usage API's rows), and the totals read back
// from the stored intervals after a restart.
#include "server/modules/accounting.h"

#include <gtest/gtest.h>

#include <limits>

#include <string>
#include <utility>
#include <vector>

#include "server/modules/fake_module_step.h"

namespace tessera {
namespace {

constexpr Micros kAccountingSec = 1'000'000;

class AccountingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    step_.now_us = 1'000 * kAccountingSec;
    step_.quota_gpus = {{"a", 4.0}, {"b", 2.0}, {"quiet", 1.0}};
  }
  // An interval ends as the core ends one: its row into the step's batch, then the hook.
  void End(uint64_t job, const std::string& tenant, Micros start, Micros end, int64_t milli) {
    step_.written.usage.push_back(UsageRow{job, tenant, "q", start, end, milli});
    accounting_.OnIntervalEnded(step_.written.usage.back());
  }
  // Job `id` of `tenant` running since `start` on `milli` milli-GPUs.
  void Run(uint64_t id, const std::string& tenant, Micros start, int64_t milli) {
    FakeModuleStep::Job& j = step_.jobs[id];
    j.tenant = tenant;
    j.record.phase = JobPhase::kRunning;
    j.record.run_start = start;
    j.record.gpu_milli = milli;
  }
  std::string Metrics(const Accounting& accounting) const {
    MetricsWriter w;
    accounting.WriteMetrics(step_, w);
    return w.Take();
  }
  static bool Has(const std::string& text, const std::string& line) {
    return text.find(line + "\n") != std::string::npos;
  }

  FakeModuleStep step_;
  Accounting accounting_;
};

TEST_F(AccountingTest, EndedIntervalsAreCountedPerTenant) {
  End(1, "a", 0, 100 * kAccountingSec, 2000);                    // 200 GPU-seconds
  End(2, "a", 50 * kAccountingSec, 150 * kAccountingSec, 500);   // 50
  End(3, "b", 0, 10 * kAccountingSec, 250);                      // 2.5: a share counts its part
  EXPECT_DOUBLE_EQ(accounting_.TenantGpuSeconds("a"), 250.0);
  EXPECT_DOUBLE_EQ(accounting_.TenantGpuSeconds("b"), 2.5);
  EXPECT_DOUBLE_EQ(accounting_.TenantGpuSeconds("nobody"), 0.0);

  const std::string text = Metrics(accounting_);
  EXPECT_TRUE(Has(text, "tessera_tenant_gpu_seconds_total{tenant=\"a\"} 250")) << text;
  EXPECT_TRUE(Has(text, "tessera_tenant_gpu_seconds_total{tenant=\"b\"} 2.5")) << text;
  // Every tenant of the queue configuration has its series, zeros when it held nothing.
  EXPECT_TRUE(Has(text, "tessera_tenant_gpu_seconds_total{tenant=\"quiet\"} 0")) << text;
  EXPECT_TRUE(Has(text, "tessera_tenant_gpus_in_use{tenant=\"quiet\"} 0")) << text;
  EXPECT_TRUE(Has(text, "tessera_tenant_gpus_in_use{tenant=\"a\"} 0")) << text;
}

TEST_F(AccountingTest, RunningIntervalsAreIncludedUpToNow) {
  End(1, "a", 0, 100 * kAccountingSec, 1000);                // 100 GPU-seconds ended
  Run(7, "a", 900 * kAccountingSec, 1500);                   // 150 more by now (t = 1,000 s)
  Run(8, "gone", 990 * kAccountingSec, 1000);                // a tenant the config no longer names
  step_.jobs[9].state = JobState::kPending;                  // holds nothing
  step_.used_gpu_milli[7] = 300;                             // what the other modules measured

  std::string text = Metrics(accounting_);
  EXPECT_TRUE(Has(text, "tessera_tenant_gpus_in_use{tenant=\"a\"} 1.5")) << text;
  EXPECT_TRUE(Has(text, "tessera_tenant_gpu_seconds_total{tenant=\"a\"} 250")) << text;
  EXPECT_TRUE(Has(text, "tessera_tenant_gpus_in_use{tenant=\"gone\"} 1")) << text;
  EXPECT_TRUE(Has(text, "tessera_tenant_gpu_seconds_total{tenant=\"gone\"} 10")) << text;
  step_.now_us += 100 * kAccountingSec;  // the running jobs' share grows with the clock
  text = Metrics(accounting_);
  EXPECT_TRUE(Has(text, "tessera_tenant_gpu_seconds_total{tenant=\"a\"} 400")) << text;
  EXPECT_DOUBLE_EQ(accounting_.TenantGpuSeconds("a"), 100.0) << "only ended intervals are kept";

  // The usage API's rows: each running job from its start up to now, measured use
  // filled in by the step, only those overlapping the window.
  std::vector<UsageRow> rows;
  Accounting::RunningIntervals(step_, 0, 2'000 * kAccountingSec, rows);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0], (UsageRow{7, "a", "q", 900 * kAccountingSec, step_.now_us, 1500, 300}));
  EXPECT_EQ(rows[1].job, 8u);
  EXPECT_EQ(rows[1].used_gpu_milli, -1) << "not measured";
  rows.clear();
  Accounting::RunningIntervals(step_, 0, 950 * kAccountingSec, rows);  // 8 starts after it
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].job, 7u);
  rows.clear();
  Accounting::RunningIntervals(step_, step_.now_us, step_.now_us + kAccountingSec, rows);
  EXPECT_TRUE(rows.empty()) << "a window from now on holds nothing of them yet";
}

TEST_F(AccountingTest, TotalsAreReadBackFromTheStoredIntervalsAfterARestart) {
  End(1, "a", 0, 100 * kAccountingSec, 2000);
  End(2, "b", 0, 30 * kAccountingSec, 428);  // a MIG slice's share
  End(3, "a", 200 * kAccountingSec, 260 * kAccountingSec, 1000);
  InMemoryStore store;
  ASSERT_TRUE(store.Commit(std::move(step_.written)).ok());

  Accounting restarted;
  StatusOr<std::vector<UsageRow>> stored = store.LoadUsage(0, std::numeric_limits<int64_t>::max());
  ASSERT_TRUE(stored.ok());
  restarted.OnStoredUsage(*stored);
  EXPECT_DOUBLE_EQ(restarted.TenantGpuSeconds("a"), 260.0);
  EXPECT_DOUBLE_EQ(restarted.TenantGpuSeconds("b"), accounting_.TenantGpuSeconds("b"));
  EXPECT_EQ(Metrics(restarted), Metrics(accounting_));

  // And it keeps counting from there.
  step_.written = WriteBatch{};
  End(4, "a", 300 * kAccountingSec, 310 * kAccountingSec, 1000);
  restarted.OnIntervalEnded(step_.written.usage.back());
  EXPECT_DOUBLE_EQ(restarted.TenantGpuSeconds("a"), 270.0);
  EXPECT_DOUBLE_EQ(accounting_.TenantGpuSeconds("a"), 270.0);
}

}  // namespace
}  // namespace tessera
