#include "agent/gpu/fake_gpus.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

#include "model/testing/test_catalog.h"

namespace tessera {
namespace {

using testing::Catalog;
using testing::Model;

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
    EXPECT_EQ(g.model, Model("H100-80GB"));
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
    EXPECT_EQ(g.model, Model("A100-80GB"));
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
  EXPECT_EQ((*gpus)[16].model, Model("A100-80GB"));
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

TEST(ParseFakeGpuSpecTest, TimesliceGroupsCarryTheirReplicas) {
  auto gpus = ParseFakeGpuSpec("1xA100-80GB:timeslice=4,2xH100-80GB", Catalog());
  ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
  ASSERT_EQ(gpus->size(), 3u);
  EXPECT_EQ((*gpus)[0].mode, SharingMode::kTimeslice);
  EXPECT_EQ((*gpus)[0].replicas, 4);
  EXPECT_EQ((*gpus)[1].mode, SharingMode::kExclusive);
  EXPECT_EQ((*gpus)[1].replicas, 0);
  auto bare = ParseFakeGpuSpec("timeslice=8,2xL40S,1xH100-80GB:shared", Catalog());
  ASSERT_TRUE(bare.ok()) << bare.status().ToString();
  EXPECT_EQ((*bare)[1].mode, SharingMode::kTimeslice);
  EXPECT_EQ((*bare)[1].replicas, 8);
  EXPECT_EQ((*bare)[2].mode, SharingMode::kShared);
  EXPECT_EQ((*bare)[2].replicas, 0);
  EXPECT_EQ(Make("1xA100-80GB:timeslice:4")->Describe(), "fake: 1xA100-80GB:timeslice=4");
  std::vector<DiscoveredGpu> found = Discover(*Make("2xL40S:timeslice=3"));
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[1].mode, SharingMode::kTimeslice);
  EXPECT_EQ(found[1].replicas, 3);
  EXPECT_FALSE(found[1].mig_enabled);
  for (const char* bad : {"1xA100-80GB:timeslice", "1xA100-80GB:timeslice=65", "timeslice=1,1xT4",
                          "timeslice=2,timeslice=4,1xT4"}) {
    auto parsed = ParseFakeGpuSpec(bad, Catalog());
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument) << bad;
  }
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
  EXPECT_EQ(gpus[0].model, Model("H100-80GB"));
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
  // GPU instance ids as NVML gives them: the smallest free from 1, in creation order.
  EXPECT_EQ(three->gpu_instance, 1);
  EXPECT_EQ(one->gpu_instance, 2);
  EXPECT_EQ(two->gpu_instance, 3);
  EXPECT_EQ(two->compute_instance, 0);

  std::vector<DiscoveredGpu> gpus = Discover(*backend);
  EXPECT_EQ(gpus[1].minor, 1);
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

std::vector<GpuTelemetry> Telemetry(GpuBackend& backend) {
  auto sample = backend.ReadTelemetry();
  EXPECT_TRUE(sample.ok()) << sample.status().ToString();
  return sample.ok() ? *sample : std::vector<GpuTelemetry>{};
}

TEST(FakeGpuTelemetryTest, IdleGpusReadLow) {
  auto backend = Make("2xH100-80GB,1xA100-80GB:mig,1xL40S");
  std::vector<DiscoveredGpu> gpus = Discover(*backend);
  std::vector<GpuTelemetry> t = Telemetry(*backend);
  ASSERT_EQ(t.size(), 4u);
  GpuTelemetry h100;
  h100.index = 1;
  h100.uuid = gpus[1].uuid;
  h100.fb_free_mib = 81559;  // the catalog's memory
  h100.temp_c = 31;
  h100.power_mw = 105000;  // 15 % of 700 W
  h100.sm_clock_mhz = 210;
  EXPECT_EQ(t[1], h100);
  for (size_t i = 0; i < t.size(); ++i) {
    EXPECT_EQ(t[i].index, static_cast<int>(i));
    EXPECT_EQ(t[i].uuid, gpus[i].uuid);
    EXPECT_FALSE(t[i].lost);
    EXPECT_EQ(t[i].util_pct, 0);
    EXPECT_EQ(t[i].fb_used_mib, 0);
    EXPECT_EQ(t[i].fb_free_mib, gpus[i].memory_mib);
    EXPECT_EQ(t[i].temp_c, 30 + static_cast<int>(i) % 4);
    EXPECT_TRUE(t[i].mig.empty());
  }
  EXPECT_EQ(t[2].power_mw, 60000);  // A100: 400 W
  EXPECT_EQ(t[3].power_mw, 52500);  // L40S: 350 W
}

TEST(FakeGpuTelemetryTest, BusyGpusShowTheirTasks) {
  auto backend = Make("2xH100-80GB,1xA100-80GB:mig");
  auto inst = backend->CreateMigInstance(2, "3g.40gb", 4);
  ASSERT_TRUE(inst.ok()) << inst.status().ToString();
  auto small = backend->CreateMigInstance(2, "1g.10gb", 0);
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  backend->SetTaskLoad("whole", {{0, "", 1000, 0}});
  backend->SetTaskLoad("share-a", {{1, "", 250, 10240}});
  backend->SetTaskLoad("share-b", {{1, "", 250, 0}});
  backend->SetTaskLoad("mig", {{2, inst->uuid, 1000, 20480}});

  for (int round = 0; round < 20; ++round) {
    std::vector<GpuTelemetry> t = Telemetry(*backend);
    ASSERT_EQ(t.size(), 3u);
    // A whole card: 60..100 %, 80 % of its memory, hot, near its board power, boosted.
    EXPECT_GE(t[0].util_pct, 60);
    EXPECT_LE(t[0].util_pct, 100);
    EXPECT_EQ(t[0].fb_used_mib, 81559 * 80 / 100);
    EXPECT_EQ(t[0].fb_free_mib, 81559 - 81559 * 80 / 100);
    EXPECT_GE(t[0].temp_c, 70);
    EXPECT_LE(t[0].temp_c, 74);
    EXPECT_GE(t[0].power_mw, 105000 + 595000 * 60 / 100);
    EXPECT_LE(t[0].power_mw, 700000);
    EXPECT_EQ(t[0].sm_clock_mhz, 1980);
    // Two quarter shares: half the card busy; one capped, one at 80 % of its quarter.
    EXPECT_GE(t[1].util_pct, 30);
    EXPECT_LE(t[1].util_pct, 50);
    EXPECT_EQ(t[1].fb_used_mib, 10240 + 81559 * 250 / 1000 * 80 / 100);
    EXPECT_GE(t[1].temp_c, 31 + 10 + 15);
    EXPECT_LE(t[1].temp_c, 31 + 10 + 15 + 4);
    EXPECT_LT(t[1].power_mw, t[0].power_mw + 1) << round;
    EXPECT_EQ(t[1].sm_clock_mhz, 1980);
    // MIG: the busy instance uses its cap; the idle one nothing.
    ASSERT_EQ(t[2].mig.size(), 2u);
    EXPECT_EQ(t[2].mig[0], (MigTelemetry{small->uuid, "1g.10gb", 0, 2, 0, 9728}));
    EXPECT_EQ(t[2].mig[1], (MigTelemetry{inst->uuid, "3g.40gb", 4, 1, 20480, 40192 - 20480}));
    EXPECT_EQ(t[2].fb_used_mib, 20480);
    EXPECT_EQ(t[2].fb_free_mib, 81920 - 20480);
    EXPECT_GE(t[2].util_pct, 60 * 428 / 1000);  // 3 of 7 compute slices
    EXPECT_LE(t[2].util_pct, 100 * 428 / 1000);
    EXPECT_EQ(t[2].sm_clock_mhz, 1410);
  }

  // An uncapped task on a MIG instance uses 80 % of it; tasks that end leave idle GPUs.
  backend->SetTaskLoad("mig", {{2, small->uuid, 1000, 0}});
  backend->SetTaskLoad("whole", {});
  backend->SetTaskLoad("share-a", {});
  std::vector<GpuTelemetry> t = Telemetry(*backend);
  EXPECT_EQ(t[0].util_pct, 0);
  EXPECT_EQ(t[0].fb_used_mib, 0);
  EXPECT_EQ(t[0].sm_clock_mhz, 210);
  EXPECT_EQ(t[0].temp_c, 30);
  EXPECT_EQ(t[1].fb_used_mib, 81559 * 250 / 1000 * 80 / 100);
  EXPECT_EQ(t[2].mig[0].fb_used_mib, 9728 * 80 / 100);
  EXPECT_EQ(t[2].mig[1].fb_used_mib, 0);
  backend->SetTaskLoad("share-b", {});
  backend->SetTaskLoad("mig", {});
  t = Telemetry(*backend);
  for (const GpuTelemetry& g : t) {
    EXPECT_EQ(g.util_pct, 0) << g.index;
    EXPECT_EQ(g.fb_used_mib, 0) << g.index;
  }
  // A destroyed instance is gone from the sample; its GPU instance id is free again.
  ASSERT_TRUE(backend->DestroyMigInstance(2, inst->uuid).ok());
  auto again = backend->CreateMigInstance(2, "3g.40gb", 4);
  ASSERT_TRUE(again.ok());
  t = Telemetry(*backend);
  ASSERT_EQ(t[2].mig.size(), 2u);
  EXPECT_EQ(t[2].mig[1].uuid, again->uuid);
  EXPECT_EQ(t[2].mig[1].gi_id, 1);
}

TEST(FakeGpuTelemetryTest, ReadingsAreDeterministic) {
  auto make = [](uint64_t seed) {
    FakeGpuOptions options;
    options.seed = seed;
    auto backend = MakeFakeGpuBackend("4xH100-80GB", Catalog(), "n1", options);
    EXPECT_TRUE(backend.ok());
    std::unique_ptr<GpuBackend> b = std::move(backend).value();
    for (int g = 0; g < 4; ++g) {
      b->SetTaskLoad("t" + std::to_string(g), {{g, "", 1000, 0}});
    }
    return b;
  };
  auto a = make(1);
  auto b = make(1);
  auto c = make(2);
  std::set<int> utils;
  bool differs = false;
  for (int round = 0; round < 10; ++round) {
    std::vector<GpuTelemetry> ta = Telemetry(*a);
    EXPECT_EQ(ta, Telemetry(*b));
    differs = differs || ta != Telemetry(*c);
    for (const GpuTelemetry& g : ta) {
      utils.insert(g.util_pct);
    }
  }
  EXPECT_TRUE(differs);
  EXPECT_GT(utils.size(), 5u);  // the jitter moves
}

class FakeFaultsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/tessera_fake_faults_XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    path_ = dir_ + "/fake-faults";
    FakeGpuOptions options;
    options.faults_path = path_;
    auto backend = MakeFakeGpuBackend("4xH100-80GB", Catalog(), "n1", options);
    ASSERT_TRUE(backend.ok()) << backend.status().ToString();
    backend_ = std::move(backend).value();
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  void Append(const std::string& text) {
    std::ofstream out(path_, std::ios::app | std::ios::binary);
    out << text;
  }

  std::string dir_;
  std::string path_;
  std::unique_ptr<GpuBackend> backend_;
};

TEST_F(FakeFaultsTest, FaultsApplyOnceEach) {
  std::vector<GpuTelemetry> t = Telemetry(*backend_);  // no file yet: no faults
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t[1].xid_count, 0);

  Append(
      "{\"gpu\":1,\"xid\":79}\n{\"gpu\":0,\"ecc_dbe\":2}\n{\"gpu\":0,\"ecc_sbe\":5}\n"
      "{\"gpu\":2,\"temp_c\":95}\n{\"gpu\":3,\"lost\":true}\n");
  t = Telemetry(*backend_);
  EXPECT_EQ(t[1].xid_count, 1);
  EXPECT_EQ(t[1].last_xid, 79);
  EXPECT_EQ(t[0].xid_count, 0);
  EXPECT_EQ(t[0].ecc_dbe_volatile, 2);
  EXPECT_EQ(t[0].ecc_dbe_aggregate, 2);
  EXPECT_EQ(t[0].ecc_sbe_volatile, 5);
  EXPECT_EQ(t[0].ecc_sbe_aggregate, 5);
  EXPECT_EQ(t[2].temp_c, 95);
  GpuTelemetry lost;
  lost.index = 3;
  lost.uuid = Discover(*backend_)[3].uuid;
  lost.lost = true;
  EXPECT_EQ(t[3], lost);

  // Only new lines count; the temperature stays until cleared, also on a busy GPU.
  backend_->SetTaskLoad("t", {{2, "", 1000, 0}});
  Append("{\"gpu\":1,\"xid\":48,\"ecc_dbe\":1}\n");
  t = Telemetry(*backend_);
  EXPECT_EQ(t[1].xid_count, 2);
  EXPECT_EQ(t[1].last_xid, 48);
  EXPECT_EQ(t[1].ecc_dbe_volatile, 1);
  EXPECT_EQ(t[0].ecc_dbe_volatile, 2);
  EXPECT_EQ(t[2].temp_c, 95);
  EXPECT_GE(t[2].util_pct, 60);
  EXPECT_TRUE(t[3].lost);

  Append("{\"gpu\":2,\"temp_c\":null}\n{\"gpu\":3,\"lost\":false}\n");
  t = Telemetry(*backend_);
  EXPECT_GE(t[2].temp_c, 30 + 2 + 10 + 30);  // busy again, by the model
  EXPECT_LE(t[2].temp_c, 30 + 2 + 10 + 30 + 4);
  EXPECT_FALSE(t[3].lost);
  EXPECT_EQ(t[3].fb_free_mib, 81559);
  EXPECT_EQ(t[3].temp_c, 33);
  EXPECT_EQ(t[1].xid_count, 2);
}

TEST_F(FakeFaultsTest, UtilisationOverrideMakesABusyGpuLookIdleUntilCleared) {
  backend_->SetTaskLoad("t", {{1, "", 1000, 0}});
  std::vector<GpuTelemetry> t = Telemetry(*backend_);
  EXPECT_GE(t[1].util_pct, 60);
  Append("{\"gpu\":1,\"util_pct\":0}\n{\"gpu\":2,\"util_pct\":101}\n");
  for (int i = 0; i < 3; ++i) {  // sticky
    t = Telemetry(*backend_);
    EXPECT_EQ(t[1].util_pct, 0);
    EXPECT_GT(t[1].fb_used_mib, 0);  // only the utilisation changes
    EXPECT_EQ(t[2].util_pct, 0);     // 101 is out of range: the line was skipped
  }
  Append("{\"gpu\":1,\"util_pct\":null}\n");
  EXPECT_GE(Telemetry(*backend_)[1].util_pct, 60);
}

TEST_F(FakeFaultsTest, MalformedLinesAreSkippedWithOneWarning) {
  Append(
      "not json\n"
      "{\"gpu\":9,\"xid\":1}\n"
      "{\"gpu\":0,\"xdi\":1}\n"
      "{\"gpu\":0}\n"
      "{\"gpu\":0,\"xid\":0}\n"
      "{\"gpu\":0,\"xid\":31,\"lost\":\"yes\"}\n"
      "[1,2]\n"
      "\n"
      "{\"gpu\":0,\"xid\":43}\n");
  ::testing::internal::CaptureStderr();
  std::vector<GpuTelemetry> t = Telemetry(*backend_);
  std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t[0].xid_count, 1);  // only the last line, whole lines or nothing
  EXPECT_EQ(t[0].last_xid, 43);
  EXPECT_FALSE(t[0].lost);
  for (int line : {1, 2, 3, 4, 5, 6, 7}) {
    EXPECT_NE(err.find(" line " + std::to_string(line) + " skipped"), std::string::npos)
        << line << ": " << err;
  }
  EXPECT_EQ(err.find(" line 8 "), std::string::npos) << err;  // a blank line is fine
  EXPECT_EQ(err.find(" line 9 "), std::string::npos) << err;
  EXPECT_NE(err.find("line 3 skipped: unknown key 'xdi'"), std::string::npos) << err;
  EXPECT_NE(err.find("line 2 skipped: gpu: must be between 0 and 3"), std::string::npos) << err;

  // Warned once: the next read is quiet.
  ::testing::internal::CaptureStderr();
  t = Telemetry(*backend_);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  EXPECT_EQ(t[0].xid_count, 1);
}

TEST_F(FakeFaultsTest, PartialLinesWaitAndRewrittenFilesStartOver) {
  Append("{\"gpu\":1,\"xid\":");
  std::vector<GpuTelemetry> t = Telemetry(*backend_);
  EXPECT_EQ(t[1].xid_count, 0);  // not a whole line yet
  Append("79}\n");
  t = Telemetry(*backend_);
  EXPECT_EQ(t[1].xid_count, 1);
  EXPECT_EQ(t[1].last_xid, 79);

  // A truncated file that is shorter than what was read: read from its start.
  std::ofstream(path_, std::ios::trunc) << "{\"gpu\":2,\"xid\":9}\n";
  t = Telemetry(*backend_);
  EXPECT_EQ(t[1].xid_count, 1);
  EXPECT_EQ(t[2].xid_count, 1);
  EXPECT_EQ(t[2].last_xid, 9);
  // Another file moved into its place, even of the same size: read from its start.
  std::ofstream(dir_ + "/next") << "{\"gpu\":0,\"xid\":8}\n";
  std::filesystem::rename(dir_ + "/next", path_);
  t = Telemetry(*backend_);
  EXPECT_EQ(t[0].xid_count, 1);
  EXPECT_EQ(t[0].last_xid, 8);
  EXPECT_EQ(t[2].xid_count, 1);

  // A removed file is no faults; a new one is read from its start.
  std::filesystem::remove(path_);
  t = Telemetry(*backend_);
  EXPECT_EQ(t[2].xid_count, 1);
  Append("{\"gpu\":2,\"xid\":63}\n{\"gpu\":2,\"xid\":64}\n");
  t = Telemetry(*backend_);
  EXPECT_EQ(t[2].xid_count, 3);
  EXPECT_EQ(t[2].last_xid, 64);
}

TEST_F(FakeFaultsTest, AnUnreadableFaultFileFailsTheRead) {
  std::filesystem::create_directory(path_);
  auto t = backend_->ReadTelemetry();
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(t.status().message().find("fake-faults"), std::string::npos);
}

}  // namespace
}  // namespace tessera
