#include "sim/fgd_grid.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>
#include <thread>

namespace tessera {

StatusOr<std::vector<FgdRunResult>> RunFgdGrid(
    const FgdGridSpec& spec, const std::function<void(const FgdGridProgress&)>& on_done) {
  if (spec.traces.size() != spec.typical.size()) {
    return InvalidArgumentError("one typical-task model per trace is required");
  }
  std::vector<FgdRunSpec> runs;
  for (size_t t = 0; t < spec.traces.size(); ++t) {
    for (const std::string& policy : spec.policies) {
      for (uint64_t seed : spec.seeds) {
        runs.push_back({spec.cluster, spec.traces[t], spec.typical[t], policy, seed,
                        spec.tune_ratio, spec.tie_break});
      }
    }
  }
  std::vector<std::optional<FgdRunResult>> results(runs.size());
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  std::vector<Status> errors(runs.size());
  size_t done = 0;

  auto worker = [&]() {
    while (!failed.load()) {
      size_t i = next.fetch_add(1);
      if (i >= runs.size()) {
        return;
      }
      StatusOr<FgdRunResult> r = RunFgdExperiment(runs[i]);
      std::lock_guard<std::mutex> lock(mu);
      if (!r.ok()) {
        errors[i] = r.status();
        failed.store(true);
        return;
      }
      results[i] = std::move(r).value();
      ++done;
      if (on_done) {
        on_done({done, runs.size(), &*results[i]});
      }
    }
  };
  unsigned hw = std::max(1U, std::thread::hardware_concurrency());
  size_t threads = spec.jobs > 0 ? static_cast<size_t>(spec.jobs) : hw;
  threads = std::min(threads, std::max<size_t>(1, runs.size()));
  std::vector<std::thread> pool;
  pool.reserve(threads);
  for (size_t i = 0; i < threads; ++i) {
    pool.emplace_back(worker);
  }
  for (std::thread& t : pool) {
    t.join();
  }
  if (failed.load()) {
    // The first failure in grid order, whatever the thread timing.
    for (const Status& e : errors) {
      if (!e.ok()) {
        return e;
      }
    }
  }
  std::vector<FgdRunResult> out;
  out.reserve(results.size());
  for (auto& r : results) {
    out.push_back(std::move(*r));
  }
  return out;
}

}  // namespace tessera
