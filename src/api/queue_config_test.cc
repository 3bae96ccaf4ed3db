#include "api/queue_config.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "model/testing/test_catalog.h"

namespace tessera {
namespace {

using testing::Catalog;

// The example of queue_config.h, verbatim.
constexpr const char* kExample = R"(
priorityClasses:
  - {name: high, value: 100}
cohorts:
  - name: org
    parent: ""              # optional: cohorts nest
    quota: {gpu: 16}        # a cohort may hold quota of its own
queues:
  - name: team-a
    cohort: org             # optional: a queue without a cohort borrows from nobody
    tenant: a               # optional, default the queue's name
    weight: 2               # fair-share weight, default 1
    quota:
      gpu: {nominal: 8, borrowingLimit: 4, lendingLimit: 2}
      "gpu:H100-80GB": 4    # a bare number is the nominal quota
      cpu: 64               # cores; "500m" is milli-cores
      memory: 512Gi         # Mi, Gi, Ti (binary); a bare number is MiB
      gpu-memory: 640Gi
)";

StatusOr<QueueTreeSpec> Parse(const std::string& yaml) {
  return ParseQueueTreeYaml(YAML::Load(yaml), Catalog());
}

// Parses `yaml` and expects InvalidArgument with a message containing each of `parts`.
void ExpectError(const std::string& yaml, const std::vector<std::string>& parts) {
  StatusOr<QueueTreeSpec> spec = Parse(yaml);
  ASSERT_FALSE(spec.ok()) << yaml;
  EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument);
  for (const std::string& part : parts) {
    EXPECT_NE(spec.status().message().find(part), std::string::npos)
        << "'" << part << "' not in: " << spec.status().message();
  }
}

StatusOr<int64_t> Quantity(const std::string& text, ResourceKind kind) {
  return ParseResourceQuantity(YAML::Load(text), kind);
}

// Field by field: QueueTreeSpec has no equality of its own.
void ExpectSameSpec(const QueueTreeSpec& a, const QueueTreeSpec& b) {
  ASSERT_EQ(a.priority_classes.size(), b.priority_classes.size());
  for (size_t i = 0; i < a.priority_classes.size(); ++i) {
    EXPECT_EQ(a.priority_classes[i].name, b.priority_classes[i].name);
    EXPECT_EQ(a.priority_classes[i].value, b.priority_classes[i].value);
  }
  ASSERT_EQ(a.nodes.size(), b.nodes.size());
  for (size_t i = 0; i < a.nodes.size(); ++i) {
    const QueueNodeSpec& x = a.nodes[i];
    const QueueNodeSpec& y = b.nodes[i];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.cohort, y.cohort) << x.name;
    EXPECT_EQ(x.parent, y.parent) << x.name;
    EXPECT_EQ(x.tenant, y.tenant) << x.name;
    EXPECT_EQ(x.weight, y.weight) << x.name;
    ASSERT_EQ(x.quotas.size(), y.quotas.size()) << x.name;
    for (size_t q = 0; q < x.quotas.size(); ++q) {
      EXPECT_EQ(x.quotas[q].resource, y.quotas[q].resource) << x.name;
      EXPECT_EQ(x.quotas[q].quota.nominal, y.quotas[q].quota.nominal) << x.name;
      EXPECT_EQ(x.quotas[q].quota.borrowing_limit, y.quotas[q].quota.borrowing_limit) << x.name;
      EXPECT_EQ(x.quotas[q].quota.lending_limit, y.quotas[q].quota.lending_limit) << x.name;
    }
  }
}

TEST(QueueConfigTest, EmittedYamlReadsBackAsTheSameSpec) {
  StatusOr<QueueTreeSpec> example = Parse(kExample);
  ASSERT_TRUE(example.ok()) << example.status().ToString();
  StatusOr<QueueTreeSpec> again = Parse(QueueTreeYaml(*example, Catalog()));
  ASSERT_TRUE(again.ok()) << again.status().ToString() << "\n" << QueueTreeYaml(*example, Catalog());
  ExpectSameSpec(*example, *again);
  EXPECT_EQ(again->nodes[1].quotas[0].quota.borrowing_limit, 4000);

  // Fractions, nested cohorts and a queue without quota.
  StatusOr<QueueTreeSpec> odd = Parse(R"(
cohorts: [{name: top}, {name: mid, parent: top, quota: {cpu: 1500m}}]
queues:
  - {name: a, cohort: mid, quota: {gpu: {nominal: 0.25, lendingLimit: 125m}, memory: 3Gi}}
  - {name: b}
)");
  ASSERT_TRUE(odd.ok()) << odd.status().ToString();
  again = Parse(QueueTreeYaml(*odd, Catalog()));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  ExpectSameSpec(*odd, *again);
  EXPECT_EQ(again->nodes[2].quotas[0].quota.nominal, 250);
  EXPECT_EQ(again->nodes[2].quotas[1].quota.nominal, 3072);
}

TEST(QueueConfigTest, ParsesTheDocumentedExample) {
  StatusOr<QueueTreeSpec> parsed = Parse(kExample);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const QueueTreeSpec& spec = *parsed;

  ASSERT_EQ(spec.priority_classes.size(), 1u);
  EXPECT_EQ(spec.priority_classes[0].name, "high");
  EXPECT_EQ(spec.priority_classes[0].value, 100);

  ASSERT_EQ(spec.nodes.size(), 2u);
  const QueueNodeSpec& org = spec.nodes[0];
  EXPECT_EQ(org.name, "org");
  EXPECT_TRUE(org.cohort);
  EXPECT_EQ(org.parent, "");
  EXPECT_EQ(org.weight, 1);
  ASSERT_EQ(org.quotas.size(), 1u);
  EXPECT_EQ(org.quotas[0].resource, (ResourceName{ResourceKind::kGpu, GpuModelId()}));
  EXPECT_EQ(org.quotas[0].quota.nominal, 16000);

  const QueueNodeSpec& team = spec.nodes[1];
  EXPECT_EQ(team.name, "team-a");
  EXPECT_FALSE(team.cohort);
  EXPECT_EQ(team.parent, "org");
  EXPECT_EQ(team.tenant, "a");
  EXPECT_EQ(team.weight, 2);
  ASSERT_EQ(team.quotas.size(), 5u);
  EXPECT_EQ(team.quotas[0].resource, (ResourceName{ResourceKind::kGpu, GpuModelId()}));
  EXPECT_EQ(team.quotas[0].quota.nominal, 8000);
  EXPECT_EQ(team.quotas[0].quota.borrowing_limit, 4000);
  EXPECT_EQ(team.quotas[0].quota.lending_limit, 2000);
  EXPECT_EQ(team.quotas[1].resource,
            (ResourceName{ResourceKind::kGpu, *Catalog().Find("H100-80GB")}));
  EXPECT_EQ(team.quotas[1].quota.nominal, 4000);
  EXPECT_FALSE(team.quotas[1].quota.borrowing_limit.has_value());
  EXPECT_FALSE(team.quotas[1].quota.lending_limit.has_value());
  EXPECT_EQ(team.quotas[2].resource, (ResourceName{ResourceKind::kCpu, GpuModelId()}));
  EXPECT_EQ(team.quotas[2].quota.nominal, 64000);
  EXPECT_EQ(team.quotas[3].resource, (ResourceName{ResourceKind::kMemory, GpuModelId()}));
  EXPECT_EQ(team.quotas[3].quota.nominal, 512 * 1024);
  EXPECT_EQ(team.quotas[4].resource, (ResourceName{ResourceKind::kGpuMemory, GpuModelId()}));
  EXPECT_EQ(team.quotas[4].quota.nominal, 640 * 1024);
}

TEST(QueueConfigTest, ExampleBuildsAQueueTree) {
  StatusOr<QueueTreeSpec> spec = Parse(kExample);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  StatusOr<QueueTree> tree = QueueTree::Create(*spec, Catalog());
  ASSERT_TRUE(tree.ok()) << tree.status().ToString();
  QueueId team = *tree->FindQueue("team-a");
  QueueId org = *tree->Find("org");
  EXPECT_EQ(tree->parent(team), org);
  EXPECT_EQ(tree->tenant(team), "a");
  EXPECT_EQ(tree->PriorityOf("high"), 100);
  ASSERT_EQ(tree->resources().size(), 5u);
  EXPECT_EQ(ResourceNameString(tree->resources()[1], Catalog()), "gpu:H100-80GB");
  EXPECT_EQ(tree->quota(org, 0).nominal, 16000);
  EXPECT_EQ(tree->quota(team, 0).borrowing_limit, 4000);
  EXPECT_EQ(tree->quota(org, 2).nominal, 0);
}

TEST(QueueConfigTest, ReferencesAreCheckedByQueueTreeCreate) {
  StatusOr<QueueTreeSpec> spec = Parse(R"(
queues:
  - {name: a, cohort: nowhere, quota: {gpu: 1}}
)");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  StatusOr<QueueTree> tree = QueueTree::Create(*spec, Catalog());
  ASSERT_FALSE(tree.ok());
  EXPECT_NE(tree.status().message().find("'nowhere'"), std::string::npos);
}

TEST(QueueConfigTest, DefaultsAndOrder) {
  // Queues may come before cohorts in the file; the spec lists cohorts first.
  StatusOr<QueueTreeSpec> spec = Parse(R"(
queues:
  - name: q1
  - name: q2
    cohort: top
    quota: {"gpu:a100": {borrowingLimit: 2}}
cohorts:
  - {name: top, parent: ~}
)");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  ASSERT_EQ(spec->nodes.size(), 3u);
  EXPECT_EQ(spec->nodes[0].name, "top");
  EXPECT_EQ(spec->nodes[0].parent, "");
  EXPECT_EQ(spec->nodes[1].name, "q1");
  EXPECT_EQ(spec->nodes[1].parent, "");
  EXPECT_EQ(spec->nodes[1].weight, 1);
  EXPECT_EQ(spec->nodes[1].tenant, "");
  EXPECT_TRUE(spec->nodes[1].quotas.empty());
  ASSERT_EQ(spec->nodes[2].quotas.size(), 1u);
  EXPECT_EQ(spec->nodes[2].quotas[0].resource.model, *Catalog().Find("A100-40GB"));
  EXPECT_EQ(spec->nodes[2].quotas[0].quota.nominal, 0);
  EXPECT_EQ(spec->nodes[2].quotas[0].quota.borrowing_limit, 2000);
  EXPECT_TRUE(spec->priority_classes.empty());
  EXPECT_TRUE(QueueTree::Create(*spec, Catalog()).ok());
}

TEST(QueueConfigTest, EmptyDocumentIsAnEmptySpec) {
  StatusOr<QueueTreeSpec> spec = Parse("");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_TRUE(spec->nodes.empty());
  StatusOr<QueueTreeSpec> lists = Parse("queues:\ncohorts: []\n");
  ASSERT_TRUE(lists.ok()) << lists.status().ToString();
  EXPECT_TRUE(lists->nodes.empty());
}

TEST(QueueConfigTest, Quantities) {
  struct Case {
    const char* text;
    ResourceKind kind;
    int64_t want;
  };
  const std::vector<Case> cases = {
      {"8", ResourceKind::kGpu, 8000},
      {"1.5", ResourceKind::kGpu, 1500},
      {"1500m", ResourceKind::kGpu, 1500},
      {"0.125", ResourceKind::kGpu, 125},
      {"0", ResourceKind::kGpu, 0},
      {"\"4\"", ResourceKind::kGpu, 4000},
      {"64", ResourceKind::kCpu, 64000},
      {"500m", ResourceKind::kCpu, 500},
      {"0.5", ResourceKind::kCpu, 500},
      {"512Gi", ResourceKind::kMemory, 524288},
      {"2048", ResourceKind::kMemory, 2048},
      {"2048Mi", ResourceKind::kMemory, 2048},
      {"1.5Ti", ResourceKind::kMemory, 1572864},
      {"0.5Gi", ResourceKind::kGpuMemory, 512},
      {"80Gi", ResourceKind::kGpuMemory, 81920},
  };
  for (const Case& c : cases) {
    StatusOr<int64_t> got = Quantity(c.text, c.kind);
    ASSERT_TRUE(got.ok()) << c.text << ": " << got.status().ToString();
    EXPECT_EQ(*got, c.want) << c.text;
  }
}

TEST(QueueConfigTest, BadQuantities) {
  struct Case {
    const char* text;
    ResourceKind kind;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"12x", ResourceKind::kGpu, "bad quantity '12x'"},
      {"-1", ResourceKind::kGpu, "negative"},
      {"-500m", ResourceKind::kCpu, "negative"},
      {"1.0005", ResourceKind::kGpu, "finer than"},
      {"0.5", ResourceKind::kMemory, "finer than the unit of 1 MiB"},
      {"1Gi", ResourceKind::kGpu, "bad quantity"},
      {"4m", ResourceKind::kMemory, "bad quantity"},
      {"1e3", ResourceKind::kCpu, "bad quantity"},
      {"1.", ResourceKind::kCpu, "bad quantity"},
      {"Gi", ResourceKind::kMemory, "bad quantity"},
      {"\"\"", ResourceKind::kMemory, "bad quantity"},
      {"99999999999999999999", ResourceKind::kCpu, "out of range"},
      {"9223372036854775807", ResourceKind::kGpu, "out of range"},
      {"{nominal: 1}", ResourceKind::kGpu, "expected a number of GPUs"},
      {"[1]", ResourceKind::kGpu, "got a list"},
      {"~", ResourceKind::kGpu, "got nothing"},
  };
  for (const Case& c : cases) {
    StatusOr<int64_t> got = Quantity(c.text, c.kind);
    ASSERT_FALSE(got.ok()) << c.text << " parsed as " << *got;
    EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(got.status().message().find(c.message), std::string::npos)
        << c.text << ": " << got.status().message();
  }
  // A quantity read from text says where it is.
  StatusOr<int64_t> at = Quantity("\n\n  12x", ResourceKind::kGpu);
  ASSERT_FALSE(at.ok());
  EXPECT_NE(at.status().message().find("line 3, column 3"), std::string::npos)
      << at.status().message();
}

TEST(QueueConfigTest, UnknownKeysAreErrorsWithPathAndLine) {
  ExpectError("queues: []\nqueue: []\n", {"unknown key 'queue'", "line 2, column 1", "queues"});
  ExpectError(R"(
queues:
  - name: a
    wieght: 2
)",
              {"queues[0]", "unknown key 'wieght'", "line 4"});
  ExpectError(R"(
queues:
  - name: a
    quota:
      gpu: {nominal: 8, borowingLimit: 4}
)",
              {"queues[0].quota.gpu", "unknown key 'borowingLimit'", "line 5"});
  // A queue key on a cohort, and a cohort key on a queue.
  ExpectError("cohorts:\n  - {name: c, tenant: x}\n", {"cohorts[0]", "unknown key 'tenant'"});
  ExpectError("queues:\n  - {name: q, parent: c}\n", {"queues[0]", "unknown key 'parent'"});
  ExpectError("priorityClasses:\n  - {name: p, value: 1, preempt: true}\n",
              {"priorityClasses[0]", "unknown key 'preempt'"});
}

TEST(QueueConfigTest, BadQuantityInAQuota) {
  ExpectError(R"(
queues:
  - name: a
    quota:
      cpu: 8
      gpu: 12x
)",
              {"queues[0].quota.gpu", "bad quantity '12x'", "line 6, column 12"});
}

TEST(QueueConfigTest, NegativeQuota) {
  ExpectError(R"(
queues:
  - name: a
    cohort: org
    quota:
      memory: {nominal: 1Gi, lendingLimit: -2Gi}
)",
              {"queues[0].quota.memory.lendingLimit", "negative", "line 6"});
  ExpectError("cohorts:\n  - {name: c, quota: {gpu: -1}}\n", {"cohorts[0].quota.gpu", "negative"});
}

TEST(QueueConfigTest, UnknownGpuModelOrResource) {
  ExpectError(R"(
queues:
  - name: a
    quota:
      "gpu:B300": 4
)",
              {"queues[0].quota.gpu:B300", "unknown GPU model 'B300'", "line 5"});
  ExpectError("queues:\n  - {name: a, quota: {gpus: 4}}\n",
              {"queues[0].quota.gpus", "unknown resource 'gpus'"});
}

TEST(QueueConfigTest, DuplicatesAreErrors) {
  ExpectError("queues:\n  - {name: a, quota: {gpu: 1, gpu: 2}}\n",
              {"queues[0].quota", "'gpu' appears twice"});
  // Two spellings of one model.
  ExpectError("queues:\n  - {name: a, quota: {\"gpu:H100\": 1, \"gpu:h100-80gb\": 2}}\n",
              {"queues[0].quota.gpu:h100-80gb", "gpu:H100-80GB", "twice"});
}

TEST(QueueConfigTest, BadFieldsAndShapes) {
  ExpectError("queues:\n  - {name: a, weight: 0}\n", {"queues[0].weight", "weight must be > 0"});
  ExpectError("queues:\n  - {name: a, weight: two}\n",
              {"queues[0].weight", "expected an integer, got 'two'"});
  ExpectError("queues:\n  - {cohort: org}\n", {"queues[0]", "a queue needs a name"});
  ExpectError("queues:\n  - {name: [a]}\n", {"queues[0].name", "expected a string"});
  ExpectError("queues: {name: a}\n", {"queues", "expected a list, got a map"});
  ExpectError("queues:\n  - a\n", {"queues[0]", "expected a map, got 'a'"});
  ExpectError("queues:\n  - {name: a, quota: [gpu]}\n", {"queues[0].quota", "expected a map"});
  ExpectError("- a\n", {"expected a map, got a list"});
  ExpectError("priorityClasses:\n  - {name: p}\n", {"priorityClasses[0]", "needs a value"});
  ExpectError("priorityClasses:\n  - {name: p, value: 3000000000}\n",
              {"priorityClasses[0].value", "out of range"});
}

class QueueConfigFileTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& text) {
    std::string path = ::testing::TempDir() + "queue_config_test_" + name;
    std::ofstream(path) << text;
    paths_.push_back(path);
    return path;
  }
  void TearDown() override {
    for (const std::string& p : paths_) {
      std::remove(p.c_str());
    }
  }

 private:
  std::vector<std::string> paths_;
};

TEST_F(QueueConfigFileTest, LoadsAFile) {
  std::string path = Write("ok.yaml", kExample);
  StatusOr<QueueTreeSpec> spec = LoadQueueTreeFile(path, Catalog());
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->nodes.size(), 2u);
  EXPECT_TRUE(QueueTree::Create(*spec, Catalog()).ok());
}

TEST_F(QueueConfigFileTest, MissingFileIsNotFound) {
  StatusOr<QueueTreeSpec> spec =
      LoadQueueTreeFile(::testing::TempDir() + "no_such_queue_config.yaml", Catalog());
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), StatusCode::kNotFound);
  EXPECT_NE(spec.status().message().find("no_such_queue_config.yaml"), std::string::npos);
}

TEST_F(QueueConfigFileTest, SyntaxErrorNamesFileAndLine) {
  std::string path = Write("syntax.yaml", "queues:\n  - {name: a\n  - b: [\n");
  StatusOr<QueueTreeSpec> spec = LoadQueueTreeFile(path, Catalog());
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(spec.status().message().find(path + ":"), std::string::npos) << spec.status().message();
  // The kit's one format: the position as "(line L, column C)".
  EXPECT_NE(spec.status().message().find("(line "), std::string::npos) << spec.status().message();
}

TEST(QueueConfigTextTest, TextErrorsUseTheKitsFormat) {
  StatusOr<QueueTreeSpec> syntax = ParseQueueTreeText("queues: [\n", Catalog());
  ASSERT_FALSE(syntax.ok());
  EXPECT_EQ(syntax.status().message().rfind("queue configuration: ", 0), 0u)
      << syntax.status().message();
  EXPECT_NE(syntax.status().message().find("(line "), std::string::npos)
      << syntax.status().message();
  StatusOr<QueueTreeSpec> content =
      ParseQueueTreeText("queues:\n  - name: a\n    quota: {gpu: 12x}\n", Catalog(), "PUT");
  ASSERT_FALSE(content.ok());
  EXPECT_EQ(content.status().message().rfind("PUT: queues[0].quota.gpu", 0), 0u)
      << content.status().message();
  EXPECT_TRUE(ParseQueueTreeText("queues:\n  - name: a\n", Catalog()).ok());
}

TEST_F(QueueConfigFileTest, ContentErrorNamesFileAndLine) {
  std::string path = Write("content.yaml", "queues:\n  - name: a\n    quota: {gpu: 12x}\n");
  StatusOr<QueueTreeSpec> spec = LoadQueueTreeFile(path, Catalog());
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(spec.status().message().find(path + ": queues[0].quota.gpu"), std::string::npos)
      << spec.status().message();
  EXPECT_NE(spec.status().message().find("line 3"), std::string::npos) << spec.status().message();
}

}  // namespace
}  // namespace tessera
