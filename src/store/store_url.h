// OpenStore: a Store from a URL, as `tessera server --store URL` takes it. Every driver
// (`tessera server` and `up` on their data directory's state.db, the controllers on etcd,
// `tessera store migrate`) opens its store here; only the URL chooses the kind of store.
//   sqlite:PATH, or a plain PATH            the SQLite store at PATH
//   etcd://HOST:PORT[,HOST:PORT...][/PREFIX] the etcd store on those members, its keys under
//                                            /PREFIX/ (default /tessera/)
// Everything else comes in the options: the SQLite store's (fsync, group size), etcd's
// (TLS, authentication, deadline, Txn limits, on_fenced), and a leader's fence.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "store/etcd/etcd_store.h"
#include "store/sqlite_store.h"
#include "store/store.h"

namespace tessera {

struct StoreUrl {
  enum class Kind { kSqlite, kEtcd };
  Kind kind = Kind::kSqlite;
  std::string path;                    // kSqlite
  std::vector<std::string> endpoints;  // kEtcd: "host:port"
  std::string prefix;                  // kEtcd: starts and ends with '/'
};

// InvalidArgument, naming what is wrong, for a malformed URL.
StatusOr<StoreUrl> ParseStoreUrl(std::string_view url);

// A leader's fence: every write is conditioned on create_revision(key) == create_revision
// (EtcdStore::SetFence), and refused with Unavailable("fenced: ...") once another term began.
struct StoreFence {
  std::string key;  // the election's key, prefix included; "" : no fence
  int64_t create_revision = 0;
};

struct OpenStoreOptions {
  // fsync, max_group (the group commit's size), busy timeout.
  SqliteStoreOptions sqlite;
  // TLS files, user/password, deadline, Txn limits, on_fenced; endpoints and prefix come
  // from the URL.
  EtcdStoreOptions etcd;
  // Only a store that several controllers share takes one (etcd); with SQLite a fence is
  // refused (InvalidArgument).
  StoreFence fence;
};

// InvalidArgument for a malformed URL (naming what is wrong) or a fence on SQLite; else
// what the store's Open says.
StatusOr<std::unique_ptr<Store>> OpenStore(const std::string& url, OpenStoreOptions options = {});

// The options OpenStore opens an etcd:// URL with (options.etcd with the URL's endpoints
// and prefix), for a driver that also talks to the store's cluster itself (leader
// election: ToEtcdClientOptions). InvalidArgument for a malformed URL or one not etcd://.
StatusOr<EtcdStoreOptions> EtcdStoreOptionsOf(const std::string& url,
                                              const OpenStoreOptions& options);

}  // namespace tessera
