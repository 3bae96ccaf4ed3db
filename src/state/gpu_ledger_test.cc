#include "state/gpu_ledger.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

const GpuModel& Model(const char* name) {
  return GpuCatalog::Default().Get(*GpuCatalog::Default().Find(name));
}

TEST(GpuLedgerTest, SharedModeChargesMilliAndMemory) {
  GpuLedger g(&Model("A100-80GB"), SharingMode::kShared);
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
  GpuLedger g(&Model("H100-80GB"), SharingMode::kExclusive);
  EXPECT_FALSE(g.FitsShare(MilliGpu(500), MiB(0)));
  EXPECT_TRUE(g.FitsWhole());
  ASSERT_TRUE(g.Allocate({0, kWholeGpu, MiB(0)}).ok());
  EXPECT_FALSE(g.FitsWhole());
  EXPECT_FALSE(g.Allocate({0, kWholeGpu, MiB(0)}).ok());
  ASSERT_TRUE(g.Release({0, kWholeGpu, MiB(0)}).ok());
  EXPECT_TRUE(g.idle());
}

TEST(GpuLedgerTest, MigModeServesOnlyInstances) {
  const GpuModel& h100 = Model("H100-80GB");
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
  GpuLedger g(&Model("G2"), SharingMode::kShared);
  EXPECT_TRUE(g.FitsShare(MilliGpu(500), MiB(0)));
  EXPECT_FALSE(g.FitsShare(MilliGpu(500), MiB(1)));
}

TEST(GpuLedgerTest, ReleaseMustMatch) {
  GpuLedger g(&Model("T4"), SharingMode::kShared);
  EXPECT_EQ(g.Release({0, MilliGpu(100), MiB(0)}).code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(g.Allocate({0, MilliGpu(100), MiB(0)}).ok());
  EXPECT_FALSE(g.Release({0, MilliGpu(200), MiB(0)}).ok());
  EXPECT_EQ(g.used_milli().value(), 100);
}

}  // namespace
}  // namespace tessera
