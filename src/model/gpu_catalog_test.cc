#include "model/gpu_catalog.h"

#include <gtest/gtest.h>

#include <set>

namespace tessera {
namespace {

std::vector<std::string> ProfileNames(const GpuModel& m) {
  std::vector<std::string> names;
  for (const MigProfile& p : m.mig_profiles) {
    names.push_back(p.name);
  }
  return names;
}

TEST(GpuCatalogTest, HasEveryRequiredModel) {
  const GpuCatalog& c = GpuCatalog::Default();
  for (const char* name : {"A100-40GB", "A100-80GB", "H100-80GB", "H200-141GB", "L40S", "A10", "T4",
                           "V100-16GB", "V100-32GB", "P100", "G2", "G3", "V100M16", "V100M32"}) {
    EXPECT_TRUE(c.Find(name).ok()) << name;
  }
  EXPECT_EQ(c.Get(*c.Find("h100")).name, "H100-80GB");  // alias, any case
  EXPECT_EQ(c.Get(*c.Find("A100-SXM4-80GB")).name, "A100-80GB");
  StatusOr<GpuModelId> bad = c.Find("B9000");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("known models"), std::string::npos);
}

TEST(GpuCatalogTest, MigProfileNamesFollowNvidiaTables) {
  const GpuCatalog& c = GpuCatalog::Default();
  EXPECT_EQ(ProfileNames(c.Get(*c.Find("A100-40GB"))),
            (std::vector<std::string>{"1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb",
                                      "4g.20gb", "7g.40gb"}));
  std::vector<std::string> eighty{"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb",
                                  "3g.40gb", "4g.40gb",    "7g.80gb"};
  EXPECT_EQ(ProfileNames(c.Get(*c.Find("A100-80GB"))), eighty);
  EXPECT_EQ(ProfileNames(c.Get(*c.Find("H100-80GB"))), eighty);
  EXPECT_EQ(ProfileNames(c.Get(*c.Find("H200-141GB"))),
            (std::vector<std::string>{"1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb",
                                      "4g.71gb", "7g.141gb"}));
  for (const char* no_mig : {"L40S", "A10", "T4", "V100-16GB", "V100-32GB", "P100", "G2"}) {
    EXPECT_FALSE(c.Get(*c.Find(no_mig)).mig_capable()) << no_mig;
  }
}

TEST(GpuCatalogTest, MigGeometryMatchesPlacementTable) {
  const GpuCatalog& c = GpuCatalog::Default();
  const GpuModel& h100 = c.Get(*c.Find("H100-80GB"));
  auto get = [&](const char* name) -> const MigProfile& {
    return h100.mig_profiles[*h100.FindMigProfile(name)];
  };
  EXPECT_EQ(get("1g.10gb").starts, (std::vector<int>{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(get("1g.10gb").max_instances, 7);
  EXPECT_EQ(get("1g.20gb").starts, (std::vector<int>{0, 2, 4, 6}));
  EXPECT_EQ(get("1g.20gb").memory_slots, 2);
  EXPECT_EQ(get("2g.20gb").starts, (std::vector<int>{0, 2, 4}));  // never slot 6
  EXPECT_EQ(get("3g.40gb").starts, (std::vector<int>{0, 4}));
  EXPECT_EQ(get("3g.40gb").memory_slots, 4);
  EXPECT_EQ(get("4g.40gb").starts, (std::vector<int>{0}));
  EXPECT_EQ(get("7g.80gb").memory_slots, 8);
  EXPECT_EQ(get("7g.80gb").compute_slices, 7);
  EXPECT_EQ(get("3g.40gb").ChargedMilli().value(), 428);  // 3/7 of a card, rounded down
  EXPECT_EQ(get("7g.80gb").ChargedMilli().value(), 1000);
  for (const GpuModel& m : c.models()) {
    for (const MigProfile& p : m.mig_profiles) {
      EXPECT_LE(p.memory, m.memory) << m.name << " " << p.name;
      for (int s : p.starts) {
        EXPECT_LE(s + p.memory_slots, kMigMemorySlots) << m.name << " " << p.name;
      }
    }
  }
}

TEST(GpuCatalogTest, ModelSetsParseAndAllow) {
  const GpuCatalog& c = GpuCatalog::Default();
  StatusOr<GpuModelSet> any = c.ParseModelSet("");
  ASSERT_TRUE(any.ok());
  EXPECT_TRUE(any->empty());
  EXPECT_TRUE(any->Allows(*c.Find("T4")));
  StatusOr<GpuModelSet> two = c.ParseModelSet("V100M16|V100M32");
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->size(), 2U);
  EXPECT_TRUE(two->Allows(*c.Find("V100M32")));
  EXPECT_FALSE(two->Allows(*c.Find("G2")));
  EXPECT_FALSE(c.ParseModelSet("G2|Z80").ok());
}

}  // namespace
}  // namespace tessera
