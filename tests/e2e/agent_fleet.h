// AgentFleet: thousands of simulated node agents in one process, each speaking the real
// agent protocol to a real controller over loopback, for the scale benchmark
// (bench/agent_scale_bench.cc) and the fleet fault test (fleet_restart_e2e_test.cc).
//
// A simulated agent does what `tessera agent --fake-gpus SPEC --cpu C --memory M` does
// on the wire, without processes:
//   - it registers over HTTP (POST /v1/agents/register) with the inventory the same fake
//     GPU backend discovers, the join token the first time and from then on the node
//     credential that answer handed out, and every task it still holds;
//   - it opens one stream on the agent channel (api/agent_channel.proto) at the port the
//     registration named, says hello, then heartbeats at the interval the controller
//     gave (one outstanding; at once when a task starts or ends), with GPU telemetry at
//     most every telemetry_interval. Streams use gRPC's callback API: no thread each;
//   - a launch (pushed, or in an answer) "runs": it is reported running, and exits with
//     code 0 after FLEET_RUN_MS milliseconds from the launch's env (else task_run; 0:
//     at once). A stop ends it as killed by the stop's signal. A launch whose key it has
//     seen is ignored, as the agent does; one that would take a GPU a live task holds is
//     refused (failed to start) and counted as a double booking;
//   - a task's end is kept and reported until an answered exchange carried it;
//   - a stream that ends is reopened, on the same gRPC channel (connection) while that
//     lives, as the agent does: one that was working within a heartbeat interval (at a
//     random point of it, as an agent notices at its next heartbeat), one that failed to
//     open after a bounded backoff (200 ms doubling to 5 s, 75-125 %); an answer that
//     says "register again" makes it register again;
//   - with no exchange answered for its lease (the node timeout less max(1 s, 10 %)) it
//     fences its tasks: they end and are reported lost, as the agent's supervisors do.
//
// Registration goes through `register_clients` keep-alive HTTP clients in parallel.
// Every launch received and every task started is counted per (job, task, attempt), so
// that tests can check that nothing ran twice.
//
// Thread safety: every public method may be called from any thread; Start and Stop once.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "api/agent_protocol.h"
#include "base/clock.h"
#include "base/status.h"
#include "model/gpu_catalog.h"

namespace tessera::fleet {

using SteadyTime = std::chrono::steady_clock::time_point;

// Latencies in microseconds, recorded from many threads without a lock: buckets of
// about 3 % width (32 per power of two).
class LatencyHistogram {
 public:
  void Add(Micros us);
  void Reset();
  uint64_t count() const;
  // The p-quantile (0..1) in milliseconds, by the nearest lower rank; 0 with no samples.
  double PercentileMs(double p) const;

 private:
  static constexpr int kSubBits = 5;
  static constexpr int kBuckets = (1 << kSubBits) * 38;
  static int Bucket(Micros us);
  static double Middle(int bucket);
  std::array<std::atomic<uint64_t>, kBuckets> counts_{};
};

struct FleetOptions {
  std::string server_url;  // http://127.0.0.1:PORT, the controller's HTTP API
  std::string join_token;
  int agents = 100;
  std::string name_prefix = "sim";   // nodes sim-00000, sim-00001, ...
  std::string gpus = "8xH100-80GB";  // as --fake-gpus
  int64_t cpu_milli = 64'000;
  int64_t memory_mib = 256 * 1024;
  int register_clients = 8;               // parallel keep-alive HTTP clients
  Micros telemetry_interval = 1'000'000;  // as the agent's default; 0: no telemetry
  Micros task_run = 0;  // how long a task runs when its env has no FLEET_RUN_MS; 0: it ends at once
  Micros answer_timeout = 10'000'000;  // as the agent: then the stream is reopened
  Micros heartbeat_interval = 0;       // as the agent's --heartbeat; 0: the controller's
  int timer_threads = 2;               // send heartbeats, end tasks, retry
};

// What the fleet saw of one task attempt.
struct TaskCount {
  TaskKey key;
  int received = 0;  // launches of it that arrived (resends included)
  int started = 0;   // times a simulated agent started it (must be at most 1)
  std::string node;  // where it last started
};

struct FleetStats {
  int agents = 0;
  int streaming = 0;             // agents whose stream is open (hello answered)
  uint64_t registrations = 0;    // answered registrations
  uint64_t register_errors = 0;  // failed registration requests
  uint64_t connects = 0;         // streams opened
  uint64_t stream_ends = 0;      // streams that ended (broken, closed, refused)
  uint64_t heartbeats = 0;       // heartbeats answered
  uint64_t store_errors = 0;     // answers that said the controller's store failed
  uint64_t answer_timeouts = 0;  // heartbeats not answered within answer_timeout
  uint64_t hello_timeouts = 0;   // of those, a new stream's hello
  uint64_t launches = 0;         // launch messages received
  uint64_t tasks_started = 0;
  uint64_t exits_acknowledged = 0;  // ended tasks whose report was answered
  uint64_t running = 0;             // tasks started and not ended
  uint64_t double_bookings = 0;
  uint64_t fenced = 0;              // tasks ended because the lease ran out
  std::vector<std::string> errors;  // the first distinct failures, for a report
};

class AgentFleet {
 public:
  // Builds every agent's inventory; starts nothing.
  static StatusOr<std::unique_ptr<AgentFleet>> Create(FleetOptions options,
                                                      const GpuCatalog& catalog);
  ~AgentFleet();
  AgentFleet(const AgentFleet&) = delete;
  AgentFleet& operator=(const AgentFleet&) = delete;

  // Every agent registers (spread over the registration clients) and connects.
  void Start();
  // Ends every stream and thread; tasks are abandoned, not reported. Idempotent.
  void Stop();

  FleetStats Stats() const;
  // Agents that registered at or after `since` and whose stream is open now.
  int StreamingSince(SteadyTime since) const;
  // Agents whose last answered registration was at or after `since`.
  int RegisteredSince(SteadyTime since) const;
  // Round trip of each answered heartbeat, from its write to its answer.
  LatencyHistogram& heartbeat_rtt();
  LatencyHistogram& hello_rtt();  // a new stream's opening to its hello's answer
  std::vector<TaskCount> TaskCounts() const;
  // A line per double booking: node, GPU, the task that held it and the one refused.
  std::vector<std::string> Clashes() const;

  struct Impl;

 private:
  explicit AgentFleet(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::fleet
