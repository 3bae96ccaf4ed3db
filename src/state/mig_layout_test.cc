#include "state/mig_layout.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

class MigLayoutTest : public ::testing::Test {
 protected:
  const GpuModel& a100_ = GpuCatalog::Default().Get(*GpuCatalog::Default().Find("A100-40GB"));
  int P(const char* name) const { return *a100_.FindMigProfile(name); }
};

TEST_F(MigLayoutTest, FourGPlusThreeGIsLegal) {
  MigLayout l(&a100_);
  ASSERT_TRUE(l.Add({P("4g.20gb"), 0}).ok());
  EXPECT_EQ(l.LegalStarts(P("3g.20gb")), std::vector<int>{4});
  ASSERT_TRUE(l.Add({P("3g.20gb"), 4}).ok());
  EXPECT_EQ(l.used_compute(), 7);
  EXPECT_EQ(l.used_slots(), 0xFF);
  EXPECT_TRUE(l.LegalStarts(P("1g.5gb")).empty());
}

TEST_F(MigLayoutTest, TwoGNeverAtSlotSix) {
  MigLayout l(&a100_);
  EXPECT_FALSE(l.CanAdd(P("2g.10gb"), 6));
  EXPECT_FALSE(l.CanAdd(P("2g.10gb"), 1));  // misaligned
  EXPECT_EQ(l.LegalStarts(P("2g.10gb")), (std::vector<int>{0, 2, 4}));
  Status s = l.Add({P("2g.10gb"), 6});
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(l.empty());
}

TEST_F(MigLayoutTest, KnownIllegalLayouts) {
  MigLayout l(&a100_);
  ASSERT_TRUE(l.Add({P("3g.20gb"), 0}).ok());
  EXPECT_FALSE(l.CanAdd(P("4g.20gb"), 0));  // 4g only at 0, taken
  EXPECT_FALSE(l.CanAdd(P("7g.40gb"), 0));
  EXPECT_FALSE(l.CanAdd(P("1g.5gb"), 2));  // inside the 3g run
  EXPECT_TRUE(l.CanAdd(P("3g.20gb"), 4));
  ASSERT_TRUE(l.Add({P("2g.10gb"), 4}).ok());
  EXPECT_EQ(l.Add({P("2g.10gb"), 6}).code(), StatusCode::kFailedPrecondition);
  // 3 + 2 compute used; a 1g.10gb at 6 (two slots) still fits: 6 of 7 compute.
  EXPECT_TRUE(l.CanAdd(P("1g.10gb"), 6));
  ASSERT_TRUE(l.Add({P("1g.10gb"), 6}).ok());
  EXPECT_EQ(l.used_compute(), 6);
  EXPECT_EQ(l.used_slots(), 0xFF);
}

TEST_F(MigLayoutTest, ComputeSlicesCapAtSeven) {
  MigLayout l(&a100_);
  for (int s = 0; s < 7; ++s) {
    ASSERT_TRUE(l.Add({P("1g.5gb"), s}).ok()) << s;
  }
  // Slot 7 is free memory but 1g.5gb cannot start there, and compute is exhausted.
  EXPECT_EQ(l.used_compute(), 7);
  EXPECT_TRUE(l.LegalStarts(P("1g.5gb")).empty());
  EXPECT_FALSE(l.CanAdd(P("1g.10gb"), 6));
}

TEST_F(MigLayoutTest, MediaExtensionsAtMostOnce) {
  MigLayout l(&a100_);
  ASSERT_TRUE(l.Add({P("1g.5gb+me"), 0}).ok());
  EXPECT_TRUE(l.LegalStarts(P("1g.5gb+me")).empty());
  EXPECT_FALSE(l.LegalStarts(P("1g.5gb")).empty());
}

TEST_F(MigLayoutTest, RemoveUndoesAddExactly) {
  MigLayout l(&a100_);
  ASSERT_TRUE(l.Add({P("2g.10gb"), 2}).ok());
  ASSERT_TRUE(l.Add({P("1g.5gb"), 0}).ok());
  EXPECT_EQ(l.Remove({P("3g.20gb"), 4}).code(), StatusCode::kNotFound);
  ASSERT_TRUE(l.Remove({P("2g.10gb"), 2}).ok());
  ASSERT_TRUE(l.Remove({P("1g.5gb"), 0}).ok());
  EXPECT_TRUE(l.empty());
  EXPECT_EQ(l.used_slots(), 0);
  EXPECT_EQ(l.used_compute(), 0);
}

TEST_F(MigLayoutTest, ChooseStartKeepsLargeProfilesPlaceable) {
  MigLayout l(&a100_);
  // A first 1g goes to the top so that 4g (slot 0 only) and a 3g stay possible.
  std::optional<int> s = l.ChooseStart(P("1g.5gb"));
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(*s, 6);
  ASSERT_TRUE(l.Add({P("1g.5gb"), *s}).ok());
  EXPECT_TRUE(l.CanAdd(P("4g.20gb"), 0));
  // A 2g next avoids slot 0 as well: it lands at 4, leaving 0..3 for a 4g or 3g.
  s = l.ChooseStart(P("2g.10gb"));
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(*s, 4);
  ASSERT_TRUE(l.Add({P("2g.10gb"), *s}).ok());
  EXPECT_TRUE(l.CanAdd(P("4g.20gb"), 0));
  // A 3g now can only go to 0.
  EXPECT_EQ(l.ChooseStart(P("3g.20gb")), std::optional<int>(0));
  // With 4g at 0 and 3g at 4, nothing else fits.
  MigLayout full(&a100_);
  ASSERT_TRUE(full.Add({P("4g.20gb"), 0}).ok());
  ASSERT_TRUE(full.Add({P("3g.20gb"), 4}).ok());
  EXPECT_FALSE(full.ChooseStart(P("1g.5gb")).has_value());
}

TEST_F(MigLayoutTest, HeadroomCountsPerProfile) {
  MigLayout l(&a100_);
  std::vector<int> room = l.Headroom();
  EXPECT_EQ(room[P("1g.5gb")], 7);
  EXPECT_EQ(room[P("1g.10gb")], 4);
  EXPECT_EQ(room[P("2g.10gb")], 3);
  EXPECT_EQ(room[P("3g.20gb")], 2);
  EXPECT_EQ(room[P("4g.20gb")], 1);
  EXPECT_EQ(room[P("7g.40gb")], 1);
  ASSERT_TRUE(l.Add({P("3g.20gb"), 4}).ok());
  room = l.Headroom();
  EXPECT_EQ(room[P("3g.20gb")], 1);
  EXPECT_EQ(room[P("2g.10gb")], 2);
  EXPECT_EQ(room[P("7g.40gb")], 0);
}

}  // namespace
}  // namespace tessera
