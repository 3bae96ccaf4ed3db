// Commits per second of one-job batches, from 1 and 8 threads, on a SqliteStore with
// fsync on and on an EtcdStore on a 3-member etcd cluster on loopback (started once, the
// test cluster: heartbeat 50 ms, election timeout 500 ms, --max-txn-ops 10000). Group
// commit turns concurrent commits into shared transactions on both; "txns" counts them.
// Filter with --benchmark_filter=Sqlite or =Etcd.
#include <benchmark/benchmark.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <system_error>

#include "store/etcd/etcd_store.h"
#include "store/etcd/testing/etcd_cluster.h"
#include "store/sqlite_store.h"

namespace tessera {
namespace {

std::string g_dir;
std::unique_ptr<Store> g_store;
std::function<uint64_t()> g_transactions;  // the open store's transactions so far
std::atomic<uint64_t> g_next_id{1};
uint64_t g_transactions_before = 0;
std::string g_error;  // why the store did not open
int g_etcd_runs = 0;

void SetUpSqlite(const benchmark::State&) {
  std::string pattern =
      (std::filesystem::temp_directory_path() / "tessera_store_bench_XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) {
    g_error = "cannot make a temporary directory";
    return;
  }
  g_dir = pattern;
  SqliteStoreOptions options;
  options.fsync = true;
  auto store = SqliteStore::Open(g_dir + "/bench.db", options);
  if (!store.ok()) {
    g_error = store.status().ToString();
    return;
  }
  SqliteStore* sqlite = store->get();
  g_transactions = [sqlite] { return sqlite->transactions(); };
  g_store = std::move(store).value();
  g_transactions_before = g_transactions();
}

// Runs on the main thread (the cluster's members die with the thread that started them).
void SetUpEtcd(const benchmark::State&) {
  StatusOr<testing::EtcdCluster*> cluster = testing::SharedEtcdCluster();
  if (!cluster.ok()) {
    g_error = cluster.status().ToString();
    return;
  }
  EtcdStoreOptions options;
  options.endpoints = (*cluster)->EndpointList();
  // A prefix per run: each starts on an empty store.
  options.prefix =
      "/store-bench/" + std::to_string(getpid()) + "-" + std::to_string(g_etcd_runs++) + "/";
  options.max_txn_ops = 10000;  // the cluster's --max-txn-ops
  auto store = EtcdStore::Open(options);
  if (!store.ok()) {
    g_error = store.status().ToString();
    return;
  }
  EtcdStore* etcd = store->get();
  g_transactions = [etcd] { return etcd->txns(); };
  g_store = std::move(store).value();
  g_transactions_before = g_transactions();
}

void TearDownStore(const benchmark::State&) {
  if (g_store != nullptr) {
    static_cast<void>(g_store->Close());
    g_store.reset();
  }
  g_transactions = nullptr;
  g_error.clear();
  if (!g_dir.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(g_dir, ignored);
    g_dir.clear();
  }
}

void BM_CommitOneJob(benchmark::State& state) {
  if (g_store == nullptr) {
    state.SkipWithError(("cannot open the store: " + g_error).c_str());
    return;
  }
  JobRow job;
  job.tenant = "team-a";
  job.queue = "research";
  job.spec_json = R"({"tasks":[{"replicas":8,"gpu":{"count":1}}]})";
  job.state = "pending";
  for (auto _ : state) {
    WriteBatch batch;
    job.id = g_next_id.fetch_add(1);
    job.name = "job-" + std::to_string(job.id);
    batch.jobs.push_back(job);
    Status status = g_store->Commit(std::move(batch));
    if (!status.ok()) {
      state.SkipWithError(status.ToString().c_str());
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) {
    // Counters of thread 0 only (benchmark sums counters over threads).
    state.counters["txns"] = static_cast<double>(g_transactions() - g_transactions_before);
  }
}
BENCHMARK(BM_CommitOneJob)
    ->Name("BM_CommitOneJob/Sqlite")
    ->Setup(SetUpSqlite)
    ->Teardown(TearDownStore)
    ->Threads(1)
    ->Threads(8)
    ->UseRealTime();
BENCHMARK(BM_CommitOneJob)
    ->Name("BM_CommitOneJob/Etcd")
    ->Setup(SetUpEtcd)
    ->Teardown(TearDownStore)
    ->Threads(1)
    ->Threads(8)
    ->UseRealTime();

}  // namespace
}  // namespace tessera
