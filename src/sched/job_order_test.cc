#include "sched/job_order.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/testing/time_units.h"
#include "model/gpu_catalog.h"
#include "model/queue_tree.h"
#include "state/node_ledger.h"

namespace tessera {
namespace {

using testing::kSecond;

QueueTree FlatTree(std::vector<std::pair<std::string, int64_t>> queues) {
  QueueTreeSpec spec;
  for (auto& [name, weight] : queues) {
    QueueNodeSpec n;
    n.name = name;
    n.weight = weight;
    spec.nodes.push_back(std::move(n));
  }
  StatusOr<QueueTree> t = QueueTree::Create(std::move(spec), GpuCatalog::Default());
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return std::move(t).value();
}

// One allocation of `gpus` whole GPUs (grants on GPUs 0..gpus-1), `cpu` milli-CPU and
// `memory` MiB.
std::vector<Allocation> Alloc(int gpus, int64_t cpu = 0, int64_t memory = 0) {
  Allocation a;
  a.node = NodeId(0);
  a.cpu = MilliCpu(cpu);
  a.memory = MiB(memory);
  for (int g = 0; g < gpus; ++g) {
    a.gpus.push_back({g, kWholeGpu, MiB(0)});
  }
  return {a};
}

// The closed form of u' = a - k u, u(0) = u0, k = ln 2 / half-life.
double Closed(double u0, double a, double t_s, double half_life_s) {
  const double k = std::log(2.0) / half_life_s;
  return u0 * std::exp(-k * t_s) + a * (1.0 - std::exp(-k * t_s)) / k;
}

TEST(QueueUsageTest, IdleQueuesHaveNoUsageAndFactorOne) {
  QueueTree tree = FlatTree({{"a", 1}, {"b", 1}});
  QueueUsage usage(tree, 8000, 64000, 1024, 100 * kSecond);
  usage.Advance(1000 * kSecond);
  for (QueueId q : tree.queues()) {
    EXPECT_EQ(usage.decayed_gpu_seconds(q), 0.0);
    EXPECT_EQ(usage.FairShareFactor(q), 1.0);
    EXPECT_EQ(usage.DominantShare(q), 0.0);
    EXPECT_EQ(usage.gpu_milli(q), 0);
  }
  EXPECT_EQ(usage.capacity_gpu_milli(), 8000);
}

TEST(QueueUsageTest, SavedUsageCarriesOverToANewTreeByQueueName) {
  QueueTree tree = FlatTree({{"a", 1}, {"b", 1}});
  QueueUsage usage(tree, 8000, 64000, 1024, 100 * kSecond);
  usage.Add(tree.Find("a").value(), Alloc(2));
  usage.Add(tree.Find("b").value(), Alloc(1));
  usage.Advance(300 * kSecond);
  const QueueUsage::Saved saved = usage.Save();
  EXPECT_EQ(saved.at, 300 * kSecond);

  // The same queues in another order, one gone and one new.
  QueueTree other = FlatTree({{"c", 1}, {"b", 1}, {"a", 1}});
  QueueUsage restored(other, 8000, 64000, 1024, 100 * kSecond);
  restored.Restore(saved);
  EXPECT_EQ(restored.decayed_gpu_seconds(other.Find("a").value()),
            usage.decayed_gpu_seconds(tree.Find("a").value()));
  EXPECT_EQ(restored.decayed_gpu_seconds(other.Find("b").value()),
            usage.decayed_gpu_seconds(tree.Find("b").value()));
  EXPECT_EQ(restored.decayed_gpu_seconds(other.Find("c").value()), 0.0);
  EXPECT_GT(restored.decayed_gpu_seconds(other.Find("a").value()), 0.0);
  EXPECT_LT(restored.FairShareFactor(other.Find("a").value()),
            restored.FairShareFactor(other.Find("b").value()));
  // Decay goes on from the saved instant, not from the start of time.
  restored.Advance(400 * kSecond);
  usage.Remove(tree.Find("a").value(), Alloc(2));
  usage.Remove(tree.Find("b").value(), Alloc(1));
  usage.Advance(400 * kSecond);
  EXPECT_DOUBLE_EQ(restored.decayed_gpu_seconds(other.Find("a").value()),
                   usage.decayed_gpu_seconds(tree.Find("a").value()));

  QueueTree one = FlatTree({{"b", 1}});
  QueueUsage only_b(one, 8000, 64000, 1024, 100 * kSecond);
  only_b.Restore(saved);
  EXPECT_EQ(only_b.FairShareFactor(one.Find("b").value()), 0.5);  // all usage is b's
}

TEST(QueueUsageTest, IntegratesAConstantAllocationExactly) {
  QueueTree tree = FlatTree({{"a", 1}, {"b", 1}});
  const QueueId a = tree.Find("a").value();
  const double half_life_s = 100.0;
  QueueUsage usage(tree, 8000, 64000, 1024, 100 * kSecond);
  usage.Add(a, Alloc(2));
  EXPECT_EQ(usage.gpu_milli(a), 2000);
  usage.Advance(100 * kSecond);
  // After one half-life: a (1 - 1/2) / k = 2000 * 100 / (2 ln 2) milli-GPU-seconds.
  const double expected = Closed(0, 2000, 100, half_life_s);
  EXPECT_NEAR(expected, 1000.0 * 100.0 / std::log(2.0), 1e-6);
  EXPECT_NEAR(usage.decayed_gpu_seconds(a), expected, expected * 1e-12);

  // Many small steps give the same result as one large step.
  QueueUsage stepped(tree, 8000, 64000, 1024, 100 * kSecond);
  stepped.Add(a, Alloc(2));
  for (int i = 1; i <= 100; ++i) {
    stepped.Advance(i * kSecond);
  }
  EXPECT_NEAR(stepped.decayed_gpu_seconds(a), expected, expected * 1e-9);

  // Much longer than the half-life: the steady state a / k.
  usage.Advance(100000 * kSecond);
  const double steady = 2000.0 * half_life_s / std::log(2.0);
  EXPECT_NEAR(usage.decayed_gpu_seconds(a), steady, steady * 1e-9);
}

TEST(QueueUsageTest, DecayHalvesAfterOneHalfLifeWithoutAllocation) {
  QueueTree tree = FlatTree({{"a", 1}});
  const QueueId a = tree.Find("a").value();
  QueueUsage usage(tree, 8000, 64000, 1024, 3600 * kSecond);
  usage.Add(a, Alloc(4));
  usage.Advance(600 * kSecond);
  const double u0 = usage.decayed_gpu_seconds(a);
  EXPECT_NEAR(u0, Closed(0, 4000, 600, 3600), u0 * 1e-12);
  usage.Remove(a, Alloc(4));
  EXPECT_EQ(usage.gpu_milli(a), 0);
  usage.Advance(4200 * kSecond);
  EXPECT_NEAR(usage.decayed_gpu_seconds(a), u0 / 2, u0 * 1e-12);
  usage.Advance(7800 * kSecond);
  EXPECT_NEAR(usage.decayed_gpu_seconds(a), u0 / 4, u0 * 1e-12);
  // Going back in time changes nothing.
  usage.Advance(0);
  EXPECT_NEAR(usage.decayed_gpu_seconds(a), u0 / 4, u0 * 1e-12);
}

TEST(QueueUsageTest, HalfLifeBelowOneSecondIsClampedToOneSecond) {
  QueueTree tree = FlatTree({{"a", 1}});
  const QueueId a = tree.Find("a").value();
  QueueUsage usage(tree, 8000, 64000, 1024, 0);
  usage.Add(a, Alloc(1));
  usage.Advance(kSecond);
  EXPECT_NEAR(usage.decayed_gpu_seconds(a), Closed(0, 1000, 1, 1), 1e-9);
}

TEST(QueueUsageTest, FairShareFactorIsTwoToTheMinusUsageOverShare) {
  QueueTree tree = FlatTree({{"a", 1}, {"b", 1}});
  const QueueId a = tree.Find("a").value();
  const QueueId b = tree.Find("b").value();
  QueueUsage usage(tree, 8000, 64000, 1024, 100 * kSecond);
  usage.Add(a, Alloc(2));
  usage.Advance(50 * kSecond);
  // a has all the usage (U = 1) with half the weight (S = 1/2): 2^-2.
  EXPECT_DOUBLE_EQ(usage.FairShareFactor(a), 0.25);
  EXPECT_DOUBLE_EQ(usage.FairShareFactor(b), 1.0);

  // At par: equal usage, equal weights.
  QueueUsage par(tree, 8000, 64000, 1024, 100 * kSecond);
  par.Add(a, Alloc(2));
  par.Add(b, Alloc(2));
  par.Advance(50 * kSecond);
  EXPECT_DOUBLE_EQ(par.FairShareFactor(a), 0.5);
  EXPECT_DOUBLE_EQ(par.FairShareFactor(b), 0.5);
}

TEST(QueueUsageTest, FairShareFactorWeighsTheShares) {
  QueueTree tree = FlatTree({{"a", 3}, {"b", 1}});
  const QueueId a = tree.Find("a").value();
  const QueueId b = tree.Find("b").value();
  QueueUsage usage(tree, 8000, 64000, 1024, 100 * kSecond);
  usage.Add(a, Alloc(1));
  usage.Add(b, Alloc(1));
  usage.Advance(10 * kSecond);
  EXPECT_NEAR(usage.FairShareFactor(a), std::exp2(-0.5 / 0.75), 1e-12);
  EXPECT_NEAR(usage.FairShareFactor(b), std::exp2(-0.5 / 0.25), 1e-12);
  EXPECT_GT(usage.FairShareFactor(a), usage.FairShareFactor(b));
}

TEST(QueueUsageTest, DominantShareIsTheLargestShareOverTheWeight) {
  QueueTree tree = FlatTree({{"a", 2}, {"b", 1}});
  const QueueId a = tree.Find("a").value();
  const QueueId b = tree.Find("b").value();
  QueueUsage usage(tree, 8000, 64000, 1000, 100 * kSecond);
  usage.Add(a, Alloc(2, 32000, 100));  // GPU 1/4, CPU 1/2, memory 1/10
  EXPECT_DOUBLE_EQ(usage.DominantShare(a), 0.5 / 2);
  usage.Add(b, Alloc(0, 0, 900));  // memory 9/10
  EXPECT_DOUBLE_EQ(usage.DominantShare(b), 0.9);
  usage.Remove(a, Alloc(2, 32000, 100));
  EXPECT_DOUBLE_EQ(usage.DominantShare(a), 0.0);
}

}  // namespace
}  // namespace tessera
