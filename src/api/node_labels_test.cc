#include "api/node_labels.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

std::string ArgsError(const std::vector<std::string>& args) {
  StatusOr<NodeLabels> labels = ParseNodeLabelArgs(args);
  EXPECT_FALSE(labels.ok());
  EXPECT_EQ(labels.status().code(), StatusCode::kInvalidArgument);
  return labels.status().message();
}

TEST(NodeLabelsTest, ReadsRepeatedAndCommaSeparatedArgsSortedByKey) {
  StatusOr<NodeLabels> labels = ParseNodeLabelArgs({"rack=r1,block=b2", " zone=eu-1 "});
  ASSERT_TRUE(labels.ok()) << labels.status().ToString();
  EXPECT_EQ(*labels, (NodeLabels{{"block", "b2"}, {"rack", "r1"}, {"zone", "eu-1"}}));
  EXPECT_EQ(FormatNodeLabels(*labels), "block=b2,rack=r1,zone=eu-1");
  EXPECT_TRUE(ParseNodeLabelArgs({}).value().empty());
  StatusOr<NodeLabels> domain =
      ParseNodeLabelArgs({"nvlink-domain=6b1f2c3d-0000-4a5b-9c8d-112233445566/7"});
  ASSERT_TRUE(domain.ok()) << domain.status().ToString();
}

TEST(NodeLabelsTest, ErrorsNameTheBadLabel) {
  EXPECT_EQ(ArgsError({"rack"}), "--label 'rack': expected key=value, e.g. rack=r1");
  EXPECT_NE(ArgsError({"Rack=r1"}).find("label 'Rack=r1': a key is lowercase"), std::string::npos);
  EXPECT_NE(ArgsError({"rack="}).find("label 'rack=': the value must be 1 to 128"),
            std::string::npos);
  EXPECT_NE(ArgsError({"=r1"}).find("label '=r1': the key must be 1 to 63"), std::string::npos);
  EXPECT_NE(ArgsError({"rack=r 1"}).find("label 'rack=r 1': a value is"), std::string::npos);
  EXPECT_NE(ArgsError({"rack=-r1"}).find("label 'rack=-r1'"), std::string::npos);
  EXPECT_NE(ArgsError({"rack-=r1"}).find("label 'rack-=r1'"), std::string::npos);
  EXPECT_NE(ArgsError({"rack=r1", "rack=r2"}).find("the key 'rack' is given twice"),
            std::string::npos);
  EXPECT_NE(ArgsError({"node=n1"}).find("the key 'node' is reserved"), std::string::npos);
  EXPECT_NE(ArgsError({"tessera.io/x=1"}).find("label 'tessera.io/x=1'"), std::string::npos);
  EXPECT_NE(ArgsError({"tessera-rack=1"}).find("is reserved"), std::string::npos);
  EXPECT_NE(ArgsError({"rack=r\t1"}).find("label 'rack=r?1'"), std::string::npos);
  EXPECT_NE(ArgsError({std::string(64, 'a') + "=1"}).find("the key must be 1 to 63"),
            std::string::npos);
}

TEST(NodeLabelsTest, ValidateCountsAndDuplicates) {
  NodeLabels many;
  for (int i = 0; i <= 64; ++i) {
    many.emplace_back("k" + std::to_string(i), "v");
  }
  EXPECT_NE(ValidateNodeLabels(many).message().find("at most 64 labels"), std::string::npos);
  EXPECT_TRUE(ValidateNodeLabels({{"rack", "r1"}, {"block", "b1"}}).ok());
  EXPECT_FALSE(ValidateNodeLabels({{"rack", "r1"}, {"rack", "r1"}}).ok());
}

TEST(NodeLabelsTest, MetricLabelNamesArePrometheusSafe) {
  EXPECT_EQ(MetricLabelName("nvlink-domain"), "nvlink_domain");
  EXPECT_EQ(MetricLabelName("topology.k8s"), "topology_k8s");
  EXPECT_EQ(MetricLabelName("rack"), "rack");
}

}  // namespace
}  // namespace tessera
