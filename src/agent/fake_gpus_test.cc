#include "agent/fake_gpus.h"

#include <gtest/gtest.h>

#include <regex>
#include <set>

namespace tessera {
namespace {

const GpuCatalog& Catalog() { return GpuCatalog::Default(); }

GpuModelId Id(std::string_view name) { return Catalog().Find(name).value(); }

std::unique_ptr<GpuBackend> Make(std::string_view spec, std::string_view node = "node-1") {
  auto backend = MakeFakeGpuBackend(spec, Catalog(), node);
  EXPECT_TRUE(backend.ok()) << backend.status().ToString();
  return backend.ok() ? std::move(backend).value() : nullptr;
}

std::vector<DiscoveredGpu> Discover(GpuBackend& backend) {
  auto gpus = backend.Discover();
  EXPECT_TRUE(gpus.ok()) << gpus.status().ToString();
  return gpus.ok() ? *gpus : std::vector<DiscoveredGpu>{};
}

TEST(ParseFakeGpuSpecTest, OneGroup) {
  auto gpus = ParseFakeGpuSpec("8xH100-80GB", Catalog());
  ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
  ASSERT_EQ(gpus->size(), 8u);
  for (const GpuSpec& g : *gpus) {
    EXPECT_EQ(g.model, Id("H100-80GB"));
    EXPECT_EQ(g.mode, SharingMode::kExclusive);
    EXPECT_EQ(g.numa_node, 0);
    EXPECT_EQ(g.nvlink_domain, 0);
  }
}

TEST(ParseFakeGpuSpecTest, RepeatedGroupsWithABareMode) {
  auto gpus = ParseFakeGpuSpec("2x4xA100-80GB,mig", Catalog());
  ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
  ASSERT_EQ(gpus->size(), 8u);
  for (int i = 0; i < 8; ++i) {
    const GpuSpec& g = (*gpus)[static_cast<size_t>(i)];
    EXPECT_EQ(g.model, Id("A100-80GB"));
    EXPECT_EQ(g.mode, SharingMode::kMig);
    EXPECT_EQ(g.numa_node, i / 4) << i;
    EXPECT_EQ(g.nvlink_domain, i / 4) << i;
  }
}

TEST(ParseFakeGpuSpecTest, MixedGroupsAndModes) {
  auto gpus =
      ParseFakeGpuSpec("2x8xH100-80GB, 1xA100-80GB:mig, 1 x A100-80GB:shared", Catalog());
  ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
  ASSERT_EQ(gpus->size(), 18u);
  EXPECT_EQ((*gpus)[0].nvlink_domain, 0);
  EXPECT_EQ((*gpus)[15].nvlink_domain, 1);
  EXPECT_EQ((*gpus)[15].numa_node, 1);
  EXPECT_EQ((*gpus)[15].mode, SharingMode::kExclusive);
  EXPECT_EQ((*gpus)[16].model, Id("A100-80GB"));
  EXPECT_EQ((*gpus)[16].mode, SharingMode::kMig);
  EXPECT_EQ((*gpus)[16].numa_node, 2);
  EXPECT_EQ((*gpus)[16].nvlink_domain, -1);  // a group of one has no NVLink peer
  EXPECT_EQ((*gpus)[17].mode, SharingMode::kShared);
  EXPECT_EQ((*gpus)[17].numa_node, 3);
  EXPECT_EQ((*gpus)[17].nvlink_domain, -1);
}

TEST(ParseFakeGpuSpecTest, BareModeOnlySetsGroupsWithoutOne) {
  auto gpus = ParseFakeGpuSpec("shared,1xA100-80GB,1xH100-80GB:exclusive", Catalog());
  ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
  ASSERT_EQ(gpus->size(), 2u);
  EXPECT_EQ((*gpus)[0].mode, SharingMode::kShared);
  EXPECT_EQ((*gpus)[1].mode, SharingMode::kExclusive);
}

TEST(ParseFakeGpuSpecTest, EmptySpecIsAMachineWithoutGpus) {
  EXPECT_TRUE(ParseFakeGpuSpec("", Catalog())->empty());
  EXPECT_TRUE(ParseFakeGpuSpec("none", Catalog())->empty());
  auto backend = Make("");
  ASSERT_NE(backend, nullptr);
  EXPECT_EQ(backend->Describe(), "fake: no GPUs");
  EXPECT_TRUE(Discover(*backend).empty());
}

TEST(ParseFakeGpuSpecTest, InvalidSpecsNameTheBadItem) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"8xB300", "8xB300"},
      {"8xH100-80GB,xH100-80GB", "xH100-80GB"},
      {"0xH100-80GB", "0xH100-80GB"},
      {"2x0xH100-80GB", "2x0xH100-80GB"},
      {"8xL40S:mig", "8xL40S:mig"},
      {"4xL40S,mig", "4xL40S"},
      {"8xH100-80GB:turbo", "8xH100-80GB:turbo"},
      {"8xH100-80GB,,mig", "empty item"},
      {"mig,shared,1xA100-80GB", "shared"},
      {"65xH100-80GB", "65xH100-80GB"},
      {"H100-80GB", "H100-80GB"},
      {"8x", "8x"},
  };
  for (const auto& [spec, needle] : cases) {
    auto gpus = ParseFakeGpuSpec(spec, Catalog());
    ASSERT_FALSE(gpus.ok()) << spec;
    EXPECT_EQ(gpus.status().code(), StatusCode::kInvalidArgument) << spec;
    EXPECT_NE(gpus.status().message().find(needle), std::string::npos)
        << spec << ": " << gpus.status().message();
    EXPECT_FALSE(MakeFakeGpuBackend(spec, Catalog(), "n").ok()) << spec;
  }
}

TEST(FakeGpuBackendTest, DescribeIsCanonical) {
  EXPECT_EQ(Make("2x8xH100-80GB")->Describe(), "fake: 2x8xH100-80GB");
  EXPECT_EQ(Make("2x4xa100-sxm4-80gb, mig")->Describe(), "fake: 2x4xA100-80GB:mig");
  EXPECT_EQ(Make("2x8xH100-80GB,1xA100-80GB:mig,1xA100-80GB:shared")->Describe(),
            "fake: 2x8xH100-80GB,1xA100-80GB:mig,1xA100-80GB:shared");
}

TEST(FakeGpuBackendTest, DiscoverReportsTheSpec) {
  auto backend = Make("2x2xH100-80GB,1xA100-80GB:mig,1xL40S:shared");
  std::vector<DiscoveredGpu> gpus = Discover(*backend);
  ASSERT_EQ(gpus.size(), 6u);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(gpus[static_cast<size_t>(i)].index, i);
  }
  EXPECT_EQ(gpus[0].product_name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(gpus[0].model, Id("H100-80GB"));
  EXPECT_EQ(gpus[0].memory_mib, 81559);
  EXPECT_EQ(gpus[0].mode, SharingMode::kExclusive);
  EXPECT_FALSE(gpus[0].mig_enabled);
  EXPECT_EQ(gpus[1].nvlink_domain, 0);
  EXPECT_EQ(gpus[2].nvlink_domain, 1);
  EXPECT_EQ(gpus[3].numa_node, 1);
  EXPECT_EQ(gpus[4].product_name, "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(gpus[4].memory_mib, 81920);
  EXPECT_TRUE(gpus[4].mig_enabled);
  EXPECT_EQ(gpus[4].mode, SharingMode::kMig);
  EXPECT_EQ(gpus[4].numa_node, 2);
  EXPECT_EQ(gpus[4].nvlink_domain, -1);
  EXPECT_TRUE(gpus[4].mig_instances.empty());
  EXPECT_EQ(gpus[5].product_name, "NVIDIA L40S");
  EXPECT_EQ(gpus[5].mode, SharingMode::kShared);
  EXPECT_FALSE(gpus[5].mig_enabled);
  EXPECT_TRUE(gpus[5].cpus.empty());
}

TEST(FakeGpuBackendTest, UuidsAreStablePerNodeAndIndex) {
  std::vector<DiscoveredGpu> a = Discover(*Make("4xH100-80GB", "node-1"));
  std::vector<DiscoveredGpu> b = Discover(*Make("2x2xH100-80GB:shared", "node-1"));
  std::vector<DiscoveredGpu> c = Discover(*Make("4xH100-80GB", "node-2"));
  const std::regex uuid_form("GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}");
  std::set<std::string> seen;
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_TRUE(std::regex_match(a[i].uuid, uuid_form)) << a[i].uuid;
    EXPECT_EQ(a[i].uuid, b[i].uuid);
    EXPECT_NE(a[i].uuid, c[i].uuid);
    seen.insert(a[i].uuid);
    seen.insert(c[i].uuid);
  }
  EXPECT_EQ(seen.size(), 8u);
  EXPECT_EQ(a[0].uuid, FakeUuid("GPU-", "GPU-fake-node-1-0"));
}

TEST(FakeGpuBackendTest, MigInstancesFollowThePlacementRules) {
  auto backend = Make("1xA100-80GB:mig,1xA100-80GB");
  auto three = backend->CreateMigInstance(0, "3g.40gb", 4);
  ASSERT_TRUE(three.ok()) << three.status().ToString();
  EXPECT_EQ(three->profile, "3g.40gb");
  EXPECT_EQ(three->start, 4);
  EXPECT_TRUE(std::regex_match(
      three->uuid,
      std::regex("MIG-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")))
      << three->uuid;

  // Refusals, each leaving the layout as it was.
  EXPECT_EQ(backend->CreateMigInstance(0, "3g.40gb", 4).status().code(),
            StatusCode::kFailedPrecondition);  // overlap
  EXPECT_EQ(backend->CreateMigInstance(0, "2g.20gb", 4).status().code(),
            StatusCode::kFailedPrecondition);  // overlap
  EXPECT_EQ(backend->CreateMigInstance(0, "3g.40gb", 1).status().code(),
            StatusCode::kInvalidArgument);  // start slot
  EXPECT_EQ(backend->CreateMigInstance(0, "1g.5gb", 0).status().code(),
            StatusCode::kInvalidArgument);  // an A100-40GB profile
  EXPECT_EQ(backend->CreateMigInstance(1, "1g.10gb", 0).status().code(),
            StatusCode::kFailedPrecondition);  // not in MIG mode
  EXPECT_EQ(backend->CreateMigInstance(2, "1g.10gb", 0).status().code(),
            StatusCode::kInvalidArgument);  // no such GPU
  EXPECT_EQ(backend->CreateMigInstance(-1, "1g.10gb", 0).status().code(),
            StatusCode::kInvalidArgument);

  auto one = backend->CreateMigInstance(0, "1g.10gb", 1);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  auto two = backend->CreateMigInstance(0, "2g.20gb", 2);
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  EXPECT_NE(one->uuid, two->uuid);

  std::vector<DiscoveredGpu> gpus = Discover(*backend);
  ASSERT_EQ(gpus[0].mig_instances.size(), 3u);
  EXPECT_EQ(gpus[0].mig_instances[0], *one);  // ascending start
  EXPECT_EQ(gpus[0].mig_instances[1], *two);
  EXPECT_EQ(gpus[0].mig_instances[2], *three);
  EXPECT_TRUE(gpus[1].mig_instances.empty());

  EXPECT_EQ(backend->DestroyMigInstance(0, "MIG-nonexistent").code(), StatusCode::kNotFound);
  EXPECT_EQ(backend->DestroyMigInstance(1, three->uuid).code(), StatusCode::kNotFound);
  EXPECT_EQ(backend->DestroyMigInstance(5, three->uuid).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(backend->DestroyMigInstance(0, three->uuid).ok());
  EXPECT_EQ(backend->DestroyMigInstance(0, three->uuid).code(), StatusCode::kNotFound);
  gpus = Discover(*backend);
  ASSERT_EQ(gpus[0].mig_instances.size(), 2u);
  EXPECT_EQ(gpus[0].mig_instances[1], *two);
  // The freed slots take a new instance.
  EXPECT_TRUE(backend->CreateMigInstance(0, "3g.40gb", 4).ok());
}

TEST(FakeGpuBackendTest, FullGpuLeavesNoRoom) {
  auto backend = Make("1xH100-80GB:mig");
  auto full = backend->CreateMigInstance(0, "7g.80gb", 0);
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  for (const auto& [profile, start] :
       std::vector<std::pair<std::string, int>>{{"1g.10gb", 6}, {"3g.40gb", 4}, {"7g.80gb", 0}}) {
    EXPECT_EQ(backend->CreateMigInstance(0, profile, start).status().code(),
              StatusCode::kFailedPrecondition)
        << profile;
  }
  ASSERT_TRUE(backend->DestroyMigInstance(0, full->uuid).ok());
  // Seven 1g instances fill the compute slices.
  for (int slot = 0; slot < 7; ++slot) {
    ASSERT_TRUE(backend->CreateMigInstance(0, "1g.10gb", slot).ok()) << slot;
  }
  EXPECT_EQ(backend->CreateMigInstance(0, "1g.20gb", 6).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(Discover(*backend)[0].mig_instances.size(), 7u);
}

TEST(FakeGpuBackendTest, MigUuidsAreDeterministic) {
  auto a = Make("1xA100-80GB:mig", "n");
  auto b = Make("1xA100-80GB:mig", "n");
  auto c = Make("1xA100-80GB:mig", "m");
  std::string ua = a->CreateMigInstance(0, "1g.10gb", 0)->uuid;
  std::string ub = b->CreateMigInstance(0, "1g.10gb", 0)->uuid;
  std::string uc = c->CreateMigInstance(0, "1g.10gb", 0)->uuid;
  EXPECT_EQ(ua, ub);
  EXPECT_NE(ua, uc);
  // A new instance gets a new UUID, also in a slot used before.
  ASSERT_TRUE(a->DestroyMigInstance(0, ua).ok());
  EXPECT_NE(a->CreateMigInstance(0, "1g.10gb", 0)->uuid, ua);
}

}  // namespace
}  // namespace tessera
