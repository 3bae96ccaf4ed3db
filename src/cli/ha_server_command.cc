#include "cli/ha_server_command.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <memory>
#include <utility>

#include "api/units.h"
#include "model/gpu_catalog.h"
#include "server/ha/etcd_election_backend.h"
#include "server/ha/ha_server.h"
#include "store/etcd/etcd_client.h"
#include "store/store_url.h"

namespace tessera {
namespace {

int Fail(const Status& s) {
  std::cerr << "tessera server: " << s.message() << "\n";
  return s.code() == StatusCode::kInvalidArgument ? 2 : 1;
}

StatusOr<std::string> ReadPassword(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) {
    return InvalidArgumentError("--etcd-password-file: cannot read " + path);
  }
  return line;
}

}  // namespace

void AddEtcdFlags(CLI::App* cmd, EtcdFlags* f, const std::string& prefix) {
  cmd->add_option("--etcd-ca", f->ca, prefix + "CA file (PEM) to verify etcd with TLS");
  cmd->add_option("--etcd-cert", f->cert, prefix + "client certificate (PEM) for etcd");
  cmd->add_option("--etcd-key", f->key, prefix + "client key (PEM) for etcd");
  cmd->add_option("--etcd-user", f->user, prefix + "etcd user");
  cmd->add_option("--etcd-password-file", f->password_file,
                  prefix + "file holding the etcd user's password");
  cmd->add_option("--etcd-timeout", f->timeout,
                  prefix + "deadline of each store call (a write without quorum fails after it "
                           "with 503)")
      ->capture_default_str();
  cmd->add_option("--etcd-max-txn-ops", f->max_txn_ops,
                  prefix + "etcd's --max-txn-ops (no larger transactions are written)")
      ->check(CLI::Range(int64_t{16}, int64_t{1'000'000}))
      ->capture_default_str();
  cmd->add_option("--etcd-max-request-bytes", f->max_request_bytes,
                  prefix + "etcd's --max-request-bytes (transactions stay 1/8 below it)")
      ->check(CLI::Range(int64_t{1} << 20, int64_t{1} << 31))
      ->capture_default_str();
}

StatusOr<OpenStoreOptions> ToEtcdOpenStoreOptions(const std::string& url, const EtcdFlags& f,
                                                  const std::string& url_flag) {
  StatusOr<StoreUrl> parsed = ParseStoreUrl(url);
  if (!parsed.ok()) {
    return InvalidArgumentError(url_flag + ": " + parsed.status().message());
  }
  if (parsed->kind != StoreUrl::Kind::kEtcd) {
    return InvalidArgumentError(url_flag + ": expected etcd://HOST:PORT[,HOST:PORT...][/PREFIX], got '" +
                                url + "'");
  }
  StatusOr<int64_t> timeout = ParseDurationMicros(f.timeout);
  if (!timeout.ok() || *timeout < 100'000) {
    return InvalidArgumentError("--etcd-timeout: at least 100ms, got '" + f.timeout + "'");
  }
  // Endpoints and prefix: OpenStore takes them from the URL.
  OpenStoreOptions options;
  EtcdStoreOptions& etcd = options.etcd;
  etcd.ca_file = f.ca;
  etcd.cert_file = f.cert;
  etcd.key_file = f.key;
  etcd.user = f.user;
  if (!f.password_file.empty()) {
    TESSERA_ASSIGN_OR_RETURN(etcd.password, ReadPassword(f.password_file));
  }
  etcd.deadline_ms = static_cast<int>(*timeout / 1000);
  etcd.max_txn_ops = static_cast<size_t>(f.max_txn_ops);
  // Room for the request's framing and the Txn's compares.
  etcd.max_txn_bytes = static_cast<size_t>(f.max_request_bytes / 8 * 7);
  return options;
}

void AddHaServerFlags(CLI::App* cmd, HaServerFlags* f) {
  cmd->add_option("--store", f->store,
                  "State store: etcd://HOST:PORT[,HOST:PORT...][/PREFIX] runs this controller as "
                  "one of several on etcd, the elected one serving (default: SQLite in --data)");
  cmd->add_option("--advertise-url", f->advertise_url,
                  "With --store: the URL other controllers redirect clients to (default "
                  "http(s)://LISTEN)");
  cmd->add_option("--lease", f->lease,
                  "With --store: the leader's lease; a dead leader is replaced after about this "
                  "long")
      ->capture_default_str();
  AddEtcdFlags(cmd, &f->etcd, "With --store: ");
}

int RunHaServer(const HaServerFlags& flags, ServerOptions options,
                const std::function<void()>& wait_for_stop) {
  StatusOr<OpenStoreOptions> parsed = ToEtcdOpenStoreOptions(flags.store, flags.etcd, "--store");
  if (!parsed.ok()) {
    return Fail(parsed.status());
  }
  const OpenStoreOptions store_options = std::move(parsed).value();
  // The store's cluster: the election runs on it, beside the store.
  StatusOr<EtcdStoreOptions> cluster = EtcdStoreOptionsOf(flags.store, store_options);
  if (!cluster.ok()) {
    return Fail(cluster.status());
  }
  StatusOr<int64_t> lease = ParseDurationMicros(flags.lease);
  if (!lease.ok() || *lease < 1'000'000 || *lease % 1'000'000 != 0) {
    return Fail(InvalidArgumentError("--lease: whole seconds, at least 1s, got '" + flags.lease +
                                     "'"));
  }
  if (options.port == 0) {
    return Fail(InvalidArgumentError(
        "--listen: with --store give a fixed port (other controllers redirect clients to it)"));
  }
  if (options.controller.checkpoint_root.empty()) {
    return Fail(InvalidArgumentError(
        "--checkpoint-root: with --store give the directory shared by every node, the same on "
        "every controller (a job requeued after a failover resumes from it)"));
  }
  if (options.agent_port == 0) {
    return Fail(InvalidArgumentError(
        "--agent-port: with --store give a fixed port (agents reach every leader's channel on it)"));
  }

  // The election's own client: its calls get a short deadline of their own (not
  // --etcd-timeout, the store's).
  EtcdClientOptions client_options = ToEtcdClientOptions(*cluster);
  client_options.deadline_ms = EtcdClientOptions{}.deadline_ms;
  StatusOr<std::unique_ptr<EtcdClient>> client = EtcdClient::Create(client_options);
  if (!client.ok()) {
    return Fail(client.status());
  }
  const int64_t ttl_s = *lease / 1'000'000;
  // A renewal every ttl/3 must be answered before the next: at most a third of the lease.
  EtcdElectionBackend backend(**client, static_cast<int>(std::min<int64_t>(ttl_s * 1000 / 3, 1000)));

  HaServerOptions ha;
  ha.server = std::move(options);
  ha.advertise_url = flags.advertise_url;
  ha.election.key = cluster->prefix + "leader";
  ha.election.lease_ttl_s = ttl_s;
  const std::string leader_key = ha.election.key;
  // Each term opens the store fenced on its leader key (see OpenStoreOptions::fence).
  ha.open_store = [url = flags.store, store_options, leader_key](
                      int64_t fence, std::function<void()> on_fenced)
      -> StatusOr<std::unique_ptr<Store>> {
    OpenStoreOptions o = store_options;
    o.etcd.on_fenced = std::move(on_fenced);
    o.fence = StoreFence{leader_key, fence};
    return OpenStore(url, std::move(o));
  };
  const std::string data_dir = ha.server.data_dir;
  StatusOr<std::unique_ptr<HaServer>> server =
      HaServer::Create(std::move(ha), GpuCatalog::Default(), backend);
  if (!server.ok()) {
    return Fail(server.status());
  }
  Status started = (*server)->Start();
  if (!started.ok()) {
    return Fail(started);
  }
  std::cout << "tessera server: controller " << (*server)->url() << " on " << flags.store
            << " (leader key " << leader_key << ", lease " << ttl_s << "s)\n"
            << "  serves while it leads; redirects to the leader otherwise\n"
            << "  tokens: made once, by the first leader, in its --data (" << data_dir
            << "/admin.token, join.token, metrics.token)\n"
            << std::flush;
  wait_for_stop();
  std::cout << "tessera server: stopping (resigning the lead)\n";
  (*server)->Stop();
  return 0;
}

}  // namespace tessera
