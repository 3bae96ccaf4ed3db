// EtcdClient: a small client of etcd's v3 gRPC API (KV, Lease, Maintenance, Auth), with
// plain C++ types (no protobuf type leaves etcd_client.cc).
//
// Endpoints: several "host:port"; a call goes to the endpoint that answered last and moves
// on to the next when one is unreachable (UNAVAILABLE) or does not answer in time
// (DEADLINE_EXCEEDED). Every call has one deadline (options.deadline_ms, default 5 s,
// or the caller's) shared by all its tries; when no endpoint answers within it the call
// fails with Unavailable("etcd: no quorum or unreachable (a:1,b:2): ... (over TLS ...)").
// Retries: reads (Range, Status, LeaseTimeToLive, keep-alives) are retried on another
// endpoint freely. A write (Put, DeleteRange, a Txn, LeaseGrant, LeaseRevoke) is sent to
// an endpoint only once its connection is up, and is not sent again once it may have
// reached etcd: a write whose answer was lost fails with Unavailable and a message that
// says "outcome unknown" (it may or may not have been applied; see EtcdStore for how it
// finds out). Errors etcd returns before applying anything ("no leader") are retried.
// TLS: set ca_file (and cert_file/key_file for a client certificate). Authentication:
// user/password; the client authenticates on first use, sends the token as the "token"
// metadata and authenticates again when etcd says the token is invalid or expired; a
// wrong user or password is Unauthenticated.
// Thread safety: every method is thread-safe; calls run concurrently.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace tessera {

struct EtcdClientOptions {
  std::vector<std::string> endpoints;  // "host:port", at least one
  // TLS: PEM files; empty ca_file (and no cert) means plaintext.
  std::string ca_file, cert_file, key_file;
  // Authentication (etcd's user/password); empty user: none.
  std::string user, password;
  // Deadline of one call, all its tries together. Default 5000 ms.
  int deadline_ms = 5000;
};

// One key as etcd holds it.
struct EtcdKeyValue {
  std::string key, value;
  int64_t create_revision = 0, mod_revision = 0, version = 0, lease = 0;

  bool operator==(const EtcdKeyValue&) const = default;
};

// A condition of a Txn: target(key) <result> operand. A key that does not exist compares
// as 0 for every revision target and as "" for its value.
struct EtcdCompare {
  enum class Target { kVersion, kCreateRevision, kModRevision, kValue, kLease };
  enum class Result { kEqual, kGreater, kLess, kNotEqual };
  std::string key;
  Target target = Target::kCreateRevision;
  Result result = Result::kEqual;
  int64_t number = 0;  // for the revision, version and lease targets
  std::string value;   // for kValue

  static EtcdCompare CreateRevision(std::string key, int64_t revision,
                                    Result result = Result::kEqual);
  static EtcdCompare ModRevision(std::string key, int64_t revision, Result result = Result::kEqual);
  static EtcdCompare Value(std::string key, std::string value, Result result = Result::kEqual);
};

// One operation of a Txn.
struct EtcdOp {
  enum class Kind { kRange, kPut, kDelete };
  Kind kind = Kind::kRange;
  std::string key, range_end;  // range_end "": the key alone
  std::string value;           // kPut
  int64_t lease = 0;           // kPut: 0, none
  int64_t limit = 0;           // kRange: 0, no limit

  static EtcdOp Get(std::string key, std::string range_end = "", int64_t limit = 0);
  static EtcdOp Put(std::string key, std::string value, int64_t lease = 0);
  static EtcdOp Delete(std::string key, std::string range_end = "");
};

struct EtcdRangeResult {
  std::vector<EtcdKeyValue> kvs;
  bool more = false;     // more keys in the range than `limit`
  int64_t count = 0;     // keys in the range
  int64_t revision = 0;  // the store's revision the read saw
};

// The answer to one EtcdOp, of the same kind.
struct EtcdOpResult {
  EtcdOp::Kind kind = EtcdOp::Kind::kRange;
  std::vector<EtcdKeyValue> kvs;  // kRange
  bool more = false;              // kRange
  int64_t deleted = 0;            // kDelete
};

struct EtcdTxnResult {
  bool succeeded = false;  // every compare held: the success ops ran, else the failure ops
  std::vector<EtcdOpResult> responses;
  int64_t revision = 0;  // the store's revision after the Txn
};

struct EtcdMemberStatus {
  std::string endpoint;  // which endpoint answered
  std::string version;
  uint64_t member_id = 0, leader = 0;
  uint64_t raft_term = 0, raft_index = 0;
  int64_t db_size = 0;
  std::vector<std::string> errors;  // alarms
};

class EtcdClient {
 public:
  using Deadline = std::chrono::steady_clock::time_point;

  // Checks the options (endpoints, TLS files) and prepares channels; connects lazily.
  static StatusOr<std::unique_ptr<EtcdClient>> Create(EtcdClientOptions options);
  ~EtcdClient();
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  // A deadline of `deadline` (a default-constructed Deadline, the default: now +
  // options.deadline_ms) applies to each call.
  StatusOr<EtcdRangeResult> Range(const std::string& key, const std::string& range_end = "",
                                  int64_t limit = 0, int64_t revision = 0, Deadline deadline = {});
  // One key; nullopt when absent.
  StatusOr<std::optional<EtcdKeyValue>> Get(const std::string& key, Deadline deadline = {});
  StatusOr<EtcdTxnResult> Txn(const std::vector<EtcdCompare>& compares,
                              const std::vector<EtcdOp>& success,
                              const std::vector<EtcdOp>& failure = {}, Deadline deadline = {});
  // The store's revision after the put.
  StatusOr<int64_t> Put(const std::string& key, const std::string& value, int64_t lease = 0,
                        Deadline deadline = {});
  // Keys deleted.
  StatusOr<int64_t> DeleteRange(const std::string& key, const std::string& range_end = "",
                                Deadline deadline = {});
  // A lease of ttl_s seconds (etcd may raise it to its minimum); its id.
  StatusOr<int64_t> LeaseGrant(int64_t ttl_s, Deadline deadline = {});
  // Renews the lease once (one message on a keep-alive stream); the TTL it now has, 0 when
  // it has expired or does not exist.
  StatusOr<int64_t> LeaseKeepAliveOnce(int64_t lease, Deadline deadline = {});
  // Ends the lease and deletes its keys; NotFound when it does not exist (any more).
  Status LeaseRevoke(int64_t lease, Deadline deadline = {});
  // Whole seconds the lease has left (0 in its last second); -1 when it has expired or
  // does not exist.
  StatusOr<int64_t> LeaseTimeToLive(int64_t lease, Deadline deadline = {});
  // The status of the member that answers.
  StatusOr<EtcdMemberStatus> MemberStatus(Deadline deadline = {});

  const EtcdClientOptions& options() const { return options_; }
  // "a:1,b:2", as error messages name them.
  std::string EndpointList() const;
  // The end of the range of every key starting with `prefix` ("\0" for every key).
  static std::string PrefixEnd(const std::string& prefix);

 private:
  struct Impl;
  explicit EtcdClient(EtcdClientOptions options);
  Deadline Resolve(Deadline deadline) const;

  EtcdClientOptions options_;
  std::unique_ptr<Impl> impl_;
};

// True when `status` says a write's answer was lost: it may or may not have been applied.
bool EtcdOutcomeUnknown(const Status& status);

}  // namespace tessera
