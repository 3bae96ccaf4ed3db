#include "server/ha/etcd_election_backend.h"

#include <chrono>

namespace tessera {

EtcdClient::Deadline EtcdElectionBackend::Deadline() const {
  return std::chrono::steady_clock::now() + std::chrono::milliseconds(call_deadline_ms_);
}

StatusOr<int64_t> EtcdElectionBackend::GrantLease(int64_t ttl_s) {
  return client_.LeaseGrant(ttl_s, Deadline());
}

StatusOr<int64_t> EtcdElectionBackend::KeepAlive(int64_t lease) {
  return client_.LeaseKeepAliveOnce(lease, Deadline());
}

Status EtcdElectionBackend::Revoke(int64_t lease) {
  Status s = client_.LeaseRevoke(lease, Deadline());
  return s.code() == StatusCode::kNotFound ? Status::Ok() : s;
}

StatusOr<std::optional<int64_t>> EtcdElectionBackend::CreateIfAbsent(const std::string& key,
                                                                     const std::string& value,
                                                                     int64_t lease) {
  TESSERA_ASSIGN_OR_RETURN(
      EtcdTxnResult txn,
      client_.Txn({EtcdCompare::CreateRevision(key, 0)}, {EtcdOp::Put(key, value, lease)}, {},
                  Deadline()));
  if (!txn.succeeded) {
    return std::optional<int64_t>();
  }
  // The put is the Txn's only write: the revision after it is the key's create revision.
  return std::optional<int64_t>(txn.revision);
}

StatusOr<std::optional<LeaderRecord>> EtcdElectionBackend::Get(const std::string& key) {
  TESSERA_ASSIGN_OR_RETURN(std::optional<EtcdKeyValue> kv, client_.Get(key, Deadline()));
  if (!kv.has_value()) {
    return std::optional<LeaderRecord>();
  }
  return std::optional<LeaderRecord>(LeaderRecord{kv->value, kv->create_revision, kv->lease});
}

}  // namespace tessera
