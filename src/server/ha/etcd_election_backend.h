// EtcdElectionBackend: LeaderElection's lease store on etcd (store/etcd/etcd_client.h).
// The leader key is created in a Txn that holds only when the key does not exist
// (create_revision == 0) and is bound to the campaigner's lease; its create revision
// is the fence of the term. Every call has a short deadline of its own (default 1 s), so
// that an unreachable etcd is noticed within one renewal period, not the client's
// default 5 s.
// Thread safety: as EtcdClient's (thread-safe).
#pragma once

#include <memory>

#include "server/ha/election_backend.h"
#include "store/etcd/etcd_client.h"

namespace tessera {

class EtcdElectionBackend final : public ElectionBackend {
 public:
  // `client` must outlive this.
  explicit EtcdElectionBackend(EtcdClient& client, int call_deadline_ms = 1000)
      : client_(client), call_deadline_ms_(call_deadline_ms) {}

  StatusOr<int64_t> GrantLease(int64_t ttl_s) override;
  StatusOr<int64_t> KeepAlive(int64_t lease) override;
  Status Revoke(int64_t lease) override;
  StatusOr<std::optional<int64_t>> CreateIfAbsent(const std::string& key, const std::string& value,
                                                  int64_t lease) override;
  StatusOr<std::optional<LeaderRecord>> Get(const std::string& key) override;

 private:
  EtcdClient::Deadline Deadline() const;

  EtcdClient& client_;
  const int call_deadline_ms_;
};

}  // namespace tessera
