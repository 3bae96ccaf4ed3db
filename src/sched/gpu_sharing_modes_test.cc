// Placement on shared and timeslice GPUs through SelectGpus and MakeAllocation: what a
// share books (memory on shared GPUs, whole replicas on timeslice ones) and that the
// booking never overcommits a card.
#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "base/rng.h"
#include "model/node.h"
#include "sched/gpu_selection.h"
#include "sched/testing/scheduler_harness.h"
#include "state/node_ledger.h"
#include "state/testing/test_cluster.h"

namespace tessera {
namespace {

using ::tessera::testing::Model;
using ::tessera::testing::Share;
using ::tessera::testing::TestNode;
using ::tessera::testing::Whole;

constexpr int64_t kA100Memory = 81920;  // MiB

NodeSpec A100Node(int gpus, SharingMode mode, int replicas = 0) {
  NodeSpec n = MakeUniformNode("n", MilliCpu(64000), MiB(1 << 19), Model("A100-80GB"), gpus, mode);
  for (GpuSpec& g : n.gpus) {
    g.replicas = replicas;
  }
  return n;
}

// Places `request` as the scheduler would (best fit), or returns nullopt when it waits.
std::optional<Allocation> Place(TestNode& n, const TaskRequest& request) {
  Pcg32 rng(1);
  std::optional<GpuChoice> choice = SelectGpus(n.ledger, request, GpuSelection::kBestFit, rng);
  if (!choice) {
    return std::nullopt;
  }
  StatusOr<Allocation> a = MakeAllocation(NodeId(0), n.ledger, request, *choice);
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  if (!a.ok()) {
    return std::nullopt;
  }
  Status s = n.ledger.Allocate(*a);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return s.ok() ? std::optional<Allocation>(*a) : std::nullopt;
}

TEST(SharedModeMemoryTest, ShareWithoutMemoryBooksItsFractionAndReportsIt) {
  TestNode n(A100Node(1, SharingMode::kShared));
  std::optional<Allocation> a = Place(n, Share(250));
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->gpus[0].milli.value(), 250);
  EXPECT_EQ(a->gpus[0].memory.value(), kA100Memory / 4);  // the grant names the cap
  std::optional<Allocation> b = Place(n, Share(250, 1000, 30720));
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->gpus[0].memory.value(), 30720);  // asked: booked as asked
  EXPECT_EQ(n.ledger.gpus()[0].used_memory().value(), kA100Memory / 4 + 30720);
}

TEST(SharedModeMemoryTest, AShareThatWouldOverbookGoesToAnotherGpuOrWaits) {
  TestNode two(A100Node(2, SharingMode::kShared));
  // Two halves without memory fill GPU 0's memory (40 GiB each) and compute.
  // A 0.25 share asking 50 GiB next to a 0.5 share: GPU 0 has 0.5 compute but only
  // 40 GiB left, so it goes to GPU 1.
  ASSERT_TRUE(Place(two, Share(500)).has_value());
  std::optional<Allocation> big = Place(two, Share(250, 1000, 51200));
  ASSERT_TRUE(big.has_value());
  EXPECT_EQ(big->gpus[0].gpu, 1);
  // A third share that fits GPU 0's compute but neither GPU's memory waits.
  EXPECT_FALSE(Place(two, Share(100, 1000, 51200)).has_value());
  EXPECT_LE(two.ledger.gpus()[0].used_memory().value(), kA100Memory);
  EXPECT_LE(two.ledger.gpus()[1].used_memory().value(), kA100Memory);

  TestNode one(A100Node(1, SharingMode::kShared));
  ASSERT_TRUE(Place(one, Share(600, 1000, 61440)).has_value());
  // 0.3 compute is left; without a memory request it would book 24 GiB, but 20 GiB is.
  EXPECT_FALSE(Place(one, Share(300)).has_value());
  EXPECT_TRUE(Place(one, Share(250)).has_value());  // its 20 GiB fits exactly
  EXPECT_EQ(one.ledger.gpus()[0].used_memory().value(), kA100Memory);
}

// Property: whatever the mix of shares with and without memory requests, placed and
// released in random order, no GPU ever books more memory or compute than it has, and
// every placed share books at least what it asked (or its fraction of the card).
TEST(SharedModeMemoryTest, RandomSharesNeverOverbookACard) {
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    Pcg32 rng(seed);
    TestNode n(A100Node(2, SharingMode::kShared));
    std::vector<Allocation> live;
    int placed = 0;
    for (int step = 0; step < 300; ++step) {
      if (!live.empty() && rng.Uniform(3) == 0) {
        const size_t k = rng.Uniform(static_cast<uint32_t>(live.size()));
        ASSERT_TRUE(n.ledger.Release(live[k]).ok());
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
        continue;
      }
      const int64_t milli = 1 + rng.Uniform(999);
      const int64_t memory = rng.Uniform(2) == 0 ? 0 : 1 + rng.Uniform(kA100Memory);
      std::optional<Allocation> a = Place(n, Share(milli, 100, memory));
      if (a) {
        const GpuGrant& g = a->gpus[0];
        EXPECT_EQ(g.milli.value(), milli);
        EXPECT_EQ(g.memory.value(), memory > 0 ? memory : milli * kA100Memory / 1000);
        live.push_back(*a);
        ++placed;
      }
      for (int gpu = 0; gpu < 2; ++gpu) {
        int64_t booked = 0;
        for (const Allocation& l : live) {
          booked += l.gpus[0].gpu == gpu ? l.gpus[0].memory.value() : 0;
        }
        const GpuLedger& ledger = n.ledger.gpus()[static_cast<size_t>(gpu)];
        ASSERT_EQ(ledger.used_memory().value(), booked) << "seed " << seed;
        ASSERT_LE(booked, kA100Memory) << "seed " << seed << " GPU " << gpu;
        ASSERT_LE(ledger.used_milli().value(), kMilliPerGpu);
      }
    }
    EXPECT_GT(placed, 30) << "seed " << seed;
  }
}

TEST(TimesliceModeTest, FourQuarterSharesFillFourReplicasAndAFifthWaits) {
  TestNode n(A100Node(1, SharingMode::kTimeslice, 4));
  for (int i = 0; i < 4; ++i) {
    std::optional<Allocation> a = Place(n, Share(250, 1000, 40960));
    ASSERT_TRUE(a.has_value()) << i;
    EXPECT_EQ(a->gpus[0].milli.value(), 250);
    EXPECT_EQ(a->gpus[0].memory.value(), 0);  // not isolated, so not booked
  }
  EXPECT_EQ(n.ledger.gpus()[0].used_replicas(), 4);
  EXPECT_EQ(n.ledger.gpus()[0].used_memory().value(), 0);
  EXPECT_FALSE(Place(n, Share(100)).has_value());
}

TEST(TimesliceModeTest, ASharesRoundsUpToWholeReplicas) {
  TestNode n(A100Node(1, SharingMode::kTimeslice, 4));
  std::optional<Allocation> a = Place(n, Share(300));
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->gpus[0].milli.value(), 500);  // two replicas' worth
  EXPECT_EQ(n.ledger.gpus()[0].used_replicas(), 2);
  EXPECT_EQ(n.ledger.free_gpu_milli().value(), 500);
  EXPECT_FALSE(Place(n, Share(600)).has_value());  // three replicas: two are left
  EXPECT_TRUE(Place(n, Share(500)).has_value());
  ASSERT_TRUE(n.ledger.Release(*a).ok());
  EXPECT_EQ(n.ledger.gpus()[0].used_replicas(), 2);
}

TEST(TimesliceModeTest, NeverAWholeGpuNorAMemoryAboveTheCard) {
  TestNode n(A100Node(2, SharingMode::kTimeslice, 8));
  EXPECT_FALSE(GpuFitsRequest(n.ledger.gpus()[0], Whole(1)));
  EXPECT_FALSE(Place(n, Whole(1)).has_value());
  EXPECT_FALSE(Place(n, Share(100, 1000, kA100Memory + 1)).has_value());
  EXPECT_TRUE(Place(n, Share(100, 1000, kA100Memory)).has_value());
}

TEST(TimesliceModeTest, MixedNodeSendsWholeGpusToExclusiveCardsAndSharesToReplicas) {
  NodeSpec spec = A100Node(2, SharingMode::kExclusive);
  spec.gpus[1].mode = SharingMode::kTimeslice;
  spec.gpus[1].replicas = 2;
  TestNode n(std::move(spec));
  std::optional<Allocation> share = Place(n, Share(500));
  ASSERT_TRUE(share.has_value());
  EXPECT_EQ(share->gpus[0].gpu, 1);
  std::optional<Allocation> whole = Place(n, Whole(1));
  ASSERT_TRUE(whole.has_value());
  EXPECT_EQ(whole->gpus[0].gpu, 0);
  EXPECT_FALSE(Place(n, Whole(1)).has_value());
  EXPECT_TRUE(Place(n, Share(500)).has_value());
  EXPECT_FALSE(Place(n, Share(1)).has_value());
}

// A whole-GPU job's reservation counts no timeslice GPU as free: n1's eight idle
// timeslice GPUs never hold `big`; n0 does once r2 ends at 200 s.
TEST(TimesliceModeTest, ReservationsForWholeGpusSkipTimesliceGpus) {
  using namespace ::tessera::testing;  // NOLINT: the harness and its builders
  SchedulerOptions o;
  o.backfill = Backfill::kEasy;
  o.runtime_source = RuntimeSource::kPredicted;
  NodeSpec timeslice = GpuNode("n1");
  for (GpuSpec& g : timeslice.gpus) {
    g.mode = SharingMode::kTimeslice;
    g.replicas = 4;
  }
  Harness h({GpuNode("n0"), timeslice}, OneQueue(), o, SubmitOrder(true));
  h.Submit(Gang("r1", "q", {4}), 0, 100 * kSecond);
  h.Submit(Gang("r2", "q", {4}), 0, 200 * kSecond);
  ASSERT_EQ(h.Cycle(0).starts.size(), 2u);
  const JobId big = h.Submit(Gang("big", "q", {6}, 0, 1 * kSecond), 10 * kSecond, 1000 * kSecond);
  CycleResult r = h.Cycle(10 * kSecond);
  EXPECT_TRUE(r.starts.empty());
  ASSERT_TRUE(r.reservation.has_value());
  EXPECT_EQ(r.reservation->job, big);
  EXPECT_EQ(r.reservation->start, 200 * kSecond);
  EXPECT_EQ(r.reservation->nodes, std::vector<NodeId>{NodeId(0)});
}

}  // namespace
}  // namespace tessera
