// Tests of the NVML backend against the fake NVML library (testing/fake_nvml.cc),
// loaded through the same dlopen path as the real one.
#include "agent/gpu/nvml_backend.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "agent/gpu/nvml_api.h"
#include "model/testing/test_catalog.h"

#ifndef TESSERA_FAKE_NVML_PATH
#error "TESSERA_FAKE_NVML_PATH must name the fake NVML library (see gpu/CMakeLists.txt)"
#endif
#ifndef TESSERA_FAKE_NVML_MINIMAL_PATH
#error "TESSERA_FAKE_NVML_MINIMAL_PATH must name the minimal fake NVML library"
#endif

namespace tessera {
namespace {

using testing::Catalog;
using testing::Model;

// The fakeNvml* hooks of an already loaded fake library.
class FakeHooks {
 public:
  explicit FakeHooks(const char* path) : handle_(dlopen(path, RTLD_NOW | RTLD_NOLOAD)) {
    if (handle_ != nullptr) {
      Resolve("fakeNvmlInitCount", &init_count_);
      Resolve("fakeNvmlGpuInstanceCount", &gi_count_);
      Resolve("fakeNvmlComputeInstanceCount", &ci_count_);
      Resolve("fakeNvmlDescribeState", &describe_);
      Resolve("fakeNvmlFailNext", &fail_next_);
      Resolve("fakeNvmlAddGpuInstance", &add_gi_);
      Resolve("fakeNvmlSetReading", &set_reading_);
      Resolve("fakeNvmlInjectXid", &inject_xid_);
      Resolve("fakeNvmlSetLost", &set_lost_);
    }
  }
  ~FakeHooks() {
    if (handle_ != nullptr) {
      dlclose(handle_);
    }
  }
  FakeHooks(const FakeHooks&) = delete;
  FakeHooks& operator=(const FakeHooks&) = delete;

  bool ok() const {
    return handle_ != nullptr && init_count_ && gi_count_ && ci_count_ && describe_ && fail_next_ &&
           add_gi_ && set_reading_ && inject_xid_ && set_lost_;
  }
  int InitCount() const { return init_count_(); }
  int GpuInstances(unsigned int gpu) const { return gi_count_(gpu); }
  int ComputeInstances(unsigned int gpu) const { return ci_count_(gpu); }
  std::string State() const {
    char buf[4096];
    return describe_(buf, sizeof(buf)) >= 0 ? std::string(buf) : "<too long>";
  }
  void FailNext(const char* function, int code) const { fail_next_(function, code); }
  int AddGpuInstance(unsigned int gpu, unsigned int profile_index, unsigned int start,
                     bool with_ci) const {
    return add_gi_(gpu, profile_index, start, with_ci ? 1 : 0);
  }
  void SetReading(unsigned int gpu, const char* name, long long value) const {
    EXPECT_EQ(set_reading_(gpu, name, value), NVML_SUCCESS) << name;
  }
  // How many event sets received the event.
  int InjectXid(unsigned int gpu, unsigned long long xid) const { return inject_xid_(gpu, xid); }
  void SetLost(unsigned int gpu, int mode) const { EXPECT_EQ(set_lost_(gpu, mode), NVML_SUCCESS); }

 private:
  template <typename Fn>
  void Resolve(const char* name, Fn* out) {
    *out = reinterpret_cast<Fn>(dlsym(handle_, name));
  }

  void* handle_;
  int (*init_count_)() = nullptr;
  int (*gi_count_)(unsigned int) = nullptr;
  int (*ci_count_)(unsigned int) = nullptr;
  int (*describe_)(char*, unsigned int) = nullptr;
  void (*fail_next_)(const char*, int) = nullptr;
  int (*add_gi_)(unsigned int, unsigned int, unsigned int, int) = nullptr;
  int (*set_reading_)(unsigned int, const char*, long long) = nullptr;
  int (*inject_xid_)(unsigned int, unsigned long long) = nullptr;
  int (*set_lost_)(unsigned int, int) = nullptr;
};

class NvmlBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/tessera_nvml_test_XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    sysfs_ = dir;
  }

  void TearDown() override {
    unsetenv("FAKE_NVML_SPEC");
    unsetenv("FAKE_NVML_OPTIONS");
    std::error_code ec;
    std::filesystem::remove_all(sysfs_, ec);
  }

  std::unique_ptr<GpuBackend> Load(const std::string& spec, const std::string& options = "",
                                   const char* library = TESSERA_FAKE_NVML_PATH) {
    setenv("FAKE_NVML_SPEC", spec.c_str(), 1);
    setenv("FAKE_NVML_OPTIONS", options.c_str(), 1);
    NvmlBackendOptions opts;
    opts.library = library;
    opts.sysfs_root = sysfs_;
    auto backend = LoadNvmlBackend(Catalog(), opts);
    EXPECT_TRUE(backend.ok()) << backend.status().ToString();
    return backend.ok() ? std::move(backend).value() : nullptr;
  }

  void WriteSysfs(const std::string& relative, const std::string& content) {
    std::filesystem::path path = std::filesystem::path(sysfs_) / relative;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path) << content;
  }

  static std::vector<DiscoveredGpu> Discover(GpuBackend& backend) {
    auto gpus = backend.Discover();
    EXPECT_TRUE(gpus.ok()) << gpus.status().ToString();
    return gpus.ok() ? *gpus : std::vector<DiscoveredGpu>{};
  }

  static std::vector<GpuTelemetry> Telemetry(GpuBackend& backend) {
    auto sample = backend.ReadTelemetry();
    EXPECT_TRUE(sample.ok()) << sample.status().ToString();
    return sample.ok() ? *sample : std::vector<GpuTelemetry>{};
  }

  std::string sysfs_;
};

TEST_F(NvmlBackendTest, MissingLibraryIsUnavailable) {
  auto backend = LoadNvmlBackend(Catalog(), "/nonexistent/libnvidia-ml.so.1");
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(backend.status().message().find("/nonexistent/libnvidia-ml.so.1"), std::string::npos)
      << backend.status().message();
}

TEST_F(NvmlBackendTest, LibraryWithoutNvmlIsUnavailable) {
  auto backend = LoadNvmlBackend(Catalog(), "libm.so.6");
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(backend.status().message().find("lacks nvmlInit_v2"), std::string::npos)
      << backend.status().message();
}

TEST_F(NvmlBackendTest, FailedInitIsUnavailable) {
  setenv("FAKE_NVML_OPTIONS", "fail_init", 1);
  auto backend = LoadNvmlBackend(Catalog(), TESSERA_FAKE_NVML_PATH);
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(backend.status().message().find("Driver Not Loaded"), std::string::npos)
      << backend.status().message();

  setenv("FAKE_NVML_OPTIONS", "", 1);
  setenv("FAKE_NVML_SPEC", "3xNOSUCHGPU", 1);
  backend = LoadNvmlBackend(Catalog(), TESSERA_FAKE_NVML_PATH);
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().code(), StatusCode::kUnavailable);
}

TEST_F(NvmlBackendTest, DiscoversModelsMemoryUuidsAndTopology) {
  auto backend = Load("2xA100-SXM4-80GB:mig,1xH100-80GB,2xH100-80GB,1xL40S,1xMYSTERY");
  ASSERT_NE(backend, nullptr);
  EXPECT_EQ(backend->Describe(), "NVML 12.550.54.15 driver 550.54.15, 7 GPUs");
  std::vector<DiscoveredGpu> gpus = Discover(*backend);
  ASSERT_EQ(gpus.size(), 7u);

  for (int i = 0; i < 7; ++i) {
    EXPECT_EQ(gpus[static_cast<size_t>(i)].minor, 2 * i + 1);  // the fake's minors are not indexes
  }
  EXPECT_EQ(gpus[0].index, 0);
  EXPECT_EQ(gpus[0].product_name, "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(gpus[0].model, Model("A100-80GB"));
  EXPECT_EQ(gpus[0].memory_mib, 81920);
  EXPECT_EQ(gpus[0].uuid, "GPU-fa4e0000-0000-4000-8000-000000000000");
  EXPECT_TRUE(gpus[0].mig_enabled);
  EXPECT_EQ(gpus[0].mode, SharingMode::kMig);
  EXPECT_TRUE(gpus[0].mig_instances.empty());
  EXPECT_EQ(gpus[1].uuid, "GPU-fa4e0000-0000-4000-8000-000000000001");

  // A100s linked directly share a domain; the lone H100 reaches only its NVSwitches;
  // the two H100s share theirs; L40S has no NVLink.
  EXPECT_EQ(gpus[0].nvlink_domain, 0);
  EXPECT_EQ(gpus[1].nvlink_domain, 0);
  EXPECT_EQ(gpus[2].nvlink_domain, -1);
  EXPECT_EQ(gpus[3].nvlink_domain, 1);
  EXPECT_EQ(gpus[4].nvlink_domain, 1);
  EXPECT_EQ(gpus[5].nvlink_domain, -1);
  EXPECT_EQ(gpus[6].nvlink_domain, -1);

  EXPECT_EQ(gpus[2].product_name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(gpus[2].model, Model("H100-80GB"));
  EXPECT_EQ(gpus[2].memory_mib, 81559);
  EXPECT_FALSE(gpus[2].mig_enabled);
  EXPECT_EQ(gpus[2].mode, SharingMode::kExclusive);
  EXPECT_EQ(gpus[5].model, Model("L40S"));
  EXPECT_FALSE(gpus[5].mig_enabled);

  // Not in the catalog: reported, with an invalid model id.
  EXPECT_EQ(gpus[6].product_name, "NVIDIA Mystery Accelerator");
  EXPECT_FALSE(gpus[6].model.valid());
  EXPECT_EQ(gpus[6].memory_mib, 12288);

  // NUMA from NVML (the sysfs fixture is empty), CPUs from NVML affinity.
  const int numa[] = {0, 0, 1, 2, 2, 3, 4};
  for (size_t i = 0; i < gpus.size(); ++i) {
    EXPECT_EQ(gpus[i].numa_node, numa[i]) << i;
    int n = numa[i];
    EXPECT_EQ(gpus[i].cpus, (std::vector<int>{4 * n, 4 * n + 1, 4 * n + 2, 4 * n + 3})) << i;
  }
}

TEST_F(NvmlBackendTest, NumaAndCpusFromSysfs) {
  WriteSysfs("bus/pci/devices/0000:10:00.0/numa_node", "1\n");
  WriteSysfs("bus/pci/devices/0000:11:00.0/numa_node", "1\n");
  WriteSysfs("bus/pci/devices/0000:12:00.0/numa_node", "0\n");
  WriteSysfs("bus/pci/devices/0000:13:00.0/numa_node", "-1\n");  // unknown: NVML decides
  WriteSysfs("devices/system/node/node0/cpulist", "0-3,8\n");
  WriteSysfs("devices/system/node/node1/cpulist", "4-7\n");
  auto backend = Load("2xH100-80GB,2xH100-80GB", "no_affinity");
  ASSERT_NE(backend, nullptr);
  std::vector<DiscoveredGpu> gpus = Discover(*backend);
  ASSERT_EQ(gpus.size(), 4u);
  // sysfs wins over nvmlDeviceGetNumaNodeId (which says 0 for GPUs 0 and 1).
  EXPECT_EQ(gpus[0].numa_node, 1);
  EXPECT_EQ(gpus[1].numa_node, 1);
  EXPECT_EQ(gpus[2].numa_node, 0);
  EXPECT_EQ(gpus[3].numa_node, 1);
  EXPECT_EQ(gpus[0].cpus, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(gpus[2].cpus, (std::vector<int>{0, 1, 2, 3, 8}));
  EXPECT_EQ(gpus[3].cpus, (std::vector<int>{4, 5, 6, 7}));
}

TEST_F(NvmlBackendTest, UnsupportedOptionalCallsDegrade) {
  auto backend = Load("4xH100-80GB,2xA100-SXM4-40GB", "no_nvlink,no_numa,no_affinity");
  ASSERT_NE(backend, nullptr);
  std::vector<DiscoveredGpu> gpus = Discover(*backend);
  ASSERT_EQ(gpus.size(), 6u);
  for (const DiscoveredGpu& g : gpus) {
    EXPECT_EQ(g.nvlink_domain, -1) << g.index;
    EXPECT_EQ(g.numa_node, 0) << g.index;
    EXPECT_TRUE(g.cpus.empty()) << g.index;
  }
  EXPECT_EQ(gpus[4].model, Model("A100-40GB"));
  EXPECT_EQ(gpus[4].memory_mib, 40960);
}

TEST_F(NvmlBackendTest, ReadsTheGpuFabricWhereTheDriverHasOne) {
  auto backend = Load("4xH200", "fabric=7");
  ASSERT_NE(backend, nullptr);
  std::vector<DiscoveredGpu> gpus = Discover(*backend);
  ASSERT_EQ(gpus.size(), 4u);
  for (const DiscoveredGpu& g : gpus) {
    EXPECT_EQ(g.fabric_domain, "6b1f2c3d-0000-4a5b-9c8d-112233445566/7") << g.index;
  }
  EXPECT_EQ(NodeFabricDomain(gpus), "6b1f2c3d-0000-4a5b-9c8d-112233445566/7");
}

TEST_F(NvmlBackendTest, NoFabricWhenUnsupportedPendingOrAbsent) {
  for (const char* options : {"", "fabric=7,fabric_pending"}) {
    SCOPED_TRACE(options);
    auto backend = Load("2xH100-80GB", options);
    ASSERT_NE(backend, nullptr);
    std::vector<DiscoveredGpu> gpus = Discover(*backend);
    ASSERT_EQ(gpus.size(), 2u);
    EXPECT_EQ(gpus[0].fabric_domain, "");
    EXPECT_EQ(NodeFabricDomain(gpus), "");
  }
  // The minimal library has no fabric call at all.
  auto old = Load("2xH100-80GB", "fabric=7", TESSERA_FAKE_NVML_MINIMAL_PATH);
  ASSERT_NE(old, nullptr);
  std::vector<DiscoveredGpu> gpus = Discover(*old);
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[1].fabric_domain, "");
}

TEST(NodeFabricDomainTest, OnlyADomainEveryReportingGpuAgreesOn) {
  std::vector<DiscoveredGpu> gpus(3);
  EXPECT_EQ(NodeFabricDomain(gpus), "");
  gpus[1].fabric_domain = "c/1";
  EXPECT_EQ(NodeFabricDomain(gpus), "c/1");
  gpus[2].fabric_domain = "c/1";
  EXPECT_EQ(NodeFabricDomain(gpus), "c/1");
  gpus[0].fabric_domain = "c/2";
  EXPECT_EQ(NodeFabricDomain(gpus), "");
}

TEST_F(NvmlBackendTest, MigCreateAndDestroy) {
  auto backend = Load("1xA100-SXM4-80GB:mig,1xA100-SXM4-80GB,1xL40S");
  ASSERT_NE(backend, nullptr);
  FakeHooks fake(TESSERA_FAKE_NVML_PATH);
  ASSERT_TRUE(fake.ok());
  EXPECT_EQ(fake.State(), "gpu0:mig[];gpu1:-;gpu2:-");

  auto three = backend->CreateMigInstance(0, "3g.40gb", 4);
  ASSERT_TRUE(three.ok()) << three.status().ToString();
  EXPECT_EQ(three->profile, "3g.40gb");
  EXPECT_EQ(three->start, 4);
  EXPECT_EQ(three->uuid.rfind("MIG-fa4e", 0), 0u) << three->uuid;
  EXPECT_EQ(fake.State(), "gpu0:mig[9@4/1];gpu1:-;gpu2:-");
  EXPECT_EQ(fake.ComputeInstances(0), 1);

  auto one = backend->CreateMigInstance(0, "1g.10gb", 0);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  auto wide = backend->CreateMigInstance(0, "1g.20gb", 2);
  ASSERT_TRUE(wide.ok()) << wide.status().ToString();
  EXPECT_EQ(fake.State(), "gpu0:mig[19@0/1,15@2/1,9@4/1];gpu1:-;gpu2:-");

  // Refusals leave the driver's state as it was.
  const std::string before = fake.State();
  EXPECT_EQ(backend->CreateMigInstance(0, "3g.40gb", 4).status().code(),
            StatusCode::kFailedPrecondition);  // overlap
  EXPECT_EQ(backend->CreateMigInstance(0, "1g.10gb", 2).status().code(),
            StatusCode::kFailedPrecondition);  // overlap with the 1g.20gb at 2..3
  EXPECT_EQ(backend->CreateMigInstance(0, "3g.40gb", 1).status().code(),
            StatusCode::kInvalidArgument);  // start slot
  EXPECT_EQ(backend->CreateMigInstance(0, "1g.5gb", 1).status().code(),
            StatusCode::kInvalidArgument);  // an A100-40GB profile
  EXPECT_EQ(backend->CreateMigInstance(1, "1g.10gb", 0).status().code(),
            StatusCode::kFailedPrecondition);  // not in MIG mode
  EXPECT_EQ(backend->CreateMigInstance(2, "1g.10gb", 0).status().code(),
            StatusCode::kFailedPrecondition);  // no MIG at all
  EXPECT_EQ(backend->CreateMigInstance(3, "1g.10gb", 0).status().code(),
            StatusCode::kInvalidArgument);  // no such GPU
  EXPECT_EQ(fake.State(), before);

  // Each instance's GPU and compute instance ids, which name its capability nodes.
  EXPECT_EQ(std::set<int>({one->gpu_instance, wide->gpu_instance, three->gpu_instance}).size(), 3u);
  for (const auto* inst : {&*one, &*wide, &*three}) {
    EXPECT_GE(inst->gpu_instance, 0) << inst->uuid;
    EXPECT_EQ(inst->compute_instance, 0) << inst->uuid;
  }
  std::vector<DiscoveredGpu> gpus = Discover(*backend);
  ASSERT_EQ(gpus[0].mig_instances.size(), 3u);
  EXPECT_EQ(gpus[0].mig_instances[0], *one);  // the same ids as at creation
  EXPECT_EQ(gpus[0].mig_instances[1], *wide);
  EXPECT_EQ(gpus[0].mig_instances[2], *three);

  ASSERT_TRUE(backend->DestroyMigInstance(0, three->uuid).ok());
  EXPECT_EQ(fake.State(), "gpu0:mig[19@0/1,15@2/1];gpu1:-;gpu2:-");
  EXPECT_EQ(fake.ComputeInstances(0), 2);
  Status again = backend->DestroyMigInstance(0, three->uuid);
  EXPECT_EQ(again.code(), StatusCode::kNotFound) << again.ToString();
  EXPECT_EQ(backend->DestroyMigInstance(0, "MIG-nonexistent").code(), StatusCode::kNotFound);
  EXPECT_EQ(backend->DestroyMigInstance(1, one->uuid).code(), StatusCode::kNotFound);
  EXPECT_EQ(backend->DestroyMigInstance(9, one->uuid).code(), StatusCode::kInvalidArgument);

  // The freed slots take a new instance, with a new UUID.
  auto four = backend->CreateMigInstance(0, "3g.40gb", 4);
  ASSERT_TRUE(four.ok()) << four.status().ToString();
  EXPECT_NE(four->uuid, three->uuid);
  gpus = Discover(*backend);
  ASSERT_EQ(gpus[0].mig_instances.size(), 3u);
  EXPECT_EQ(gpus[0].mig_instances[2], *four);
}

TEST_F(NvmlBackendTest, ComputeInstanceFailureRollsBackTheGpuInstance) {
  auto backend = Load("1xH100-80GB:mig");
  ASSERT_NE(backend, nullptr);
  FakeHooks fake(TESSERA_FAKE_NVML_PATH);
  ASSERT_TRUE(fake.ok());
  fake.FailNext("nvmlGpuInstanceCreateComputeInstance", NVML_ERROR_INSUFFICIENT_RESOURCES);
  auto created = backend->CreateMigInstance(0, "2g.20gb", 2);
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(fake.GpuInstances(0), 0);
  EXPECT_EQ(fake.State(), "gpu0:mig[]");

  fake.FailNext("nvmlDeviceCreateGpuInstanceWithPlacement", NVML_ERROR_NO_PERMISSION);
  created = backend->CreateMigInstance(0, "2g.20gb", 2);
  EXPECT_EQ(created.status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(fake.GpuInstances(0), 0);

  created = backend->CreateMigInstance(0, "2g.20gb", 2);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_EQ(fake.State(), "gpu0:mig[14@2/1]");
}

TEST_F(NvmlBackendTest, DestroyOfABusyInstanceFailsAndKeepsIt) {
  auto backend = Load("1xH200:mig");
  ASSERT_NE(backend, nullptr);
  FakeHooks fake(TESSERA_FAKE_NVML_PATH);
  ASSERT_TRUE(fake.ok());
  auto inst = backend->CreateMigInstance(0, "3g.71gb", 0);
  ASSERT_TRUE(inst.ok()) << inst.status().ToString();
  fake.FailNext("nvmlComputeInstanceDestroy", NVML_ERROR_IN_USE);
  Status busy = backend->DestroyMigInstance(0, inst->uuid);
  EXPECT_EQ(busy.code(), StatusCode::kFailedPrecondition) << busy.ToString();
  EXPECT_EQ(fake.State(), "gpu0:mig[9@0/1]");
  EXPECT_TRUE(backend->DestroyMigInstance(0, inst->uuid).ok());
  EXPECT_EQ(fake.State(), "gpu0:mig[]");
}

TEST_F(NvmlBackendTest, DiscoversInstancesMadeElsewhere) {
  auto backend = Load("1xA100-SXM4-40GB:mig");
  ASSERT_NE(backend, nullptr);
  FakeHooks fake(TESSERA_FAKE_NVML_PATH);
  ASSERT_TRUE(fake.ok());
  // A 1g+me instance with its compute instance, and a 3g GPU instance without one.
  ASSERT_EQ(fake.AddGpuInstance(0, NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 6, true), NVML_SUCCESS);
  ASSERT_EQ(fake.AddGpuInstance(0, NVML_GPU_INSTANCE_PROFILE_3_SLICE, 0, false), NVML_SUCCESS);
  std::vector<DiscoveredGpu> gpus = Discover(*backend);
  ASSERT_EQ(gpus.size(), 1u);
  ASSERT_EQ(gpus[0].mig_instances.size(), 2u);
  const MigInstanceInfo& bare = gpus[0].mig_instances[0];
  const MigInstanceInfo& me = gpus[0].mig_instances[1];
  EXPECT_EQ(bare.profile, "3g.20gb");
  EXPECT_EQ(bare.start, 0);
  EXPECT_EQ(bare.uuid, "MIG-" + gpus[0].uuid + "/2");
  EXPECT_EQ(me.profile, "1g.5gb+me");
  EXPECT_EQ(me.start, 6);
  EXPECT_EQ(me.uuid.rfind("MIG-fa4e", 0), 0u) << me.uuid;

  // The layout they leave is respected.
  EXPECT_EQ(backend->CreateMigInstance(0, "1g.5gb+me", 5).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(backend->CreateMigInstance(0, "2g.10gb", 2).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_TRUE(backend->CreateMigInstance(0, "2g.10gb", 4).ok());

  ASSERT_TRUE(backend->DestroyMigInstance(0, bare.uuid).ok());
  ASSERT_TRUE(backend->DestroyMigInstance(0, me.uuid).ok());
  EXPECT_EQ(fake.State(), "gpu0:mig[14@4/1]");
}

TEST_F(NvmlBackendTest, ShutsNvmlDownWhenDestroyed) {
  auto backend = Load("1xT4");
  ASSERT_NE(backend, nullptr);
  FakeHooks fake(TESSERA_FAKE_NVML_PATH);
  ASSERT_TRUE(fake.ok());
  EXPECT_EQ(fake.InitCount(), 1);
  std::vector<DiscoveredGpu> gpus = Discover(*backend);
  ASSERT_EQ(gpus.size(), 1u);
  EXPECT_EQ(gpus[0].model, Model("T4"));
  EXPECT_EQ(backend->Describe(), "NVML 12.550.54.15 driver 550.54.15, 1 GPU");
  backend.reset();
  EXPECT_EQ(fake.InitCount(), 0);
}

TEST_F(NvmlBackendTest, OlderLibraryWithoutOptionalFunctions) {
  WriteSysfs("bus/pci/devices/0000:10:00.0/numa_node", "1\n");
  WriteSysfs("devices/system/node/node1/cpulist", "4-5\n");
  auto backend =
      Load("2xA100-SXM4-80GB:mig", "driver=470.82.01", TESSERA_FAKE_NVML_MINIMAL_PATH);
  ASSERT_NE(backend, nullptr);
  FakeHooks fake(TESSERA_FAKE_NVML_MINIMAL_PATH);
  ASSERT_TRUE(fake.ok());
  EXPECT_EQ(backend->Describe(), "NVML unknown driver 470.82.01, 2 GPUs");
  std::vector<DiscoveredGpu> gpus = Discover(*backend);
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[0].nvlink_domain, -1);  // no NVLink functions: no domains
  EXPECT_EQ(gpus[1].nvlink_domain, -1);
  EXPECT_EQ(gpus[0].numa_node, 1);  // sysfs
  EXPECT_EQ(gpus[0].cpus, (std::vector<int>{4, 5}));
  EXPECT_EQ(gpus[1].numa_node, 0);  // nothing known
  EXPECT_TRUE(gpus[1].cpus.empty());
  EXPECT_EQ(gpus[0].minor, -1);  // no minor numbers: the agent falls back to the index

  // MIG works without possible-placements and compute-profile queries.
  auto full = backend->CreateMigInstance(1, "7g.80gb", 0);
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  EXPECT_EQ(backend->CreateMigInstance(0, "4g.40gb", 4).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(fake.State(), "gpu0:mig[];gpu1:mig[0@0/1]");
  ASSERT_TRUE(backend->DestroyMigInstance(1, full->uuid).ok());
  EXPECT_EQ(fake.State(), "gpu0:mig[];gpu1:mig[]");
}

TEST_F(NvmlBackendTest, TelemetryReadsEveryField) {
  auto backend = Load("1xA100-SXM4-80GB:mig,2xH100-80GB,1xMYSTERY");
  ASSERT_NE(backend, nullptr);
  FakeHooks fake(TESSERA_FAKE_NVML_PATH);
  ASSERT_TRUE(fake.ok());
  auto three = backend->CreateMigInstance(0, "3g.40gb", 4);  // GPU instance 1
  ASSERT_TRUE(three.ok()) << three.status().ToString();
  auto one = backend->CreateMigInstance(0, "1g.10gb", 0);  // GPU instance 2
  ASSERT_TRUE(one.ok()) << one.status().ToString();

  fake.SetReading(2, "util", 97);
  fake.SetReading(2, "mem_used_mib", 70000);
  fake.SetReading(2, "temp", 83);
  fake.SetReading(2, "power_mw", 612345);
  fake.SetReading(2, "sm_clock", 1980);
  fake.SetReading(2, "ecc_sbe_volatile", 5);
  fake.SetReading(2, "ecc_dbe_volatile", 1);
  fake.SetReading(2, "ecc_sbe_aggregate", 17);
  fake.SetReading(2, "ecc_dbe_aggregate", 3);
  fake.SetReading(3, "ecc_dbe_volatile", 4);  // MYSTERY has no ECC: NOT_SUPPORTED reads 0
  EXPECT_EQ(fake.InjectXid(2, 79), 1);        // the backend registered one event set
  EXPECT_EQ(fake.InjectXid(2, 48), 1);
  EXPECT_EQ(fake.InjectXid(3, 13), 1);

  std::vector<GpuTelemetry> t = Telemetry(*backend);
  ASSERT_EQ(t.size(), 4u);

  // MIG mode: no utilisation; the instances with their memory and GPU instance ids.
  GpuTelemetry mig;
  mig.index = 0;
  mig.uuid = "GPU-fa4e0000-0000-4000-8000-000000000000";
  mig.fb_used_mib = 1024;
  mig.fb_free_mib = 81920 - 1024;
  mig.temp_c = 40;
  mig.power_mw = 100000;
  mig.sm_clock_mhz = 1000;
  mig.mig = {{one->uuid, "1g.10gb", 0, 2, 512, 9728 - 512},
             {three->uuid, "3g.40gb", 4, 1, 256, 40192 - 256}};
  EXPECT_EQ(t[0], mig);

  GpuTelemetry idle;  // the fake's defaults for GPU 1
  idle.index = 1;
  idle.uuid = "GPU-fa4e0000-0000-4000-8000-000000000001";
  idle.util_pct = 11;
  idle.fb_used_mib = 2048;
  idle.fb_free_mib = 81559 - 2048;
  idle.temp_c = 41;
  idle.power_mw = 101000;
  idle.sm_clock_mhz = 1010;
  EXPECT_EQ(t[1], idle);

  GpuTelemetry busy;
  busy.index = 2;
  busy.uuid = "GPU-fa4e0000-0000-4000-8000-000000000002";
  busy.util_pct = 97;
  busy.fb_used_mib = 70000;
  busy.fb_free_mib = 81559 - 70000;
  busy.temp_c = 83;
  busy.power_mw = 612345;
  busy.sm_clock_mhz = 1980;
  busy.xid_count = 2;
  busy.last_xid = 48;
  busy.ecc_sbe_volatile = 5;
  busy.ecc_dbe_volatile = 1;
  busy.ecc_sbe_aggregate = 17;
  busy.ecc_dbe_aggregate = 3;
  EXPECT_EQ(t[2], busy);

  EXPECT_EQ(t[3].ecc_dbe_volatile, 0);
  EXPECT_EQ(t[3].xid_count, 1);
  EXPECT_EQ(t[3].last_xid, 13);
  EXPECT_EQ(t[3].util_pct, 13);

  // Counters count since the start; events are taken once.
  t = Telemetry(*backend);
  EXPECT_EQ(t[2], busy);
  EXPECT_EQ(fake.InjectXid(2, 94), 1);
  t = Telemetry(*backend);
  EXPECT_EQ(t[2].xid_count, 3);
  EXPECT_EQ(t[2].last_xid, 94);
  EXPECT_EQ(fake.State(),
            "gpu0:mig[19@0/1,9@4/1];gpu1:-;gpu2:-;gpu3:-");  // reading changes nothing
}

TEST_F(NvmlBackendTest, LostGpusAreReportedNotFailed) {
  auto backend = Load("1xH100-80GB:mig,2xH100-80GB");
  ASSERT_NE(backend, nullptr);
  FakeHooks fake(TESSERA_FAKE_NVML_PATH);
  ASSERT_TRUE(fake.ok());
  ASSERT_TRUE(backend->CreateMigInstance(0, "7g.80gb", 0).ok());
  EXPECT_EQ(fake.InjectXid(2, 79), 1);
  std::vector<GpuTelemetry> before = Telemetry(*backend);
  ASSERT_EQ(before.size(), 3u);
  EXPECT_FALSE(before[0].lost);
  ASSERT_EQ(before[0].mig.size(), 1u);

  // Calls answer GPU_IS_LOST (GPU 0, in MIG mode), or no handle at all (GPU 2).
  fake.SetLost(0, 1);
  fake.SetLost(2, 2);
  std::vector<GpuTelemetry> t = Telemetry(*backend);
  ASSERT_EQ(t.size(), 3u);
  for (int i : {0, 2}) {
    GpuTelemetry lost;
    lost.index = i;
    lost.uuid = before[static_cast<size_t>(i)].uuid;  // the last one known
    lost.lost = true;
    lost.xid_count = i == 2 ? 1 : 0;
    lost.last_xid = i == 2 ? 79 : 0;
    EXPECT_EQ(t[static_cast<size_t>(i)], lost) << i;
  }
  EXPECT_EQ(t[1], before[1]);

  fake.SetLost(0, 0);
  fake.SetLost(2, 0);
  t = Telemetry(*backend);
  EXPECT_EQ(t, before);
}

TEST_F(NvmlBackendTest, OlderLibraryReportsZerosForWhatItCannotRead) {
  auto backend = Load("1xA100-SXM4-80GB,1xA100-SXM4-80GB:mig", "driver=470.82.01",
                      TESSERA_FAKE_NVML_MINIMAL_PATH);
  ASSERT_NE(backend, nullptr);
  FakeHooks fake(TESSERA_FAKE_NVML_MINIMAL_PATH);
  ASSERT_TRUE(fake.ok());
  EXPECT_EQ(Discover(*backend).size(), 2u);
  auto inst = backend->CreateMigInstance(1, "2g.20gb", 2);
  ASSERT_TRUE(inst.ok()) << inst.status().ToString();
  EXPECT_EQ(fake.InjectXid(0, 79), 0);  // no event functions: nothing registered
  std::vector<GpuTelemetry> t = Telemetry(*backend);
  ASSERT_EQ(t.size(), 2u);
  GpuTelemetry plain;  // memory info is all this library offers
  plain.index = 0;
  plain.uuid = "GPU-fa4e0000-0000-4000-8000-000000000000";
  plain.fb_used_mib = 1024;
  plain.fb_free_mib = 81920 - 1024;
  EXPECT_EQ(t[0], plain);
  ASSERT_EQ(t[1].mig.size(), 1u);
  EXPECT_EQ(t[1].mig[0], (MigTelemetry{inst->uuid, "2g.20gb", 2, 1, 256, 19968 - 256}));
  EXPECT_EQ(t[1].fb_used_mib, 2048);
}

}  // namespace
}  // namespace tessera
