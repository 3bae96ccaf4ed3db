#include "api/kueue_import.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "api/queue_config.h"
#include "model/testing/test_catalog.h"

namespace tessera {
namespace {

using testing::Catalog;

std::string ReadExample(const std::string& name) {
  std::ifstream in(std::string(TESSERA_EXAMPLES_DIR) + "/" + name);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

const QueueNodeSpec* Node(const QueueTreeSpec& spec, const std::string& name) {
  for (const QueueNodeSpec& n : spec.nodes) {
    if (n.name == name) {
      return &n;
    }
  }
  return nullptr;
}

const Quota* QuotaOf(const QueueNodeSpec& node, const std::string& resource) {
  for (const QueueQuota& q : node.quotas) {
    if (ResourceNameString(q.resource, Catalog()) == resource) {
      return &q.quota;
    }
  }
  return nullptr;
}

constexpr const char* kFlavor = R"(
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: h100}
spec: {nodeLabels: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}}
---
)";

// A ClusterQueue in cohort `org` with `extra` lines under spec (indented 2).
std::string Queue(const std::string& extra) {
  return std::string(kFlavor) +
         "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: q}\nspec:\n"
         "  cohort: org\n"
         "  resourceGroups:\n"
         "  - coveredResources: [nvidia.com/gpu]\n"
         "    flavors: [{name: h100, resources: [{name: nvidia.com/gpu, nominalQuota: 4}]}]\n" +
         extra;
}

TEST(KueueImportTest, TheExampleMapsQueuesCohortsFlavorsTenantsAndPriorities) {
  StatusOr<KueueImport> imported =
      ImportKueueYaml(ReadExample("kueue/cluster-queues.yaml"), Catalog());
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  EXPECT_TRUE(imported->warnings.empty());
  const QueueTreeSpec& spec = imported->spec;
  ASSERT_EQ(spec.nodes.size(), 3u);
  const QueueNodeSpec* cohort = Node(spec, "research");
  ASSERT_NE(cohort, nullptr);
  EXPECT_TRUE(cohort->cohort);
  const QueueNodeSpec* a = Node(spec, "team-a-cq");
  const QueueNodeSpec* b = Node(spec, "team-b-cq");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(a->parent, "research");
  EXPECT_EQ(a->tenant, "team-a");
  EXPECT_EQ(b->tenant, "team-b");
  EXPECT_EQ(a->weight, 1);
  EXPECT_EQ(b->weight, 2);
  const Quota* a_h100 = QuotaOf(*a, "gpu:H100-80GB");
  ASSERT_NE(a_h100, nullptr);
  EXPECT_EQ(a_h100->nominal, 2000);
  EXPECT_EQ(a_h100->borrowing_limit, 1000);
  EXPECT_FALSE(a_h100->lending_limit.has_value());
  const Quota* b_h100 = QuotaOf(*b, "gpu:H100-80GB");
  ASSERT_NE(b_h100, nullptr);
  EXPECT_EQ(b_h100->lending_limit, 1000);
  EXPECT_EQ(QuotaOf(*b, "gpu:A100-80GB")->borrowing_limit, 0);
  EXPECT_EQ(QuotaOf(*a, "cpu")->nominal, 32000);
  EXPECT_EQ(QuotaOf(*a, "memory")->nominal, 256 * 1024);
  ASSERT_EQ(spec.priority_classes.size(), 1u);
  EXPECT_EQ(spec.priority_classes[0].name, "urgent");
  EXPECT_EQ(spec.priority_classes[0].value, 1000);

  // The text Tessera writes reads back through its own parser as the same tree.
  const std::string yaml = QueueTreeYaml(spec, Catalog());
  StatusOr<QueueTreeSpec> parsed = ParseQueueTreeText(yaml, Catalog());
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString() << "\n" << yaml;
  EXPECT_EQ(QueueTreeYaml(*parsed, Catalog()), yaml);
  EXPECT_TRUE(QueueTree::Create(*parsed, Catalog()).ok());
}

TEST(KueueImportTest, HierarchicalCohortsAndUndeclaredCohorts) {
  const std::string yaml = Queue("") +
                           "---\napiVersion: kueue.x-k8s.io/v1alpha1\nkind: Cohort\n"
                           "metadata: {name: org}\nspec:\n  parent: company\n"
                           "  resourceGroups:\n  - coveredResources: [nvidia.com/gpu]\n"
                           "    flavors: [{name: h100, resources: [{name: nvidia.com/gpu, "
                           "nominalQuota: 2, lendingLimit: 1}]}]\n";
  StatusOr<KueueImport> imported = ImportKueueYaml(yaml, Catalog());
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  const QueueNodeSpec* org = Node(imported->spec, "org");
  const QueueNodeSpec* company = Node(imported->spec, "company");
  ASSERT_NE(org, nullptr);
  ASSERT_NE(company, nullptr);
  EXPECT_TRUE(company->cohort);
  EXPECT_EQ(org->parent, "company");
  EXPECT_EQ(QuotaOf(*org, "gpu:H100-80GB")->nominal, 2000);
  EXPECT_EQ(QuotaOf(*org, "gpu:H100-80GB")->lending_limit, 1000);
  EXPECT_EQ(Node(imported->spec, "q")->tenant, "");  // no LocalQueue: the queue's name
}

TEST(KueueImportTest, ProductLabelsNameCatalogModels) {
  for (const auto& [label, model] :
       std::vector<std::pair<std::string, std::string>>{{"NVIDIA-A100-SXM4-80GB", "A100-80GB"},
                                                        {"NVIDIA-H100-80GB-HBM3", "H100-80GB"},
                                                        {"NVIDIA-H200", "H200-141GB"},
                                                        {"Tesla-T4-SHARED", "T4"},
                                                        {"nvidia-tesla-a100", "A100-40GB"},
                                                        {"nvidia-l40s", "L40S"}}) {
    const std::string yaml =
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: f}\n"
        "spec: {nodeLabels: {nvidia.com/gpu.product: " +
        label +
        "}}\n---\n"
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: q}\n"
        "spec: {resourceGroups: [{coveredResources: [nvidia.com/gpu], flavors: [{name: f, "
        "resources: [{name: nvidia.com/gpu, nominalQuota: 1}]}]}]}\n";
    StatusOr<KueueImport> imported = ImportKueueYaml(yaml, Catalog());
    ASSERT_TRUE(imported.ok()) << label << ": " << imported.status().ToString();
    EXPECT_NE(QuotaOf(*Node(imported->spec, "q"), "gpu:" + model), nullptr) << label;
  }
}

TEST(KueueImportTest, WhatHasNoEquivalentIsAnErrorNamingTheObjectAndField) {
  struct Case {
    std::string extra;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"  preemption: {reclaimWithinCohort: Never}\n",
       "ClusterQueue q: spec.preemption.reclaimWithinCohort: 'Never' has no per-queue equivalent"},
      {"  preemption: {withinClusterQueue: LowerOrNewerEqualPriority}\n",
       "ClusterQueue q: spec.preemption.withinClusterQueue:"},
      {"  preemption: {borrowWithinCohort: {policy: LowerPriority}}\n",
       "ClusterQueue q: spec.preemption.borrowWithinCohort.policy:"},
      {"  admissionChecks: [prov]\n", "ClusterQueue q: spec.admissionChecks: admission checks"},
      {"  flavorFungibility: {whenCanBorrow: TryNextFlavor}\n",
       "ClusterQueue q: spec.flavorFungibility: has no equivalent"},
      {"  queueingStrategy: StrictFIFO\n", "ClusterQueue q: spec.queueingStrategy:"},
      {"  fairSharing: {weight: 0.5}\n", "ClusterQueue q: spec.fairSharing.weight: weight '0.5'"},
      {"  namespaceSelector: {matchLabels: {team: a}}\n",
       "ClusterQueue q: spec.namespaceSelector:"},
      {"  bogus: 1\n", "ClusterQueue q: spec.bogus: unknown field 'bogus'"},
  };
  for (const Case& c : cases) {
    StatusOr<KueueImport> imported = ImportKueueYaml(Queue(c.extra), Catalog());
    ASSERT_FALSE(imported.ok()) << c.extra;
    EXPECT_EQ(imported.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(imported.status().message().find(c.message), std::string::npos)
        << imported.status().message();
    EXPECT_NE(imported.status().message().find("(line "), std::string::npos)
        << imported.status().message();

    // Lenient: a warning with the same words, and the rest imported.
    StatusOr<KueueImport> lenient = ImportKueueYaml(Queue(c.extra), Catalog(), {.lenient = true});
    ASSERT_TRUE(lenient.ok()) << lenient.status().ToString();
    ASSERT_EQ(lenient->warnings.size(), 1u) << c.extra;
    EXPECT_NE(lenient->warnings[0].find(c.message), std::string::npos) << lenient->warnings[0];
    EXPECT_EQ(QuotaOf(*Node(lenient->spec, "q"), "gpu:H100-80GB")->nominal, 4000);
  }
}

TEST(KueueImportTest, UnknownResourcesFlavorsAndLabels) {
  const std::string mig =
      std::string(kFlavor) +
      "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: q}\n"
      "spec: {resourceGroups: [{coveredResources: [nvidia.com/mig-1g.10gb], flavors: [{name: "
      "h100, resources: [{name: nvidia.com/mig-1g.10gb, nominalQuota: 7}]}]}]}\n";
  StatusOr<KueueImport> imported = ImportKueueYaml(mig, Catalog());
  ASSERT_FALSE(imported.ok());
  EXPECT_NE(imported.status().message().find(
                "ClusterQueue q: spec.resourceGroups[0].flavors[0].resources[0].name: resource "
                "'nvidia.com/mig-1g.10gb' has no equivalent"),
            std::string::npos)
      << imported.status().message();
  StatusOr<KueueImport> lenient = ImportKueueYaml(mig, Catalog(), {.lenient = true});
  ASSERT_TRUE(lenient.ok()) << lenient.status().ToString();
  EXPECT_TRUE(Node(lenient->spec, "q")->quotas.empty());

  const std::string missing =
      "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: q}\n"
      "spec: {resourceGroups: [{coveredResources: [cpu], flavors: [{name: spot, resources: "
      "[{name: cpu, nominalQuota: 1}]}]}]}\n";
  imported = ImportKueueYaml(missing, Catalog(), {.lenient = true});
  ASSERT_FALSE(imported.ok());
  EXPECT_NE(imported.status().message().find("ResourceFlavor 'spot' is not defined"),
            std::string::npos);

  const std::string labels =
      "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: f}\n"
      "spec:\n  nodeLabels: {cloud.provider.com/spot: \"true\"}\n"
      "  nodeTaints: [{key: spot, effect: NoSchedule}]\n";
  imported = ImportKueueYaml(labels, Catalog());
  ASSERT_FALSE(imported.ok());
  EXPECT_NE(imported.status().message().find(
                "ResourceFlavor f: spec.nodeLabels.cloud.provider.com/spot: node label"),
            std::string::npos)
      << imported.status().message();
  lenient = ImportKueueYaml(labels, Catalog(), {.lenient = true});
  ASSERT_TRUE(lenient.ok());
  EXPECT_EQ(lenient->warnings.size(), 2u);

  const std::string product =
      "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: f}\n"
      "spec: {nodeLabels: {nvidia.com/gpu.product: NVIDIA-B300}}\n";
  imported = ImportKueueYaml(product, Catalog(), {.lenient = true});
  ASSERT_FALSE(imported.ok());
  EXPECT_NE(imported.status().message().find("GPU product 'NVIDIA-B300' is not a known GPU model"),
            std::string::npos);
}

TEST(KueueImportTest, CpuUnderTwoFlavorsIsOneQuotaInTessera) {
  const std::string yaml =
      std::string(kFlavor) +
      "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: cpu-only}\n---\n"
      "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: q}\n"
      "spec:\n  cohort: org\n  resourceGroups:\n  - coveredResources: [cpu]\n"
      "    flavors:\n    - {name: h100, resources: [{name: cpu, nominalQuota: 8, borrowingLimit: "
      "2}]}\n"
      "    - {name: cpu-only, resources: [{name: cpu, nominalQuota: 4, borrowingLimit: 1}]}\n";
  StatusOr<KueueImport> imported = ImportKueueYaml(yaml, Catalog());
  ASSERT_FALSE(imported.ok());
  EXPECT_NE(imported.status().message().find("flavors 'h100' and 'cpu-only' both give cpu"),
            std::string::npos)
      << imported.status().message();
  imported = ImportKueueYaml(yaml, Catalog(), {.lenient = true});
  ASSERT_TRUE(imported.ok());
  const Quota* cpu = QuotaOf(*Node(imported->spec, "q"), "cpu");
  EXPECT_EQ(cpu->nominal, 12000);
  EXPECT_EQ(cpu->borrowing_limit, 3000);
}

TEST(KueueImportTest, LocalQueuesOfTwoNamespacesOnOneQueue) {
  const std::string yaml = Queue("") +
                           "---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\n"
                           "metadata: {name: lq, namespace: ns1}\nspec: {clusterQueue: q}\n"
                           "---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\n"
                           "metadata: {name: lq, namespace: ns2}\nspec: {clusterQueue: q}\n";
  StatusOr<KueueImport> imported = ImportKueueYaml(yaml, Catalog());
  ASSERT_FALSE(imported.ok());
  EXPECT_NE(imported.status().message().find(
                "LocalQueue ns2/lq: metadata.namespace: ClusterQueue 'q' is already used from "
                "namespace 'ns1'"),
            std::string::npos)
      << imported.status().message();
  imported = ImportKueueYaml(yaml, Catalog(), {.lenient = true});
  ASSERT_TRUE(imported.ok());
  EXPECT_EQ(Node(imported->spec, "q")->tenant, "ns1");
}

TEST(KueueImportTest, OtherObjectsAndBadText) {
  const std::string deployment =
      Queue("") + "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n";
  StatusOr<KueueImport> imported = ImportKueueYaml(deployment, Catalog());
  ASSERT_FALSE(imported.ok());
  EXPECT_NE(imported.status().message().find("Deployment web: apiVersion: not a Kueue object"),
            std::string::npos)
      << imported.status().message();
  EXPECT_TRUE(ImportKueueYaml(deployment, Catalog(), {.lenient = true}).ok());

  imported = ImportKueueYaml("kind: [unclosed\n", Catalog(), {}, "q.yaml");
  ASSERT_FALSE(imported.ok());
  EXPECT_EQ(imported.status().message().rfind("q.yaml: ", 0), 0u) << imported.status().message();

  // A borrowing limit without a cohort is refused, as Kueue does.
  const std::string rootless =
      std::string(kFlavor) +
      "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: q}\n"
      "spec: {resourceGroups: [{coveredResources: [nvidia.com/gpu], flavors: [{name: h100, "
      "resources: [{name: nvidia.com/gpu, nominalQuota: 1, borrowingLimit: 1}]}]}]}\n";
  imported = ImportKueueYaml(rootless, Catalog());
  ASSERT_FALSE(imported.ok());
  EXPECT_NE(imported.status().message().find("cannot have a borrowing limit"), std::string::npos)
      << imported.status().message();

  // Errors carry the line of the field in the whole file.
  imported = ImportKueueYaml(Queue("  queueingStrategy: StrictFIFO\n"), Catalog());
  ASSERT_FALSE(imported.ok());
  EXPECT_NE(imported.status().message().find("(line 15, column 21)"), std::string::npos)
      << imported.status().message();
}

TEST(KueueImportTest, KubernetesMemoryQuantities) {
  bool exact = false;
  EXPECT_EQ(KubernetesBytesToMiB("512Gi", &exact).value(), 512 * 1024);
  EXPECT_TRUE(exact);
  EXPECT_EQ(KubernetesBytesToMiB("1.5Ti", &exact).value(), 1536 * 1024);
  EXPECT_EQ(KubernetesBytesToMiB("1073741824", &exact).value(), 1024);
  EXPECT_TRUE(exact);
  EXPECT_EQ(KubernetesBytesToMiB("100G", &exact).value(), 95367);  // 100e9 bytes
  EXPECT_FALSE(exact);
  EXPECT_FALSE(KubernetesBytesToMiB("12 parsecs", &exact).ok());
  EXPECT_FALSE(KubernetesBytesToMiB("-1Gi", &exact).ok());
  EXPECT_FALSE(KubernetesBytesToMiB("999999999999999999999Pi", &exact).ok());
}

}  // namespace
}  // namespace tessera
