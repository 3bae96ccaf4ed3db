// Agent: the node daemon. It discovers the node's GPUs (NVML, or a fake inventory),
// registers with the controller, and then heartbeats: each heartbeat reports the
// node's tasks (running, exited with their codes, checkpoints, new log output) and
// receives the tasks to launch and to stop.
//
// Channel: when the registration names the controller's agent channel, heartbeats go
// over that stream (agent/agent_channel_client.h, protobuf messages), and launches and
// stops arrive on it the moment they are durable. The agent heartbeats at once when a
// task ends (an exit watcher waits on the shims' pidfds) or a launch arrives, and at
// least every interval; without the channel (while it cannot be opened) heartbeats go
// over HTTP (JSON). Both are HeartbeatTransports (agent/heartbeat_transport.h), handled
// alike. A stream that breaks or stops answering makes the agent register again (below).
//
// Delivery: the controller resends a launch until a heartbeat reports that task and
// a stop until the task has exited; the agent ignores keys it has seen. Exit reports
// are resent until a heartbeat carrying them is answered (the controller makes them
// durable before it answers). When the controller says "reregister" (it restarted
// or declared this node down) the agent registers again with what it runs.
//
// Several controllers (server_url "URL,URL,...", high availability): registration and
// HTTP heartbeats go to the controller that answered last, follow a follower's
// redirect to the leader and move on to the next address on no answer or a 503
// (agent/controller_links.h). When the channel's stream breaks, or a heartbeat on it is
// not answered within AnswerBound() (3 heartbeat intervals, 3 s to 10 s: a stopped
// controller keeps the connection open and answers nothing), the agent drops the
// stream and registers again, starting from the next address, with every task it
// runs (re-attached, not restarted) and every exit not yet acknowledged; it then opens
// the channel of the controller that took the registration.
//
// Isolation per task: CUDA_VISIBLE_DEVICES / NVIDIA_VISIBLE_DEVICES with the GPU or
// MIG instance UUIDs, CPU affinity to the GPUs' NUMA nodes, cgroup v2 limits where
// the machine allows (TaskLauncher warns once where it does not), its own process
// group. The agent keeps its own ledger of GPU use and refuses a launch that would
// give a GPU slice twice (and counts it: double_bookings()).
//
// Telemetry: at most once per telemetry_interval the agent reads every GPU
// (GpuBackend::ReadTelemetry) and sends the sample in the next heartbeat's "gpus"; a
// heartbeat without a new sample leaves "gpus" out. A sample whose heartbeat fails
// goes with the next heartbeat unless a newer one replaces it. A failing read is
// logged once per distinct message and the heartbeat goes without telemetry. The agent
// tells the backend where each task runs (GpuBackend::SetTaskLoad) when it starts and
// when it ends, so that the fake backend's readings follow the work. With fake GPUs,
// faults are injected through <data_dir>/fake-faults (see fake_gpus.h).
//
// Preemption: a stop writes the preempt marker into the task's checkpoint directory
// (agent/launch/checkpoint_protocol.h) and sends the signal (SIGTERM); after the grace
// period, SIGKILL. Tasks die with the agent.
//
// Shared GPUs (agent/agent_gpu_shares.h): one MPS control daemon per GPU in shared mode,
// restarted when it ends, stopped when the GPU leaves shared mode or when Stop() kills
// the tasks (kept for the next agent otherwise); share tasks get its directories and the
// CUDA limiter (LD_PRELOAD and its limits).
//
// Thread safety: Start/Stop from one thread; the loop runs on its own thread.
// RunOnce is for tests that drive the agent without the loop.
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agent/agent_channel_client.h"
#include "agent/gpu/gpu_backend.h"
#include "agent/heartbeat_transport.h"
#include "agent/launch/task_launcher.h"
#include "agent/runtime/cdi_spec.h"
#include "agent/runtime/container_runtime.h"
#include "agent/task_sandbox.h"
#include "api/agent_protocol.h"
#include "api/node_labels.h"
#include "base/clock.h"
#include "base/mutex.h"
#include "base/rng.h"
#include "base/status.h"
#include "model/gpu_catalog.h"

namespace tessera {

class AgentGpuShares;
class ControllerLinks;

struct AgentOptions {
  // The controller's URL, or several joined by ',' (the controllers of one cluster).
  std::string server_url = "http://127.0.0.1:7450";
  std::string token;             // the join token
  std::string node_name;         // "": the host name
  std::string data_dir;          // logs/ live here; required
  std::string fake_gpus;         // "": NVML when present, else no GPUs
  // Overrides the GPUs' reported sharing modes (agent/gpu/gpu_sharing_config.h), e.g.
  // "all=shared" or "0,1=shared;2=timeslice:4"; "": as discovered.
  std::string gpu_sharing;
  std::string nvml_library = "libnvidia-ml.so.1";
  // GPUs in shared mode (agent/agent_gpu_shares.h): the MPS control program ("": on
  // PATH, but none with fake GPUs; "none": no MPS) and the CUDA limiter injected into
  // share tasks ("": beside the tessera binary; "none": no limiter).
  std::string mps_control;
  std::string cuda_limiter;
  // The node's MPS serves several Unix users at once (agent/agent_gpu_shares.h): the
  // label mps-multi-user=on lets the controller put different tenants' shares on one GPU.
  bool mps_multi_user = false;
  int64_t cpu_milli = 0;         // 0: the machine's CPUs
  int64_t memory_mib = 0;        // 0: the machine's memory
  bool use_cgroups = true;
  // The tessera-shim to spawn per task; "": the one beside this executable, and without
  // one, forked shims (agent/launch/shim_start.h).
  std::string shim_program;
  std::string ca_cert;           // for https:// controllers
  bool insecure = false;
  Micros heartbeat_interval = 0;  // 0: what the controller says
  int64_t max_log_chunk = 64 << 10;  // bytes of output per task per heartbeat
  Micros telemetry_interval = 1'000'000;  // least time between GPU samples; 0: no telemetry
  const Clock* clock = nullptr;           // nullptr: the system clock; must outlive the agent
  // Where the GPUs' device nodes are (<device_dir>/nvidia<minor>, and the MIG
  // capabilities' <device_dir>/nvidia-caps/), and where the driver says which
  // capability opens which MIG instance: a task can open only its own (task_sandbox.h).
  std::string device_dir = "/dev";
  std::string nvidia_caps_dir = "/proc/driver/nvidia/capabilities";
  // A root agent runs tasks only as the uid the controller gives (never 0) unless this
  // is set: for one-user machines where tasks must run as root.
  bool allow_root_tasks = false;
  // Stop() leaves the tasks running, for the next agent on this data directory to adopt
  // (a restart or an upgrade); false: Stop() kills them and they are reported lost.
  bool keep_tasks_on_stop = false;
  // Node labels reported with the inventory (validated: api/node_labels.h). Without an
  // "nvlink-domain" here, the GPUs' NVLink fabric (NVML's clusterUuid/cliqueId) gives one.
  NodeLabels labels;
  // Tasks in container images (agent/runtime/container_runtime.h): "auto" runs them when
  // Podman works and the agent is root (the node is then labelled containers=podman),
  // "on" refuses to start without, "off" never. (`tessera agent` defaults to auto.)
  std::string containers = "off";
  std::string podman = "podman";
  // Where the CDI spec of the node's GPUs is written (agent/runtime/cdi_spec.h); Podman
  // reads /etc/cdi and /var/run/cdi.
  std::string cdi_dir = "/var/run/cdi";
  // Host directories jobs may mount into their containers; empty: none.
  std::vector<std::string> container_mount_prefixes;
  // Registries reached over plain HTTP (host:port).
  std::vector<std::string> container_insecure_registries;
  // The node's image store is kept to this many MiB after each pull, least recently used
  // images no task uses removed first; 0: no bound.
  int64_t image_cache_mib = 64 * 1024;
};

class Agent {
 public:
  static StatusOr<std::unique_ptr<Agent>> Create(AgentOptions options, const GpuCatalog& catalog);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  void Start();
  // Stops the loop; kills the tasks unless keep_tasks_on_stop. Idempotent.
  void Stop();
  // One register-or-heartbeat exchange and its consequences.
  Status RunOnce();
  // The wait between heartbeats now (the controller's, unless the options set one); read
  // it from the thread that runs RunOnce or the loop.
  Micros heartbeat_interval() const { return interval_; }
  // The longest the agent waits for a controller's answer: 3 heartbeat intervals, within
  // [3 s, 10 s]. Same thread as heartbeat_interval().
  Micros AnswerBound() const;
  // The controller the agent speaks to now (the last that answered); same thread.
  std::string controller() const;

  // A copy: the loop replaces the inventory at each registration.
  NodeInventory inventory() const;
  std::string describe_gpus() const;
  int double_bookings() const { return double_bookings_.load(); }
  size_t running_tasks() const;

 private:
  struct LocalTask {
    TaskLaunch launch;
    std::string id;        // launcher id: job.task.attempt
    std::string record;    // its record, also its state file (task_records.h)
    std::string log_path;
    int64_t log_shipped = 0;
    bool exited = false;
    bool failed_to_start = false;
    bool lost = false;     // ended, how is unknown (or the agent killed it): reported "lost"
    std::string message;
    int exit_code = 0;
    int signal = 0;
    Micros signalled_at = 0;  // 0: not asked to stop
    Micros kill_at = 0;
    bool killed = false;
    bool checkpointed = false;
    bool starting = false;  // prepared, its shim not yet started (by a launch thread)
    std::string progress;   // while starting: how far its image's pull is ("": none)
    int stop_signal = 15;   // what a stop sent; resent once a starting task has started
    std::vector<std::pair<int, std::string>> mig;  // created instances: gpu, uuid
    std::vector<std::pair<int, int64_t>> gpu_use;  // ledger entries: gpu, milli
  };

  Agent(AgentOptions options, const GpuCatalog& catalog);
  Status Init();
  // The HTTP links to the controllers with the node's bearer, and the two heartbeat
  // transports over them (agent_heartbeat.cc).
  Status InitTransports();
  void Loop();
  Status Register();
  Status Heartbeat();
  // One heartbeat's exchange (agent_heartbeat.cc), waiting up to AnswerBound(): on the
  // channel when it is open or can be opened, else over HTTP.
  HeartbeatResult Exchange(const HeartbeatRequest& request);
  bool UseChannel();  // opens the channel when due; false: use HTTP this time
  void Apply(const HeartbeatResponse& commands);   // its launches, then its stops
  void OnPush(const HeartbeatResponse& commands);  // the channel's reader thread
  void ReportSoon();  // the loop heartbeats now rather than at its interval
  void WatchExits();  // the exit watcher's thread: a task's end makes the loop report it
  // Prepares the task under mu_ and lists it as starting; a launch thread then records
  // and starts it (agent_launch.cc). Without the loop (RunOnce), it starts inline.
  void Launch(const TaskLaunch& launch);
  // A task that fails to start is kept, to be reported, with its GPUs released.
  void FailLaunch(LocalTask task, std::string message) REQUIRES(mu_);
  // Reserves the task's GPUs and plans its sandbox; on an error, what it reserved stays
  // in `task` for FailLaunch to release.
  Status PrepareTask(LocalTask& task, LaunchSpec* spec) REQUIRES(mu_);
  // Records and starts a prepared task (without mu_), then marks it started or failed.
  // `registry_auth`: the launch's registry credential, which only the pull sees (the
  // task's table entry and record never hold it).
  void Spawn(const std::string& id, LaunchSpec spec, const std::string& registry_auth)
      EXCLUDES(mu_);
  // A launch thread: runs what `queue` holds until the launchers stop.
  void LaunchLoop(std::deque<std::function<void()>>* queue);
  void StartLaunchers();
  void StopLaunchers();  // after the last Launch: waits for the launches in flight
  // The agent's own ledger: never hand out a GPU slice twice.
  Status ReserveGpus(LocalTask& task) REQUIRES(mu_);
  // The task's GPUs and new MIG instances: their UUIDs and device nodes.
  Status GrantDevices(LocalTask& task, std::vector<std::string>* visible,
                      std::vector<GpuDeviceGrant>* granted) REQUIRES(mu_);
  // Environment, job sandbox, checkpoint directory, CPUs, device fence and lease;
  // `note` gets what the task's log should say about its working directory.
  StatusOr<LaunchSpec> BuildLaunchSpec(const LocalTask& task, int64_t uid, int64_t gid,
                                       const std::vector<std::string>& visible,
                                       const std::vector<GpuDeviceGrant>& granted,
                                       std::string* note) REQUIRES(mu_);
  // Its device node: <device_dir>/nvidia<minor>.
  int GpuMinor(int gpu) const REQUIRES(mu_);
  // Containers (agent_containers.cc): the runtime, when this node runs them (Init);
  // the node's CDI spec (its GPUs and the MIG instances of container tasks); a prepared
  // bare launch made a `podman run` of the task's image; the image pulled before the
  // start (on a launch thread); a container task's end (its exit read as a bare
  // task's, its leftovers removed).
  Status InitContainers();
  Status WriteNodeCdiSpec() REQUIRES(mu_);
  StatusOr<LaunchSpec> ContainerLaunchSpec(const LocalTask& task, LaunchSpec bare,
                                           const JobSandbox& box,
                                           const std::vector<std::string>& visible,
                                           const std::vector<GpuDeviceGrant>& granted)
      REQUIRES(mu_);
  // Pulls the task's image when the node lacks it (or this tenant has not had it),
  // keeping the task's progress note current meanwhile.
  Status PrepareImage(const std::string& id, const TaskLaunch& launch,
                      const std::string& registry_auth) EXCLUDES(mu_);
  void SetProgress(const std::string& id, const std::string& note) EXCLUDES(mu_);
  void ContainerEnded(LocalTask& task, const TaskExit& exit) REQUIRES(mu_);
  void ForgetContainer(const std::string& task_id) REQUIRES(mu_);
  // At start, after Recover: removes every task container no adopted task owns (one whose
  // Podman was killed while no agent ran).
  void ReconcileContainers() REQUIRES(mu_);
  // Where a container task's mount sources are bound: <data>/containers/mounts/<id>.
  std::string StagingDir(const std::string& task_id) const;
  void StopTask(const TaskStop& stop);
  void Sweep();  // reap exits, enforce kill deadlines, notice checkpoints
  void ReleaseTask(LocalTask& task) REQUIRES(mu_);
  // Re-attaches what earlier agents on this data directory left.
  void Recover() REQUIRES(mu_);
  // Forgets the tasks whose end the controller has durably recorded.
  void Acknowledge(const std::vector<TaskReport>& reported) REQUIRES(mu_);
  // An exchange was answered: advances the log offsets shipped, then Acknowledge.
  void Delivered(const std::vector<std::pair<std::string, int64_t>>& shipped,
                 const std::vector<TaskReport>& reported) REQUIRES(mu_);
  // The uid/gid a launch runs as, or why it may not run.
  StatusOr<std::pair<int64_t, int64_t>> RunAs(const TaskLaunch& launch) REQUIRES(mu_);
  // Records a successful exchange that was sent at `sent_wall_us` (the lease file).
  void Renew(Micros sent_wall_us);
  std::vector<TaskReport> Reports(std::vector<std::pair<std::string, int64_t>>* shipped);
  StatusOr<nlohmann::json> Post(const std::string& path, const nlohmann::json& body);
  Status RefreshInventory();
  // A new GPU sample when telemetry_interval has passed since the last read, else the
  // sample a failed heartbeat did not deliver, else nothing.
  std::vector<GpuTelemetry> TakeTelemetry();

  AgentOptions options_;
  const GpuCatalog* catalog_;
  SystemClock system_clock_;
  const Clock* clock_ = &system_clock_;
  // One caller at a time (GpuBackend's rule): the agent's calls hold mu_.
  std::unique_ptr<GpuBackend> backend_ PT_GUARDED_BY(mu_);
  // Replaced at each registration (on the loop thread); launches read it.
  std::vector<DiscoveredGpu> gpus_ GUARDED_BY(mu_);
  NodeInventory inventory_ GUARDED_BY(mu_);
  // Made by Init, reset by Stop once the threads that use it have ended; thread-safe.
  std::unique_ptr<TaskLauncher> launcher_;
  std::unique_ptr<AgentGpuShares> gpu_shares_;  // MPS daemons and the CUDA limiter
  std::unique_ptr<ContainerRuntime> containers_;  // null: this node runs no containers
  std::vector<std::string> driver_files_;         // the driver's files for the CDI spec (Init)
  std::unique_ptr<ControllerLinks> links_;  // HTTP to the controllers
  std::string bearer_;  // the node's credential, or the join token until it has one
  // The agent channel (on the loop thread; pushes arrive on its reader thread).
  std::unique_ptr<AgentChannelClient> channel_;
  std::unique_ptr<HttpHeartbeatTransport> http_;  // over links_, without the channel
  int64_t channel_port_ = 0;  // from the last registration; 0: none
  Micros channel_retry_at_ = 0;
  Micros channel_backoff_ = 0;  // grows while the channel cannot be opened
  std::string channel_error_;  // the last one logged
  std::string agent_id_;
  bool registered_ = false;
  // Where tasks' terminals listen: the address the controller sees this agent at (set
  // at registration).
  std::string pty_address_ GUARDED_BY(mu_) = "127.0.0.1";
  Micros interval_ = 500'000;
  // Tasks fence themselves this long after the last contact; 0: never. Set by Register
  // on the loop thread while the channel is closed (no push can launch meanwhile).
  Micros lease_ = 0;
  bool warned_same_uid_ GUARDED_BY(mu_) = false;
  // Telemetry, on the loop thread.
  bool telemetry_read_ = false;  // whether a read was attempted
  Micros telemetry_at_ = 0;      // when
  std::vector<GpuTelemetry> unsent_telemetry_;
  std::set<std::string> telemetry_errors_;  // messages logged already

  mutable Mutex mu_;
  std::map<std::string, LocalTask> tasks_ GUARDED_BY(mu_);  // by launcher id
  std::set<std::string> seen_ GUARDED_BY(mu_);              // launch ids ever accepted
  std::set<std::string> orphans_ GUARDED_BY(mu_);  // killed at start: no readable record
  std::map<int, int64_t> gpu_used_ GUARDED_BY(mu_);  // gpu index -> milli in use
  std::map<std::string, CdiDevice> cdi_mig_ GUARDED_BY(mu_);  // container tasks' MIG, by UUID
  std::atomic<int> double_bookings_{0};

  // Taken with mu_ held (StopTask's ReportSoon), never the other way round.
  Mutex loop_mu_ ACQUIRED_AFTER(mu_);
  CondVar loop_cv_;
  bool stopping_ GUARDED_BY(loop_mu_) = false;
  bool report_now_ GUARDED_BY(loop_mu_) = false;
  // The stream ended by itself: the loop reports at a random point of the next
  // min(heartbeat, kMaxReturnSpread), so that the agents of a controller that restarted
  // come back spread over the interval it sized to its fleet.
  bool stream_ended_ GUARDED_BY(loop_mu_) = false;
  // Jitter for the loop's retries and returns.
  Pcg32 jitter_ GUARDED_BY(loop_mu_){(uint64_t{std::random_device{}()} << 32) |
                                     std::random_device{}()};
  // Launch threads: they start prepared tasks, two at a time; tasks in images have two
  // of their own (image_queue_), so that a pull of minutes keeps no bare task waiting.
  static constexpr int kLaunchThreads = 2;
  // Taken with loop_mu_ held (Start starts the launch threads).
  Mutex launch_mu_ ACQUIRED_AFTER(loop_mu_);
  CondVar launch_cv_;
  std::deque<std::function<void()>> launch_queue_ GUARDED_BY(launch_mu_);
  std::deque<std::function<void()>> image_queue_ GUARDED_BY(launch_mu_);
  int launches_in_flight_ GUARDED_BY(launch_mu_) = 0;
  bool launch_stopping_ GUARDED_BY(launch_mu_) = false;
  std::vector<std::thread> launchers_ GUARDED_BY(launch_mu_);
  std::thread loop_;
  std::thread exit_watch_;
};

}  // namespace tessera
