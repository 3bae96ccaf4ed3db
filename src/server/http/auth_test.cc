#include "server/http/auth.h"

#include <gtest/gtest.h>

#include <set>
#include <thread>
#include <vector>

namespace tessera {
namespace {

TEST(HashTokenTest, IsSha256Hex) {
  EXPECT_EQ(HashToken(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(HashToken("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_NE(HashToken("tsr_a"), HashToken("tsr_b"));
}

TEST(GenerateTokenTest, PrefixAndRandomBase64Url) {
  std::string token = GenerateToken("tsr_admin");
  ASSERT_EQ(token.rfind("tsr_admin_", 0), 0u) << token;
  std::string secret = token.substr(std::string("tsr_admin_").size());
  EXPECT_EQ(secret.size(), 43u);  // 32 bytes, unpadded base64
  for (char c : secret) {
    EXPECT_TRUE((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                c == '-' || c == '_')
        << "character '" << c << "' in " << token;
  }
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    EXPECT_TRUE(seen.insert(GenerateToken("t")).second);
  }
  EXPECT_EQ(GenerateToken("").size(), 43u);
}

TEST(RoleTest, NamesRoundTrip) {
  for (Role role : {Role::kAdmin, Role::kTenant, Role::kAgent, Role::kMetrics, Role::kNode}) {
    auto parsed = ParseRole(RoleName(role));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, role);
  }
  EXPECT_EQ(RoleName(Role::kAdmin), "admin");
  EXPECT_EQ(RoleName(Role::kTenant), "tenant");
  EXPECT_EQ(RoleName(Role::kAgent), "agent");
  EXPECT_EQ(RoleName(Role::kMetrics), "metrics");
  EXPECT_EQ(RoleName(Role::kNode), "node");
  EXPECT_EQ(ParseRole("root").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseRole("Admin").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseRole("").status().code(), StatusCode::kInvalidArgument);
}

TEST(TokenRegistryTest, AuthenticatesKnownTokens) {
  TokenRegistry registry;
  std::string admin = GenerateToken("tsr_admin");
  std::string tenant = GenerateToken("tsr_tenant");
  registry.Add(HashToken(admin), Principal{Role::kAdmin, "", "root"});
  registry.Add(HashToken(tenant), Principal{Role::kTenant, "team-a", "ci"});
  EXPECT_EQ(registry.size(), 2u);

  auto who = registry.Authenticate("Bearer " + admin);
  ASSERT_TRUE(who.ok()) << who.status().ToString();
  EXPECT_EQ(*who, (Principal{Role::kAdmin, "", "root"}));
  who = registry.Authenticate("bearer   " + tenant + "  ");
  ASSERT_TRUE(who.ok()) << who.status().ToString();
  EXPECT_EQ(*who, (Principal{Role::kTenant, "team-a", "ci"}));
  EXPECT_TRUE(registry.Authenticate("BEARER\t" + tenant).ok());
}

TEST(TokenRegistryTest, RefusesMissingAndUnknownTokens) {
  TokenRegistry registry;
  std::string token = GenerateToken("tsr_agent");
  registry.Add(HashToken(token), Principal{Role::kAgent, "", "node-1"});
  for (std::string header :
       {std::string(""), std::string("Bearer"), std::string("Bearer   "),
        std::string("Basic dXNlcjpwYXNz"), token, std::string("Bearer") + token}) {
    auto who = registry.Authenticate(header);
    ASSERT_FALSE(who.ok()) << header;
    EXPECT_EQ(who.status(), UnauthenticatedError("missing bearer token")) << header;
  }
  auto who = registry.Authenticate("Bearer " + token + "x");
  EXPECT_EQ(who.status(), UnauthenticatedError("unknown token"));
  // The registry holds hashes: the hash itself is not a credential.
  who = registry.Authenticate("Bearer " + HashToken(token));
  EXPECT_EQ(who.status(), UnauthenticatedError("unknown token"));
}

TEST(TokenRegistryTest, RemoveAndReplace) {
  TokenRegistry registry;
  std::string hash = HashToken("secret");
  registry.Add(hash, Principal{Role::kTenant, "a", "x"});
  registry.Add(hash, Principal{Role::kTenant, "b", "y"});
  EXPECT_EQ(registry.size(), 1u);
  EXPECT_EQ(registry.Authenticate("Bearer secret")->tenant, "b");
  EXPECT_TRUE(registry.Remove(hash));
  EXPECT_FALSE(registry.Remove(hash));
  EXPECT_EQ(registry.size(), 0u);
  EXPECT_EQ(registry.Authenticate("Bearer secret").status().code(), StatusCode::kUnauthenticated);
}

TEST(TokenRegistryTest, RowsRoundTrip) {
  Principal who{Role::kTenant, "team-a", "ci"};
  TokenRow row = MakeTokenRow(HashToken("s1"), who, 99);
  EXPECT_EQ(row, (TokenRow{HashToken("s1"), "tenant", "team-a", "ci", 99, ""}));
  auto back = PrincipalFromRow(row);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, who);

  TokenRegistry registry;
  ASSERT_TRUE(
      registry.AddRows({row, MakeTokenRow(HashToken("s2"), Principal{Role::kAdmin, "", "root"}, 1)})
          .ok());
  EXPECT_EQ(registry.size(), 2u);
  EXPECT_EQ(registry.Authenticate("Bearer s2")->role, Role::kAdmin);

  TokenRegistry strict;
  TokenRow bad{HashToken("s3"), "superuser", "", "mallory", 1, ""};
  Status status = strict.AddRows({MakeTokenRow(HashToken("s4"), who, 1), bad});
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("mallory"), std::string::npos) << status.ToString();
  EXPECT_EQ(strict.size(), 0u);
}

TEST(TokenRegistryTest, AUserTokenKeepsItsUserThroughItsRow) {
  Principal alice{Role::kTenant, "team-a", "alice@team-a", "alice"};
  TokenRow row = MakeTokenRow(HashToken("s5"), alice, 7);
  EXPECT_EQ(row.user, "alice");
  auto back = PrincipalFromRow(row);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, alice);
  TokenRegistry registry;
  ASSERT_TRUE(registry.AddRows({row}).ok());
  EXPECT_EQ(registry.Authenticate("Bearer s5")->user, "alice");

  EXPECT_TRUE(CheckUserName("alice.b-c_d@x").ok());
  EXPECT_EQ(CheckUserName("").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckUserName("a b").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckUserName(std::string(129, 'a')).code(), StatusCode::kInvalidArgument);
}

TEST(TokenRegistryTest, ConcurrentReadersAndWriters) {
  TokenRegistry registry;
  registry.Add(HashToken("stable"), Principal{Role::kAdmin, "", "root"});
  std::vector<std::thread> threads;
  std::vector<int> misses(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&registry, &misses, t] {
      for (int i = 0; i < 200; ++i) {
        std::string mine = "t" + std::to_string(t) + "-" + std::to_string(i);
        registry.Add(HashToken(mine), Principal{Role::kTenant, "x", mine});
        if (!registry.Authenticate("Bearer stable").ok() ||
            !registry.Authenticate("Bearer " + mine).ok()) {
          ++misses[t];
        }
        registry.Remove(HashToken(mine));
      }
    });
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  for (int miss : misses) {
    EXPECT_EQ(miss, 0);
  }
  EXPECT_EQ(registry.size(), 1u);
}

}  // namespace
}  // namespace tessera
