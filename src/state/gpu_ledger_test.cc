#include "state/gpu_ledger.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

// The catalog's entry itself (testing::Model gives its id).
const GpuModel& ModelSpec(const char* name) {
  return GpuCatalog::Default().Get(*GpuCatalog::Default().Find(name));
}

TEST(GpuLedgerTest, SharedModeChargesMilliAndMemory) {
  GpuLedger g(&ModelSpec("A100-80GB"), SharingMode::kShared);
  EXPECT_TRUE(g.FitsShare(MilliGpu(250), MiB(20480)));
  ASSERT_TRUE(g.Allocate({0, MilliGpu(250), MiB(20480)}).ok());
  ASSERT_TRUE(g.Allocate({0, MilliGpu(700), MiB(40960)}).ok());
  EXPECT_EQ(g.free_milli().value(), 50);
  EXPECT_EQ(g.free_memory().value(), 81920 - 61440);
  EXPECT_FALSE(g.FitsShare(MilliGpu(60), MiB(0)));
  EXPECT_FALSE(g.FitsShare(MilliGpu(10), MiB(30000)));  // memory cap
  Status s = g.Allocate({0, MilliGpu(60), MiB(0)});
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(g.grant_count(), 2);
  EXPECT_FALSE(g.FitsWhole());
}

TEST(GpuLedgerTest, ExclusiveModeTakesWholeCardsOnly) {
  GpuLedger g(&ModelSpec("H100-80GB"), SharingMode::kExclusive);
  EXPECT_FALSE(g.FitsShare(MilliGpu(500), MiB(0)));
  EXPECT_TRUE(g.FitsWhole());
  ASSERT_TRUE(g.Allocate({0, kWholeGpu, MiB(0)}).ok());
  EXPECT_FALSE(g.FitsWhole());
  EXPECT_FALSE(g.Allocate({0, kWholeGpu, MiB(0)}).ok());
  ASSERT_TRUE(g.Release({0, kWholeGpu, MiB(0)}).ok());
  EXPECT_TRUE(g.idle());
}

TEST(GpuLedgerTest, MigModeServesOnlyInstances) {
  const GpuModel& h100 = ModelSpec("H100-80GB");
  GpuLedger g(&h100, SharingMode::kMig);
  EXPECT_FALSE(g.FitsShare(MilliGpu(100), MiB(0)));
  EXPECT_FALSE(g.FitsWhole());
  int p3g = *h100.FindMigProfile("3g.40gb");
  const MigProfile& prof = h100.mig_profiles[p3g];
  GpuGrant grant{0, prof.ChargedMilli(), prof.memory, p3g, 4};
  ASSERT_TRUE(g.Allocate(grant).ok());
  EXPECT_EQ(g.used_milli().value(), 428);
  EXPECT_EQ(g.mig().instances().size(), 1U);
  GpuGrant wrong_charge = grant;
  wrong_charge.mig_start = 0;
  wrong_charge.milli = MilliGpu(1);
  EXPECT_EQ(g.Allocate(wrong_charge).code(), StatusCode::kInvalidArgument);
  GpuGrant overlap = grant;
  overlap.mig_start = 4;
  EXPECT_EQ(g.Allocate(overlap).code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(g.Release(grant).ok());
  EXPECT_TRUE(g == GpuLedger(&h100, SharingMode::kMig));
}

TEST(GpuLedgerTest, UndisclosedMemoryRefusesMemoryRequests) {
  GpuLedger g(&ModelSpec("G2"), SharingMode::kShared);
  EXPECT_TRUE(g.FitsShare(MilliGpu(500), MiB(0)));
  EXPECT_FALSE(g.FitsShare(MilliGpu(500), MiB(1)));
}

TEST(GpuLedgerTest, ReleaseMustMatch) {
  GpuLedger g(&ModelSpec("T4"), SharingMode::kShared);
  EXPECT_EQ(g.Release({0, MilliGpu(100), MiB(0)}).code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(g.Allocate({0, MilliGpu(100), MiB(0)}).ok());
  EXPECT_FALSE(g.Release({0, MilliGpu(200), MiB(0)}).ok());
  EXPECT_EQ(g.used_milli().value(), 100);
}

TEST(GpuLedgerTest, SharedShareWithoutMemoryBooksItsFractionOfTheCard) {
  GpuLedger g(&ModelSpec("A100-80GB"), SharingMode::kShared);
  EXPECT_EQ(g.BookedMemory(MilliGpu(250), MiB(0)).value(), 81920 / 4);
  EXPECT_EQ(g.BookedMemory(MilliGpu(333), MiB(0)).value(), 333 * 81920 / 1000);  // rounded down
  EXPECT_EQ(g.BookedMemory(MilliGpu(250), MiB(4096)).value(), 4096);  // asked: booked as asked
  EXPECT_EQ(g.BookedMemory(kWholeGpu, MiB(0)).value(), 0);            // a whole card: as asked
  ASSERT_TRUE(g.Allocate({0, MilliGpu(500), g.BookedMemory(MilliGpu(500), MiB(0))}).ok());
  EXPECT_EQ(g.used_memory().value(), 40960);
  // 0.25 more with 50 GiB would overbook the card: refused although compute is free.
  EXPECT_FALSE(g.FitsShare(MilliGpu(250), MiB(51200)));
  EXPECT_TRUE(g.FitsShare(MilliGpu(250), MiB(40960)));
  EXPECT_TRUE(g.FitsShare(MilliGpu(500), MiB(0)));  // its 40 GiB fraction fits exactly
}

TEST(GpuLedgerTest, TimesliceSharesTakeWholeReplicasAndBookNoMemory) {
  const GpuModel& a100 = ModelSpec("A100-80GB");
  GpuLedger g(&a100, SharingMode::kTimeslice, 4);
  EXPECT_EQ(g.replicas(), 4);
  EXPECT_FALSE(g.FitsWhole());
  EXPECT_FALSE(g.FitsShare(kWholeGpu, MiB(0)));
  EXPECT_EQ(g.ReplicasFor(MilliGpu(250)), 1);
  EXPECT_EQ(g.ReplicasFor(MilliGpu(251)), 2);
  EXPECT_EQ(g.BookedMilli(MilliGpu(100)).value(), 250);
  EXPECT_EQ(g.BookedMilli(MilliGpu(300)).value(), 500);
  EXPECT_EQ(g.BookedMemory(MilliGpu(300), MiB(20480)).value(), 0);
  // Memory is not booked, but a request above the card's never fits.
  EXPECT_TRUE(g.FitsShare(MilliGpu(250), MiB(81920)));
  EXPECT_FALSE(g.FitsShare(MilliGpu(250), MiB(81921)));
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(g.FitsShare(MilliGpu(250), MiB(40960))) << i;
    ASSERT_TRUE(g.Allocate({0, MilliGpu(250), MiB(0)}).ok()) << i;
  }
  EXPECT_EQ(g.used_replicas(), 4);
  EXPECT_EQ(g.used_milli().value(), 1000);
  EXPECT_EQ(g.used_memory().value(), 0);
  EXPECT_FALSE(g.FitsShare(MilliGpu(1), MiB(0)));
  EXPECT_EQ(g.Allocate({0, MilliGpu(250), MiB(0)}).code(), StatusCode::kResourceExhausted);
  ASSERT_TRUE(g.Release({0, MilliGpu(250), MiB(0)}).ok());
  EXPECT_EQ(g.used_replicas(), 3);
  // Grants book whole replicas and no memory; anything else is malformed.
  EXPECT_EQ(g.Allocate({0, MilliGpu(200), MiB(0)}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(g.Allocate({0, MilliGpu(250), MiB(1024)}).code(), StatusCode::kInvalidArgument);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(g.Release({0, MilliGpu(250), MiB(0)}).ok());
  }
  EXPECT_TRUE(g == GpuLedger(&a100, SharingMode::kTimeslice, 4));
}

TEST(GpuLedgerTest, TimesliceReplicasThatDoNotDivideTheCardRoundDown) {
  GpuLedger g(&ModelSpec("H100-80GB"), SharingMode::kTimeslice, 3);
  EXPECT_EQ(g.BookedMilli(MilliGpu(100)).value(), 333);
  EXPECT_EQ(g.BookedMilli(MilliGpu(500)).value(), 666);
  EXPECT_EQ(g.BookedMilli(MilliGpu(999)).value(), 1000);
  // A booked amount takes as many replicas as the amount asked.
  EXPECT_EQ(g.ReplicasFor(MilliGpu(333)), 1);
  EXPECT_EQ(g.ReplicasFor(MilliGpu(666)), 2);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(g.Allocate({0, MilliGpu(333), MiB(0)}).ok()) << i;
  }
  EXPECT_EQ(g.used_replicas(), 3);
  EXPECT_FALSE(g.FitsShare(MilliGpu(1), MiB(0)));  // 1 milli left over, but no replica
}

}  // namespace
}  // namespace tessera
