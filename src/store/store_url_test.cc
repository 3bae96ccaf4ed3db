#include "store/store_url.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <thread>
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

TEST(StoreUrlTest, OpenStoreChoosesTheStoreByUrlAndHandsItItsOptions) {
  testing::TempDir dir("tessera_store_url_");
  ASSERT_TRUE(dir.ok());
  OpenStoreOptions options;
  options.sqlite.fsync = false;
  options.sqlite.max_group = 1;  // one transaction per commit, however many wait
  auto store = OpenStore(dir.File("plain.db"), options);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto* sqlite = dynamic_cast<SqliteStore*>(store->get());
  ASSERT_NE(sqlite, nullptr);
  EXPECT_EQ(sqlite->path(), dir.File("plain.db"));
  constexpr int kThreads = 8;
  constexpr int kPerThread = 25;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&store, &failures, t] {
      for (int i = 0; i < kPerThread; ++i) {
        WriteBatch batch;
        batch.kv = {{std::to_string(t) + "/" + std::to_string(i), "v"}};
        if (!(*store)->Commit(std::move(batch)).ok()) {
          failures.fetch_add(1);
        }
      }
    });
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(sqlite->transactions(), static_cast<uint64_t>(kThreads * kPerThread));
  EXPECT_EQ((*store)->ListKv("").value().size(), static_cast<size_t>(kThreads * kPerThread));
}

TEST(StoreUrlTest, AFenceNeedsEtcd) {
  testing::TempDir dir("tessera_store_url_");
  ASSERT_TRUE(dir.ok());
  OpenStoreOptions options;
  options.fence = StoreFence{"/tessera/leader", 7};
  auto store = OpenStore("sqlite:" + dir.File("s.db"), options);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(store.status().message().find("needs etcd"), std::string::npos)
      << store.status().ToString();
  EXPECT_FALSE(std::filesystem::exists(dir.File("s.db")));  // refused before opening
}

TEST(StoreUrlTest, OpenStoreOnAnUnreachableEtcdIsUnavailableNamingTheEndpoint) {
  OpenStoreOptions options;
  options.etcd.deadline_ms = 300;
  auto store = OpenStore("etcd://127.0.0.1:1/x", options);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kUnavailable) << store.status().ToString();
  EXPECT_NE(store.status().message().find("127.0.0.1:1"), std::string::npos)
      << store.status().ToString();
}

TEST(StoreUrlTest, EtcdStoreOptionsOfTakesTheClusterFromTheUrlAndTheRestFromTheOptions) {
  OpenStoreOptions options;
  options.etcd.endpoints = {"ignored:1"};
  options.etcd.prefix = "/ignored/";
  options.etcd.ca_file = "ca.pem";
  options.etcd.cert_file = "cert.pem";
  options.etcd.key_file = "key.pem";
  options.etcd.user = "tessera";
  options.etcd.password = "secret";
  options.etcd.deadline_ms = 1234;
  options.etcd.max_txn_ops = 999;
  auto etcd = EtcdStoreOptionsOf("etcd://a:2379,b:2380/prod", options);
  ASSERT_TRUE(etcd.ok()) << etcd.status().ToString();
  EXPECT_EQ(etcd->endpoints, (std::vector<std::string>{"a:2379", "b:2380"}));
  EXPECT_EQ(etcd->prefix, "/prod/");
  EXPECT_EQ(etcd->ca_file, "ca.pem");
  EXPECT_EQ(etcd->max_txn_ops, 999u);
  const EtcdClientOptions client = ToEtcdClientOptions(*etcd);
  EXPECT_EQ(client.endpoints, etcd->endpoints);
  EXPECT_EQ(client.ca_file, "ca.pem");
  EXPECT_EQ(client.cert_file, "cert.pem");
  EXPECT_EQ(client.key_file, "key.pem");
  EXPECT_EQ(client.user, "tessera");
  EXPECT_EQ(client.password, "secret");
  EXPECT_EQ(client.deadline_ms, 1234);

  auto sqlite = EtcdStoreOptionsOf("sqlite:/tmp/x.db", options);
  EXPECT_EQ(sqlite.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(sqlite.status().message().find("not an etcd store"), std::string::npos)
      << sqlite.status().ToString();
  auto bad = EtcdStoreOptionsOf("etcd://a:port", options);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("no valid port"), std::string::npos);
}

}  // namespace
}  // namespace tessera
