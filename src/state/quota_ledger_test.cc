#include "state/quota_ledger.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/rng.h"
#include "base/strings.h"

namespace tessera {
namespace {

const GpuCatalog& Catalog() { return GpuCatalog::Default(); }

constexpr ResourceName kGpu{ResourceKind::kGpu, GpuModelId()};
constexpr ResourceName kCpu{ResourceKind::kCpu, GpuModelId()};

QueueQuota Q(ResourceName r, int64_t nominal, std::optional<int64_t> borrowing_limit = {},
             std::optional<int64_t> lending_limit = {}) {
  return {r, Quota{nominal, borrowing_limit, lending_limit}};
}

QueueNodeSpec Node(std::string name, bool cohort, std::string parent,
                   std::vector<QueueQuota> quotas = {}) {
  QueueNodeSpec n;
  n.name = std::move(name);
  n.cohort = cohort;
  n.parent = std::move(parent);
  n.quotas = std::move(quotas);
  return n;
}
QueueNodeSpec Cohort(std::string name, std::string parent, std::vector<QueueQuota> quotas = {}) {
  return Node(std::move(name), true, std::move(parent), std::move(quotas));
}
QueueNodeSpec Queue(std::string name, std::string parent, std::vector<QueueQuota> quotas = {}) {
  return Node(std::move(name), false, std::move(parent), std::move(quotas));
}

QueueTree Build(std::vector<QueueNodeSpec> nodes) {
  QueueTreeSpec spec;
  spec.nodes = std::move(nodes);
  StatusOr<QueueTree> tree = QueueTree::Create(std::move(spec), Catalog());
  EXPECT_TRUE(tree.ok()) << tree.status().ToString();
  return std::move(tree).value();
}

QueueId Id(const QueueTree& tree, std::string_view name) { return *tree.Find(name); }

std::string AllViolations(const QuotaLedger& ledger) { return Join(ledger.Violations(), "\n"); }

// Kueue's simplest case: a queue without a cohort admits up to its nominal quota.
TEST(QuotaLedgerTest, QueueWithinNominal) {
  QueueTree tree = Build({Queue("a", "", {Q(kGpu, 10)})});
  QuotaLedger ledger(tree);
  QueueId a = Id(tree, "a");
  EXPECT_EQ(ledger.SubtreeQuota(a, 0), 10);
  EXPECT_EQ(ledger.Guaranteed(a, 0), 0);
  EXPECT_EQ(ledger.Available(a, 0), 10);

  EXPECT_EQ(ledger.Check(a, {6}), QuotaFit::kNominal);
  ledger.Add(a, {6});
  EXPECT_EQ(ledger.Usage(a, 0), 6);
  EXPECT_EQ(ledger.Available(a, 0), 4);
  EXPECT_EQ(ledger.Check(a, {4}), QuotaFit::kNominal);
  EXPECT_EQ(ledger.Check(a, {5}), QuotaFit::kNo);
  EXPECT_FALSE(ledger.IsBorrowing(a));
  EXPECT_TRUE(ledger.Violations().empty());

  ledger.Remove(a, {6});
  EXPECT_EQ(ledger.Usage(a, 0), 0);
  EXPECT_EQ(ledger.Available(a, 0), 10);
}

// Two queues of 10 in a cohort without quota of its own: one may borrow the other's
// unused quota, and then the other can use only what is left.
TEST(QuotaLedgerTest, BorrowsUnusedQuotaFromSibling) {
  QueueTree tree = Build(
      {Cohort("org", ""), Queue("a", "org", {Q(kGpu, 10)}), Queue("b", "org", {Q(kGpu, 10)})});
  QuotaLedger ledger(tree);
  QueueId org = Id(tree, "org"), a = Id(tree, "a"), b = Id(tree, "b");
  EXPECT_EQ(ledger.SubtreeQuota(org, 0), 20);
  EXPECT_EQ(ledger.Available(a, 0), 20);

  EXPECT_EQ(ledger.Check(a, {10}), QuotaFit::kNominal);
  EXPECT_EQ(ledger.Check(a, {15}), QuotaFit::kBorrow);
  EXPECT_EQ(ledger.Check(a, {15}, /*allow_borrowing=*/false), QuotaFit::kNo);
  EXPECT_EQ(ledger.Check(a, {21}), QuotaFit::kNo);

  ledger.Add(a, {15});
  EXPECT_EQ(ledger.Usage(a, 0), 15);
  EXPECT_EQ(ledger.Usage(org, 0), 15);
  EXPECT_TRUE(ledger.IsBorrowing(a));
  EXPECT_FALSE(ledger.IsBorrowing(b));
  EXPECT_FALSE(ledger.IsBorrowing(org));
  EXPECT_EQ(ledger.Available(a, 0), 5);
  EXPECT_EQ(ledger.Available(b, 0), 5);
  // b's own nominal quota is lent out: within nominal is not enough to fit now.
  EXPECT_EQ(ledger.Check(b, {5}), QuotaFit::kNominal);
  EXPECT_EQ(ledger.Check(b, {6}), QuotaFit::kNo);
  EXPECT_TRUE(ledger.Violations().empty()) << AllViolations(ledger);

  ledger.Add(b, {5});
  EXPECT_EQ(ledger.Usage(org, 0), 20);
  EXPECT_EQ(ledger.Available(a, 0), 0);
  EXPECT_EQ(ledger.Check(a, {1}), QuotaFit::kNo);

  ledger.Remove(a, {15});
  ledger.Remove(b, {5});
  EXPECT_EQ(ledger.Usage(org, 0), 0);
  EXPECT_EQ(ledger.Available(b, 0), 20);
}

TEST(QuotaLedgerTest, BorrowingLimitCapsBorrowing) {
  QueueTree tree =
      Build({Cohort("org", ""), Queue("a", "org", {Q(kGpu, 10, /*borrowing_limit=*/2)}),
             Queue("b", "org", {Q(kGpu, 10)})});
  QuotaLedger ledger(tree);
  QueueId a = Id(tree, "a"), b = Id(tree, "b");
  EXPECT_EQ(ledger.Available(a, 0), 12);
  EXPECT_EQ(ledger.Available(b, 0), 20);
  EXPECT_EQ(ledger.Check(a, {12}), QuotaFit::kBorrow);
  EXPECT_EQ(ledger.Check(a, {13}), QuotaFit::kNo);

  ledger.Add(a, {11});
  EXPECT_EQ(ledger.Available(a, 0), 1);
  EXPECT_EQ(ledger.Check(a, {1}), QuotaFit::kBorrow);
  EXPECT_EQ(ledger.Check(a, {2}), QuotaFit::kNo);
  EXPECT_EQ(ledger.Available(b, 0), 9);

  // The limit binds only while the cohort has room: with b using 9, a's one
  // remaining unit of borrowing is still there, then nothing.
  ledger.Add(b, {8});
  EXPECT_EQ(ledger.Available(a, 0), 1);
  ledger.Add(b, {1});
  EXPECT_EQ(ledger.Available(a, 0), 0);
  EXPECT_TRUE(ledger.Violations().empty()) << AllViolations(ledger);

  // Forcing past the limit (bypassing Check) is reported, naming node and resource.
  ledger.Remove(b, {9});
  ledger.Add(a, {2});
  std::vector<std::string> v = ledger.Violations();
  ASSERT_EQ(v.size(), 1u) << AllViolations(ledger);
  EXPECT_NE(v[0].find("queue 'a'"), std::string::npos) << v[0];
  EXPECT_NE(v[0].find("gpu"), std::string::npos) << v[0];
  EXPECT_NE(v[0].find("13"), std::string::npos) << v[0];
  EXPECT_NE(v[0].find("borrowing limit 2"), std::string::npos) << v[0];
}

// a lends at most 4 of its 10: 6 stay guaranteed to it whatever b does.
TEST(QuotaLedgerTest, LendingLimitKeepsPartOfTheQuotaUnlendable) {
  QueueTree tree =
      Build({Cohort("org", ""),
             Queue("a", "org", {Q(kGpu, 10, /*borrowing_limit=*/{}, /*lending_limit=*/4)}),
             Queue("b", "org", {Q(kGpu, 10)})});
  QuotaLedger ledger(tree);
  QueueId org = Id(tree, "org"), a = Id(tree, "a"), b = Id(tree, "b");
  EXPECT_EQ(ledger.Guaranteed(a, 0), 6);
  EXPECT_EQ(ledger.Guaranteed(b, 0), 0);
  EXPECT_EQ(ledger.SubtreeQuota(a, 0), 10);
  EXPECT_EQ(ledger.SubtreeQuota(org, 0), 14);
  EXPECT_EQ(ledger.Available(b, 0), 14);
  EXPECT_EQ(ledger.Available(a, 0), 20);

  EXPECT_EQ(ledger.Check(b, {15}), QuotaFit::kNo);
  EXPECT_EQ(ledger.Check(b, {14}), QuotaFit::kBorrow);
  ledger.Add(b, {14});
  EXPECT_EQ(ledger.Usage(org, 0), 14);
  EXPECT_EQ(ledger.Available(a, 0), 6);
  EXPECT_EQ(ledger.Check(a, {6}), QuotaFit::kNominal);
  EXPECT_EQ(ledger.Check(a, {7}), QuotaFit::kNo);
  ledger.Add(a, {6});
  EXPECT_EQ(ledger.Usage(org, 0), 14) << "a's use of its guaranteed part stays local";
  EXPECT_TRUE(ledger.Violations().empty()) << AllViolations(ledger);
}

TEST(QuotaLedgerTest, UsageBeyondGuaranteedAppearsInParent) {
  QueueTree tree =
      Build({Cohort("org", ""), Cohort("team", "org", {Q(kGpu, 0, {}, 0)}),
             Queue("a", "team", {Q(kGpu, 10, {}, 4)}), Queue("b", "org", {Q(kGpu, 10)})});
  QuotaLedger ledger(tree);
  QueueId org = Id(tree, "org"), team = Id(tree, "team"), a = Id(tree, "a");
  // team lends nothing upward: its 4 (what a lends) stay in it.
  EXPECT_EQ(ledger.SubtreeQuota(team, 0), 4);
  EXPECT_EQ(ledger.Guaranteed(team, 0), 4);
  EXPECT_EQ(ledger.SubtreeQuota(org, 0), 10);

  ledger.Add(a, {5});
  EXPECT_EQ(ledger.Usage(a, 0), 5);
  EXPECT_EQ(ledger.Usage(team, 0), 0);
  EXPECT_EQ(ledger.Usage(org, 0), 0);
  ledger.Add(a, {3});  // 8: 2 beyond a's guaranteed 6
  EXPECT_EQ(ledger.Usage(team, 0), 2);
  EXPECT_EQ(ledger.Usage(org, 0), 0);
  ledger.Add(a, {4});  // 12: 6 beyond a's guaranteed, 2 beyond team's
  EXPECT_EQ(ledger.Usage(team, 0), 6);
  EXPECT_EQ(ledger.Usage(org, 0), 2);
  EXPECT_TRUE(ledger.Violations().empty()) << AllViolations(ledger);

  ledger.Remove(a, {7});  // 5
  EXPECT_EQ(ledger.Usage(team, 0), 0);
  EXPECT_EQ(ledger.Usage(org, 0), 0);
  ledger.Remove(a, {5});
  EXPECT_EQ(ledger.Usage(a, 0), 0);
}

// Kueue's hierarchical cohorts: org holds 4 of its own; research (a nested cohort)
// may borrow at most 2 beyond its queues' 6.
//   org {4} ── research {bl 2} ── r1 {4}, r2 {2}
//           └─ prod {6}
TEST(QuotaLedgerTest, HierarchicalCohortsWithOwnQuotaAndNestedBorrowingLimit) {
  QueueTree tree =
      Build({Cohort("org", "", {Q(kGpu, 4)}),
             Cohort("research", "org", {Q(kGpu, 0, /*borrowing_limit=*/2)}),
             Queue("r1", "research", {Q(kGpu, 4)}), Queue("r2", "research", {Q(kGpu, 2)}),
             Queue("prod", "org", {Q(kGpu, 6)})});
  QuotaLedger ledger(tree);
  QueueId org = Id(tree, "org"), research = Id(tree, "research");
  QueueId r1 = Id(tree, "r1"), r2 = Id(tree, "r2"), prod = Id(tree, "prod");
  EXPECT_EQ(ledger.SubtreeQuota(research, 0), 6);
  EXPECT_EQ(ledger.SubtreeQuota(org, 0), 16);
  EXPECT_EQ(ledger.Available(prod, 0), 16);
  EXPECT_EQ(ledger.Available(research, 0), 8);
  EXPECT_EQ(ledger.Available(r1, 0), 8);

  EXPECT_EQ(ledger.Check(r1, {8}), QuotaFit::kBorrow);
  EXPECT_EQ(ledger.Check(r1, {9}), QuotaFit::kNo);
  ledger.Add(r1, {8});
  EXPECT_EQ(ledger.Usage(research, 0), 8);
  EXPECT_EQ(ledger.Usage(org, 0), 8);
  EXPECT_TRUE(ledger.IsBorrowing(research));
  EXPECT_FALSE(ledger.IsBorrowing(org));
  // org still has 8, but research has used up its borrowing limit.
  EXPECT_EQ(ledger.Available(org, 0), 8);
  EXPECT_EQ(ledger.Available(r2, 0), 0);
  EXPECT_EQ(ledger.Check(r2, {1}), QuotaFit::kNo);
  // prod gets its 6 plus org's own 4... minus what research took beyond its 6.
  EXPECT_EQ(ledger.Available(prod, 0), 8);
  EXPECT_EQ(ledger.Check(prod, {8}), QuotaFit::kBorrow);
  ledger.Add(prod, {8});
  EXPECT_EQ(ledger.Usage(org, 0), 16);
  EXPECT_EQ(ledger.Available(r1, 0), 0);
  EXPECT_TRUE(ledger.Violations().empty()) << AllViolations(ledger);

  // With r1 gone, r2 gets research's 6 plus its 2 of borrowing: org's 8 left over.
  ledger.Remove(r1, {8});
  EXPECT_EQ(ledger.Usage(research, 0), 0);
  EXPECT_EQ(ledger.Usage(org, 0), 8);
  EXPECT_EQ(ledger.Available(r2, 0), 8);
  EXPECT_EQ(ledger.Check(r2, {2}), QuotaFit::kNominal);
  EXPECT_EQ(ledger.Check(r2, {8}), QuotaFit::kBorrow);
  EXPECT_EQ(ledger.Check(r2, {9}), QuotaFit::kNo);
  ledger.Remove(prod, {8});
  EXPECT_EQ(ledger.Available(prod, 0), 16);
}

// A nested cohort with a lending limit keeps part of its subtree for its own queues.
TEST(QuotaLedgerTest, NestedCohortLendingLimit) {
  QueueTree tree =
      Build({Cohort("org", ""), Cohort("research", "org", {Q(kGpu, 0, {}, 3)}),
             Queue("r1", "research", {Q(kGpu, 8)}), Queue("prod", "org", {Q(kGpu, 6)})});
  QuotaLedger ledger(tree);
  QueueId org = Id(tree, "org"), research = Id(tree, "research");
  QueueId r1 = Id(tree, "r1"), prod = Id(tree, "prod");
  EXPECT_EQ(ledger.SubtreeQuota(research, 0), 8);
  EXPECT_EQ(ledger.Guaranteed(research, 0), 5);
  EXPECT_EQ(ledger.SubtreeQuota(org, 0), 9);
  EXPECT_EQ(ledger.Available(prod, 0), 9);

  ledger.Add(prod, {9});
  EXPECT_EQ(ledger.Available(r1, 0), 5) << "research's guaranteed 5 is out of prod's reach";
  EXPECT_EQ(ledger.Check(r1, {5}), QuotaFit::kNominal);
  EXPECT_EQ(ledger.Check(r1, {6}), QuotaFit::kNo);
  ledger.Add(r1, {5});
  EXPECT_EQ(ledger.Usage(research, 0), 5);
  EXPECT_EQ(ledger.Usage(org, 0), 9);
  EXPECT_TRUE(ledger.Violations().empty()) << AllViolations(ledger);
}

TEST(QuotaLedgerTest, ZeroChargesAreIgnoredAndEveryChargedResourceMustFit) {
  QueueTree tree =
      Build({Cohort("org", ""), Queue("a", "org", {Q(kGpu, 4)}), Queue("b", "org", {Q(kCpu, 8)})});
  QuotaLedger ledger(tree);
  QueueId a = Id(tree, "a"), b = Id(tree, "b");
  ASSERT_EQ(tree.resources().size(), 2u);
  // a has no CPU quota of its own: CPU is borrowed from b.
  EXPECT_EQ(ledger.Check(a, {4, 0}), QuotaFit::kNominal);
  EXPECT_EQ(ledger.Check(a, {4, 1}), QuotaFit::kBorrow);
  EXPECT_EQ(ledger.Check(a, {4, 9}), QuotaFit::kNo);
  EXPECT_EQ(ledger.Check(a, {5, 1}), QuotaFit::kNo);
  EXPECT_EQ(ledger.Check(a, {0, 0}), QuotaFit::kNominal);
  ledger.Add(a, {4, 8});
  EXPECT_EQ(ledger.Check(b, {0, 1}), QuotaFit::kNo);
  EXPECT_EQ(ledger.Check(b, {4, 0}), QuotaFit::kNo);
  EXPECT_TRUE(ledger.IsBorrowing(a));
  EXPECT_FALSE(ledger.IsBorrowing(a, {1, 0}));
  EXPECT_TRUE(ledger.IsBorrowing(a, {0, 1}));
}

TEST(QuotaLedgerTest, UnlimitedTreeHasNoResources) {
  QueueTree tree = QueueTree::Unlimited(Catalog());
  QuotaLedger ledger(tree);
  EXPECT_EQ(ledger.Check(QueueId(0), {}), QuotaFit::kNominal);
  ledger.Add(QueueId(0), {});
  EXPECT_FALSE(ledger.IsBorrowing(QueueId(0)));
  EXPECT_TRUE(ledger.Violations().empty());
}

TEST(QuotaLedgerTest, HugeQuotasAndLimitsDoNotOverflow) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  QueueTree tree =
      Build({Cohort("org", "", {Q(kGpu, kMax)}), Cohort("sub", "org", {Q(kGpu, kMax, kMax, kMax)}),
             Queue("a", "sub", {Q(kGpu, kMax, kMax)}), Queue("b", "org", {Q(kGpu, 5)})});
  QuotaLedger ledger(tree);
  QueueId org = Id(tree, "org"), a = Id(tree, "a"), b = Id(tree, "b");
  EXPECT_EQ(ledger.SubtreeQuota(org, 0), kMax);
  EXPECT_EQ(ledger.Available(a, 0), kMax);
  EXPECT_EQ(ledger.Available(b, 0), kMax);
  EXPECT_EQ(ledger.Check(b, {1'000'000}), QuotaFit::kBorrow);
  ledger.Add(a, {1'000'000'000'000});
  EXPECT_GT(ledger.Available(a, 0), 0);
  EXPECT_GT(ledger.Available(b, 0), 0);
  EXPECT_TRUE(ledger.Violations().empty()) << AllViolations(ledger);
}

TEST(QuotaLedgerTest, ViolationsReportNegativeUsageAndOverfullRoots) {
  QueueTree tree =
      Build({Cohort("org", ""), Queue("a", "org", {Q(kGpu, 10)}), Queue("b", "org", {Q(kCpu, 3)})});
  QuotaLedger ledger(tree);
  ledger.Add(Id(tree, "a"), {11, 0});  // bypasses Check
  std::vector<std::string> v = ledger.Violations();
  ASSERT_EQ(v.size(), 1u) << AllViolations(ledger);
  EXPECT_NE(v[0].find("cohort 'org'"), std::string::npos) << v[0];
  EXPECT_NE(v[0].find("gpu"), std::string::npos) << v[0];
  EXPECT_NE(v[0].find("11"), std::string::npos) << v[0];

  QuotaLedger refunds(tree);
  refunds.Remove(Id(tree, "b"), {0, 2});  // matches no Add
  std::vector<std::string> neg = refunds.Violations();
  ASSERT_GE(neg.size(), 1u);
  EXPECT_NE(neg[0].find("queue 'b'"), std::string::npos) << neg[0];
  EXPECT_NE(neg[0].find("cpu"), std::string::npos) << neg[0];
  EXPECT_NE(neg[0].find("negative"), std::string::npos) << neg[0];
}

TEST(QuotaLedgerTest, CopiesAreIndependentForks) {
  QueueTree tree = Build({Cohort("org", ""), Queue("a", "org", {Q(kGpu, 10)})});
  QuotaLedger ledger(tree);
  QueueId a = Id(tree, "a");
  ledger.Add(a, {3});
  QuotaLedger fork = ledger;
  fork.Add(a, {5});
  EXPECT_EQ(ledger.Usage(a, 0), 3);
  EXPECT_EQ(fork.Usage(a, 0), 8);
  EXPECT_EQ(&fork.tree(), &tree);
}

// ---------------------------------------------------------------------------
// Property test: random trees, random admissions and refunds.

int64_t Pick(Rng& rng, int64_t lo, int64_t hi) {
  return lo + static_cast<int64_t>(rng.Uniform(static_cast<uint32_t>(hi - lo + 1)));
}

// A random forest of up to 3 levels of cohorts, queues under them and a root queue,
// on two resources, with random borrowing and lending limits.
QueueTree RandomTree(Rng& rng) {
  std::vector<QueueNodeSpec> nodes;
  std::vector<std::string> cohorts;
  auto quotas = [&](bool root) {
    std::vector<QueueQuota> out;
    for (ResourceName r : {kGpu, kCpu}) {
      if (rng.Uniform(4) == 0) {
        continue;  // undeclared: nominal 0
      }
      QueueQuota q = Q(r, Pick(rng, 0, 10));
      if (!root && rng.Uniform(2) == 0) {
        q.quota.borrowing_limit = Pick(rng, 0, 6);
      }
      if (!root && rng.Uniform(3) == 0) {
        q.quota.lending_limit = Pick(rng, 0, 8);
      }
      out.push_back(q);
    }
    return out;
  };
  const int roots = static_cast<int>(Pick(rng, 1, 2));
  for (int i = 0; i < roots; ++i) {
    std::string name = "root" + std::to_string(i);
    nodes.push_back(Cohort(name, "", quotas(true)));
    cohorts.push_back(name);
  }
  const int inner = static_cast<int>(Pick(rng, 0, 3));
  for (int i = 0; i < inner; ++i) {
    std::string name = "cohort" + std::to_string(i);
    nodes.push_back(
        Cohort(name, cohorts[rng.Uniform(static_cast<uint32_t>(cohorts.size()))], quotas(false)));
    cohorts.push_back(name);
  }
  const int queues = static_cast<int>(Pick(rng, 2, 6));
  for (int i = 0; i < queues; ++i) {
    nodes.push_back(Queue("q" + std::to_string(i),
                          cohorts[rng.Uniform(static_cast<uint32_t>(cohorts.size()))],
                          quotas(false)));
  }
  nodes.push_back(Queue("lonely", "", quotas(true)));
  return Build(std::move(nodes));
}

// The header's formulas, recomputed from scratch with the queues' usage as input.
struct Reference {
  explicit Reference(const QueueTree& t) : tree(t) {}

  int64_t Subtree(QueueId id, size_t r) const {
    int64_t s = tree.quota(id, r).nominal;
    for (QueueId c : tree.children(id)) {
      s += Lendable(c, r);
    }
    return s;
  }
  int64_t Lendable(QueueId id, size_t r) const {
    const std::optional<int64_t>& limit = tree.quota(id, r).lending_limit;
    return limit ? std::min(Subtree(id, r), *limit) : Subtree(id, r);
  }
  int64_t Guaranteed(QueueId id, size_t r) const { return Subtree(id, r) - Lendable(id, r); }
  int64_t Usage(QueueId id, size_t r, const std::vector<ResourceVector>& queue_usage) const {
    if (tree.is_queue(id)) {
      return queue_usage[id.value()][r];
    }
    int64_t u = 0;
    for (QueueId c : tree.children(id)) {
      u += std::max<int64_t>(0, Usage(c, r, queue_usage) - Guaranteed(c, r));
    }
    return u;
  }

  const QueueTree& tree;
};

TEST(QuotaLedgerTest, RandomAdmissionsKeepTheInvariants) {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Pcg32 rng(seed);
    QueueTree tree = RandomTree(rng);
    const size_t resources = tree.resources().size();
    Reference ref(tree);
    QuotaLedger ledger(tree);
    for (size_t i = 0; i < tree.size(); ++i) {
      for (size_t r = 0; r < resources; ++r) {
        QueueId id(static_cast<uint32_t>(i));
        ASSERT_EQ(ledger.SubtreeQuota(id, r), ref.Subtree(id, r)) << tree.spec(id).name;
        ASSERT_EQ(ledger.Guaranteed(id, r), ref.Guaranteed(id, r)) << tree.spec(id).name;
      }
    }

    std::vector<std::pair<QueueId, ResourceVector>> admitted;
    std::vector<ResourceVector> queue_usage(tree.size(), ResourceVector(resources, 0));
    int fits = 0, no_fits = 0;
    for (int step = 0; step < 400; ++step) {
      if (admitted.empty() || rng.Uniform(10) < 6) {
        QueueId q = tree.queues()[rng.Uniform(static_cast<uint32_t>(tree.queues().size()))];
        ResourceVector charge(resources);
        for (int64_t& c : charge) {
          c = rng.Uniform(3) == 0 ? 0 : Pick(rng, 1, 6);
        }
        const QuotaFit fit = ledger.Check(q, charge);
        const QuotaFit strict = ledger.Check(q, charge, /*allow_borrowing=*/false);
        EXPECT_EQ(strict, fit == QuotaFit::kBorrow ? QuotaFit::kNo : fit);
        // Available is exact: what Check admits keeps every invariant, and what it
        // refuses would break one.
        QuotaLedger what_if = ledger;
        what_if.Add(q, charge);
        if (fit == QuotaFit::kNo) {
          ++no_fits;
          EXPECT_FALSE(what_if.Violations().empty())
              << "refused a charge that fits on " << tree.spec(q).name;
          continue;
        }
        ++fits;
        ASSERT_TRUE(what_if.Violations().empty()) << AllViolations(what_if);
        ledger.Add(q, charge);
        admitted.emplace_back(q, charge);
        for (size_t r = 0; r < resources; ++r) {
          queue_usage[q.value()][r] += charge[r];
          if (fit == QuotaFit::kNominal && charge[r] != 0) {
            EXPECT_LE(ledger.Usage(q, r), tree.quota(q, r).nominal);
          }
        }
      } else {
        size_t k = rng.Uniform(static_cast<uint32_t>(admitted.size()));
        auto [q, charge] = admitted[k];
        admitted.erase(admitted.begin() + static_cast<std::ptrdiff_t>(k));
        ledger.Remove(q, charge);
        for (size_t r = 0; r < resources; ++r) {
          queue_usage[q.value()][r] -= charge[r];
        }
      }
      ASSERT_TRUE(ledger.Violations().empty()) << "step " << step << "\n" << AllViolations(ledger);
      for (size_t i = 0; i < tree.size(); ++i) {
        for (size_t r = 0; r < resources; ++r) {
          QueueId id(static_cast<uint32_t>(i));
          ASSERT_EQ(ledger.Usage(id, r), ref.Usage(id, r, queue_usage))
              << "step " << step << " " << tree.spec(id).name;
        }
      }
    }
    // The generator must exercise both outcomes, or the test proves little.
    EXPECT_GT(fits, 20);
    EXPECT_GT(no_fits, 5);

    for (const auto& [q, charge] : admitted) {
      ledger.Remove(q, charge);
    }
    for (size_t i = 0; i < tree.size(); ++i) {
      for (size_t r = 0; r < resources; ++r) {
        EXPECT_EQ(ledger.Usage(QueueId(static_cast<uint32_t>(i)), r), 0);
      }
    }
    EXPECT_TRUE(ledger.Violations().empty()) << AllViolations(ledger);
  }
}

}  // namespace
}  // namespace tessera
