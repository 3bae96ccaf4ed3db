// API authentication: bearer tokens, kept only as SHA-256 hashes.
//
// A token is a random secret handed out once (GenerateToken); the controller stores its
// hash (HashToken) with the principal it stands for, in the Store (TokenRow) and in a
// TokenRegistry that answers each request's Authorization header.
// Roles: admin (everything), tenant (its own tenant's jobs and queues), agent (the join
// token: registers a node name for the first time, nothing else), node (a credential
// bound to one node name, handed out at that name's first registration: its agent's
// registrations, heartbeats and task reports), metrics (reads /metrics only: what a
// Prometheus server is given). Thread safety: the free functions are thread-safe; TokenRegistry is thread-safe
// (a shared_mutex: many concurrent Authenticate calls, exclusive Add/Remove).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "store/store.h"

namespace tessera {

enum class Role : uint8_t { kAdmin, kTenant, kAgent, kMetrics, kNode };

// "admin", "tenant", "agent", "metrics", "node".
std::string_view RoleName(Role role);
// The inverse of RoleName; InvalidArgument for anything else (case-sensitive).
StatusOr<Role> ParseRole(std::string_view name);

struct Principal {
  Role role = Role::kTenant;
  std::string tenant;  // the tenant a kTenant principal acts for; "" for others
  std::string name;    // who holds the token (a person, a CI job; for kNode the node name)
  // The person a kTenant token stands for inside its tenant; "" for a token of the tenant
  // as a whole. A user token's jobs are that user's, whatever their file says.
  std::string user = "";  // an initializer, so that aggregates may leave it out

  bool operator==(const Principal&) const = default;
};

// A user name as a token and a job file carry it: 1 to 128 of A-Z a-z 0-9 . _ - @
// (InvalidArgument naming what is wrong otherwise).
Status CheckUserName(std::string_view user);

// SHA-256 of the token, 64 lowercase hex digits (OpenSSL EVP).
std::string HashToken(std::string_view token);

// prefix + "_" + 32 random bytes (OpenSSL RAND_bytes) as unpadded base64url (43
// characters), e.g. "tsr_admin_3q2-...". An empty prefix gives the random part alone.
// Aborts the process if the system cannot supply randomness (no weak token is ever made).
std::string GenerateToken(std::string_view prefix);

// The row that persists a token, and the principal a row stands for.
TokenRow MakeTokenRow(const std::string& hash, const Principal& who, int64_t created_us);
StatusOr<Principal> PrincipalFromRow(const TokenRow& row);  // InvalidArgument: bad role

class TokenRegistry {  // thread-safe (a reader-writer lock)
 public:
  // Adds or replaces the principal of a token hash.
  void Add(const std::string& hash, Principal who);
  // Removes a token; false when it was not there.
  bool Remove(const std::string& hash);
  // Adds every row (e.g. from Store::LoadTokens); InvalidArgument naming the first row with
  // a bad role, and then nothing is added.
  Status AddRows(const std::vector<TokenRow>& rows);

  // From an Authorization header value "Bearer <token>" (scheme case-insensitive, spaces
  // around the token ignored): the principal, or Unauthenticated with a reason ("missing
  // bearer token", "unknown token").
  StatusOr<Principal> Authenticate(std::string_view authorization) const;
  size_t size() const;

 private:
  mutable SharedMutex mu_;
  std::unordered_map<std::string, Principal> by_hash_ GUARDED_BY(mu_);
};

}  // namespace tessera
