// EtcdClient: see etcd_client.h.
#include "base/mutex.h"
#include "store/etcd/etcd_client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

#include "store/etcd/proto/rpc.grpc.pb.h"

namespace tessera {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr std::string_view kUnknownOutcome = "outcome unknown";

// How long a write waits for one endpoint's connection before it tries the next.
constexpr milliseconds kConnectWait{1000};
// The pause between two rounds over every endpoint.
constexpr milliseconds kRoundPause{50};

// gRPC takes deadlines on the system clock.
std::chrono::system_clock::time_point ToSystem(Clock::time_point t) {
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(t - Clock::now());
}

StatusOr<std::string> ReadFile(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return InvalidArgumentError(std::string("etcd: cannot read the ") + what + " file " + path);
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// etcd's errors that it returns before it applies anything: a write may go elsewhere.
bool NotApplied(const grpc::Status& s) {
  const std::string& m = s.error_message();
  return m.find("no leader") != std::string::npos || m.find("not capable") != std::string::npos ||
         m.find("server stopped") != std::string::npos ||
         m.find("unhealthy cluster") != std::string::npos;
}

bool TokenRejected(const grpc::Status& s) {
  const std::string& m = s.error_message();
  return s.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
         m.find("invalid auth token") != std::string::npos ||
         m.find("revision of auth store is old") != std::string::npos;
}

Status FromGrpc(const grpc::Status& s, const std::string& what) {
  std::string message = "etcd " + what + ": " + s.error_message();
  switch (s.error_code()) {
    case grpc::StatusCode::OK:
      return Status::Ok();
    case grpc::StatusCode::INVALID_ARGUMENT:
      return InvalidArgumentError(std::move(message));
    case grpc::StatusCode::NOT_FOUND:
      return NotFoundError(std::move(message));
    case grpc::StatusCode::ALREADY_EXISTS:
      return AlreadyExistsError(std::move(message));
    case grpc::StatusCode::FAILED_PRECONDITION:
      return FailedPreconditionError(std::move(message));
    case grpc::StatusCode::PERMISSION_DENIED:
      return PermissionDeniedError(std::move(message));
    case grpc::StatusCode::UNAUTHENTICATED:
      return UnauthenticatedError(std::move(message));
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return ResourceExhaustedError(std::move(message));
    case grpc::StatusCode::OUT_OF_RANGE:
      return OutOfRangeError(std::move(message));
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return UnavailableError(std::move(message));
    default:
      return InternalError(std::move(message));
  }
}

// A refused Authenticate. etcd says INVALID_ARGUMENT for a wrong user or password; as
// that, callers would take it for a request of theirs to fix (a 400), not a store
// that cannot be used.
Status AuthError(const grpc::Status& s, const std::string& user) {
  const std::string what = "authenticate as " + user;
  if (s.error_message().find("authentication failed") != std::string::npos) {
    return UnauthenticatedError("etcd " + what + ": " + s.error_message());
  }
  return FromGrpc(s, what);
}

EtcdKeyValue FromPb(const mvccpb::KeyValue& kv) {
  return EtcdKeyValue{kv.key(),          kv.value(),   kv.create_revision(),
                      kv.mod_revision(), kv.version(), kv.lease()};
}

void ToPb(const EtcdCompare& c, etcdserverpb::Compare* out) {
  using Pb = etcdserverpb::Compare;
  out->set_key(c.key);
  switch (c.result) {
    case EtcdCompare::Result::kEqual:
      out->set_result(Pb::EQUAL);
      break;
    case EtcdCompare::Result::kGreater:
      out->set_result(Pb::GREATER);
      break;
    case EtcdCompare::Result::kLess:
      out->set_result(Pb::LESS);
      break;
    case EtcdCompare::Result::kNotEqual:
      out->set_result(Pb::NOT_EQUAL);
      break;
  }
  switch (c.target) {
    case EtcdCompare::Target::kVersion:
      out->set_target(Pb::VERSION);
      out->set_version(c.number);
      break;
    case EtcdCompare::Target::kCreateRevision:
      out->set_target(Pb::CREATE);
      out->set_create_revision(c.number);
      break;
    case EtcdCompare::Target::kModRevision:
      out->set_target(Pb::MOD);
      out->set_mod_revision(c.number);
      break;
    case EtcdCompare::Target::kValue:
      out->set_target(Pb::VALUE);
      out->set_value(c.value);
      break;
    case EtcdCompare::Target::kLease:
      out->set_target(Pb::LEASE);
      out->set_lease(c.number);
      break;
  }
}

void ToPb(const EtcdOp& op, etcdserverpb::RequestOp* out) {
  switch (op.kind) {
    case EtcdOp::Kind::kRange: {
      auto* r = out->mutable_request_range();
      r->set_key(op.key);
      r->set_range_end(op.range_end);
      r->set_limit(op.limit);
      break;
    }
    case EtcdOp::Kind::kPut: {
      auto* p = out->mutable_request_put();
      p->set_key(op.key);
      p->set_value(op.value);
      p->set_lease(op.lease);
      break;
    }
    case EtcdOp::Kind::kDelete: {
      auto* d = out->mutable_request_delete_range();
      d->set_key(op.key);
      d->set_range_end(op.range_end);
      break;
    }
  }
}

}  // namespace

EtcdCompare EtcdCompare::CreateRevision(std::string key, int64_t revision, Result result) {
  EtcdCompare c;
  c.key = std::move(key);
  c.target = Target::kCreateRevision;
  c.result = result;
  c.number = revision;
  return c;
}

EtcdCompare EtcdCompare::ModRevision(std::string key, int64_t revision, Result result) {
  EtcdCompare c;
  c.key = std::move(key);
  c.target = Target::kModRevision;
  c.result = result;
  c.number = revision;
  return c;
}

EtcdCompare EtcdCompare::Value(std::string key, std::string value, Result result) {
  EtcdCompare c;
  c.key = std::move(key);
  c.target = Target::kValue;
  c.result = result;
  c.value = std::move(value);
  return c;
}

EtcdOp EtcdOp::Get(std::string key, std::string range_end, int64_t limit) {
  EtcdOp op;
  op.kind = Kind::kRange;
  op.key = std::move(key);
  op.range_end = std::move(range_end);
  op.limit = limit;
  return op;
}

EtcdOp EtcdOp::Put(std::string key, std::string value, int64_t lease) {
  EtcdOp op;
  op.kind = Kind::kPut;
  op.key = std::move(key);
  op.value = std::move(value);
  op.lease = lease;
  return op;
}

EtcdOp EtcdOp::Delete(std::string key, std::string range_end) {
  EtcdOp op;
  op.kind = Kind::kDelete;
  op.key = std::move(key);
  op.range_end = std::move(range_end);
  return op;
}

bool EtcdOutcomeUnknown(const Status& status) {
  return status.code() == StatusCode::kUnavailable &&
         status.message().find(kUnknownOutcome) != std::string::npos;
}

struct EtcdClient::Impl {
  struct Endpoint {
    std::string address;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<etcdserverpb::KV::Stub> kv;
    std::unique_ptr<etcdserverpb::Lease::Stub> lease;
    std::unique_ptr<etcdserverpb::Maintenance::Stub> maintenance;
    std::unique_ptr<etcdserverpb::Auth::Stub> auth;
  };
  // How a call may be retried.
  enum class Kind {
    kRead,   // any number of times, anywhere
    kWrite,  // sent at most once; retried only when etcd says it applied nothing
  };

  std::vector<Endpoint> endpoints;
  int deadline_ms = 5000;
  // How the client connects, for errors: a TLS mismatch reads as a closed connection.
  std::string transport = "plaintext";
  std::string user, password;

  Mutex mu;
  size_t current GUARDED_BY(mu) = 0;
  std::string token GUARDED_BY(mu);

  size_t Current() {
    MutexLock lock(mu);
    return current;
  }
  void Answered(size_t index) {
    MutexLock lock(mu);
    current = index;
  }
  std::string Token() {
    MutexLock lock(mu);
    return token;
  }

  // Waits for the endpoint's connection, at most until `until`; false when it is down.
  static bool Connected(Endpoint& ep, Clock::time_point until) {
    grpc_connectivity_state state = ep.channel->GetState(true);
    while (state != GRPC_CHANNEL_READY) {
      if (state == GRPC_CHANNEL_TRANSIENT_FAILURE || state == GRPC_CHANNEL_SHUTDOWN ||
          Clock::now() >= until) {
        return false;
      }
      if (!ep.channel->WaitForStateChange(state, ToSystem(until))) {
        return false;
      }
      state = ep.channel->GetState(true);
    }
    return true;
  }

  // A fresh token from the endpoint (no-op without a user).
  grpc::Status Authenticate(Endpoint& ep, Clock::time_point deadline) {
    if (user.empty()) {
      return grpc::Status::OK;
    }
    grpc::ClientContext context;
    context.set_deadline(ToSystem(deadline));
    etcdserverpb::AuthenticateRequest request;
    request.set_name(user);
    request.set_password(password);
    etcdserverpb::AuthenticateResponse response;
    grpc::Status s = ep.auth->Authenticate(&context, request, &response);
    if (s.ok()) {
      MutexLock lock(mu);
      token = response.token();
    }
    return s;
  }

  // Runs fn(endpoint, context) on the endpoints in turn until one answers (see the header
  // for the retry rules).
  template <typename Fn>
  Status Call(Kind kind, Clock::time_point deadline, const std::string& what, Fn fn) {
    const size_t n = endpoints.size();
    const milliseconds read_try{std::max<int>(1000, deadline_ms / static_cast<int>(n))};
    std::string last_error = "no endpoint tried";
    size_t start = Current();
    for (int round = 0; round < 1000 && Clock::now() < deadline; ++round) {
      for (size_t i = 0; i < n; ++i) {
        const auto now = Clock::now();
        if (now >= deadline) {
          break;
        }
        const size_t index = (start + i) % n;
        Endpoint& ep = endpoints[index];
        if (kind == Kind::kWrite && !Connected(ep, std::min(deadline, now + kConnectWait))) {
          last_error = ep.address + ": not connected";
          continue;
        }
        if (!user.empty() && Token().empty()) {
          grpc::Status auth = Authenticate(ep, deadline);
          if (!auth.ok()) {
            if (auth.error_code() != grpc::StatusCode::UNAVAILABLE &&
                auth.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
              return AuthError(auth, user);
            }
            last_error = ep.address + ": " + auth.error_message();
            continue;
          }
        }
        grpc::Status s;
        for (int auth_try = 0; auth_try < 2; ++auth_try) {
          grpc::ClientContext context;
          context.set_deadline(ToSystem(
              kind == Kind::kRead ? std::min(deadline, Clock::now() + read_try) : deadline));
          // Without a leader etcd answers "no leader" at once instead of waiting.
          context.AddMetadata("hasleader", "true");
          if (!user.empty()) {
            context.AddMetadata("token", Token());
          }
          s = fn(ep, context);
          if (s.ok() || user.empty() || !TokenRejected(s) || auth_try == 1) {
            break;
          }
          grpc::Status auth = Authenticate(ep, deadline);
          if (!auth.ok()) {
            return AuthError(auth, user);
          }
        }
        if (s.ok()) {
          Answered(index);
          return Status::Ok();
        }
        const auto code = s.error_code();
        if (code != grpc::StatusCode::UNAVAILABLE && code != grpc::StatusCode::DEADLINE_EXCEEDED) {
          Answered(index);
          return FromGrpc(s, what);
        }
        last_error =
            ep.address + ": " +
            (code == grpc::StatusCode::DEADLINE_EXCEEDED ? "deadline exceeded" : s.error_message());
        if (kind == Kind::kWrite && !NotApplied(s)) {
          return UnavailableError("etcd " + what + " (" + ep.address + "): " + last_error + "; " +
                                  std::string(kUnknownOutcome) +
                                  " (the write may or may not have been applied)");
        }
      }
      start = Current();
      const auto pause_until = std::min(deadline, Clock::now() + kRoundPause);
      std::this_thread::sleep_until(pause_until);
    }
    std::string list;
    for (const Endpoint& ep : endpoints) {
      list += (list.empty() ? "" : ",") + ep.address;
    }
    return UnavailableError("etcd: no quorum or unreachable (" + list + "): " + what + ": " +
                            last_error + " (over " + transport + ")");
  }
};

EtcdClient::EtcdClient(EtcdClientOptions options)
    : options_(std::move(options)), impl_(std::make_unique<Impl>()) {}

EtcdClient::~EtcdClient() = default;

StatusOr<std::unique_ptr<EtcdClient>> EtcdClient::Create(EtcdClientOptions options) {
  if (options.endpoints.empty()) {
    return InvalidArgumentError("etcd: no endpoint given");
  }
  for (const std::string& endpoint : options.endpoints) {
    const size_t colon = endpoint.rfind(':');
    if (endpoint.empty() || colon == std::string::npos || colon == 0 ||
        colon + 1 == endpoint.size() ||
        endpoint.find_first_not_of("0123456789", colon + 1) != std::string::npos) {
      return InvalidArgumentError("etcd: endpoint '" + endpoint + "' is not host:port");
    }
  }
  if (options.cert_file.empty() != options.key_file.empty()) {
    return InvalidArgumentError("etcd: a client certificate needs both its cert and key files");
  }
  if (options.deadline_ms <= 0) {
    return InvalidArgumentError("etcd: the call deadline must be positive");
  }
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (!options.ca_file.empty() || !options.cert_file.empty()) {
    grpc::SslCredentialsOptions ssl;
    if (!options.ca_file.empty()) {
      TESSERA_ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadFile(options.ca_file, "CA"));
    }
    if (!options.cert_file.empty()) {
      TESSERA_ASSIGN_OR_RETURN(ssl.pem_cert_chain, ReadFile(options.cert_file, "certificate"));
      TESSERA_ASSIGN_OR_RETURN(ssl.pem_private_key, ReadFile(options.key_file, "key"));
    }
    credentials = grpc::SslCredentials(ssl);
  }
  grpc::ChannelArguments args;
  // A member that comes back is reconnected within a second, not after gRPC's default
  // backoff of up to two minutes. The connect timeout stays at its default (20 s): a
  // member that has not joined its cluster yet accepts connections but answers them only
  // once it has, and an attempt cut short then leaves the channel failing for good.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetMaxReceiveMessageSize(64 << 20);
  args.SetMaxSendMessageSize(64 << 20);
  // One connection per endpoint and client, not one shared process-wide, so that clients
  // in one process (tests) see their own members' failures.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);

  std::unique_ptr<EtcdClient> client(new EtcdClient(options));
  Impl& impl = *client->impl_;
  impl.deadline_ms = options.deadline_ms;
  impl.user = options.user;
  impl.password = options.password;
  if (!options.ca_file.empty() || !options.cert_file.empty()) {
    impl.transport = options.cert_file.empty() ? "TLS without a client certificate"
                                               : "TLS with a client certificate";
    if (options.ca_file.empty()) {
      impl.transport += ", etcd verified by the system's CA roots";
    }
  }
  for (const std::string& endpoint : options.endpoints) {
    Impl::Endpoint& ep = impl.endpoints.emplace_back();
    ep.address = endpoint;
    ep.channel = grpc::CreateCustomChannel(endpoint, credentials, args);
    ep.kv = etcdserverpb::KV::NewStub(ep.channel);
    ep.lease = etcdserverpb::Lease::NewStub(ep.channel);
    ep.maintenance = etcdserverpb::Maintenance::NewStub(ep.channel);
    ep.auth = etcdserverpb::Auth::NewStub(ep.channel);
  }
  return client;
}

EtcdClient::Deadline EtcdClient::Resolve(Deadline deadline) const {
  return deadline == Deadline{} ? Clock::now() + milliseconds(options_.deadline_ms) : deadline;
}

std::string EtcdClient::EndpointList() const {
  std::string list;
  for (const std::string& endpoint : options_.endpoints) {
    list += (list.empty() ? "" : ",") + endpoint;
  }
  return list;
}

std::string EtcdClient::PrefixEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    auto& last = reinterpret_cast<unsigned char&>(end.back());
    if (last < 0xff) {
      ++last;
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

StatusOr<EtcdRangeResult> EtcdClient::Range(const std::string& key, const std::string& range_end,
                                            int64_t limit, int64_t revision, Deadline deadline) {
  etcdserverpb::RangeRequest request;
  request.set_key(key);
  request.set_range_end(range_end);
  request.set_limit(limit);
  request.set_revision(revision);
  etcdserverpb::RangeResponse response;
  TESSERA_RETURN_IF_ERROR(impl_->Call(Impl::Kind::kRead, Resolve(deadline), "range",
                                      [&](Impl::Endpoint& ep, auto& context) {
                                        return ep.kv->Range(&context, request, &response);
                                      }));
  EtcdRangeResult out;
  out.kvs.reserve(static_cast<size_t>(response.kvs_size()));
  for (const mvccpb::KeyValue& kv : response.kvs()) {
    out.kvs.push_back(FromPb(kv));
  }
  out.more = response.more();
  out.count = response.count();
  out.revision = response.header().revision();
  return out;
}

StatusOr<std::optional<EtcdKeyValue>> EtcdClient::Get(const std::string& key, Deadline deadline) {
  TESSERA_ASSIGN_OR_RETURN(EtcdRangeResult range, Range(key, "", 1, 0, deadline));
  if (range.kvs.empty()) {
    return std::optional<EtcdKeyValue>();
  }
  return std::optional<EtcdKeyValue>(std::move(range.kvs[0]));
}

StatusOr<EtcdTxnResult> EtcdClient::Txn(const std::vector<EtcdCompare>& compares,
                                        const std::vector<EtcdOp>& success,
                                        const std::vector<EtcdOp>& failure, Deadline deadline) {
  etcdserverpb::TxnRequest request;
  bool writes = false;
  for (const EtcdCompare& c : compares) {
    ToPb(c, request.add_compare());
  }
  for (const EtcdOp& op : success) {
    writes = writes || op.kind == EtcdOp::Kind::kPut;
    ToPb(op, request.add_success());
  }
  for (const EtcdOp& op : failure) {
    writes = writes || op.kind == EtcdOp::Kind::kPut;
    ToPb(op, request.add_failure());
  }
  etcdserverpb::TxnResponse response;
  TESSERA_RETURN_IF_ERROR(impl_->Call(writes ? Impl::Kind::kWrite : Impl::Kind::kRead,
                                      Resolve(deadline), "txn",
                                      [&](Impl::Endpoint& ep, auto& context) {
                                        response.Clear();
                                        return ep.kv->Txn(&context, request, &response);
                                      }));
  EtcdTxnResult out;
  out.succeeded = response.succeeded();
  out.revision = response.header().revision();
  for (const etcdserverpb::ResponseOp& r : response.responses()) {
    EtcdOpResult& result = out.responses.emplace_back();
    if (r.has_response_range()) {
      result.kind = EtcdOp::Kind::kRange;
      for (const mvccpb::KeyValue& kv : r.response_range().kvs()) {
        result.kvs.push_back(FromPb(kv));
      }
      result.more = r.response_range().more();
    } else if (r.has_response_put()) {
      result.kind = EtcdOp::Kind::kPut;
    } else if (r.has_response_delete_range()) {
      result.kind = EtcdOp::Kind::kDelete;
      result.deleted = r.response_delete_range().deleted();
    }
  }
  return out;
}

StatusOr<int64_t> EtcdClient::Put(const std::string& key, const std::string& value, int64_t lease,
                                  Deadline deadline) {
  etcdserverpb::PutRequest request;
  request.set_key(key);
  request.set_value(value);
  request.set_lease(lease);
  etcdserverpb::PutResponse response;
  TESSERA_RETURN_IF_ERROR(impl_->Call(
      Impl::Kind::kWrite, Resolve(deadline), "put",
      [&](Impl::Endpoint& ep, auto& context) { return ep.kv->Put(&context, request, &response); }));
  return response.header().revision();
}

StatusOr<int64_t> EtcdClient::DeleteRange(const std::string& key, const std::string& range_end,
                                          Deadline deadline) {
  etcdserverpb::DeleteRangeRequest request;
  request.set_key(key);
  request.set_range_end(range_end);
  etcdserverpb::DeleteRangeResponse response;
  // Deleting again deletes nothing more: safe to retry.
  TESSERA_RETURN_IF_ERROR(impl_->Call(Impl::Kind::kRead, Resolve(deadline), "delete",
                                      [&](Impl::Endpoint& ep, auto& context) {
                                        return ep.kv->DeleteRange(&context, request, &response);
                                      }));
  return response.deleted();
}

StatusOr<int64_t> EtcdClient::LeaseGrant(int64_t ttl_s, Deadline deadline) {
  etcdserverpb::LeaseGrantRequest request;
  request.set_ttl(ttl_s);
  etcdserverpb::LeaseGrantResponse response;
  // A lease granted twice leaves one unused, which expires by itself: safe to retry.
  TESSERA_RETURN_IF_ERROR(impl_->Call(Impl::Kind::kRead, Resolve(deadline), "lease grant",
                                      [&](Impl::Endpoint& ep, auto& context) {
                                        return ep.lease->LeaseGrant(&context, request, &response);
                                      }));
  if (!response.error().empty()) {
    return UnavailableError("etcd lease grant: " + response.error());
  }
  return response.id();
}

StatusOr<int64_t> EtcdClient::LeaseKeepAliveOnce(int64_t lease, Deadline deadline) {
  etcdserverpb::LeaseKeepAliveRequest request;
  request.set_id(lease);
  etcdserverpb::LeaseKeepAliveResponse response;
  TESSERA_RETURN_IF_ERROR(impl_->Call(Impl::Kind::kRead, Resolve(deadline), "lease keep-alive",
                                      [&](Impl::Endpoint& ep, grpc::ClientContext& context) {
                                        auto stream = ep.lease->LeaseKeepAlive(&context);
                                        if (!stream->Write(request)) {
                                          return stream->Finish();
                                        }
                                        stream->WritesDone();
                                        const bool got = stream->Read(&response);
                                        grpc::Status s = stream->Finish();
                                        if (s.ok() && !got) {
                                          return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                                              "keep-alive stream ended unanswered");
                                        }
                                        return s;
                                      }));
  return std::max<int64_t>(response.ttl(), 0);
}

Status EtcdClient::LeaseRevoke(int64_t lease, Deadline deadline) {
  etcdserverpb::LeaseRevokeRequest request;
  request.set_id(lease);
  etcdserverpb::LeaseRevokeResponse response;
  // Revoking again answers NotFound: safe to retry.
  return impl_->Call(Impl::Kind::kRead, Resolve(deadline), "lease revoke",
                     [&](Impl::Endpoint& ep, auto& context) {
                       return ep.lease->LeaseRevoke(&context, request, &response);
                     });
}

StatusOr<int64_t> EtcdClient::LeaseTimeToLive(int64_t lease, Deadline deadline) {
  etcdserverpb::LeaseTimeToLiveRequest request;
  request.set_id(lease);
  etcdserverpb::LeaseTimeToLiveResponse response;
  Status status = impl_->Call(Impl::Kind::kRead, Resolve(deadline), "lease time-to-live",
                              [&](Impl::Endpoint& ep, auto& context) {
                                return ep.lease->LeaseTimeToLive(&context, request, &response);
                              });
  if (status.code() == StatusCode::kNotFound) {
    return int64_t{-1};
  }
  TESSERA_RETURN_IF_ERROR(status);
  // etcd answers -1 for a lease that is gone; 0 for one in its last second.
  return response.ttl() < 0 ? int64_t{-1} : response.ttl();
}

StatusOr<EtcdMemberStatus> EtcdClient::MemberStatus(Deadline deadline) {
  etcdserverpb::StatusRequest request;
  etcdserverpb::StatusResponse response;
  std::string answered;
  TESSERA_RETURN_IF_ERROR(impl_->Call(Impl::Kind::kRead, Resolve(deadline), "status",
                                      [&](Impl::Endpoint& ep, auto& context) {
                                        answered = ep.address;
                                        return ep.maintenance->Status(&context, request, &response);
                                      }));
  EtcdMemberStatus out;
  out.endpoint = answered;
  out.version = response.version();
  out.member_id = response.header().member_id();
  out.leader = response.leader();
  out.raft_term = response.raftterm();
  out.raft_index = response.raftindex();
  out.db_size = response.dbsize();
  out.errors.assign(response.errors().begin(), response.errors().end());
  return out;
}

}  // namespace tessera
