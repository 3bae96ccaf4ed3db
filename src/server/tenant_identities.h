// TenantIdentities: the Unix identity (uid:gid) each tenant's tasks run as, from an
// explicit table (run_as) or else assigned once from a pool of uids and kept in the
// store under "uid/<tenant>", so that a tenant keeps its identity on every node (shared
// filesystems) and across restarts. Two tenants never share a uid: that would share
// everything a uid guards.
// Thread safety: none; the controller calls it under its lock.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "base/status.h"
#include "store/store.h"

namespace tessera {

class TenantIdentities {
 public:
  using Identity = std::pair<int64_t, int64_t>;  // uid, gid
  struct Options {
    std::map<std::string, Identity> run_as;  // tenant -> identity, before the pool
    int64_t pool_start = 200'000;            // pool: [start, start + size), gid = uid
    int64_t pool_size = 100'000;
  };

  explicit TenantIdentities(Options options) : options_(std::move(options)) {}

  // Reads the identities assigned before. Internal for a stored value that is not
  // uid:gid; InvalidArgument when run_as gives a tenant a uid another tenant holds.
  Status Load(Store& store);
  // The tenant's identity if it has one (run_as first); nullopt when none yet.
  std::optional<Identity> Known(const std::string& tenant) const;
  // The tenant's identity, assigned from the pool when new (the lowest free uid): the
  // assignment goes into `batch`, to be durable with the caller's change. {-1, -1} when
  // the pool is exhausted (logged).
  Identity For(const std::string& tenant, WriteBatch& batch);

 private:
  Options options_;
  std::map<std::string, Identity> assigned_;  // from the pool, by tenant
};

}  // namespace tessera
