#include "model/queue_tree.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tessera {
namespace {

const GpuCatalog& Catalog() { return GpuCatalog::Default(); }

ResourceName Gpu() { return ResourceName{ResourceKind::kGpu, GpuModelId()}; }
ResourceName GpuOf(std::string_view model) {
  return ResourceName{ResourceKind::kGpu, *Catalog().Find(model)};
}
ResourceName Cpu() { return ResourceName{ResourceKind::kCpu, GpuModelId()}; }
ResourceName Memory() { return ResourceName{ResourceKind::kMemory, GpuModelId()}; }

QueueNodeSpec Cohort(std::string name, std::string parent = "",
                     std::vector<QueueQuota> quotas = {}) {
  QueueNodeSpec n;
  n.name = std::move(name);
  n.cohort = true;
  n.parent = std::move(parent);
  n.quotas = std::move(quotas);
  return n;
}

QueueNodeSpec Queue(std::string name, std::string parent = "",
                    std::vector<QueueQuota> quotas = {}) {
  QueueNodeSpec n = Cohort(std::move(name), std::move(parent), std::move(quotas));
  n.cohort = false;
  return n;
}

QueueQuota Nominal(ResourceName r, int64_t nominal) { return {r, Quota{nominal, {}, {}}}; }

std::string Names(const QueueTree& tree, const std::vector<QueueId>& ids) {
  std::string out;
  for (QueueId id : ids) {
    out += (out.empty() ? "" : " ") + tree.spec(id).name;
  }
  return out;
}

// Creates `spec` and expects InvalidArgument with a message containing each of `parts`.
void ExpectInvalid(QueueTreeSpec spec, const std::vector<std::string>& parts) {
  StatusOr<QueueTree> tree = QueueTree::Create(std::move(spec), Catalog());
  ASSERT_FALSE(tree.ok());
  EXPECT_EQ(tree.status().code(), StatusCode::kInvalidArgument);
  for (const std::string& part : parts) {
    EXPECT_NE(tree.status().message().find(part), std::string::npos)
        << "'" << part << "' not in: " << tree.status().message();
  }
}

TEST(QueueTreeTest, ResourceNamesRoundTrip) {
  const std::vector<std::pair<std::string, ResourceName>> cases = {
      {"gpu", Gpu()},
      {"gpu:H100-80GB", GpuOf("H100-80GB")},
      {"gpu-memory", ResourceName{ResourceKind::kGpuMemory, GpuModelId()}},
      {"cpu", Cpu()},
      {"memory", Memory()},
  };
  for (const auto& [text, name] : cases) {
    StatusOr<ResourceName> parsed = ParseResourceName(text, Catalog());
    ASSERT_TRUE(parsed.ok()) << text << ": " << parsed.status().ToString();
    EXPECT_EQ(*parsed, name) << text;
    EXPECT_EQ(ResourceNameString(name, Catalog()), text);
  }
}

TEST(QueueTreeTest, ResourceNameAcceptsAliasesAndPrintsTheCanonicalName) {
  StatusOr<ResourceName> alias = ParseResourceName("gpu:h100", Catalog());
  ASSERT_TRUE(alias.ok());
  EXPECT_EQ(*alias, GpuOf("H100-80GB"));
  EXPECT_EQ(ResourceNameString(*alias, Catalog()), "gpu:H100-80GB");
}

TEST(QueueTreeTest, ResourceNameRejectsUnknownNames) {
  StatusOr<ResourceName> model = ParseResourceName("gpu:B300", Catalog());
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(model.status().message().find("B300"), std::string::npos);

  StatusOr<ResourceName> kind = ParseResourceName("gpus", Catalog());
  ASSERT_FALSE(kind.ok());
  EXPECT_NE(kind.status().message().find("'gpus'"), std::string::npos);

  EXPECT_FALSE(ParseResourceName("gpu:", Catalog()).ok());
  EXPECT_FALSE(ParseResourceName("", Catalog()).ok());
  EXPECT_FALSE(ParseResourceName("GPU", Catalog()).ok());
}

// org ── research ── {vision, nlp}
//     └─ prod
TEST(QueueTreeTest, BuildsTheStructure) {
  QueueTreeSpec spec;
  spec.nodes = {
      Queue("vision", "research", {Nominal(Gpu(), 4000)}),
      Cohort("org", "", {Nominal(Gpu(), 2000), Nominal(Cpu(), 8000)}),
      Queue("prod", "org", {Nominal(GpuOf("H100"), 8000), Nominal(Gpu(), 1000)}),
      Cohort("research", "org"),
      Queue("nlp", "research", {Nominal(Memory(), 1024)}),
  };
  spec.nodes[0].tenant = "cv-lab";
  spec.nodes[0].weight = 3;
  spec.priority_classes = {{"high", 100}, {"low", -5}};
  StatusOr<QueueTree> created = QueueTree::Create(spec, Catalog());
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  const QueueTree& tree = *created;

  ASSERT_EQ(tree.size(), 5u);
  QueueId vision = *tree.Find("vision");
  QueueId org = *tree.Find("org");
  QueueId prod = *tree.Find("prod");
  QueueId research = *tree.Find("research");
  QueueId nlp = *tree.Find("nlp");
  EXPECT_EQ(vision.value(), 0u);
  EXPECT_EQ(research.value(), 3u);

  EXPECT_TRUE(tree.is_queue(vision));
  EXPECT_FALSE(tree.is_queue(org));
  EXPECT_FALSE(tree.parent(org).valid());
  EXPECT_EQ(tree.parent(vision), research);
  EXPECT_EQ(tree.parent(research), org);
  EXPECT_EQ(tree.children(org), (std::vector<QueueId>{prod, research}));
  EXPECT_EQ(tree.children(research), (std::vector<QueueId>{vision, nlp}));
  EXPECT_TRUE(tree.children(vision).empty());
  EXPECT_EQ(Names(tree, tree.queues()), "vision prod nlp");

  EXPECT_EQ(tree.tenant(vision), "cv-lab");
  EXPECT_EQ(tree.tenant(prod), "prod");
  EXPECT_EQ(tree.spec(vision).weight, 3);

  // Every distinct resource, first seen first.
  ASSERT_EQ(tree.resources().size(), 4u);
  EXPECT_EQ(tree.resources()[0], Gpu());
  EXPECT_EQ(tree.resources()[1], Cpu());
  EXPECT_EQ(tree.resources()[2], GpuOf("H100-80GB"));
  EXPECT_EQ(tree.resources()[3], Memory());

  // Declared quotas land on their resource; undeclared ones are zero and unlimited.
  EXPECT_EQ(tree.quota(vision, 0).nominal, 4000);
  EXPECT_EQ(tree.quota(org, 0).nominal, 2000);
  EXPECT_EQ(tree.quota(org, 1).nominal, 8000);
  EXPECT_EQ(tree.quota(prod, 2).nominal, 8000);
  EXPECT_EQ(tree.quota(prod, 0).nominal, 1000);
  EXPECT_EQ(tree.quota(nlp, 3).nominal, 1024);
  EXPECT_EQ(tree.quota(nlp, 0).nominal, 0);
  EXPECT_FALSE(tree.quota(nlp, 0).borrowing_limit.has_value());
  EXPECT_FALSE(tree.quota(nlp, 0).lending_limit.has_value());
  EXPECT_EQ(tree.quota(research, 1).nominal, 0);

  EXPECT_EQ(tree.PriorityOf("high"), 100);
  EXPECT_EQ(tree.PriorityOf("low"), -5);
  EXPECT_FALSE(tree.PriorityOf("medium").has_value());
  EXPECT_EQ(&tree.catalog(), &Catalog());
}

TEST(QueueTreeTest, BottomUpListsEveryNodeAfterItsChildren) {
  QueueTreeSpec spec;
  spec.nodes = {
      Queue("q1", "c2"), Cohort("c1"),       Cohort("c2", "c1"), Queue("q2", "c1"),
      Queue("solo"),     Cohort("c3", "c2"), Queue("q3", "c3"),  Cohort("empty", "c1"),
  };
  StatusOr<QueueTree> tree = QueueTree::Create(spec, Catalog());
  ASSERT_TRUE(tree.ok()) << tree.status().ToString();
  const std::vector<QueueId>& order = tree->bottom_up();
  ASSERT_EQ(order.size(), tree->size());
  std::vector<size_t> position(tree->size(), order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    ASSERT_EQ(position[order[i].value()], order.size()) << "listed twice";
    position[order[i].value()] = i;
  }
  for (size_t i = 0; i < tree->size(); ++i) {
    QueueId id(static_cast<uint32_t>(i));
    for (QueueId child : tree->children(id)) {
      EXPECT_LT(position[child.value()], position[i])
          << tree->spec(child).name << " must come before " << tree->spec(id).name;
    }
  }
  EXPECT_EQ(Names(*tree, order), "q1 q3 c3 c2 q2 empty c1 solo");
}

TEST(QueueTreeTest, FindAndFindQueue) {
  QueueTreeSpec spec;
  spec.nodes = {Cohort("org"), Queue("a", "org")};
  StatusOr<QueueTree> tree = QueueTree::Create(spec, Catalog());
  ASSERT_TRUE(tree.ok());
  EXPECT_EQ(*tree->Find("org"), QueueId(0));
  EXPECT_EQ(*tree->FindQueue("a"), QueueId(1));

  StatusOr<QueueId> missing = tree->Find("b");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("'b'"), std::string::npos);

  StatusOr<QueueId> cohort = tree->FindQueue("org");
  ASSERT_FALSE(cohort.ok());
  EXPECT_EQ(cohort.status().code(), StatusCode::kNotFound);
  EXPECT_NE(cohort.status().message().find("cohort"), std::string::npos);
}

TEST(QueueTreeTest, UnlimitedIsOneRootQueueWithoutQuota) {
  QueueTree tree = QueueTree::Unlimited(Catalog());
  ASSERT_EQ(tree.size(), 1u);
  EXPECT_TRUE(tree.is_queue(QueueId(0)));
  EXPECT_FALSE(tree.parent(QueueId(0)).valid());
  EXPECT_EQ(tree.spec(QueueId(0)).name, "default");
  EXPECT_EQ(tree.tenant(QueueId(0)), "default");
  EXPECT_TRUE(tree.resources().empty());
  EXPECT_EQ(tree.queues(), std::vector<QueueId>{QueueId(0)});
  EXPECT_EQ(tree.bottom_up(), std::vector<QueueId>{QueueId(0)});
  EXPECT_EQ(*tree.FindQueue("default"), QueueId(0));

  QueueTree named = QueueTree::Unlimited(Catalog(), "batch");
  EXPECT_EQ(*named.FindQueue("batch"), QueueId(0));
}

TEST(QueueTreeTest, EmptySpecIsAnEmptyTree) {
  StatusOr<QueueTree> tree = QueueTree::Create({}, Catalog());
  ASSERT_TRUE(tree.ok());
  EXPECT_EQ(tree->size(), 0u);
  EXPECT_TRUE(tree->bottom_up().empty());
}

TEST(QueueTreeTest, RejectsDuplicateAndMissingNames) {
  QueueTreeSpec dup;
  dup.nodes = {Cohort("a"), Queue("a")};
  ExpectInvalid(dup, {"duplicate", "'a'"});

  QueueTreeSpec unnamed;
  unnamed.nodes = {Queue("")};
  ExpectInvalid(unnamed, {"no name"});
}

TEST(QueueTreeTest, RejectsBadParents) {
  QueueTreeSpec missing;
  missing.nodes = {Queue("a", "nowhere")};
  ExpectInvalid(missing, {"queue 'a'", "'nowhere'", "does not exist"});

  QueueTreeSpec queue_parent;
  queue_parent.nodes = {Queue("a"), Queue("b", "a")};
  ExpectInvalid(queue_parent, {"queue 'b'", "'a'", "is a queue"});
}

TEST(QueueTreeTest, RejectsCycles) {
  QueueTreeSpec self;
  self.nodes = {Cohort("c", "c")};
  ExpectInvalid(self, {"cohort 'c'", "loops"});

  QueueTreeSpec three;
  three.nodes = {Cohort("x", "z"), Cohort("y", "x"), Cohort("z", "y"), Queue("q", "x")};
  ExpectInvalid(three, {"cohort 'x'", "x -> z -> y -> x"});
}

TEST(QueueTreeTest, RejectsBadQuotasNamingTheNodeAndResource) {
  QueueTreeSpec negative;
  negative.nodes = {Cohort("org"), Queue("a", "org", {Nominal(Gpu(), -1)})};
  ExpectInvalid(negative, {"queue 'a'", "gpu", "negative"});

  QueueTreeSpec negative_borrow;
  negative_borrow.nodes = {Cohort("org"), Queue("a", "org", {{Cpu(), Quota{1, -2, {}}}})};
  ExpectInvalid(negative_borrow, {"queue 'a'", "borrowing limit", "cpu", "-2"});

  QueueTreeSpec negative_lend;
  negative_lend.nodes = {Cohort("org"), Cohort("sub", "org", {{Memory(), Quota{1, {}, -3}}})};
  ExpectInvalid(negative_lend, {"cohort 'sub'", "lending limit", "memory", "-3"});

  QueueTreeSpec twice;
  twice.nodes = {Queue("a", "", {Nominal(GpuOf("H100"), 1), Nominal(GpuOf("H100-80GB"), 2)})};
  ExpectInvalid(twice, {"queue 'a'", "gpu:H100-80GB", "twice"});

  QueueTreeSpec root_limit;
  root_limit.nodes = {Queue("a", "", {{Gpu(), Quota{1000, 500, {}}}})};
  ExpectInvalid(root_limit, {"queue 'a'", "no parent", "borrowing", "gpu"});

  QueueTreeSpec bad_model;
  bad_model.nodes = {
      Queue("a", "", {Nominal(ResourceName{ResourceKind::kGpu, GpuModelId(999)}, 1)})};
  ExpectInvalid(bad_model, {"queue 'a'", "invalid resource"});

  QueueTreeSpec model_on_cpu;
  model_on_cpu.nodes = {
      Queue("a", "", {Nominal(ResourceName{ResourceKind::kCpu, GpuModelId(0)}, 1)})};
  ExpectInvalid(model_on_cpu, {"queue 'a'", "invalid resource"});
}

TEST(QueueTreeTest, RejectsNonPositiveWeights) {
  QueueTreeSpec zero;
  zero.nodes = {Queue("a")};
  zero.nodes[0].weight = 0;
  ExpectInvalid(zero, {"queue 'a'", "weight", "0"});

  QueueTreeSpec negative;
  negative.nodes = {Cohort("org")};
  negative.nodes[0].weight = -2;
  ExpectInvalid(negative, {"cohort 'org'", "weight"});
}

TEST(QueueTreeTest, RejectsBadPriorityClasses) {
  QueueTreeSpec dup;
  dup.nodes = {Queue("a")};
  dup.priority_classes = {{"high", 1}, {"high", 2}};
  ExpectInvalid(dup, {"duplicate priority class 'high'"});

  QueueTreeSpec unnamed;
  unnamed.priority_classes = {{"", 1}};
  ExpectInvalid(unnamed, {"priority class", "no name"});
}

TEST(QueueTreeTest, AcceptsLargeQuotasAndLimits) {
  constexpr int64_t kHuge = std::numeric_limits<int64_t>::max();
  QueueTreeSpec spec;
  spec.nodes = {Cohort("org", "", {Nominal(Gpu(), kHuge)}),
                Queue("a", "org", {{Gpu(), Quota{kHuge, kHuge, kHuge}}})};
  StatusOr<QueueTree> tree = QueueTree::Create(spec, Catalog());
  ASSERT_TRUE(tree.ok()) << tree.status().ToString();
  EXPECT_EQ(tree->quota(QueueId(1), 0).borrowing_limit, kHuge);
}

// Tenants' nominal GPU quota: their queues' any-model and per-model GPU quota added up, in
// GPUs; cohorts' own and other resources left out; a tenant without GPU quota is listed.
TEST(QueueTreeTest, TenantNominalGpusAddsUpEachTenantsQueues) {
  QueueTreeSpec spec;
  spec.nodes = {
      Cohort("org", "", {Nominal(Gpu(), 16000)}),
      Queue("vision", "org", {Nominal(Gpu(), 4000), Nominal(Cpu(), 8000)}),
      Queue("vision-h100", "org", {Nominal(GpuOf("H100"), 2500)}),
      Queue("nlp", "org", {Nominal(Gpu(), 1000)}),
      Queue("batch", "org", {Nominal(Memory(), 1024)}),
  };
  spec.nodes[1].tenant = "cv-lab";
  spec.nodes[2].tenant = "cv-lab";
  StatusOr<QueueTree> tree = QueueTree::Create(spec, Catalog());
  ASSERT_TRUE(tree.ok()) << tree.status().ToString();
  EXPECT_EQ(tree->TenantNominalGpus(),
            (std::map<std::string, double>{{"batch", 0.0}, {"cv-lab", 6.5}, {"nlp", 1.0}}));
  EXPECT_TRUE(QueueTree::Unlimited(Catalog()).TenantNominalGpus().count("default"));
}

}  // namespace
}  // namespace tessera
