// OpenStore: a Store from a URL, as `tessera server --store URL` takes it.
//   sqlite:PATH, or a plain PATH            the SQLite store at PATH
//   etcd://HOST:PORT[,HOST:PORT...][/PREFIX] the etcd store on those members, its keys under
//                                            /PREFIX/ (default /tessera/)
// TLS and authentication to etcd come in the options (EtcdStoreOptions), not the URL.
// Thread safety: pure functions.
#pragma once

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

struct OpenStoreOptions {
  SqliteStoreOptions sqlite;
  // TLS files, user/password, deadline, limits, on_fenced; endpoints and prefix come from
  // the URL.
  EtcdStoreOptions etcd;
};

StatusOr<std::unique_ptr<Store>> OpenStore(const std::string& url, OpenStoreOptions options = {});

}  // namespace tessera
