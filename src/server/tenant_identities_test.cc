#include "server/tenant_identities.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(TenantIdentitiesTest, EachTenantGetsTheLowestFreePoolUidOnceAndKeepsIt) {
  InMemoryStore store;
  TenantIdentities::Options options{{{"ops", {1500, 1500}}}, 1000, 3};
  {
    TenantIdentities ids(options);
    ASSERT_TRUE(ids.Load(store).ok());
    EXPECT_EQ(ids.Known("team-a"), std::nullopt);
    WriteBatch batch;
    EXPECT_EQ(ids.For("team-a", batch), (TenantIdentities::Identity{1000, 1000}));
    EXPECT_EQ(ids.For("team-b", batch), (TenantIdentities::Identity{1001, 1001}));
    EXPECT_EQ(ids.For("team-a", batch), (TenantIdentities::Identity{1000, 1000}));  // once
    EXPECT_EQ(ids.For("ops", batch), (TenantIdentities::Identity{1500, 1500}));     // run_as
    EXPECT_EQ(batch.kv.size(), 2u);  // only the pool's assignments are stored
    ASSERT_TRUE(store.Commit(std::move(batch)).ok());
  }
  // After a restart the assignments are read back; the pool continues after them.
  TenantIdentities again(options);
  ASSERT_TRUE(again.Load(store).ok());
  EXPECT_EQ(again.Known("team-b"), (TenantIdentities::Identity{1001, 1001}));
  WriteBatch batch;
  EXPECT_EQ(again.For("team-c", batch), (TenantIdentities::Identity{1002, 1002}));
  EXPECT_EQ(again.For("team-d", batch), (TenantIdentities::Identity{-1, -1}));  // exhausted
}

TEST(TenantIdentitiesTest, RunAsMayNotGiveATenantAnotherTenantsUid) {
  InMemoryStore store;
  {
    TenantIdentities ids({{}, 1000, 10});
    WriteBatch batch;
    ids.For("team-a", batch);
    ASSERT_TRUE(store.Commit(std::move(batch)).ok());
  }
  TenantIdentities clash({{{"team-b", {1000, 1000}}}, 1000, 10});
  Status s = clash.Load(store);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("is already tenant team-a's"), std::string::npos) << s.message();

  WriteBatch bad;
  bad.kv.emplace_back("uid/team-x", "not-an-identity");
  ASSERT_TRUE(store.Commit(std::move(bad)).ok());
  EXPECT_EQ(TenantIdentities({{}, 1000, 10}).Load(store).code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace tessera
