#include "agent/agent.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <thread>
#include <utility>

#include "agent/agent_gpu_shares.h"
#include "agent/controller_links.h"
#include "agent/gpu/fake_gpus.h"
#include "agent/gpu/gpu_sharing_config.h"
#include "agent/gpu/nvml_backend.h"
#include "agent/launch/checkpoint_protocol.h"
#include "agent/launch/cpu_topology.h"
#include "agent/launch/shim_start.h"
#include "agent/runtime/mount_staging.h"
#include "agent/task_records.h"
#include "agent/task_sandbox.h"
#include "api/http_errors.h"
#include "base/strings.h"

namespace tessera {
namespace {

std::string HostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') {
    return "localhost";
  }
  return buf;
}

int64_t MachineMemoryMiB() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemTotal:") {
      return kib / 1024;
    }
  }
  return 1024;
}

std::string RandomId() {
  std::random_device rd;
  std::ostringstream out;
  out << std::hex << rd() << rd();
  return out.str();
}

// Where a task starts when its spec names no directory: where it was submitted from,
// when that exists on this node (a shared filesystem) and the task's uid can enter
// it, else the job's own directory (`note` says why, for the task's log).
std::string DefaultWorkingDir(const TaskLaunch& l, const std::string& job_dir, int64_t uid,
                              int64_t gid, std::string* note) {
  struct stat st {};
  if (l.submit_dir.empty() || ::stat(l.submit_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return job_dir;
  }
  if (!Reachable(l.submit_dir, uid, gid)) {
    *note = "tessera: the submit directory " + l.submit_dir + " is not reachable by uid " +
            std::to_string(uid) + "; starting in " + job_dir + "\n";
    return job_dir;
  }
  return l.submit_dir;
}

}  // namespace

Agent::Agent(AgentOptions options, const GpuCatalog& catalog)
    : options_(std::move(options)), catalog_(&catalog) {}

Agent::~Agent() { Stop(); }

StatusOr<std::unique_ptr<Agent>> Agent::Create(AgentOptions options, const GpuCatalog& catalog) {
  if (options.data_dir.empty()) {
    return InvalidArgumentError("the agent needs a data directory");
  }
  TESSERA_RETURN_IF_ERROR(ValidateNodeLabels(options.labels));
  if (options.token.empty()) {
    return InvalidArgumentError("the agent needs the controller's join token");
  }
  std::unique_ptr<Agent> a(new Agent(std::move(options), catalog));
  TESSERA_RETURN_IF_ERROR(a->Init());
  return a;
}

Status Agent::Init() {
  if (options_.node_name.empty()) {
    options_.node_name = HostName();
  }
  if (options_.clock != nullptr) {
    clock_ = options_.clock;
  }
  if (options_.telemetry_interval < 0) {
    return InvalidArgumentError("the telemetry interval must not be negative");
  }
  // Made now: the logs go here, and with fake GPUs so does the fault-injection file.
  std::error_code ec;
  std::filesystem::create_directories(options_.data_dir, ec);
  if (ec) {
    return InvalidArgumentError("cannot create the agent's data directory " + options_.data_dir +
                                ": " + ec.message());
  }
  if (!options_.fake_gpus.empty()) {
    FakeGpuOptions fake;
    fake.faults_path = options_.data_dir + "/fake-faults";
    TESSERA_ASSIGN_OR_RETURN(
        backend_, MakeFakeGpuBackend(options_.fake_gpus, *catalog_, options_.node_name, fake));
  } else {
    StatusOr<std::unique_ptr<GpuBackend>> nvml = LoadNvmlBackend(*catalog_, options_.nvml_library);
    if (nvml.ok()) {
      backend_ = std::move(nvml).value();
    } else {
      std::cerr << "tessera agent: no GPUs: " << nvml.status().message()
                << " (use --fake-gpus for a fake inventory)\n";
      TESSERA_ASSIGN_OR_RETURN(backend_, MakeFakeGpuBackend("", *catalog_, options_.node_name));
    }
  }
  if (!options_.gpu_sharing.empty()) {
    // At start-up every item must apply; later discoveries report GPUs as they are.
    TESSERA_ASSIGN_OR_RETURN(GpuSharingConfig sharing, ParseGpuSharingConfig(options_.gpu_sharing));
    std::vector<DiscoveredGpu> found;
    {
      MutexLock lock(mu_);  // the backend's callers hold it (no other thread runs yet)
      TESSERA_ASSIGN_OR_RETURN(found, backend_->Discover());
    }
    std::vector<std::string> problems = ApplyGpuSharingConfig(sharing, &found);
    if (!problems.empty()) {
      return InvalidArgumentError(problems.front());
    }
  }
  {
    AgentGpuSharesOptions shares;
    shares.data_dir = options_.data_dir;
    shares.mps_control = options_.mps_control;
    shares.cuda_limiter = options_.cuda_limiter;
    shares.mps_multi_user = options_.mps_multi_user;
    shares.clock = clock_;
    if (shares.mps_control.empty() && !options_.fake_gpus.empty()) {
      shares.mps_control = "none";  // a real daemon has no fake GPU to serve
    }
    gpu_shares_ = std::make_unique<AgentGpuShares>(std::move(shares));
  }
  TESSERA_RETURN_IF_ERROR(InitContainers());
  TESSERA_RETURN_IF_ERROR(RefreshInventory());
  if (containers_) {
    MutexLock lock(mu_);
    if (Status cdi = WriteNodeCdiSpec(); !cdi.ok()) {
      return Status(cdi.code(), "containers: the CDI spec: " + cdi.message());
    }
  }

  // Every task would fail to start: refuse, naming the fix. Only root tasks (a
  // controller that gives no uid, --allow-root-tasks) reach it anyway.
  if (Status reach = DataDirReachableByTasks(options_.data_dir); !reach.ok()) {
    if (!options_.allow_root_tasks) {
      return reach;
    }
    std::cerr << "tessera agent: warning: " << reach.message() << "\n";
  }
  // The data directory is traversable only, so tasks reach their job directories;
  // logs, task records and the credential are the agent's alone.
  ::chmod(options_.data_dir.c_str(), 0711);
  TESSERA_RETURN_IF_ERROR(MakeDirs(options_.data_dir + "/logs", 0700));
  TESSERA_RETURN_IF_ERROR(MakeDirs(TaskRecordsRoot(options_.data_dir), 0700));
  ::chmod((options_.data_dir + "/logs").c_str(), 0700);
  ::chmod(TaskRecordsRoot(options_.data_dir).c_str(), 0700);

  TaskLauncher::Options lo;
  lo.use_cgroups = options_.use_cgroups;
  lo.shim_program =
      options_.shim_program.empty() ? ShimProgramBesideThisExecutable() : options_.shim_program;
  if (lo.shim_program.empty()) {
    std::cerr << "tessera agent: warning: tessera-shim is not installed beside this program; "
                 "every task start forks the agent instead (slower)\n";
  }
  launcher_ = std::make_unique<TaskLauncher>(lo);
  {
    MutexLock lock(mu_);
    Recover();
    ReconcileContainers();
  }
  if (options_.heartbeat_interval > 0) {
    interval_ = options_.heartbeat_interval;
  }
  TESSERA_RETURN_IF_ERROR(InitTransports());
  agent_id_ = RandomId();
  return Status::Ok();
}

Status Agent::RefreshInventory() {
  std::vector<DiscoveredGpu> gpus;
  {
    MutexLock lock(mu_);  // the backend has one caller at a time
    TESSERA_ASSIGN_OR_RETURN(gpus, backend_->Discover());
  }
  StatusOr<GpuSharingConfig> sharing = ParseGpuSharingConfig(options_.gpu_sharing);
  if (sharing.ok()) {
    for (const std::string& problem : ApplyGpuSharingConfig(*sharing, &gpus)) {
      std::cerr << "tessera agent: " << problem << " (the GPU is reported as the driver has it)\n";
    }
  }
  {
    MutexLock lock(mu_);  // launches (on the channel's reader thread) read gpus_
    gpus_ = gpus;
  }
  NodeInventory inv;
  NodeSpec& spec = inv.spec;
  spec.name = options_.node_name;
  const int64_t cpus = static_cast<int64_t>(std::thread::hardware_concurrency());
  spec.cpu = MilliCpu(options_.cpu_milli > 0 ? options_.cpu_milli : std::max<int64_t>(1, cpus) * 1000);
  spec.memory = MiB(options_.memory_mib > 0 ? options_.memory_mib : MachineMemoryMiB());
  int numa = 1;
  for (const DiscoveredGpu& g : gpus) {
    if (!g.model.valid()) {
      return FailedPreconditionError("GPU " + std::to_string(g.index) + " ('" + g.product_name +
                                     "') is not a model the catalog knows");
    }
    GpuSpec gs;
    gs.model = g.model;
    gs.mode = g.mode;
    gs.replicas = g.replicas;
    gs.numa_node = g.numa_node;
    gs.nvlink_domain = g.nvlink_domain;
    numa = std::max(numa, g.numa_node + 1);
    spec.gpus.push_back(gs);
    inv.gpu_uuids.push_back(g.uuid);
    std::vector<NodeMigInstance> mig;
    for (const MigInstanceInfo& m : g.mig_instances) {
      mig.push_back(NodeMigInstance{m.uuid, m.profile, m.start});
    }
    inv.mig_instances.push_back(std::move(mig));
  }
  spec.numa_nodes = numa;
  spec.labels = options_.labels;
  if (containers_ && std::none_of(spec.labels.begin(), spec.labels.end(),
                                  [](const auto& l) { return l.first == kContainersLabel; })) {
    spec.labels.emplace_back(kContainersLabel, "podman");
  }
  const bool given = std::any_of(spec.labels.begin(), spec.labels.end(), [](const auto& l) {
    return l.first == kNvlinkDomainLabel;
  });
  // The admin's label wins; a domain the driver reports that breaks the label syntax is
  // left out rather than failing the registration.
  if (std::string domain = NodeFabricDomain(gpus);
      !given && !domain.empty() && ValidateNodeLabel(kNvlinkDomainLabel, domain).ok()) {
    spec.labels.emplace_back(std::string(kNvlinkDomainLabel), std::move(domain));
    std::sort(spec.labels.begin(), spec.labels.end());
  }
  gpu_shares_->OnInventory(gpus);
  // "mps" and "cuda-limiter" say how shares are enforced here (the admin's labels win).
  for (auto& [key, value] : gpu_shares_->Labels()) {
    if (std::none_of(spec.labels.begin(), spec.labels.end(),
                     [&key = key](const auto& l) { return l.first == key; })) {
      spec.labels.emplace_back(key, value);
    }
  }
  std::sort(spec.labels.begin(), spec.labels.end());
  MutexLock lock(mu_);
  inventory_ = std::move(inv);
  return Status::Ok();
}

NodeInventory Agent::inventory() const {
  MutexLock lock(mu_);
  return inventory_;
}

std::string Agent::describe_gpus() const {
  MutexLock lock(mu_);
  return backend_->Describe();
}

void Agent::Start() {
  MutexLock lock(loop_mu_);
  if (loop_.joinable()) {
    return;
  }
  stopping_ = false;
  StartLaunchers();
  loop_ = std::thread([this] { Loop(); });
  exit_watch_ = std::thread([this] { WatchExits(); });
}

void Agent::Stop() {
  {
    MutexLock lock(loop_mu_);
    stopping_ = true;
  }
  loop_cv_.NotifyAll();
  if (loop_.joinable()) {
    loop_.join();
  }
  if (exit_watch_.joinable()) {
    launcher_->Interrupt();
    exit_watch_.join();
  }
  if (channel_ != nullptr) {
    (void)channel_->Close();  // no more pushes
  }
  StopLaunchers();
  if (launcher_ == nullptr) {
    return;
  }
  if (!options_.keep_tasks_on_stop) {
    {
      MutexLock lock(mu_);
      for (auto& [id, t] : tasks_) {
        if (!t.exited) {
          (void)WriteTaskMarker(t.record, "lost", "the agent stopped and killed it");
        }
      }
    }
    launcher_->KillAll();
    Sweep();  // records their ends; reported (as lost) by the next agent on this directory
    if (containers_) {
      RemoveCdiSpec(options_.cdi_dir, options_.node_name);  // no task is left to use it
    }
  }
  if (gpu_shares_ != nullptr) {
    gpu_shares_->Stop(!options_.keep_tasks_on_stop);  // daemons go with the tasks, or stay with them
  }
  MutexLock lock(mu_);
  launcher_.reset();
}

void Agent::Loop() {
  // The most a broken stream's agent waits before it reports (spread over up to this).
  constexpr Micros kMaxReturnSpread = 5'000'000;
  using Steady = std::chrono::steady_clock;
  Micros backoff = 200'000;
  MutexLock lock(loop_mu_);
  while (!stopping_) {
    lock.Unlock();
    Status s = RunOnce();
    lock.Lock();
    Micros wait = interval_;
    if (!s.ok()) {
      std::cerr << "tessera agent: " << s.ToString() << "\n";
      // 75-125 %: agents that lost the same controller do not retry in step.
      wait = backoff * 3 / 4 + jitter_.Uniform(static_cast<uint32_t>(backoff / 2 + 1));
      // With several controllers a failure is usually a failover, which ends within a
      // lease: retry at least every second then, so as not to add seconds to it.
      const Micros max_backoff = links_ != nullptr && links_->listed() > 1 ? 1'000'000 : 5'000'000;
      backoff = std::min<Micros>(backoff * 2, max_backoff);
    } else {
      backoff = 200'000;
    }
    Steady::time_point until = Steady::now() + std::chrono::microseconds(wait);
    while (!stopping_ && !report_now_ &&
           loop_cv_.WaitUntil(loop_mu_, until, [this]() REQUIRES(loop_mu_) {
             return stopping_ || report_now_ || stream_ended_;
           })) {
      if (stream_ended_) {
        stream_ended_ = false;
        const Micros spread = std::clamp<Micros>(interval_, 1, kMaxReturnSpread);
        until = std::min(until, Steady::now() + std::chrono::microseconds(jitter_.Uniform(
                                                    static_cast<uint32_t>(spread))));
      }
    }
    report_now_ = false;
  }
}

StatusOr<nlohmann::json> Agent::Post(const std::string& path, const nlohmann::json& body) {
  TESSERA_ASSIGN_OR_RETURN(
      ControllerLinks::Answer r,
      links_->Post(path, body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
  if (r.status != 200) {
    return StatusFromHttp(r.status, r.body);
  }
  nlohmann::json j = nlohmann::json::parse(r.body, nullptr, false);
  if (j.is_discarded()) {
    return InternalError("the controller's answer to " + path + " is not JSON");
  }
  return j;
}

Status Agent::RunOnce() {
  Sweep();
  gpu_shares_->Poll();
  if (!registered_) {
    return Register();
  }
  return Heartbeat();
}

Status Agent::Register() {
  TESSERA_RETURN_IF_ERROR(RefreshInventory());
  RegisterRequest req;
  req.agent_id = agent_id_;
  std::vector<std::pair<std::string, int64_t>> shipped;
  {
    MutexLock lock(mu_);
    req.inventory = inventory_;
  }
  req.tasks = Reports(&shipped);
  const Micros sent = SystemClock().NowMicros();
  const std::string credential_path = options_.data_dir + "/node.credential";
  const nlohmann::json body = ToJson(req, *catalog_);
  StatusOr<nlohmann::json> answer = Post("/v1/agents/register", body);
  if (!answer.ok() && (answer.status().code() == StatusCode::kUnauthenticated ||
                       answer.status().code() == StatusCode::kPermissionDenied) &&
      std::filesystem::exists(credential_path)) {
    // Never falls back to the join token by itself: a node whose credential was revoked
    // and then removed must not rejoin unless someone on the node means it to.
    return Status(answer.status().code(),
                  "the controller refuses this node's credential (" + answer.status().message() +
                      "); if the node was removed on purpose, delete " + credential_path +
                      " to join again with the join token");
  }
  TESSERA_RETURN_IF_ERROR(answer.status());
  TESSERA_ASSIGN_OR_RETURN(RegisterResponse resp, RegisterResponseFromJson(answer.value()));
  if (!resp.credential.empty()) {
    // Handed out once: keep it (0600, replaced atomically) before using it.
    const std::string tmp = credential_path + ".tmp";
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    const std::string text = resp.credential + "\n";
    const bool written = fd >= 0 && ::fchmod(fd, 0600) == 0 &&
                         ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                         ::fsync(fd) == 0;
    if (fd >= 0) {
      ::close(fd);
    }
    if (!written || ::rename(tmp.c_str(), credential_path.c_str()) != 0) {
      return UnavailableError("cannot write the node credential to " + credential_path);
    }
    bearer_ = resp.credential;
    links_->SetBearer(bearer_);
  }
  // A new registration gets a new stream (the controller forgot the old one's agent).
  (void)channel_->Close();
  channel_port_ = resp.channel_port;
  channel_retry_at_ = 0;
  channel_backoff_ = 0;
  if (options_.heartbeat_interval <= 0 && resp.heartbeat_interval_ms > 0) {
    interval_ = resp.heartbeat_interval_ms * 1000;
    links_->SetAnswerTimeout(AnswerBound());
  }
  // Fence a little before the controller declares the node lost.
  const Micros timeout = resp.node_timeout_ms * 1000;
  lease_ = timeout <= 0 ? 0 : timeout - std::max<Micros>(1'000'000, timeout / 10);
  Renew(sent);
  MutexLock lock(mu_);
  Delivered(shipped, req.tasks);  // what this registration reported is durable now
  registered_ = true;
  pty_address_ = LocalAddressToward(links_->current());
  std::cerr << "tessera agent: registered node " << resp.node << " with "
            << inventory_.spec.gpus.size() << " GPUs (" << backend_->Describe() << ")"
            << (links_->listed() > 1 ? " at " + links_->current() : "") << "\n";
  lock.Unlock();
  (void)UseChannel();  // at once: launches are pushed only once the stream is open
  return Status::Ok();
}

std::vector<TaskReport> Agent::Reports(std::vector<std::pair<std::string, int64_t>>* shipped) {
  MutexLock lock(mu_);
  std::vector<TaskReport> out;
  for (auto& [id, t] : tasks_) {
    TaskReport r;
    r.key = t.launch.key;
    r.state = t.failed_to_start ? TaskState::kFailedToStart
              : !t.exited       ? TaskState::kRunning
              : t.lost          ? TaskState::kLost
                                : TaskState::kExited;
    r.exit_code = t.exit_code;
    r.signal = t.signal;
    r.checkpointed = t.checkpointed;
    // A starting task's message is its progress (the controller shows it as the job's
    // reason); an ended one's says why it ended.
    r.message = r.state == TaskState::kRunning && t.starting ? t.progress : t.message;
    r.log_offset = t.log_shipped;
    r.pty_port = launcher_->PtyPort(id);
    int64_t size = 0;
    if (!t.log_path.empty()) {
      std::ifstream in(t.log_path, std::ios::binary);
      if (in) {
        in.seekg(0, std::ios::end);
        size = in.tellg();
        if (size > t.log_shipped) {
          const int64_t n = std::min(options_.max_log_chunk, size - t.log_shipped);
          r.log_chunk.resize(static_cast<size_t>(n));
          in.seekg(t.log_shipped);
          in.read(r.log_chunk.data(), n);
        }
      }
    }
    const int64_t next = t.log_shipped + static_cast<int64_t>(r.log_chunk.size());
    shipped->emplace_back(id, next);
    // An exit is reported only with the last of the task's output.
    if ((r.state == TaskState::kExited || r.state == TaskState::kLost) && next < size) {
      r.state = TaskState::kRunning;
    }
    out.push_back(std::move(r));
  }
  return out;
}

Status Agent::ReserveGpus(LocalTask& t) {
  const TaskLaunch& l = t.launch;
  for (int g : l.gpus) {
    if (g < 0 || static_cast<size_t>(g) >= gpus_.size()) {
      return InvalidArgumentError("GPU index " + std::to_string(g) +
                                  " does not exist on this node");
    }
    const int64_t want = l.gpus.size() > 1 ? 1000 : std::max<int64_t>(l.gpu_milli, 1);
    if (gpu_used_[g] + want > 1000) {
      ++double_bookings_;
      return FailedPreconditionError("GPU " + std::to_string(g) + " would be double-booked (" +
                                     std::to_string(gpu_used_[g]) + " milli already in use)");
    }
  }
  for (int g : l.gpus) {
    const int64_t want = l.gpus.size() > 1 ? 1000 : std::max<int64_t>(l.gpu_milli, 1);
    gpu_used_[g] += want;
    t.gpu_use.emplace_back(g, want);
  }
  return Status::Ok();
}

int Agent::GpuMinor(int g) const {
  const DiscoveredGpu& gpu = gpus_[static_cast<size_t>(g)];
  return gpu.minor >= 0 ? gpu.minor : gpu.index;
}

Status Agent::GrantDevices(LocalTask& t, std::vector<std::string>* visible,
                           std::vector<GpuDeviceGrant>* granted) {
  for (int g : t.launch.gpus) {
    visible->push_back(gpus_[static_cast<size_t>(g)].uuid);
    granted->push_back({GpuMinor(g)});
  }
  for (const MigRequest& m : t.launch.mig) {
    StatusOr<MigInstanceInfo> inst = backend_->CreateMigInstance(m.gpu, m.profile, m.start);
    if (!inst.ok()) {
      // An overlap with an instance already there is a slice given twice; a driver that
      // fails (NVML error) is not, and its reason goes with the launch failure.
      if (inst.status().code() == StatusCode::kFailedPrecondition) {
        ++double_bookings_;
      }
      return FailedPreconditionError("MIG instance " + m.profile + " at slot " +
                                     std::to_string(m.start) + " on GPU " +
                                     std::to_string(m.gpu) +
                                     " could not be created: " + inst.status().message());
    }
    t.mig.emplace_back(m.gpu, inst->uuid);
    visible->push_back(inst->uuid);
    // A MIG client needs its parent card's device node and its instance's capabilities.
    granted->push_back({GpuMinor(m.gpu), inst->gpu_instance, inst->compute_instance});
  }
  return Status::Ok();
}

StatusOr<LaunchSpec> Agent::BuildLaunchSpec(const LocalTask& t, int64_t uid, int64_t gid,
                                            const std::vector<std::string>& visible,
                                            const std::vector<GpuDeviceGrant>& granted,
                                            std::string* note) {
  const TaskLaunch& l = t.launch;
  std::map<std::string, std::string> env = l.env;
  if (visible.empty()) {
    env["CUDA_VISIBLE_DEVICES"] = "";
    env["NVIDIA_VISIBLE_DEVICES"] = "void";
  } else {
    env["CUDA_VISIBLE_DEVICES"] = Join(visible, ",");
    env["NVIDIA_VISIBLE_DEVICES"] = Join(visible, ",");
  }
  TESSERA_ASSIGN_OR_RETURN(JobSandbox box,
                           PrepareJobSandbox(options_.data_dir, l.key.job, uid, gid));
  if (!Reachable(box.dir, uid, gid)) {
    return FailedPreconditionError(DataDirReachableByTasks(options_.data_dir).message());
  }
  env["HOME"] = box.home;
  env["TMPDIR"] = box.tmp;
  gpu_shares_->AddEnv(l, &env);
  if (!l.checkpoint_dir.empty()) {
    Status ckpt = PrepareCheckpointDir(l.checkpoint_dir, l.checkpoint_managed, uid, gid);
    if (!ckpt.ok()) {
      return Status(ckpt.code(), "checkpoint directory: " + ckpt.message());
    }
  }
  std::set<int> numa(l.numa_nodes.begin(), l.numa_nodes.end());
  std::vector<int> cpus;
  for (int node : numa) {
    std::vector<int> c = CpusOfNumaNode(node);
    cpus.insert(cpus.end(), c.begin(), c.end());
  }
  LaunchSpec spec;
  spec.id = t.id;
  spec.argv = l.command;
  spec.env = std::move(env);
  spec.working_dir =
      l.working_dir.empty() ? DefaultWorkingDir(l, box.dir, uid, gid, note) : l.working_dir;
  spec.log_path = options_.data_dir + "/logs/" + t.id + ".log";
  spec.cpus = std::move(cpus);
  spec.cpu_milli = l.cpu_milli;
  spec.memory_mib = l.memory_mib;
  spec.state_file = t.record;
  spec.uid = uid;
  spec.gid = gid;
  spec.pty_secret = l.pty_secret;
  spec.pty_address = pty_address_;
  std::vector<int> minors;
  for (size_t g = 0; g < gpus_.size(); ++g) {
    minors.push_back(GpuMinor(static_cast<int>(g)));
  }
  StatusOr<std::vector<std::string>> hidden =
      HiddenGpuDevices(options_.device_dir, options_.nvidia_caps_dir, minors, granted);
  if (!hidden.ok()) {
    return Status(hidden.status().code(), "GPU devices: " + hidden.status().message());
  }
  spec.hidden_devices = std::move(*hidden);
  if (lease_ > 0) {
    spec.lease_file = std::filesystem::absolute(options_.data_dir + "/lease").string();
    spec.lease_us = lease_;
  }
  if (!l.container.empty()) {
    return ContainerLaunchSpec(t, std::move(spec), box, visible, granted);
  }
  return spec;
}

void Agent::StopTask(const TaskStop& stop) {
  const std::string id = TaskRecordId(stop.key);
  MutexLock lock(mu_);
  auto it = tasks_.find(id);
  if (it == tasks_.end() && seen_.insert(id).second) {
    // A stop for a task this agent never had (its launch was never sent, or was lost):
    // the attempt ends here at once, reported as lost; a launch of it that comes later
    // is a resend (seen_) and starts nothing.
    LocalTask never;
    never.launch.key = stop.key;
    never.id = id;
    never.exited = true;
    never.lost = true;
    never.message = "stopped before it reached this node; it never ran";
    tasks_[id] = std::move(never);
    ReportSoon();
    return;
  }
  if (it == tasks_.end() || it->second.exited || it->second.signalled_at > 0) {
    return;
  }
  LocalTask& t = it->second;
  const Micros now = clock_->NowMicros();
  t.signalled_at = now;
  t.kill_at = now + stop.grace_ms * 1000;
  if (!t.launch.checkpoint_dir.empty()) {
    ScopedFsIdentity as_task(t.launch.uid, t.launch.gid);
    (void)WritePreemptMarker(t.launch.checkpoint_dir, t.kill_at, "preempted");
  }
  const int sig = stop.grace_ms <= 0 ? SIGKILL : (stop.signal > 0 ? stop.signal : SIGTERM);
  t.stop_signal = sig;
  if (!t.starting) {
    (void)launcher_->Signal(id, sig);  // else sent once it has started
  }
  t.killed = sig == SIGKILL;
}

void Agent::ReleaseTask(LocalTask& t) {
  backend_->SetTaskLoad(t.id, {});
  if (!t.launch.container.empty()) {
    std::error_code ec;  // the job's environment: none of it stays on the node
    std::filesystem::remove(ContainerEnvFile(options_.data_dir + "/containers", t.id), ec);
    UnstageMounts(StagingDir(t.id));
  }
  for (const auto& [g, milli] : t.gpu_use) {
    gpu_used_[g] -= milli;
  }
  t.gpu_use.clear();
  for (const auto& [g, uuid] : t.mig) {
    cdi_mig_.erase(uuid);
    Status s = backend_->DestroyMigInstance(g, uuid);
    if (!s.ok()) {
      std::cerr << "tessera agent: destroying MIG instance " << uuid << ": " << s.message() << "\n";
    }
  }
  t.mig.clear();
}

void Agent::Sweep() {
  MutexLock lock(mu_);
  if (launcher_ == nullptr) {
    return;
  }
  for (const TaskExit& e : launcher_->Reap()) {
    if (orphans_.erase(e.id) > 0) {
      RemoveTaskRecord(TaskRecordPath(options_.data_dir, e.id));
      continue;
    }
    auto it = tasks_.find(e.id);
    if (it == tasks_.end()) {
      continue;
    }
    LocalTask& t = it->second;
    t.exited = true;
    t.exit_code = e.signal != 0 ? 0 : e.exit_code;
    t.signal = e.signal;
    ContainerEnded(t, e);
    std::optional<std::string> why = ReadTaskMarker(t.record, "lost");
    if (why && e.status_known && e.signal == SIGKILL) {
      // Killed by this agent's stop; a task that ended on its own just before keeps its
      // real outcome.
      t.lost = true;
      t.message = *why;
    } else if (!e.status_known) {
      t.lost = true;
      t.exit_code = 0;
      t.message = "its supervisor on the node was killed; how it ended is not known";
    } else if (e.fenced) {
      t.lost = true;
      t.message = "killed on the node after it lost the controller for longer than its lease";
    }
    if (!t.launch.checkpoint_dir.empty() && t.signalled_at > 0 &&
        CheckpointReportedSince(t.launch.checkpoint_dir, t.signalled_at)) {
      t.checkpointed = true;
    }
    ReleaseTask(t);
  }
  const Micros now = clock_->NowMicros();
  for (auto& [id, t] : tasks_) {
    if (t.exited || t.signalled_at == 0 || t.starting) {
      continue;
    }
    if (!t.checkpointed && !t.launch.checkpoint_dir.empty() &&
        CheckpointReportedSince(t.launch.checkpoint_dir, t.signalled_at)) {
      t.checkpointed = true;
    }
    if (!t.killed && now >= t.kill_at) {
      (void)launcher_->Signal(id, SIGKILL);
      t.killed = true;
    }
  }
}

size_t Agent::running_tasks() const {
  MutexLock lock(mu_);
  size_t n = 0;
  for (const auto& [id, t] : tasks_) {
    n += t.exited ? 0 : 1;
  }
  return n;
}

}  // namespace tessera
