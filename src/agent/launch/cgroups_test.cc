#include "agent/launch/cgroups.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

namespace tessera {
namespace {

TEST(ParseCgroupV2PathTest, FindsTheUnifiedLine) {
  EXPECT_EQ(ParseCgroupV2Path("0::/system.slice/tessera-agent.service\n").value(),
            "/system.slice/tessera-agent.service");
  // A hybrid machine lists v1 hierarchies too.
  EXPECT_EQ(ParseCgroupV2Path("4:memory:/x\n1:cpu:/\n0::/\n").value(), "/");
}

TEST(ParseCgroupV2PathTest, ErrorsByCase) {
  EXPECT_EQ(ParseCgroupV2Path("4:memory:/x\n1:cpu:/\n").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ParseCgroupV2Path("").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ParseCgroupV2Path("0::/../sibling\n").status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(ParseCgroupV2Path("0::relative\n").status().code(), StatusCode::kInvalidArgument);
}

constexpr const char* kHybridMountinfo =
    "25 30 0:22 / /sys rw,nosuid - sysfs sysfs rw\n"
    "31 25 0:26 / /sys/fs/cgroup ro,nosuid shared:9 - tmpfs tmpfs ro,mode=755\n"
    "32 31 0:27 / /sys/fs/cgroup/unified rw,nosuid shared:10 - cgroup2 cgroup2 rw\n"
    "33 31 0:28 / /sys/fs/cgroup/memory rw,nosuid shared:11 - cgroup cgroup rw,memory\n";

TEST(FindCgroup2MountTest, HybridLayout) {
  auto mount = FindCgroup2Mount(kHybridMountinfo);
  ASSERT_TRUE(mount.ok()) << mount.status().ToString();
  EXPECT_EQ(mount->mount_point, "/sys/fs/cgroup/unified");
  EXPECT_EQ(mount->root, "/");
}

TEST(FindCgroup2MountTest, PrefersSysFsCgroupAndDecodesEscapes) {
  auto mount = FindCgroup2Mount(
      "40 1 0:50 / /mnt/my\\040cgroups rw - cgroup2 none rw\n"
      "41 1 0:29 /kubepods/pod1 /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n");
  ASSERT_TRUE(mount.ok());
  EXPECT_EQ(mount->mount_point, "/sys/fs/cgroup");
  EXPECT_EQ(mount->root, "/kubepods/pod1");
  auto other = FindCgroup2Mount("40 1 0:50 / /mnt/my\\040cgroups rw - cgroup2 none rw\n");
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->mount_point, "/mnt/my cgroups");
}

TEST(FindCgroup2MountTest, NoneMounted) {
  EXPECT_EQ(FindCgroup2Mount("33 31 0:28 / /sys/fs/cgroup/memory rw - cgroup cgroup rw\n")
                .status()
                .code(),
            StatusCode::kNotFound);
  EXPECT_EQ(FindCgroup2Mount("garbage\n\n").status().code(), StatusCode::kNotFound);
}

TEST(CgroupDirectoryTest, JoinsMountAndPath) {
  Cgroup2Mount plain{"/sys/fs/cgroup", "/"};
  EXPECT_EQ(CgroupDirectory(plain, "/system.slice/a.service").value(),
            "/sys/fs/cgroup/system.slice/a.service");
  EXPECT_EQ(CgroupDirectory(plain, "/").value(), "/sys/fs/cgroup");
  Cgroup2Mount nested{"/sys/fs/cgroup", "/kubepods/pod1"};
  EXPECT_EQ(CgroupDirectory(nested, "/kubepods/pod1/agent").value(), "/sys/fs/cgroup/agent");
  EXPECT_EQ(CgroupDirectory(nested, "/kubepods/pod1").value(), "/sys/fs/cgroup");
  EXPECT_EQ(CgroupDirectory(nested, "/kubepods/pod10").status().code(),
            StatusCode::kFailedPrecondition);
}

TEST(ControlTextTest, CpuMax) {
  EXPECT_EQ(CpuMaxText(0), "max 100000");
  EXPECT_EQ(CpuMaxText(-5), "max 100000");
  EXPECT_EQ(CpuMaxText(1000), "100000 100000");
  EXPECT_EQ(CpuMaxText(1500), "150000 100000");
  EXPECT_EQ(CpuMaxText(250), "25000 100000");
  EXPECT_EQ(CpuMaxText(5), "1000 100000");  // raised to the kernel's 1 ms minimum
  EXPECT_EQ(CpuMaxText(64000), "6400000 100000");
}

TEST(ControlTextTest, MemoryMax) {
  EXPECT_EQ(MemoryMaxText(0), "max");
  EXPECT_EQ(MemoryMaxText(64), "67108864");
  EXPECT_EQ(MemoryMaxText(81920), "85899345920");
}

TEST(ControlTextTest, ParseControllers) {
  EXPECT_EQ(ParseControllers("cpuset cpu io memory pids\n"),
            (std::vector<std::string>{"cpuset", "cpu", "io", "memory", "pids"}));
  EXPECT_TRUE(ParseControllers("\n").empty());
}

TEST(CgroupTreeTest, NotACgroupDirectoryIsUnusableWithAWarning) {
  char tmpl[] = "/tmp/tessera-cg-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string root = tmpl;
  CgroupTree tree = CgroupTree::Open(root + "/parent");
  EXPECT_FALSE(tree.usable());
  ASSERT_EQ(tree.warnings().size(), 1u);
  EXPECT_NE(tree.warnings()[0].find("not in a cgroup v2 file system"), std::string::npos)
      << tree.warnings()[0];
  EXPECT_NE(tree.warnings()[0].find("CPU and memory limits are not enforced"), std::string::npos);
  EXPECT_EQ(tree.CreateTaskGroup("1.0.0", 100, 64).status().code(),
            StatusCode::kFailedPrecondition);
  std::error_code ec;
  std::filesystem::remove_all(root, ec);
}

TEST(CgroupTreeTest, UnwritableParentIsUnusableWithAWarning) {
  CgroupTree tree = CgroupTree::Open("/proc/tessera-no-such-cgroup");
  EXPECT_FALSE(tree.usable());
  ASSERT_EQ(tree.warnings().size(), 1u);
  EXPECT_NE(tree.warnings()[0].find("not writable at /proc/tessera-no-such-cgroup"),
            std::string::npos)
      << tree.warnings()[0];
}

TEST(CgroupTreeTest, RemovingAMissingGroupIsOk) {
  EXPECT_TRUE(CgroupTree::RemoveTaskGroup("/tmp/tessera-no-such-cgroup-dir").ok());
}

}  // namespace
}  // namespace tessera
