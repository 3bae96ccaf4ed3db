// EtcdClient against a real 3-member etcd cluster (shared by this binary's tests).
#include "store/etcd/etcd_client.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "store/etcd/testing/etcd_cluster.h"

namespace tessera {
namespace {

using Clock = std::chrono::steady_clock;

template <typename T>
T ValueOr(const StatusOr<T>& v, T fallback) {
  return v.ok() ? *v : fallback;
}

class EtcdClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto cluster = testing::SharedEtcdCluster();
    ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
    cluster_ = *cluster;
    EtcdClientOptions options;
    options.endpoints = cluster_->EndpointList();
    auto client = EtcdClient::Create(options);
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = std::move(client).value();
  }

  testing::EtcdCluster* cluster_ = nullptr;
  std::unique_ptr<EtcdClient> client_;
};

TEST_F(EtcdClientTest, PutGetRangeAndDelete) {
  ASSERT_TRUE(client_->Put("/client/range/b", "2").ok());
  ASSERT_TRUE(client_->Put("/client/range/a", "1").ok());
  ASSERT_TRUE(client_->Put("/client/range/c", std::string("x\0y", 3)).ok());
  ASSERT_TRUE(client_->Put("/client/rangf", "outside").ok());
  auto all = client_->Range("/client/range/", EtcdClient::PrefixEnd("/client/range/"));
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->kvs.size(), 3u);
  EXPECT_EQ(all->kvs[0].key, "/client/range/a");
  EXPECT_EQ(all->kvs[2].value, std::string("x\0y", 3));
  EXPECT_FALSE(all->more);
  EXPECT_GT(all->revision, 0);
  auto limited = client_->Range("/client/range/", EtcdClient::PrefixEnd("/client/range/"), 2);
  ASSERT_TRUE(limited.ok());
  EXPECT_EQ(limited->kvs.size(), 2u);
  EXPECT_TRUE(limited->more);
  EXPECT_EQ(limited->count, 3);
  auto one = client_->Get("/client/range/b");
  ASSERT_TRUE(one.ok());
  ASSERT_TRUE(one->has_value());
  EXPECT_EQ((*one)->value, "2");
  EXPECT_EQ((*one)->version, 1);
  EXPECT_EQ((*one)->create_revision, (*one)->mod_revision);
  auto deleted = client_->DeleteRange("/client/range/", EtcdClient::PrefixEnd("/client/range/"));
  ASSERT_TRUE(deleted.ok());
  EXPECT_EQ(*deleted, 3);
  EXPECT_FALSE(client_->Get("/client/range/b")->has_value());
  EXPECT_TRUE(client_->Get("/client/rangf")->has_value());
}

TEST_F(EtcdClientTest, PrefixEndIsTheNextKeyAfterThePrefix) {
  EXPECT_EQ(EtcdClient::PrefixEnd("/a/"), "/a0");
  EXPECT_EQ(EtcdClient::PrefixEnd("a\xff"), "b");
  EXPECT_EQ(EtcdClient::PrefixEnd("\xff\xff"), std::string(1, '\0'));
  EXPECT_EQ(EtcdClient::PrefixEnd(""), std::string(1, '\0'));
}

TEST_F(EtcdClientTest, TxnComparesCreateRevision) {
  const std::string key = "/client/txn/leader";
  // Created only while absent: the first Txn succeeds, the second runs its failure ops.
  auto first = client_->Txn({EtcdCompare::CreateRevision(key, 0)}, {EtcdOp::Put(key, "one")},
                            {EtcdOp::Get(key)});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(first->succeeded);
  ASSERT_EQ(first->responses.size(), 1u);
  EXPECT_EQ(first->responses[0].kind, EtcdOp::Kind::kPut);
  const int64_t created = first->revision;
  auto second = client_->Txn({EtcdCompare::CreateRevision(key, 0)}, {EtcdOp::Put(key, "two")},
                             {EtcdOp::Get(key)});
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(second->succeeded);
  ASSERT_EQ(second->responses.size(), 1u);
  ASSERT_EQ(second->responses[0].kvs.size(), 1u);
  EXPECT_EQ(second->responses[0].kvs[0].value, "one");
  EXPECT_EQ(second->responses[0].kvs[0].create_revision, created);
  // Conditioned on the creation revision (a fence): holds until the key is re-created.
  auto fenced = client_->Txn({EtcdCompare::CreateRevision(key, created)},
                             {EtcdOp::Put("/client/txn/data", "x"), EtcdOp::Delete(key)});
  ASSERT_TRUE(fenced.ok());
  EXPECT_TRUE(fenced->succeeded);
  ASSERT_TRUE(client_->Put(key, "three").ok());
  auto stale = client_->Txn({EtcdCompare::CreateRevision(key, created)},
                            {EtcdOp::Put("/client/txn/data", "y")});
  ASSERT_TRUE(stale.ok());
  EXPECT_FALSE(stale->succeeded);
  EXPECT_EQ((*client_->Get("/client/txn/data"))->value, "x");
  // Value and mod-revision compares.
  auto by_value = client_->Txn({EtcdCompare::Value(key, "three")}, {EtcdOp::Put(key, "four")});
  ASSERT_TRUE(by_value.ok());
  EXPECT_TRUE(by_value->succeeded);
  auto by_mod =
      client_->Txn({EtcdCompare::ModRevision(key, by_value->revision)}, {EtcdOp::Delete(key)});
  ASSERT_TRUE(by_mod.ok());
  EXPECT_TRUE(by_mod->succeeded);
  ASSERT_EQ(by_mod->responses.size(), 1u);
  EXPECT_EQ(by_mod->responses[0].deleted, 1);
}

TEST_F(EtcdClientTest, TxnRefusesTheSameKeyTwice) {
  auto twice = client_->Txn({}, {EtcdOp::Put("/client/dup", "a"), EtcdOp::Put("/client/dup", "b")});
  EXPECT_EQ(twice.status().code(), StatusCode::kInvalidArgument) << twice.status().ToString();
}

TEST_F(EtcdClientTest, LeaseKeepsItsKeysUntilItExpires) {
  auto lease = client_->LeaseGrant(1);
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  ASSERT_NE(*lease, 0);
  ASSERT_TRUE(client_->Put("/client/lease/key", "v", *lease).ok());
  auto kv = client_->Get("/client/lease/key");
  ASSERT_TRUE(kv.ok());
  ASSERT_TRUE(kv->has_value());
  EXPECT_EQ((*kv)->lease, *lease);
  // Renewed for 1.5 s, longer than its TTL: the key stays.
  for (int i = 0; i < 5; ++i) {
    auto ttl = client_->LeaseKeepAliveOnce(*lease);
    ASSERT_TRUE(ttl.ok()) << ttl.status().ToString();
    EXPECT_GE(*ttl, 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  EXPECT_TRUE(client_->Get("/client/lease/key")->has_value());
  auto left = client_->LeaseTimeToLive(*lease);
  ASSERT_TRUE(left.ok());
  EXPECT_GE(*left, 0);
  // Left alone, it expires (bounded wait) and takes its key along.
  const auto until = Clock::now() + std::chrono::seconds(6);
  while (Clock::now() < until && ValueOr<int64_t>(client_->LeaseTimeToLive(*lease), 0) != -1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(ValueOr<int64_t>(client_->LeaseTimeToLive(*lease), 0), -1);
  EXPECT_FALSE(client_->Get("/client/lease/key")->has_value());
  auto expired = client_->LeaseKeepAliveOnce(*lease);
  ASSERT_TRUE(expired.ok()) << expired.status().ToString();
  EXPECT_EQ(*expired, 0);
}

TEST_F(EtcdClientTest, RevokeEndsALeaseAndItsKeys) {
  auto lease = client_->LeaseGrant(30);
  ASSERT_TRUE(lease.ok());
  ASSERT_TRUE(client_->Put("/client/revoke/key", "v", *lease).ok());
  ASSERT_TRUE(client_->LeaseRevoke(*lease).ok());
  EXPECT_FALSE(client_->Get("/client/revoke/key")->has_value());
  EXPECT_EQ(client_->LeaseRevoke(*lease).code(), StatusCode::kNotFound);
  EXPECT_EQ(ValueOr<int64_t>(client_->LeaseKeepAliveOnce(*lease), -1), 0);
}

TEST_F(EtcdClientTest, StatusNamesTheMemberAndItsLeader) {
  auto status = client_->MemberStatus();
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  EXPECT_EQ(status->version.rfind("3.", 0), 0u) << status->version;
  EXPECT_NE(status->member_id, 0u);
  EXPECT_NE(status->leader, 0u);
  EXPECT_FALSE(status->endpoint.empty());
}

TEST_F(EtcdClientTest, SkipsAnEndpointThatIsDown) {
  EtcdClientOptions options;
  options.endpoints = {"127.0.0.1:1"};  // nothing listens on port 1
  for (const std::string& endpoint : cluster_->EndpointList()) {
    options.endpoints.push_back(endpoint);
  }
  auto client = EtcdClient::Create(options);
  ASSERT_TRUE(client.ok());
  EXPECT_TRUE((*client)->Put("/client/failover", "v").ok());
  auto got = (*client)->Get("/client/failover");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(got->has_value());
}

TEST_F(EtcdClientTest, NoEndpointAnsweringIsUnavailableWithinTheDeadline) {
  EtcdClientOptions options;
  options.endpoints = {"127.0.0.1:1", "127.0.0.1:2"};
  options.deadline_ms = 600;
  auto client = EtcdClient::Create(options);
  ASSERT_TRUE(client.ok());
  const auto start = Clock::now();
  auto got = (*client)->Get("/x");
  const auto took = Clock::now() - start;
  EXPECT_EQ(got.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(got.status().message().find("no quorum or unreachable (127.0.0.1:1,127.0.0.1:2)"),
            std::string::npos)
      << got.status().ToString();
  EXPECT_LT(took, std::chrono::milliseconds(2000));
  auto put = (*client)->Put("/x", "v");
  EXPECT_EQ(put.status().code(), StatusCode::kUnavailable);
  EXPECT_FALSE(EtcdOutcomeUnknown(put.status())) << "never sent: " << put.status().ToString();
}

TEST(EtcdClientOptionsTest, RejectsBadOptions) {
  EXPECT_EQ(EtcdClient::Create({}).status().code(), StatusCode::kInvalidArgument);
  EtcdClientOptions no_port;
  no_port.endpoints = {"localhost"};
  EXPECT_EQ(EtcdClient::Create(no_port).status().code(), StatusCode::kInvalidArgument);
  EtcdClientOptions half_cert;
  half_cert.endpoints = {"localhost:2379"};
  half_cert.cert_file = "/nonexistent/cert.pem";
  EXPECT_EQ(EtcdClient::Create(half_cert).status().code(), StatusCode::kInvalidArgument);
  EtcdClientOptions missing_ca;
  missing_ca.endpoints = {"localhost:2379"};
  missing_ca.ca_file = "/nonexistent/ca.pem";
  auto created = EtcdClient::Create(missing_ca);
  EXPECT_EQ(created.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(created.status().message().find("/nonexistent/ca.pem"), std::string::npos);
}

}  // namespace
}  // namespace tessera
