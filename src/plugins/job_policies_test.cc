#include "plugins/job_policies.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "model/gpu_catalog.h"
#include "model/queue_tree.h"
#include "sched/job_order.h"

namespace tessera {
namespace {

constexpr Micros kSecond = 1'000'000;
constexpr Micros kHour = 3600 * kSecond;

SchedulerPolicy Parse(std::string_view spec) {
  StatusOr<SchedulerPolicy> p = ParseSchedulerPolicy(spec);
  EXPECT_TRUE(p.ok()) << spec << ": " << p.status().ToString();
  return p.ok() ? std::move(p).value() : SchedulerPolicy{};
}

// The error of a spec that must not parse.
std::string ParseError(std::string_view spec) {
  StatusOr<SchedulerPolicy> p = ParseSchedulerPolicy(spec);
  EXPECT_FALSE(p.ok()) << spec;
  if (p.ok()) {
    return "";
  }
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument) << spec;
  return p.status().message();
}

// What a preset is documented to be, field by field; everything else at its default.
struct Expected {
  std::string job_order = "fifo";
  std::string queue_order;
  bool strict_fifo = false;
  bool borrowing = true;
  bool preempt_priority = false;
  bool preempt_reclaim = false;
  bool preempt_las = false;
  bool preempt_srtf = false;
  bool lossless = false;
  Backfill backfill = Backfill::kNone;
  RuntimeSource runtime_source = RuntimeSource::kPredicted;
  Micros starvation_limit = 0;
  bool victims_by_cost = true;
  bool uses_predictor = false;
  Micros grace = 30 * kSecond;
  Micros checkpoint_wait = 0;
  double sjf_gpu_exponent = 1.0;
};

void ExpectPolicy(const SchedulerPolicy& p, const Expected& e) {
  SCOPED_TRACE(p.name);
  const SchedulerOptions& o = p.options;
  EXPECT_EQ(p.job_order, e.job_order);
  EXPECT_EQ(p.queue_order, e.queue_order);
  EXPECT_EQ(o.strict_fifo, e.strict_fifo);
  EXPECT_EQ(o.borrowing, e.borrowing);
  EXPECT_EQ(o.preempt_priority, e.preempt_priority);
  EXPECT_EQ(o.preempt_reclaim, e.preempt_reclaim);
  EXPECT_EQ(o.preempt_las, e.preempt_las);
  EXPECT_EQ(o.preempt_srtf, e.preempt_srtf);
  EXPECT_EQ(o.lossless_preemption, e.lossless);
  EXPECT_EQ(o.backfill, e.backfill);
  EXPECT_EQ(o.runtime_source, e.runtime_source);
  EXPECT_EQ(o.starvation_limit, e.starvation_limit);
  EXPECT_EQ(o.victims_by_cost, e.victims_by_cost);
  EXPECT_EQ(p.uses_predictor, e.uses_predictor);
  EXPECT_EQ(o.grace, e.grace);
  EXPECT_EQ(o.checkpoint_wait, e.checkpoint_wait);
  EXPECT_EQ(o.sjf_gpu_exponent, e.sjf_gpu_exponent);
  // Defaults no preset changes.
  EXPECT_EQ(p.fairshare_half_life, 7 * 24 * kHour);
  EXPECT_EQ(o.las_thresholds, (std::vector<double>{3200.0, 32000.0}));
}

TEST(JobPoliciesTest, PresetNamesIncludeTheDocumentedTenOnce) {
  const std::vector<std::string>& names = SchedulerPresetNames();
  for (const char* documented : {"fifo", "fifo-strict", "static-vc", "priority", "fairshare",
                                 "drf", "slurm", "tiresias", "srtf", "tessera"}) {
    EXPECT_EQ(std::count(names.begin(), names.end(), documented), 1) << documented;
  }
}

TEST(JobPoliciesTest, EveryPresetParsesWithItsDocumentedFeatures) {
  {
    Expected e;
    ExpectPolicy(Parse("fifo"), e);
  }
  {
    Expected e;
    e.strict_fifo = true;
    ExpectPolicy(Parse("fifo-strict"), e);
  }
  {
    Expected e;
    e.borrowing = false;
    ExpectPolicy(Parse("static-vc"), e);
  }
  {
    Expected e;
    e.job_order = "priority";
    e.preempt_priority = true;
    ExpectPolicy(Parse("priority"), e);
  }
  {
    Expected e;
    e.job_order = "priority";
    e.queue_order = "fairshare";
    ExpectPolicy(Parse("fairshare"), e);
  }
  {
    Expected e;
    e.job_order = "priority";
    e.queue_order = "drf";
    ExpectPolicy(Parse("drf"), e);
  }
  {
    Expected e;
    e.job_order = "priority";
    e.queue_order = "slurm";
    e.backfill = Backfill::kEasy;
    e.runtime_source = RuntimeSource::kUserLimit;
    ExpectPolicy(Parse("slurm"), e);
  }
  {
    Expected e;
    e.job_order = "las";
    e.preempt_las = true;
    e.victims_by_cost = false;
    ExpectPolicy(Parse("tiresias"), e);
  }
  {
    Expected e;
    e.job_order = "srtf";
    e.preempt_srtf = true;
    e.lossless = true;
    e.runtime_source = RuntimeSource::kOracle;
    ExpectPolicy(Parse("srtf"), e);
  }
  {
    Expected e;
    e.job_order = "las-sjf";
    e.preempt_reclaim = true;
    e.preempt_priority = true;
    e.preempt_las = true;
    e.victims_by_cost = false;
    e.uses_predictor = true;
    e.checkpoint_wait = 30 * 60 * kSecond;  // ckpt-grace: up to 30 min to reach a checkpoint
    e.sjf_gpu_exponent = 0.5;
    EXPECT_EQ(Parse("tessera").options.restart_amortization, 10);
    ExpectPolicy(Parse("tessera"), e);
  }
}

TEST(JobPoliciesTest, EveryPresetBuildsItsOrders) {
  for (const std::string& name : SchedulerPresetNames()) {
    SCOPED_TRACE(name);
    SchedulerPolicy p = Parse(name);
    EXPECT_EQ(p.name, name);
    StatusOr<std::unique_ptr<JobOrderPlugin>> order = MakeJobOrder(p.job_order, p.options);
    ASSERT_TRUE(order.ok()) << order.status().ToString();
    EXPECT_EQ(order.value()->name(), p.job_order);
    if (!p.queue_order.empty()) {
      StatusOr<std::unique_ptr<QueueOrderPlugin>> q = MakeQueueOrder(p.queue_order);
      ASSERT_TRUE(q.ok()) << q.status().ToString();
      EXPECT_EQ(q.value()->name(), p.queue_order);
    }
  }
}

TEST(JobPoliciesTest, PresetNamesAreTrimmed) {
  SchedulerPolicy p = Parse("  tessera ");
  EXPECT_EQ(p.name, "tessera");
  EXPECT_EQ(p.job_order, "las-sjf");
}

TEST(JobPoliciesTest, CombinationsSetEveryNamedFeature) {
  {
    SchedulerPolicy p = Parse("fairshare+fifo+reclaim+backfill");
    EXPECT_EQ(p.name, "fairshare+fifo+reclaim+backfill");
    Expected e;
    e.queue_order = "fairshare";
    e.preempt_reclaim = true;
    e.backfill = Backfill::kEasy;
    e.uses_predictor = true;
    ExpectPolicy(p, e);
  }
  {
    Expected e;
    e.job_order = "las";
    e.queue_order = "drf";
    e.preempt_las = true;
    e.preempt_srtf = true;
    e.starvation_limit = 2 * kHour;
    ExpectPolicy(Parse("drf+las+preempt-las+preempt-srtf+starve=2"), e);
  }
  {
    Expected e;
    e.job_order = "sjf";
    e.queue_order = "slurm";
    e.strict_fifo = true;
    e.borrowing = false;
    e.preempt_priority = true;
    e.backfill = Backfill::kEasy;
    e.runtime_source = RuntimeSource::kUserLimit;
    e.uses_predictor = true;  // sjf needs predictions even when backfill trusts limits
    ExpectPolicy(Parse(" slurm + sjf + strict + no-borrow + preempt + backfill-limit "), e);
  }
  {
    // Features alone: the job order stays fifo.
    Expected e;
    e.preempt_reclaim = true;
    ExpectPolicy(Parse("reclaim"), e);
  }
  // The users' level of fair share: off unless named, in no preset.
  EXPECT_TRUE(Parse("fairshare+fifo+fair-users").options.user_fair_share);
  for (const std::string& preset : SchedulerPresetNames()) {
    EXPECT_FALSE(Parse(preset).options.user_fair_share) << preset;
  }
}

TEST(JobPoliciesTest, ErrorsNameTheBadToken) {
  std::string m = ParseError("fairshare+fifo+bogus");
  EXPECT_NE(m.find("'bogus'"), std::string::npos) << m;
  // The message lists what is known, presets included.
  EXPECT_NE(m.find("preempt-las"), std::string::npos) << m;
  EXPECT_NE(m.find("tessera"), std::string::npos) << m;

  m = ParseError("nonsense");
  EXPECT_NE(m.find("'nonsense'"), std::string::npos) << m;

  m = ParseError("starve=0");
  EXPECT_NE(m.find("'starve=0'"), std::string::npos) << m;
  m = ParseError("fifo+starve=-3");
  EXPECT_NE(m.find("'starve=-3'"), std::string::npos) << m;
  m = ParseError("fifo+starve=soon");
  EXPECT_NE(m.find("'starve=soon'"), std::string::npos) << m;

  m = ParseError("fifo+las");
  EXPECT_NE(m.find("two job orders"), std::string::npos) << m;
  m = ParseError("fairshare+drf");
  EXPECT_NE(m.find("two queue orders"), std::string::npos) << m;

  m = ParseError("");
  EXPECT_NE(m.find("empty"), std::string::npos) << m;
  ParseError("   ");
  m = ParseError("fifo++strict");
  EXPECT_NE(m.find("''"), std::string::npos) << m;
  // Presets are not components of a combination.
  m = ParseError("fifo+tiresias");
  EXPECT_NE(m.find("'tiresias'"), std::string::npos) << m;
}

TEST(JobPoliciesTest, UnknownOrdersAreNamed) {
  StatusOr<std::unique_ptr<JobOrderPlugin>> j = MakeJobOrder("lifo", SchedulerOptions{});
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(j.status().message().find("'lifo'"), std::string::npos);
  StatusOr<std::unique_ptr<QueueOrderPlugin>> q = MakeQueueOrder("fifo");
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(q.status().message().find("'fifo'"), std::string::npos);
}

// ---------------------------------------------------------------------------------
// Job order keys.

std::unique_ptr<JobOrderPlugin> Order(std::string_view name, SchedulerOptions options = {}) {
  StatusOr<std::unique_ptr<JobOrderPlugin>> o = MakeJobOrder(name, options);
  EXPECT_TRUE(o.ok()) << o.status().ToString();
  return std::move(o).value();
}

JobRecord Job(Micros submit, int64_t gpu_milli = 1000) {
  JobRecord r;
  r.spec.submit_time = submit;
  r.gpu_milli = gpu_milli;
  return r;
}

TEST(JobPoliciesTest, FifoAndPriorityKeyBySubmission) {
  auto fifo = Order("fifo");
  auto priority = Order("priority");
  EXPECT_FALSE(fifo->by_priority());
  EXPECT_TRUE(priority->by_priority());
  JobRecord a = Job(10 * kSecond), b = Job(20 * kSecond);
  b.spec.priority = 100;  // ignored by the key itself
  EXPECT_DOUBLE_EQ(fifo->Key(a, 0), 10.0);
  EXPECT_DOUBLE_EQ(fifo->Key(b, 0), 20.0);
  EXPECT_DOUBLE_EQ(priority->Key(b, 0), 20.0);
  // The key does not move while the job waits.
  EXPECT_DOUBLE_EQ(fifo->Key(a, 5000 * kSecond), 10.0);
}

TEST(JobPoliciesTest, LasKeysByLevelThenSubmission) {
  auto las = Order("las");
  EXPECT_TRUE(las->by_priority());
  JobRecord early_served = Job(0);
  early_served.attained_gpu_seconds = 3200;  // level 1
  JobRecord late_fresh = Job(1'000'000 * kSecond);
  late_fresh.attained_gpu_seconds = 3199;  // level 0
  JobRecord early_fresh = Job(5 * kSecond);
  JobRecord most_served = Job(0);
  most_served.attained_gpu_seconds = 32000;  // level 2
  EXPECT_LT(las->Key(early_fresh, 0), las->Key(late_fresh, 0));
  EXPECT_LT(las->Key(late_fresh, 0), las->Key(early_served, 0));
  EXPECT_LT(las->Key(early_served, 0), las->Key(most_served, 0));
  // Within a level: submission time in seconds.
  EXPECT_DOUBLE_EQ(las->Key(early_fresh, 0), 5.0);
  EXPECT_DOUBLE_EQ(las->Key(early_served, 0) - las->Key(Job(0), 0),
                   las->Key(most_served, 0) - las->Key(early_served, 0));

  // The thresholds come from the options.
  SchedulerOptions o;
  o.las_thresholds = {10.0};
  auto custom = Order("las", o);
  JobRecord j = Job(0);
  j.attained_gpu_seconds = 10;
  JobRecord later = Job(100 * kSecond);
  later.attained_gpu_seconds = 9;
  EXPECT_LT(custom->Key(later, 0), custom->Key(j, 0));
  j.attained_gpu_seconds = 3200;  // still level 1 of one threshold
  JobRecord k = Job(0);
  k.attained_gpu_seconds = 1e6;
  EXPECT_DOUBLE_EQ(custom->Key(j, 0), custom->Key(k, 0));
}

TEST(JobPoliciesTest, SjfKeysByPredictedRemainingTimesGpus) {
  auto sjf = Order("sjf");
  JobRecord j = Job(0, 4000);
  j.predicted_runtime = 1000 * kSecond;
  j.resumed_from = 200 * kSecond;
  EXPECT_DOUBLE_EQ(sjf->Key(j, 0), 800.0 * 4);
  // At least a tenth of the prediction remains, however long it has run.
  j.resumed_from = 990 * kSecond;
  EXPECT_DOUBLE_EQ(sjf->Key(j, 0), 100.0 * 4);
  j.resumed_from = 5000 * kSecond;
  EXPECT_DOUBLE_EQ(sjf->Key(j, 0), 100.0 * 4);
  // A GPU share counts as one GPU; no prediction: the user's limit.
  JobRecord share = Job(0, 500);
  share.spec.runtime_limit = 600 * kSecond;
  EXPECT_DOUBLE_EQ(sjf->Key(share, 0), 600.0);
  // Short and wide against long and narrow: GPU-time decides.
  JobRecord wide = Job(0, 8000), narrow = Job(0, 1000);
  wide.predicted_runtime = 100 * kSecond;
  narrow.predicted_runtime = 700 * kSecond;
  EXPECT_LT(narrow.predicted_runtime * 1, wide.predicted_runtime * 8);
  EXPECT_LT(sjf->Key(narrow, 0), sjf->Key(wide, 0));
}

TEST(JobPoliciesTest, LasSjfKeysByLevelThenPredictedRemainingGpuTime) {
  SchedulerOptions o;
  o.sjf_gpu_exponent = 0.5;
  auto order = Order("las-sjf", o);
  EXPECT_EQ(order->name(), "las-sjf");
  // Level 0: shortest predicted remaining time x sqrt(GPUs) first, whatever the
  // submission order.
  JobRecord late_short = Job(1000 * kSecond, 4000);
  late_short.predicted_runtime = 100 * kSecond;
  JobRecord early_long = Job(0, 1000);
  early_long.predicted_runtime = 1000 * kSecond;
  EXPECT_DOUBLE_EQ(order->Key(late_short, 0), 100.0 * 2);
  EXPECT_LT(order->Key(late_short, 0), order->Key(early_long, 0));
  // A more-served job comes after every less-served one, however short its prediction:
  // a wrong prediction cannot keep a long job ahead.
  JobRecord served_quick = Job(0, 1000);
  served_quick.predicted_runtime = 1 * kSecond;
  served_quick.attained_gpu_seconds = 3200;
  EXPECT_LT(order->Key(early_long, 0), order->Key(served_quick, 0));
  JobRecord served_slow = served_quick;
  served_slow.predicted_runtime = 5000 * kSecond;
  EXPECT_LT(order->Key(served_quick, 0), order->Key(served_slow, 0));
  JobRecord most_served = Job(0, 1000);
  most_served.predicted_runtime = 1 * kSecond;
  most_served.attained_gpu_seconds = 32000;
  EXPECT_LT(order->Key(served_slow, 0), order->Key(most_served, 0));
  // A prediction beyond any level gap still keeps the job in its level.
  JobRecord huge = Job(0, 16000);
  huge.predicted_runtime = 4'000'000'000LL * kSecond;
  EXPECT_LT(order->Key(huge, 0), order->Key(served_quick, 0));
  SchedulerPolicy p = Parse("las-sjf+preempt-las");
  EXPECT_TRUE(p.uses_predictor);
}

// no-guess: a job the predictor knew nothing of is ranked by size, then arrival (the
// scheduler's tie-break), ahead of the level's ranked jobs and never by its limit; the
// LAS level still comes first. Without the token the limit ranks it, as before.
TEST(JobPoliciesTest, NoGuessRanksJobsWithoutHistoryBySizeNotByTheirLimit) {
  SchedulerOptions o;
  o.sjf_gpu_exponent = 0.5;
  o.sjf_no_guess = true;
  auto order = Order("las-sjf", o);
  JobRecord short_limit = Job(0, 4000), long_limit = Job(0, 4000), narrow = Job(0, 1000);
  for (JobRecord* j : {&short_limit, &long_limit, &narrow}) {
    j->runtime_guessed = true;
  }
  short_limit.predicted_runtime = short_limit.spec.runtime_limit = 600 * kSecond;
  long_limit.predicted_runtime = long_limit.spec.runtime_limit = 7 * 24 * 3600 * kSecond;
  narrow.predicted_runtime = narrow.spec.runtime_limit = 7 * 24 * 3600 * kSecond;
  // The same size: the same key whatever the limits say (arrival breaks the tie).
  EXPECT_DOUBLE_EQ(order->Key(short_limit, 0), order->Key(long_limit, 0));
  // The narrower first, although its limit is the longest.
  EXPECT_LT(order->Key(narrow, 0), order->Key(short_limit, 0));
  // Ahead of a ranked job with the shortest prediction, behind none of its level.
  JobRecord ranked = Job(0, 1000);
  ranked.predicted_runtime = 1 * kSecond;
  EXPECT_LT(order->Key(long_limit, 0), order->Key(ranked, 0));
  // A more-served unknown job still comes after every less-served one.
  JobRecord served = long_limit;
  served.attained_gpu_seconds = 3200;
  EXPECT_LT(order->Key(ranked, 0), order->Key(served, 0));
  // Plain sjf keeps it ahead of ranked jobs too.
  auto sjf = Order("sjf", o);
  EXPECT_LT(sjf->Key(long_limit, 0), sjf->Key(ranked, 0));
  // Without no-guess the limit ranks it.
  o.sjf_no_guess = false;
  auto plain = Order("las-sjf", o);
  EXPECT_LT(plain->Key(short_limit, 0), plain->Key(long_limit, 0));
  EXPECT_LT(plain->Key(ranked, 0), plain->Key(long_limit, 0));
  EXPECT_TRUE(Parse("las-sjf+no-guess").options.sjf_no_guess);
  EXPECT_FALSE(Parse("tessera").options.sjf_no_guess);
}

TEST(JobPoliciesTest, VictimsAndAmortizationTokens) {
  SchedulerPolicy p = Parse("las+preempt-las+victims-las+amortize=10");
  EXPECT_FALSE(p.options.victims_by_cost);
  EXPECT_EQ(p.options.restart_amortization, 10);
  EXPECT_EQ(Parse("las").options.restart_amortization, 0);
  EXPECT_TRUE(Parse("las").options.victims_by_cost);
  for (const char* bad : {"amortize=0", "amortize=-1", "amortize=x", "amortize=1001"}) {
    std::string m = ParseError(std::string("las+") + bad);
    EXPECT_NE(m.find(std::string("'") + bad + "'"), std::string::npos) << m;
  }
}

TEST(JobPoliciesTest, SrtfKeysByTrueRemainingTime) {
  auto srtf = Order("srtf");
  JobRecord j = Job(0, 8000);
  j.oracle_runtime = 1000 * kSecond;
  j.predicted_runtime = 10 * kSecond;  // ignored when the truth is known
  j.resumed_from = 300 * kSecond;
  EXPECT_DOUBLE_EQ(srtf->Key(j, 0), 700.0);  // not scaled by GPUs
  j.oracle_runtime = -1;
  j.predicted_runtime = 500 * kSecond;
  EXPECT_DOUBLE_EQ(srtf->Key(j, 0), 200.0);
  j.oracle_runtime = 100 * kSecond;
  EXPECT_DOUBLE_EQ(srtf->Key(j, 0), 0.0);  // never negative
}

// ---------------------------------------------------------------------------------
// Queue order keys.

TEST(JobPoliciesTest, QueueOrdersKeyByUsage) {
  QueueTreeSpec spec;
  for (const char* name : {"a", "b"}) {
    QueueNodeSpec n;
    n.name = name;
    spec.nodes.push_back(n);
  }
  StatusOr<QueueTree> tree = QueueTree::Create(spec, GpuCatalog::Default());
  ASSERT_TRUE(tree.ok());
  const QueueId a = tree.value().Find("a").value();
  const QueueId b = tree.value().Find("b").value();
  QueueUsage usage(tree.value(), 8000, 64000, 1024, 3600 * kSecond);
  Allocation alloc;
  alloc.node = NodeId(0);
  alloc.gpus = {{0, kWholeGpu, MiB(0)}, {1, kWholeGpu, MiB(0)}};
  usage.Add(a, {alloc});
  usage.Advance(60 * kSecond);

  auto fairshare = std::move(MakeQueueOrder("fairshare")).value();
  EXPECT_FALSE(fairshare->additive());
  EXPECT_DOUBLE_EQ(fairshare->Key(a, usage), -0.25);
  EXPECT_DOUBLE_EQ(fairshare->Key(b, usage), -1.0);  // the idle queue goes first

  auto drf = std::move(MakeQueueOrder("drf")).value();
  EXPECT_FALSE(drf->additive());
  EXPECT_DOUBLE_EQ(drf->Key(a, usage), 0.25);
  EXPECT_DOUBLE_EQ(drf->Key(b, usage), 0.0);

  // Slurm: additive with the job key (submit seconds): fair share is worth
  // 10 x PriorityMaxAge (7 days) of age.
  auto slurm = std::move(MakeQueueOrder("slurm")).value();
  EXPECT_TRUE(slurm->additive());
  const double week = 7 * 24 * 3600.0;
  EXPECT_DOUBLE_EQ(slurm->Key(a, usage), -10 * week * 0.25);
  EXPECT_DOUBLE_EQ(slurm->Key(b, usage), -10 * week * 1.0);
}

}  // namespace
}  // namespace tessera
