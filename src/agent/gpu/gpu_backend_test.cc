#include "agent/gpu/gpu_backend.h"

#include <gtest/gtest.h>

#include "agent/gpu/fake_gpus.h"
#include "model/testing/test_catalog.h"

namespace tessera {
namespace {

using testing::Catalog;
using testing::Model;

std::string MatchName(std::string_view product, int64_t mib) {
  auto id = MatchCatalogModel(product, mib, Catalog());
  return id.ok() ? Catalog().Get(*id).name : "<" + id.status().ToString() + ">";
}

TEST(MatchCatalogModelTest, RealProductNames) {
  EXPECT_EQ(MatchName("NVIDIA A100-SXM4-80GB", 81920), "A100-80GB");
  EXPECT_EQ(MatchName("NVIDIA A100-SXM4-40GB", 40960), "A100-40GB");
  EXPECT_EQ(MatchName("NVIDIA A100-PCIE-40GB", 40960), "A100-40GB");
  EXPECT_EQ(MatchName("NVIDIA A100 80GB PCIe", 81920), "A100-80GB");
  EXPECT_EQ(MatchName("NVIDIA H100 80GB HBM3", 81559), "H100-80GB");
  EXPECT_EQ(MatchName("NVIDIA H100 PCIe", 81559), "H100-80GB");
  EXPECT_EQ(MatchName("NVIDIA H200", 143771), "H200-141GB");
  EXPECT_EQ(MatchName("NVIDIA H200 NVL", 143771), "H200-141GB");
  EXPECT_EQ(MatchName("NVIDIA L40S", 46068), "L40S");
  EXPECT_EQ(MatchName("NVIDIA A10", 23028), "A10");
  EXPECT_EQ(MatchName("Tesla T4", 15360), "T4");
  EXPECT_EQ(MatchName("Tesla V100-SXM2-32GB", 32768), "V100-32GB");
  EXPECT_EQ(MatchName("Tesla V100-PCIE-16GB", 16160), "V100-16GB");
}

TEST(MatchCatalogModelTest, MemoryTellsFamilyMembersApart) {
  // "A100" alone is an alias of the 40 GB card; 80 GB of memory says otherwise.
  EXPECT_EQ(MatchName("NVIDIA A100", 81920), "A100-80GB");
  EXPECT_EQ(MatchName("NVIDIA A100", 40960), "A100-40GB");
  EXPECT_EQ(MatchName("NVIDIA A100-SXM4", 80000), "A100-80GB");
}

TEST(MatchCatalogModelTest, UnknownMemoryFallsBackToTheName) {
  EXPECT_EQ(MatchName("NVIDIA H100 80GB HBM3", 0), "H100-80GB");
  EXPECT_EQ(MatchName("NVIDIA A100-SXM4-80GB", -1), "A100-80GB");
  EXPECT_EQ(MatchName("NVIDIA L40S", 0), "L40S");
}

TEST(MatchCatalogModelTest, UnknownProductsAreNotFound) {
  for (auto [name, mib] : std::vector<std::pair<std::string_view, int64_t>>{
           {"NVIDIA H100 NVL", 95830},  // 94 GB: not the 80 GB model
           {"NVIDIA GeForce RTX 4090", 24564},
           {"NVIDIA Mystery Accelerator", 12288},
           {"NVIDIA A10G", 23028},
           {"", 81920}}) {
    auto id = MatchCatalogModel(name, mib, Catalog());
    ASSERT_FALSE(id.ok()) << name;
    EXPECT_EQ(id.status().code(), StatusCode::kNotFound) << name;
  }
  auto id = MatchCatalogModel("NVIDIA H100 NVL", 95830, Catalog());
  EXPECT_NE(id.status().message().find("NVIDIA H100 NVL"), std::string::npos);
}

TEST(MatchCatalogModelTest, FakeProductNamesRoundTrip) {
  for (const GpuModel& m : Catalog().models()) {
    EXPECT_EQ(MatchName(FakeProductName(m), m.memory.value()), m.name) << FakeProductName(m);
  }
}

TEST(CheckMigPlacementTest, LegalPlacementsPass) {
  const GpuModel& a100 = Catalog().Get(Model("A100-80GB"));
  EXPECT_TRUE(CheckMigPlacement(a100, "3g.40gb", 0, {}).ok());
  EXPECT_TRUE(CheckMigPlacement(a100, "3g.40gb", 4, {{0, 4, 4, "4g.40gb"}}).ok());
  EXPECT_TRUE(CheckMigPlacement(a100, "1g.20gb", 6, {{0, 2, 2, "2g.20gb"},
                                                     {2, 2, 2, "2g.20gb"},
                                                     {4, 2, 2, "2g.20gb"}})
                  .ok());
}

TEST(CheckMigPlacementTest, BadArgumentsAreInvalid) {
  const GpuModel& a100 = Catalog().Get(Model("A100-80GB"));
  Status s = CheckMigPlacement(a100, "3g.40gb", 2, {});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("legal starts: 0,4"), std::string::npos) << s.message();
  EXPECT_EQ(CheckMigPlacement(a100, "1g.5gb", 0, {}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckMigPlacement(a100, "7g.80gb", 1, {}).code(), StatusCode::kInvalidArgument);
  const GpuModel& l40s = Catalog().Get(Model("L40S"));
  s = CheckMigPlacement(l40s, "1g.10gb", 0, {});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("has no MIG"), std::string::npos) << s.message();
}

TEST(CheckMigPlacementTest, ConflictsWithTheLayoutAreFailedPrecondition) {
  const GpuModel& a100 = Catalog().Get(Model("A100-80GB"));
  // Overlap: slots 0..3 are taken.
  Status s = CheckMigPlacement(a100, "2g.20gb", 2, {{0, 4, 4, "4g.40gb"}});
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("overlaps"), std::string::npos) << s.message();
  EXPECT_EQ(CheckMigPlacement(a100, "1g.10gb", 3, {{0, 4, 4, "4g.40gb"}}).code(),
            StatusCode::kFailedPrecondition);
  // Compute slices run out before memory slots do.
  EXPECT_EQ(CheckMigPlacement(a100, "1g.10gb", 1, {{0, 1, 7, ""}}).code(),
            StatusCode::kFailedPrecondition);
  // One +me instance per GPU.
  EXPECT_EQ(CheckMigPlacement(a100, "1g.10gb+me", 1, {{0, 1, 1, "1g.10gb+me"}}).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_TRUE(CheckMigPlacement(a100, "1g.10gb", 1, {{0, 1, 1, "1g.10gb+me"}}).ok());
}

}  // namespace
}  // namespace tessera
