// `tessera queues import`: to stdout, to a file, to the controller; errors and
// --lenient warnings.
#include "cli/queues_import_command.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "api/queue_config.h"
#include "cli/testing/fake_controller.h"

namespace tessera {
namespace {

using namespace ::tessera::cli_testing;  // NOLINT: the fake controller and its helpers

constexpr const char* kKueue = R"(apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: h100}
spec: {nodeLabels: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: q}
spec:
  cohort: org
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors: [{name: h100, resources: [{name: nvidia.com/gpu, nominalQuota: 4, borrowingLimit: 2}]}]
)";

class QueuesImportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tessera_kueue_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ + "/" + name) << text;
    return dir_ + "/" + name;
  }
  std::string dir_;
};

TEST_F(QueuesImportTest, PrintsAQueueConfigurationTesseraParses) {
  QueuesImportOptions o;
  o.file = Write("kueue.yaml", kKueue);
  std::ostringstream out, err;
  ASSERT_EQ(RunQueuesImport(nullptr, o, out, err), 0) << err.str();
  EXPECT_EQ(err.str(), "");
  StatusOr<QueueTreeSpec> spec = ParseQueueTreeText(out.str(), GpuCatalog::Default());
  ASSERT_TRUE(spec.ok()) << spec.status().ToString() << "\n" << out.str();
  ASSERT_EQ(spec->nodes.size(), 2u);
  EXPECT_EQ(spec->nodes[0].name, "org");
  EXPECT_EQ(spec->nodes[1].name, "q");
  EXPECT_EQ(spec->nodes[1].parent, "org");
  ASSERT_EQ(spec->nodes[1].quotas.size(), 1u);
  EXPECT_EQ(spec->nodes[1].quotas[0].quota.nominal, 4000);
  EXPECT_EQ(spec->nodes[1].quotas[0].quota.borrowing_limit, 2000);
}

TEST_F(QueuesImportTest, WritesTheFileWithOut) {
  QueuesImportOptions o;
  o.file = Write("kueue.yaml", kKueue);
  o.out_file = dir_ + "/queues.yaml";
  std::ostringstream out, err;
  ASSERT_EQ(RunQueuesImport(nullptr, o, out, err), 0) << err.str();
  EXPECT_EQ(out.str(), "wrote " + o.out_file + " (1 queue, 1 cohort)\n");
  EXPECT_TRUE(LoadQueueTreeFile(o.out_file, GpuCatalog::Default()).ok());
}

TEST_F(QueuesImportTest, AFieldWithoutEquivalentIsBadInputUnlessLenient) {
  QueuesImportOptions o;
  o.file = Write("kueue.yaml", std::string(kKueue) + "  admissionChecks: [provisioning]\n");
  std::ostringstream out, err;
  EXPECT_EQ(RunQueuesImport(nullptr, o, out, err), 2);
  EXPECT_EQ(out.str(), "");
  EXPECT_EQ(err.str(),
            "tessera: ClusterQueue q: spec.admissionChecks: admission checks have no equivalent "
            "in Tessera (line 14, column 20)\n"
            "tessera: --lenient imports the rest and warns about such fields\n");

  o.lenient = true;
  std::ostringstream out2, err2;
  EXPECT_EQ(RunQueuesImport(nullptr, o, out2, err2), 0);
  EXPECT_EQ(err2.str(),
            "tessera: warning: ClusterQueue q: spec.admissionChecks: admission checks have no "
            "equivalent in Tessera (line 14, column 20)\n");
  EXPECT_TRUE(ParseQueueTreeText(out2.str(), GpuCatalog::Default()).ok());

  o.file = dir_ + "/missing.yaml";
  std::ostringstream err3;
  EXPECT_EQ(RunQueuesImport(nullptr, o, out, err3), 2);
  EXPECT_EQ(err3.str(), "tessera: cannot read '" + o.file + "'\n");
}

TEST_F(QueuesImportTest, ApplySendsTheConvertedConfiguration) {
  FakeController ctl;
  ctl.Reply("PUT", "/v1/queues", 200, R"({"queues": [{"name": "q"}]})");
  QueuesImportOptions o;
  o.file = Write("kueue.yaml", kKueue);
  o.apply = true;
  std::ostringstream out, err;
  const ClientConfig config = ctl.Config();
  ASSERT_EQ(RunQueuesImport(&config, o, out, err), 0) << err.str();
  EXPECT_EQ(out.str(), "queue configuration replaced (1 queue, 1 cohort)\n");
  const std::vector<SeenRequest> seen = ctl.requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].method, "PUT");
  EXPECT_EQ(seen[0].content_type, "application/yaml");
  StatusOr<QueueTreeSpec> spec = ParseQueueTreeText(seen[0].body, GpuCatalog::Default());
  ASSERT_TRUE(spec.ok()) << seen[0].body;
  EXPECT_EQ(spec->nodes.size(), 2u);
}

}  // namespace
}  // namespace tessera
