#include "model/node.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(NodeTest, UniformNodeSpreadsGpusOverNuma) {
  const GpuCatalog& c = GpuCatalog::Default();
  NodeSpec n = MakeUniformNode("n0", MilliCpu(64000), MiB(512 * 1024), *c.Find("H100-80GB"), 8,
                               SharingMode::kExclusive, 2, true);
  ASSERT_EQ(n.gpus.size(), 8U);
  EXPECT_EQ(n.gpus[0].numa_node, 0);
  EXPECT_EQ(n.gpus[3].numa_node, 0);
  EXPECT_EQ(n.gpus[4].numa_node, 1);
  EXPECT_EQ(n.gpus[7].numa_node, 1);
  EXPECT_EQ(n.gpus[5].nvlink_domain, 0);
  EXPECT_TRUE(n.Homogeneous());
  EXPECT_TRUE(ValidateNodeSpec(n, c).ok());
}

TEST(NodeTest, ValidationCatchesImpossibleSpecs) {
  const GpuCatalog& c = GpuCatalog::Default();
  NodeSpec n =
      MakeUniformNode("n0", MilliCpu(8000), MiB(1024), *c.Find("T4"), 2, SharingMode::kShared);
  EXPECT_TRUE(ValidateNodeSpec(n, c).ok());
  NodeSpec mig_on_t4 = n;
  mig_on_t4.gpus[0].mode = SharingMode::kMig;
  Status s = ValidateNodeSpec(mig_on_t4, c);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("does not support MIG"), std::string::npos);
  NodeSpec bad_numa = n;
  bad_numa.gpus[1].numa_node = 3;
  EXPECT_FALSE(ValidateNodeSpec(bad_numa, c).ok());
  NodeSpec negative = n;
  negative.cpu = MilliCpu(-5);
  EXPECT_FALSE(ValidateNodeSpec(negative, c).ok());
  n.labels.push_back({"rack", "r7"});
  EXPECT_EQ(n.Label("rack"), "r7");
  EXPECT_EQ(n.Label("zone"), "");
}

TEST(NodeTest, SharingModesRoundTrip) {
  for (SharingMode m : {SharingMode::kExclusive, SharingMode::kMig, SharingMode::kShared}) {
    EXPECT_EQ(*ParseSharingMode(SharingModeName(m)), m);
  }
  EXPECT_FALSE(ParseSharingMode("mps").ok());
}

}  // namespace
}  // namespace tessera
