#include "agent/runtime/cdi_spec.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace tessera {
namespace {

TEST(CdiSpecTest, OneDevicePerUuidWithItsNodesAndCommonEdits) {
  CdiSpecInput in;
  in.devices = {{"GPU-aaaa", {{"/dev/nvidia0", "/fake/nvidia0"}}, {}},
                {"MIG-bbbb",
                 {{"/dev/nvidia1", "/fake/nvidia1"},
                  {"/dev/nvidia-caps/nvidia-cap21", "/fake/nvidia-caps/nvidia-cap21"},
                  {"/dev/nvidia-caps/nvidia-cap22", "/fake/nvidia-caps/nvidia-cap22"}},
                 {}}};
  in.control_nodes = {{"/dev/nvidiactl", "/fake/nvidiactl"}};
  in.driver_files = {"/usr/lib/x86_64-linux-gnu/libcuda.so.1"};
  StatusOr<nlohmann::json> spec = CdiSpecJson(in);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ((*spec)["cdiVersion"], "0.5.0");
  EXPECT_EQ((*spec)["kind"], "tessera.io/gpu");
  ASSERT_EQ((*spec)["devices"].size(), 2U);
  EXPECT_EQ((*spec)["devices"][1]["name"], "MIG-bbbb");
  EXPECT_EQ((*spec)["devices"][1]["containerEdits"]["deviceNodes"].size(), 3U);
  EXPECT_EQ((*spec)["devices"][0]["containerEdits"]["deviceNodes"][0]["hostPath"], "/fake/nvidia0");
  EXPECT_EQ((*spec)["containerEdits"]["deviceNodes"][0]["path"], "/dev/nvidiactl");
  const auto& mount = (*spec)["containerEdits"]["mounts"][0];
  EXPECT_EQ(mount["containerPath"], mount["hostPath"]);
  EXPECT_EQ(mount["options"][0], "ro");
  EXPECT_EQ(CdiDeviceName("GPU-aaaa"), "tessera.io/gpu=GPU-aaaa");
}

TEST(CdiSpecTest, RefusesNamesCdiWouldRefuseAndDuplicates) {
  EXPECT_FALSE(CdiSpecJson({{{"-x", {{"/dev/nvidia0", "/x"}}, {}}}, {}, {}}).ok());
  EXPECT_FALSE(CdiSpecJson({{{"a b", {{"/dev/nvidia0", "/x"}}, {}}}, {}, {}}).ok());
  EXPECT_FALSE(CdiSpecJson({{{"GPU-1", {{"/dev/nvidia0", "/x"}}, {}},
                             {"GPU-1", {{"/dev/nvidia0", "/x"}}, {}}},
                            {},
                            {}})
                   .ok());
  EXPECT_FALSE(CdiSpecJson({{{"GPU-1", {}, {}}}, {}, {}}).ok());  // no edit at all
  StatusOr<nlohmann::json> env_only =
      CdiSpecJson({{{"GPU-1", {}, {"TESSERA_GPU_0=GPU-1"}}}, {}, {}});
  ASSERT_TRUE(env_only.ok());
  EXPECT_EQ((*env_only)["devices"][0]["containerEdits"]["env"][0], "TESSERA_GPU_0=GPU-1");
  EXPECT_FALSE((*env_only)["devices"][0]["containerEdits"].contains("deviceNodes"));
  EXPECT_TRUE(IsCdiDeviceName("MIG-3f2a:1.0_x"));
}

TEST(CdiSpecTest, FindsControlNodesAndDriverFilesThatExist) {
  const std::string dir = testing::TempDir() + "cdi_spec_test_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir + "/dev");
  std::filesystem::create_directories(dir + "/lib");
  std::filesystem::create_directories(dir + "/bin");
  for (const char* f : {"/lib/libcuda.so.550.1", "/lib/libnvidia-ml.so.1", "/lib/libc.so.6",
                        "/bin/nvidia-smi", "/bin/ls"}) {
    std::ofstream(dir + f) << "x";
  }
  std::ofstream(dir + "/dev/nvidiactl") << "not a device";
  const bool root = ::geteuid() == 0;
  if (root) {
    ASSERT_EQ(::mknod((dir + "/dev/nvidia-uvm").c_str(), S_IFCHR | 0666, makedev(1, 3)), 0);
  }
  std::vector<CdiDeviceNode> nodes = ControlNodes(dir + "/dev");
  if (root) {
    ASSERT_EQ(nodes.size(), 1U);  // a regular file named like a node is not one
    EXPECT_EQ(nodes[0], (CdiDeviceNode{"/dev/nvidia-uvm", dir + "/dev/nvidia-uvm"}));
  } else {
    EXPECT_TRUE(nodes.empty());
  }
  const CdiDevice fake = GpuCdiDevice("GPU-x", 3, dir + "/dev");  // no nvidia3 there
  EXPECT_TRUE(fake.nodes.empty());
  EXPECT_EQ(fake.env, std::vector<std::string>{"TESSERA_GPU_3=GPU-x"});
  if (root) {
    ASSERT_EQ(::mknod((dir + "/dev/nvidia3").c_str(), S_IFCHR | 0666, makedev(1, 3)), 0);
    const CdiDevice real = GpuCdiDevice("GPU-x", 3, dir + "/dev");
    EXPECT_EQ(real.nodes, (std::vector<CdiDeviceNode>{{"/dev/nvidia3", dir + "/dev/nvidia3"}}));
    EXPECT_TRUE(real.env.empty());
  }
  EXPECT_EQ(FindDriverFiles({dir + "/lib"}, {dir + "/bin"}),
            (std::vector<std::string>{dir + "/bin/nvidia-smi", dir + "/lib/libcuda.so.550.1",
                                      dir + "/lib/libnvidia-ml.so.1"}));

  ASSERT_TRUE(WriteCdiSpec(dir + "/cdi", "node-1", {{"kind", "tessera.io/gpu"}}).ok());
  std::ifstream in(dir + "/cdi/tessera-node-1.json");
  EXPECT_EQ(nlohmann::json::parse(in)["kind"], "tessera.io/gpu");
  struct stat st {};
  ASSERT_EQ(::stat((dir + "/cdi/tessera-node-1.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644U);
  RemoveCdiSpec(dir + "/cdi", "node-1");
  EXPECT_FALSE(std::filesystem::exists(dir + "/cdi/tessera-node-1.json"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tessera
