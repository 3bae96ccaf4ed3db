// `tessera store migrate --from STATE.DB --to etcd://...`: a one-machine controller's
// SQLite store copied into etcd, for running several controllers (store/store_migrate.h).
// Thread safety: one thread.
#pragma once

namespace CLI {
class App;
}

namespace tessera {

void AddStoreCommand(CLI::App& app, int* exit_code);

}  // namespace tessera
