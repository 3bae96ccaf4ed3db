#include "agent/launch/cpu_topology.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

namespace tessera {
namespace {

class FakeSysfs : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tessera-sysfs-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  void Write(const std::string& rel, const std::string& text) {
    std::filesystem::path path = std::filesystem::path(root_) / rel;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path) << text;
  }
  std::string root_;
};

TEST(ParseCpuListTest, RangesAndSingles) {
  auto cpus = ParseCpuList("0-3,8,10-11");
  ASSERT_TRUE(cpus.ok()) << cpus.status().ToString();
  EXPECT_EQ(*cpus, (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
}

TEST(ParseCpuListTest, SysfsStyleTextSortedAndDeduplicated) {
  EXPECT_EQ(ParseCpuList("5\n").value(), std::vector<int>{5});
  EXPECT_EQ(ParseCpuList(" 3, 1,1-2 ").value(), (std::vector<int>{1, 2, 3}));
  EXPECT_TRUE(ParseCpuList("").value().empty());
  EXPECT_TRUE(ParseCpuList("\n").value().empty());
}

TEST(ParseCpuListTest, RejectsMalformedLists) {
  for (const char* bad : {"a", "3-1", "-1", "1,,2", "0-70000", "1-", "65536", "+3", "1;2"}) {
    auto cpus = ParseCpuList(bad);
    EXPECT_FALSE(cpus.ok()) << "accepted '" << bad << "'";
    if (!cpus.ok()) {
      EXPECT_EQ(cpus.status().code(), StatusCode::kInvalidArgument) << bad;
    }
  }
}

TEST(FormatCpuListTest, FoldsRanges) {
  EXPECT_EQ(FormatCpuList({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(FormatCpuList({11, 10, 10, 8}), "8,10-11");
  EXPECT_EQ(FormatCpuList({}), "");
  EXPECT_EQ(FormatCpuList({7}), "7");
  EXPECT_EQ(ParseCpuList(FormatCpuList({4, 5, 6, 9})).value(), (std::vector<int>{4, 5, 6, 9}));
}

TEST_F(FakeSysfs, CpusOfNumaNode) {
  Write("devices/system/node/node0/cpulist", "0-3\n");
  Write("devices/system/node/node1/cpulist", "4-7,12\n");
  Write("devices/system/node/node2/cpulist", "\n");
  Write("devices/system/node/node3/cpulist", "garbage\n");
  EXPECT_EQ(CpusOfNumaNode(0, root_), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(CpusOfNumaNode(1, root_), (std::vector<int>{4, 5, 6, 7, 12}));
  EXPECT_TRUE(CpusOfNumaNode(2, root_).empty());  // a memory-only node
  EXPECT_TRUE(CpusOfNumaNode(3, root_).empty());  // unreadable content
  EXPECT_TRUE(CpusOfNumaNode(4, root_).empty());  // absent
  EXPECT_TRUE(CpusOfNumaNode(-1, root_).empty());
}

TEST_F(FakeSysfs, OnlineNumaNodes) {
  EXPECT_TRUE(OnlineNumaNodes(root_).empty());
  Write("devices/system/node/online", "0-1,3\n");
  EXPECT_EQ(OnlineNumaNodes(root_), (std::vector<int>{0, 1, 3}));
}

TEST(CpuTopologyTest, RealSysfsIsConsistentWhenPresent) {
  // Whatever this machine has: every CPU of node 0 parses to a valid id.
  for (int cpu : CpusOfNumaNode(0)) {
    EXPECT_GE(cpu, 0);
    EXPECT_LT(cpu, kMaxCpuId);
  }
}

}  // namespace
}  // namespace tessera
