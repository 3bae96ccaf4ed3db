#include "store/store_url.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/testing/temp_dir.h"

namespace tessera {
namespace {

TEST(StoreUrlTest, PlainPathsAndSqliteUrlsAreSqlite) {
  auto plain = ParseStoreUrl("/var/lib/tessera/state.db");
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(plain->kind, StoreUrl::Kind::kSqlite);
  EXPECT_EQ(plain->path, "/var/lib/tessera/state.db");
  auto relative = ParseStoreUrl("state.db");
  ASSERT_TRUE(relative.ok());
  EXPECT_EQ(relative->path, "state.db");
  auto sqlite = ParseStoreUrl("sqlite:/tmp/x.db");
  ASSERT_TRUE(sqlite.ok());
  EXPECT_EQ(sqlite->kind, StoreUrl::Kind::kSqlite);
  EXPECT_EQ(sqlite->path, "/tmp/x.db");
}

TEST(StoreUrlTest, EtcdUrlsListEndpointsAndAPrefix) {
  auto one = ParseStoreUrl("etcd://127.0.0.1:2379");
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(one->kind, StoreUrl::Kind::kEtcd);
  EXPECT_EQ(one->endpoints, (std::vector<std::string>{"127.0.0.1:2379"}));
  EXPECT_EQ(one->prefix, "/tessera/");
  auto three = ParseStoreUrl("etcd://a:2379,b:2379,c.example.com:12379/prod/tessera");
  ASSERT_TRUE(three.ok()) << three.status().ToString();
  EXPECT_EQ(three->endpoints,
            (std::vector<std::string>{"a:2379", "b:2379", "c.example.com:12379"}));
  EXPECT_EQ(three->prefix, "/prod/tessera/");
  auto slash = ParseStoreUrl("etcd://a:1/x/");
  ASSERT_TRUE(slash.ok());
  EXPECT_EQ(slash->prefix, "/x/");
  auto root = ParseStoreUrl("etcd://a:1/");
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(root->prefix, "/tessera/");
}

TEST(StoreUrlTest, MalformedUrlsSayWhatIsWrong) {
  struct Case {
    const char* url;
    const char* says;
  };
  for (const Case& c : std::vector<Case>{{"", "empty"},
                                         {"sqlite:", "no path"},
                                         {"etcd://", "no etcd endpoint"},
                                         {"etcd:///prefix", "no etcd endpoint"},
                                         {"etcd://a:1,,b:2", "empty endpoint"},
                                         {"etcd://localhost", "not HOST:PORT"},
                                         {"etcd://:2379", "not HOST:PORT"},
                                         {"etcd://a:port", "no valid port"},
                                         {"etcd://a:70000", "no valid port"},
                                         {"etcd://a:0", "no valid port"},
                                         {"etcd://a:1//x", "empty segment"},
                                         {"postgres://db/x", "unknown scheme 'postgres'"}}) {
    auto parsed = ParseStoreUrl(c.url);
    ASSERT_FALSE(parsed.ok()) << c.url;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument) << c.url;
    EXPECT_NE(parsed.status().message().find(c.says), std::string::npos)
        << c.url << ": " << parsed.status().ToString();
  }
}

TEST(StoreUrlTest, OpensSqliteByUrl) {
  testing::TempDir dir("tessera_store_url_");
  ASSERT_TRUE(dir.ok());
  auto store = OpenStore("sqlite:" + dir.File("s.db"));
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  WriteBatch batch;
  batch.kv = {{"k", "v"}};
  ASSERT_TRUE((*store)->Commit(batch).ok());
  EXPECT_EQ((*store)->GetKv("k").value(), std::optional<std::string>("v"));
  EXPECT_EQ(OpenStore("etcd://").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera
