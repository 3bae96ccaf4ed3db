// Commits per second of one-job batches on a SqliteStore with fsync on, from 1 and 8
// threads (group commit turns concurrent commits into shared transactions).
#include <benchmark/benchmark.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>

#include "store/sqlite_store.h"

namespace tessera {
namespace {

std::string g_dir;
std::unique_ptr<SqliteStore> g_store;
std::atomic<uint64_t> g_next_id{1};
uint64_t g_transactions_before = 0;

void SetUpStore(const benchmark::State&) {
  std::string pattern =
      (std::filesystem::temp_directory_path() / "tessera_store_bench_XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) {
    return;
  }
  g_dir = pattern;
  SqliteStoreOptions options;
  options.fsync = true;
  auto store = SqliteStore::Open(g_dir + "/bench.db", options);
  if (store.ok()) {
    g_store = std::move(store).value();
    g_transactions_before = g_store->transactions();
  }
}

void TearDownStore(const benchmark::State&) {
  if (g_store != nullptr) {
    static_cast<void>(g_store->Close());
    g_store.reset();
  }
  std::error_code ignored;
  std::filesystem::remove_all(g_dir, ignored);
}

void BM_CommitOneJob(benchmark::State& state) {
  if (g_store == nullptr) {
    state.SkipWithError("cannot open the store");
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
    state.counters["txns"] = static_cast<double>(g_store->transactions() - g_transactions_before);
  }
}
BENCHMARK(BM_CommitOneJob)
    ->Setup(SetUpStore)
    ->Teardown(TearDownStore)
    ->Threads(1)
    ->Threads(8)
    ->UseRealTime();

}  // namespace
}  // namespace tessera
