#include "api/queue_idle.h"

#include <gtest/gtest.h>

#include "api/queue_config.h"
#include "model/gpu_catalog.h"

namespace tessera {
namespace {

TEST(QueueIdleTest, DefaultsWhenAbsent) {
  auto policies = QueueIdlePolicies("queues:\n  - name: a\n  - name: b\n    idle: {}\n");
  ASSERT_TRUE(policies.ok()) << policies.status().ToString();
  ASSERT_EQ(policies->size(), 2u);
  EXPECT_EQ(policies->at("a"), IdlePolicy{});
  EXPECT_EQ(policies->at("a").below_pct, 5);
  EXPECT_EQ(policies->at("a").window, 30LL * 60 * 1'000'000);
  EXPECT_EQ(policies->at("a").action, IdleAction::kNotify);
  EXPECT_EQ(policies->at("b"), IdlePolicy{});
  EXPECT_EQ(IdlePolicyText(IdlePolicy{}), "below 5% for 30m: notify");
}

TEST(QueueIdleTest, ReadsEveryField) {
  auto policies =
      QueueIdlePolicies("queues:\n  - name: a\n    idle: {below: 10%, for: 1h, action: cancel}\n"
                        "  - name: b\n    idle: {below: 0, action: requeue}\n");
  ASSERT_TRUE(policies.ok()) << policies.status().ToString();
  EXPECT_EQ(policies->at("a").below_pct, 10);
  EXPECT_EQ(policies->at("a").window, 3600LL * 1'000'000);
  EXPECT_EQ(policies->at("a").action, IdleAction::kCancel);
  EXPECT_EQ(policies->at("b").action, IdleAction::kRequeue);
  EXPECT_EQ(IdlePolicyText(policies->at("b")), "off");
}

TEST(QueueIdleTest, QueueConfigRejectsBadPoliciesNamingTheField) {
  const GpuCatalog& catalog = GpuCatalog::Default();
  struct Case {
    const char* idle;
    const char* error;
  };
  for (const Case& c : {Case{"{below: 120%}", "queues[0].idle.below: expected a whole percentage"},
                        Case{"{below: five}", "queues[0].idle.below"},
                        Case{"{for: 10s}", "queues[0].idle.for: the idle window must be at least 1m"},
                        Case{"{for: soon}", "queues[0].idle.for"},
                        Case{"{action: kill}", "queues[0].idle.action: expected notify, requeue or cancel"},
                        Case{"{after: 1h}", "queues[0].idle"}}) {
    auto spec = ParseQueueTreeText(std::string("queues:\n  - name: a\n    idle: ") + c.idle + "\n",
                                   catalog, "q.yaml");
    ASSERT_FALSE(spec.ok()) << c.idle;
    EXPECT_NE(std::string(spec.status().message()).find(c.error), std::string::npos)
        << spec.status().message();
  }
  auto ok = ParseQueueTreeText("queues:\n  - name: a\n    idle: {below: 5%, for: 30m, action: requeue}\n",
                               catalog, "q.yaml");
  EXPECT_TRUE(ok.ok()) << ok.status().ToString();
}

}  // namespace
}  // namespace tessera
