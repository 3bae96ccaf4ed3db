#include "server/modules/registry_credentials.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace tessera {
namespace {

TEST(RegistryCredentialsTest, AnAuthFileForTheImagesRegistryOnlyOfItsOwnTenant) {
  RegistryCredentials creds;
  StatusOr<std::pair<std::string, std::string>> r =
      creds.Record("team-a", "127.0.0.1:5000", "ada", "s3cret");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->first, "registry-auth/team-a/127.0.0.1:5000");
  creds.Apply(*r);
  const nlohmann::json auth =
      nlohmann::json::parse(creds.AuthFile("team-a", "127.0.0.1:5000/team/img:1"));
  // base64("ada:s3cret")
  EXPECT_EQ(auth["auths"]["127.0.0.1:5000"]["auth"], "YWRhOnMzY3JldA==");
  EXPECT_EQ(creds.AuthFile("team-b", "127.0.0.1:5000/team/img:1"), "");     // another tenant
  EXPECT_EQ(creds.AuthFile("team-a", "nvcr.io/nvidia/pytorch:24.05"), "");  // another registry
  EXPECT_EQ(creds.Registries("team-a"), std::vector<std::string>{"127.0.0.1:5000"});
  creds.Apply(*creds.Record("team-a", "127.0.0.1:5000", "", ""));  // removed
  EXPECT_EQ(creds.AuthFile("team-a", "127.0.0.1:5000/team/img:1"), "");
  EXPECT_TRUE(creds.Registries("team-a").empty());
}

TEST(RegistryCredentialsTest, BadInputIsRefused) {
  RegistryCredentials creds;
  EXPECT_FALSE(creds.Record("t", "Not A Host", "u", "p").ok());
  EXPECT_FALSE(creds.Record("t", "host/path", "u", "p").ok());
  EXPECT_FALSE(creds.Record("t", "nvcr.io", "", "p").ok());
  EXPECT_FALSE(creds.Record("t", "nvcr.io", "u", "").ok());
  EXPECT_FALSE(creds.Record("t", "nvcr.io", "u", "p\nx").ok());
  EXPECT_FALSE(creds.Record("t", "nvcr.io", "u", std::string(2000, 'p')).ok());
  EXPECT_FALSE(creds.Record("", "nvcr.io", "u", "p").ok());
  EXPECT_FALSE(creds.Record("a/b", "nvcr.io", "u", "p").ok());  // the key's first component
  EXPECT_TRUE(creds.Record("t", "docker.io", "u", "p").ok());
}

// What was set is read back after a restart, removals included; a damaged value is passed
// over instead of stopping the load.
TEST(RegistryCredentialsTest, CredentialsSurviveARestartAndADamagedOneIsPassedOver) {
  InMemoryStore store;
  RegistryCredentials creds;
  for (const auto& [tenant, registry] :
       {std::pair{"team-a", "nvcr.io"}, std::pair{"team-a", "127.0.0.1:5000"},
        std::pair{"team-b", "nvcr.io"}}) {
    auto r = creds.Record(tenant, registry, "u-" + std::string(tenant), "pw");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    WriteBatch batch;
    batch.kv.push_back(*r);
    ASSERT_TRUE(store.Commit(std::move(batch)).ok());
    creds.Apply(*r);
  }
  auto removed = creds.Record("team-a", "127.0.0.1:5000", "", "");
  ASSERT_TRUE(removed.ok());
  WriteBatch batch;
  batch.kv.push_back(*removed);
  batch.kv.emplace_back("registry-auth/team-c/nvcr.io", "{not json");
  ASSERT_TRUE(store.Commit(std::move(batch)).ok());

  RegistryCredentials again;
  ASSERT_TRUE(again.Load(store).ok());
  EXPECT_EQ(again.Registries("team-a"), std::vector<std::string>{"nvcr.io"});
  EXPECT_EQ(again.AuthFile("team-b", "nvcr.io/nvidia/pytorch:24.05"),
            creds.AuthFile("team-b", "nvcr.io/nvidia/pytorch:24.05"));
  EXPECT_NE(again.AuthFile("team-b", "nvcr.io/nvidia/pytorch:24.05"), "");
  EXPECT_TRUE(again.Registries("team-c").empty());
  EXPECT_EQ(again.unreadable(), 1);
}

}  // namespace
}  // namespace tessera
