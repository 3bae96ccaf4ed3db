// ElectionBackend: what leader election needs of a store with leases (etcd v3): a lease
// that expires unless kept alive, and a key created only when absent and bound to it.
// EtcdElectionBackend (etcd_election_backend.h) is the real one; tests use a fake.
// Thread safety: implementations are thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "base/status.h"

namespace tessera {

// The leader key as stored: who holds it and since which revision.
struct LeaderRecord {
  std::string value;             // the holder's advertised URL
  int64_t create_revision = 0;   // the fence: every write of the holder is conditioned on it
  int64_t lease = 0;
};

class ElectionBackend {
 public:
  virtual ~ElectionBackend() = default;
  // A lease of ttl_s seconds; its id.
  virtual StatusOr<int64_t> GrantLease(int64_t ttl_s) = 0;
  // Renews the lease; the seconds it has left, 0 when it has already expired.
  virtual StatusOr<int64_t> KeepAlive(int64_t lease) = 0;
  // Ends the lease now (and every key bound to it). NotFound when already gone is OK.
  virtual Status Revoke(int64_t lease) = 0;
  // Creates key = value bound to lease when key does not exist: its create revision;
  // nullopt when someone else holds it.
  virtual StatusOr<std::optional<int64_t>> CreateIfAbsent(const std::string& key,
                                                          const std::string& value,
                                                          int64_t lease) = 0;
  // The key's record; nullopt when absent.
  virtual StatusOr<std::optional<LeaderRecord>> Get(const std::string& key) = 0;
};

}  // namespace tessera
