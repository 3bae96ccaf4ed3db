// `tessera server --store etcd://...`: one of several controllers on etcd, the elected
// one serving (server/ha/ha_server.h). Without --store the server runs alone on SQLite.
// Thread safety: one thread (the daemon's main).
#pragma once

#include <functional>
#include <string>

#include "server/http/server.h"
#include "store/store_url.h"

namespace CLI {
class App;
}

namespace tessera {

// How to reach etcd: TLS, authentication, limits (`server --store`, `store migrate`).
struct EtcdFlags {
  std::string ca, cert, key;           // TLS to etcd (PEM files)
  std::string user, password_file;     // etcd authentication
  std::string timeout = "5s";          // each store call, retries included
  int64_t max_txn_ops = 10000;         // etcd's --max-txn-ops
  int64_t max_request_bytes = 33554432;  // etcd's --max-request-bytes
};

void AddEtcdFlags(CLI::App* cmd, EtcdFlags* flags, const std::string& prefix);

// The options to OpenStore `url` with, from the flags; `url` must be etcd://... (the
// flag `url_flag` takes no other store). InvalidArgument names the flag at fault.
StatusOr<OpenStoreOptions> ToEtcdOpenStoreOptions(const std::string& url, const EtcdFlags& flags,
                                                  const std::string& url_flag);

struct HaServerFlags {
  std::string store;          // "" : SQLite in the data directory
  std::string advertise_url;  // "" : http(s)://LISTEN
  std::string lease = "2s";   // the leader's lease: failover takes about this long
  EtcdFlags etcd;
};

void AddHaServerFlags(CLI::App* cmd, HaServerFlags* flags);

// Runs until wait_for_stop returns; the exit code.
int RunHaServer(const HaServerFlags& flags, ServerOptions options,
                const std::function<void()>& wait_for_stop);

}  // namespace tessera
