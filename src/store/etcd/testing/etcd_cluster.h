// EtcdCluster: a real etcd cluster of N members on loopback, for tests.
//
// Start runs N `etcd` processes (found on PATH) on free 127.0.0.1 client and peer ports,
// each with its data directory and log file under a temporary directory, with quick
// elections (heartbeat 50 ms, election timeout 500 ms) and the limits production should
// use (--max-txn-ops 10000, --max-request-bytes 33554432), and waits (bounded) until every
// member serves and the cluster has a leader. Without etcd installed Start fails with a
// message that says to run scripts/setup.sh.
// Members die with the process that started them (PR_SET_PDEATHSIG): call Start, Kill and
// Restart from a thread that outlives the cluster (the test's main thread).
// Thread safety: one thread drives a cluster; Endpoints() may be read from any.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace tessera::testing {

struct EtcdClusterOptions {
  int members = 3;
  // How long Start and Restart wait for the members to serve. Default 20 s.
  int start_timeout_ms = 20000;
};

class EtcdCluster {
 public:
  static StatusOr<std::unique_ptr<EtcdCluster>> Start(EtcdClusterOptions options = {});
  ~EtcdCluster();  // Stop()
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  // "127.0.0.1:p1,127.0.0.1:p2,...", every member's client address.
  std::string Endpoints() const;
  std::vector<std::string> EndpointList() const;
  int members() const { return static_cast<int>(members_.size()); }
  bool running(int i) const { return members_[static_cast<size_t>(i)].pid > 0; }

  // SIGKILL member i and reap it.
  Status Kill(int i);
  // Starts member i again on its data directory and ports; waits until it serves.
  Status Restart(int i);
  // Kills every member (also on destruction); the temporary directory goes too.
  void Stop();
  // The last lines of member i's log, for failure messages.
  std::string LogTail(int i) const;

 private:
  struct Member {
    std::string name, data_dir, log;
    int client_port = 0, peer_port = 0;
    pid_t pid = -1;
  };
  explicit EtcdCluster(EtcdClusterOptions options) : options_(options) {}
  Status Spawn(Member& member);
  // Waits until each listed member answers Status and knows a leader.
  Status WaitServing(const std::vector<int>& which);

  EtcdClusterOptions options_;
  std::string etcd_;  // the binary
  std::string dir_;
  std::string initial_cluster_;
  std::vector<Member> members_;
};

// One cluster (default options) for the whole test binary, started on first use and
// stopped at exit; the same error on every call when it could not start. Call it from the
// main thread (a test's SetUpTestSuite or body).
StatusOr<EtcdCluster*> SharedEtcdCluster();

}  // namespace tessera::testing
