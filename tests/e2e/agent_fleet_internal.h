// The insides of AgentFleet (agent_fleet.h), shared by agent_fleet.cc (registration,
// the agents' protocol, the public API) and agent_fleet_stream.cc (the channel's
// streams, the timers).
//
// Locks: each SimAgent's mu guards its fields; a StreamLink's mu guards the link and is
// taken after the agent's, never before. The fleet's counts_mu is taken last. gRPC runs
// no reaction inline in the thread that starts an operation, so operations are started
// with these locks held.
#pragma once

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "agent/gpu/gpu_backend.h"
#include "api/agent_channel.grpc.pb.h"
#include "e2e/agent_fleet.h"

namespace httplib {
class Client;
}

namespace tessera::fleet {

namespace internal {

// Steady-clock microseconds.
Micros NowUs();

// Runs callbacks at their due time on a few threads, earliest first.
class Timers {
 public:
  explicit Timers(int threads);
  ~Timers();
  Timers(const Timers&) = delete;
  Timers& operator=(const Timers&) = delete;
  void At(Micros when, std::function<void()> f);
  // Drops what is not due yet and joins the threads. Idempotent.
  void Stop();

 private:
  struct Item {
    Micros when;
    uint64_t seq;
    std::function<void()> f;
  };
  void Run();
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Item> heap_;  // earliest on top
  uint64_t seq_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

class FleetStream;

// What an agent holds of its stream. The reactor is set while the agent may still
// write to it (a hold keeps gRPC from finishing it); the reactor clears it when the
// stream has ended, before it lets go of the hold.
struct StreamLink {
  std::mutex mu;
  FleetStream* reactor = nullptr;
  bool writing = false;
  std::deque<channel::AgentMessage> queue;  // written after the one in flight
  // False when the stream has ended (nothing is written).
  bool Write(channel::AgentMessage m);
  void Cancel();
};

struct SimTask {
  TaskKey key;
  std::vector<std::pair<int, int64_t>> gpu_use;  // GPU index, milli
  bool exited = false;
  bool failed = false;  // failed to start
  bool lost = false;
  int exit_code = 0;
  int signal = 0;
  std::string message;
};

struct SimAgent {
  int index = 0;
  std::string node;
  std::string agent_id;
  NodeInventory inventory;

  std::mutex mu;
  std::unique_ptr<GpuBackend> backend;  // fake GPUs: telemetry follows the tasks
  // Registration.
  std::string credential;  // "": not handed out yet, the join token is used
  bool registering = false;
  int64_t channel_port = 0;
  int64_t channel_at = 0;  // the port `channel` was made for
  Micros interval = 500'000;
  Micros lease = 0;          // 0: no fencing
  Micros last_contact = 0;   // when the last answered exchange was sent
  Micros registered_at = 0;  // the last answered registration; 0: none
  Micros backoff = 0;
  // The stream. `epoch` changes with every registration and stream, so that callbacks
  // of an earlier one change nothing.
  uint64_t epoch = 0;
  std::shared_ptr<StreamLink> link;
  // Its stream's channel, released only when the next one is made: a channel's last
  // reference may not go on one of gRPC's callback threads (it would shut down the
  // completion queue that thread serves).
  std::shared_ptr<grpc::Channel> channel;
  bool open = false;  // the hello was answered
  uint64_t next_seq = 1;
  uint64_t hello_seq = 0;
  uint64_t outstanding = 0;  // the seq awaiting its answer; 0: none
  Micros sent_at = 0;
  std::vector<TaskReport> in_flight;  // what the outstanding heartbeat reported
  bool report_now = false;
  uint64_t heartbeat_token = 0;  // only the newest scheduled heartbeat is sent
  Micros telemetry_at = 0;       // 0: never read
  // Tasks, by "job.task.attempt".
  std::map<std::string, SimTask> tasks;
  std::set<std::string> seen;
  std::vector<int64_t> gpu_used;  // milli per GPU index
};

}  // namespace internal

struct AgentFleet::Impl {
  using SimAgent = internal::SimAgent;
  using SimTask = internal::SimTask;

  FleetOptions options;
  const GpuCatalog* catalog = nullptr;
  std::string host;  // the controller's, from server_url
  std::vector<std::unique_ptr<SimAgent>> agents;
  std::unique_ptr<internal::Timers> timers;
  std::atomic<bool> stopping{false};
  bool started = false;

  // Registration: agents waiting, and the threads with an HTTP client each.
  std::mutex reg_mu;
  std::condition_variable reg_cv;
  std::deque<SimAgent*> reg_queue;
  std::vector<std::thread> registrars;
  std::vector<httplib::Client*> reg_clients;  // for Stop to interrupt; guarded by reg_mu
  std::thread sweeper;
  std::mutex sweep_mu;
  std::condition_variable sweep_cv;

  // Reactors not yet done: Stop waits for them.
  std::mutex live_mu;
  std::condition_variable live_cv;
  int live_streams = 0;

  std::atomic<uint64_t> registrations{0}, register_errors{0}, connects{0}, stream_ends{0},
      heartbeats{0}, store_errors{0}, answer_timeouts{0}, hello_timeouts{0}, launches{0},
      tasks_started{0}, exits_acknowledged{0}, running{0}, double_bookings{0}, fenced{0};
  LatencyHistogram rtt;
  LatencyHistogram hello_rtt;  // a stream's opening to its hello's answer
  mutable std::mutex counts_mu;
  std::unordered_map<TaskKey, TaskCount> counts;
  std::vector<std::string> clashes;
  std::vector<std::string> errors;

  // agent_fleet.cc
  void Registrar(int i);
  void RegisterOne(SimAgent& a, httplib::Client& client);
  void QueueRegistration(SimAgent& a);                         // requires a.mu
  void RetryRegistration(SimAgent& a);                         // requires a.mu
  void Apply(SimAgent& a, const HeartbeatResponse& commands);  // requires a.mu
  void Launch(SimAgent& a, const TaskLaunch& launch);          // requires a.mu
  void StopTask(SimAgent& a, const TaskStop& stop);            // requires a.mu
  void EndTask(SimAgent& a, const std::string& id, int code, int signal, bool lost,
               const std::string& message);                                // requires a.mu
  std::vector<TaskReport> Reports(SimAgent& a);                            // requires a.mu
  void Acknowledge(SimAgent& a, const std::vector<TaskReport>& reported);  // requires a.mu
  void Sweep();
  void NoteError(const std::string& what);

  // agent_fleet_stream.cc
  void Connect(SimAgent& a);                          // requires a.mu
  void RetryConnect(SimAgent& a, bool was_open);      // requires a.mu
  void ReportSoon(SimAgent& a);                       // requires a.mu
  void ScheduleHeartbeat(SimAgent& a, Micros delay);  // requires a.mu
  void SendHeartbeat(SimAgent& a, uint64_t token);
  void OnMessage(SimAgent& a, uint64_t epoch, const channel::ControllerMessage& m);
  void OnStreamEnd(SimAgent& a, uint64_t epoch);
  void StreamDone();
};

}  // namespace tessera::fleet
