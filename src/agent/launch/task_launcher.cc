#include "agent/launch/task_launcher.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <functional>
#include <future>
#include <optional>
#include <system_error>
#include <thread>
#include <utility>

#include "agent/launch/cpu_topology.h"
#include "agent/launch/pty_relay.h"
#include "agent/launch/shim_start.h"
#include "agent/launch/task_state_file.h"
#include "agent/launch/task_shim.h"
#include "base/clock.h"
#include "base/file_util.h"
#include "base/status.h"
#include "base/strings.h"

namespace tessera {
namespace {

// How long KillAll waits for shims, and Reap keeps killing leftovers of a shim that died.
constexpr int64_t kKillWaitMs = 5000;
constexpr auto kPollPause = std::chrono::milliseconds(10);

constexpr const char* kDefaultPath = "/usr/local/bin:/usr/bin:/bin";
constexpr std::array<const char*, 6> kBaseEnvKeys = {"PATH", "HOME", "USER",
                                                     "LANG", "TZ",   "TMPDIR"};

bool ValidId(std::string_view id) {
  if (id.empty() || id.size() > 200 || id.front() == '.') {
    return false;
  }
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
  });
}

bool HasNul(std::string_view s) { return s.find('\0') != std::string_view::npos; }

Status ValidateSpec(const LaunchSpec& spec) {
  if (!ValidId(spec.id)) {
    return InvalidArgumentError("task id '" + spec.id +
                                "' must be 1-200 characters of [A-Za-z0-9._-] not starting "
                                "with '.'");
  }
  if (spec.argv.empty() || spec.argv[0].empty()) {
    return InvalidArgumentError("task " + spec.id + ": argv must name a program");
  }
  for (const std::string& arg : spec.argv) {
    if (HasNul(arg)) {
      return InvalidArgumentError("task " + spec.id + ": argv holds a NUL byte");
    }
  }
  for (const auto& [key, value] : spec.env) {
    if (key.empty() || key.find('=') != std::string::npos || HasNul(key) || HasNul(value)) {
      return InvalidArgumentError("task " + spec.id + ": bad environment variable name '" + key +
                                  "'");
    }
  }
  if (spec.log_path.empty() || HasNul(spec.log_path) || HasNul(spec.working_dir)) {
    return InvalidArgumentError("task " + spec.id + ": log_path must be a file path");
  }
  for (int cpu : spec.cpus) {
    if (cpu < 0 || cpu >= kMaxCpuId) {
      return InvalidArgumentError("task " + spec.id + ": cpu " + std::to_string(cpu) +
                                  " out of range");
    }
  }
  if (spec.cpu_milli < 0 || spec.memory_mib < 0) {
    return InvalidArgumentError("task " + spec.id + ": cpu_milli and memory_mib must be >= 0");
  }
  if (spec.state_file.empty() || HasNul(spec.state_file)) {
    return InvalidArgumentError("task " + spec.id + ": state_file must be a file path");
  }
  constexpr int64_t kMaxId = 0xfffffffeLL;  // (uid_t)-1 means "unchanged" to the kernel
  if (spec.uid < -1 || spec.uid > kMaxId || spec.gid < -1 || spec.gid > kMaxId ||
      (spec.uid >= 0) != (spec.gid >= 0)) {
    return InvalidArgumentError("task " + spec.id +
                                ": uid and gid must both be -1 or both in [0, 4294967294]");
  }
  for (const std::string& path : spec.hidden_devices) {
    if (path.empty() || path.front() != '/' || HasNul(path)) {
      return InvalidArgumentError("task " + spec.id + ": hidden device '" + path +
                                  "' must be an absolute path");
    }
  }
  if (spec.lease_us < 0 ||
      (spec.lease_us > 0 && (spec.lease_file.empty() || spec.lease_file.front() != '/' ||
                             HasNul(spec.lease_file)))) {
    return InvalidArgumentError("task " + spec.id +
                                ": a lease needs lease_us >= 0 and an absolute lease_file");
  }
  return Status::Ok();
}

std::string Absolute(const std::string& path) {
  std::error_code ec;
  std::filesystem::path abs = std::filesystem::absolute(path, ec);
  return ec ? path : abs.lexically_normal().string();
}

struct ShimRecord {
  pid_t shim = 0;
  pid_t leader = 0;
  uint64_t starttime = 0;
};

std::optional<ShimRecord> ParseShimRecord(std::string_view text) {
  std::vector<std::string_view> fields = Split(Trim(text), ' ');
  if (fields.size() != 3) {
    return std::nullopt;
  }
  auto shim = ParseInt64(fields[0]);
  auto leader = ParseInt64(fields[1]);
  auto start = ParseInt64(fields[2]);
  if (!shim.ok() || !leader.ok() || !start.ok() || *shim <= 0 || *leader <= 0 || *start < 0 ||
      *shim > 0x7fffffff || *leader > 0x7fffffff) {
    return std::nullopt;
  }
  return ShimRecord{static_cast<pid_t>(*shim), static_cast<pid_t>(*leader),
                    static_cast<uint64_t>(*start)};
}

// Fills `exit` from the state file's end line; false when there is none (or it is not one).
bool ReadExit(const std::string& state_file, TaskExit* exit) {
  const std::string end = ReadTaskState(state_file).end;
  std::vector<std::string_view> fields = Split(end, ' ');
  if (fields.size() == 1 && fields[0] == "fenced") {
    exit->exit_code = -1;
    exit->signal = SIGKILL;
    exit->status_known = true;
    exit->fenced = true;
    return true;
  }
  if (fields.size() != 2) {
    return false;
  }
  auto value = ParseInt64(fields[1]);
  if (!value.ok() || *value < 0 || *value > 255) {
    return false;
  }
  if (fields[0] == "exit") {
    exit->exit_code = static_cast<int>(*value);
    exit->signal = 0;
  } else if (fields[0] == "signal") {
    exit->exit_code = -1;
    exit->signal = static_cast<int>(*value);
  } else {
    return false;
  }
  exit->status_known = true;
  return true;
}

bool Alive(pid_t pid, uint64_t starttime) {
  ProcStat stat;
  return ReadProcStat(pid, &stat) && stat.starttime == starttime && stat.state != 'Z' &&
         stat.state != 'X';
}

// True once the shim, this process's child, has exited (left a zombie, or was reaped by
// someone else).
bool ChildExited(pid_t pid) {
  siginfo_t info;
  std::memset(&info, 0, sizeof(info));
  int rc = ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT);
  if (rc != 0) {
    return errno != EINTR;
  }
  return info.si_pid != 0;
}

// The directory of the state file.
std::string StateParent(const std::string& state_file) {
  const std::filesystem::path path(state_file);
  return path.has_parent_path() ? path.parent_path().string() : ".";
}

// Makes the state file, durably (the shim's last line must survive a crash of the
// machine, and is then fdatasync'ed alone), or, for a new start of the same attempt,
// clears what an earlier start wrote in it, unless that start's shim still runs.
Status PrepareStateFile(const LaunchSpec& spec, ShimPlan* plan) {
  const std::string& path = plan->state_file;
  const std::string parent = StateParent(path);
  std::error_code ec;
  std::filesystem::create_directories(parent, ec);
  UniqueFd made(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (made.get() >= 0) {
    UniqueFd dir(::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (dir.get() < 0 || ::fsync(dir.get()) != 0) {
      return InternalError("task " + spec.id + ": cannot sync " + parent + ": " + ErrnoText(errno));
    }
  } else if (errno != EEXIST) {
    return InternalError("task " + spec.id + ": cannot create " + path + ": " + ErrnoText(errno));
  } else {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
      return InvalidArgumentError("task " + spec.id + ": state_file " + path +
                                  " is not a regular file");
    }
    const TaskStateLines old = ReadTaskState(path);
    std::optional<ShimRecord> shim = ParseShimRecord(old.shim);
    if (shim && Alive(shim->shim, shim->starttime)) {
      return AlreadyExistsError("task " + spec.id + ": the shim of an earlier start (pid " +
                                std::to_string(shim->shim) + ") still runs for " + path);
    }
    if (old.any) {
      TESSERA_RETURN_IF_ERROR(ClearStateFile(path));
    }
  }
  if (spec.lease_us > 0) {
    plan->lease_file = spec.lease_file;
    plan->lease_ns = spec.lease_us * 1000;
  }
  return Status::Ok();
}

// The task's stdin (/dev/null), its log (appended) and its working directory.
Status OpenStdio(const LaunchSpec& spec, ShimPlan* plan) {
  std::filesystem::path log_path(spec.log_path);
  if (log_path.has_parent_path()) {
    std::error_code ec;
    std::filesystem::create_directories(log_path.parent_path(), ec);
    if (ec) {
      return InternalError("task " + spec.id + ": cannot create the log directory " +
                           log_path.parent_path().string() + ": " + ec.message());
    }
  }
  plan->log_fd =
      UniqueFd(::open(spec.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (plan->log_fd.get() < 0) {
    return InternalError("task " + spec.id + ": cannot open log " + spec.log_path + ": " +
                         ErrnoText(errno));
  }
  plan->null_fd = UniqueFd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (plan->null_fd.get() < 0) {
    return InternalError("task " + spec.id + ": cannot open /dev/null: " + ErrnoText(errno));
  }
  // Absolute: the shim leaves the agent's working directory.
  plan->working_dir = spec.working_dir;
  if (plan->working_dir.empty()) {
    plan->working_dir = log_path.has_parent_path() ? log_path.parent_path().string() : ".";
  }
  plan->working_dir = Absolute(plan->working_dir);
  return Status::Ok();
}

// What the leader needs to exec: identity, argv, environment (the base, then the task's),
// program paths (searched in the task's PATH like execvp, but by the agent), CPU affinity.
void PlanExec(const LaunchSpec& spec, const std::map<std::string, std::string>& base_env,
              ShimPlan* plan) {
  if (spec.uid >= 0) {
    plan->uid = static_cast<uint32_t>(spec.uid);
    plan->gid = static_cast<uint32_t>(spec.gid);
    plan->set_ids = ::geteuid() == 0;
    plan->check_uid = true;
  }
  std::map<std::string, std::string> env = base_env;
  for (const auto& [key, value] : spec.env) {
    env[key] = value;
  }
  for (const auto& [key, value] : env) {
    plan->env_storage.push_back(key + "=" + value);
  }
  plan->argv_storage = spec.argv;
  for (std::string& s : plan->argv_storage) {
    plan->argv.push_back(s.data());
  }
  plan->argv.push_back(nullptr);
  for (std::string& s : plan->env_storage) {
    plan->envp.push_back(s.data());
  }
  plan->envp.push_back(nullptr);

  const std::string& program = spec.argv[0];
  if (program.find('/') != std::string::npos) {
    plan->candidates.push_back(program);
  } else {
    for (std::string_view dir : Split(env["PATH"], ':')) {
      if (!dir.empty()) {
        plan->candidates.push_back(std::string(dir) + "/" + program);
      }
    }
  }

  if (!spec.cpus.empty()) {
    constexpr size_t kBits = 8 * sizeof(unsigned long);
    int max_cpu = *std::max_element(spec.cpus.begin(), spec.cpus.end());
    // At least the size of cpu_set_t, as the kernel expects whole words.
    size_t words = std::max(static_cast<size_t>(max_cpu) / kBits + 1,
                            sizeof(cpu_set_t) / sizeof(unsigned long));
    plan->cpu_mask.assign(words, 0);
    for (int cpu : spec.cpus) {
      plan->cpu_mask[static_cast<size_t>(cpu) / kBits] |= 1UL << (static_cast<size_t>(cpu) % kBits);
    }
  }
}

// The device fence: the hidden devices that exist and the empty 0000 file mounted on them.
Status PrepareHiddenDevices(const LaunchSpec& spec, ShimPlan* plan) {
  for (const std::string& path : spec.hidden_devices) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0) {
      plan->hidden.push_back(path);
    }
  }
  if (!plan->hidden.empty()) {
    // One for every task of the directory: never written, only mounted over devices.
    plan->hidden_source = StateParent(plan->state_file) + "/hidden-device";
    UniqueFd fd(::open(plan->hidden_source.c_str(), O_RDONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0));
    if (fd.get() < 0 || ::fchmod(fd.get(), 0) != 0) {
      return InternalError("task " + spec.id + ": cannot create " + plan->hidden_source + ": " +
                           ErrnoText(errno));
    }
  }
  return Status::Ok();
}

// Creates the task's cgroup with its limits and opens it for the leader to join. Sets
// *cgroup_dir as soon as the cgroup exists, so that the caller removes it on failure.
Status PrepareCgroup(CgroupTree& cgroups, const LaunchSpec& spec, ShimPlan* plan,
                     std::string* cgroup_dir) {
  TESSERA_ASSIGN_OR_RETURN(*cgroup_dir,
                           cgroups.CreateTaskGroup(spec.id, spec.cpu_milli, spec.memory_mib));
  plan->cgroup_kill = *cgroup_dir + "/cgroup.kill";
  plan->cgroup_procs = *cgroup_dir + "/cgroup.procs";
  plan->cgroup_procs_fd = UniqueFd(::open(plan->cgroup_procs.c_str(), O_WRONLY | O_CLOEXEC));
  if (plan->cgroup_procs_fd.get() < 0) {
    return InternalError("task " + spec.id + ": cannot open " + plan->cgroup_procs + ": " +
                         ErrnoText(errno));
  }
  // Before the task exists, so a later launcher can always find its cgroup. Not synced:
  // after a crash of the machine the cgroup is gone too.
  return AppendStateLine(plan->state_file, "cgroup " + *cgroup_dir, /*durable=*/false);
}

}  // namespace

// The thread that forks every shim, alive as long as the launcher. It blocks all
// signals, which the children inherit: no handler of the agent can run in a child
// between fork and exec, and the shim keeps them blocked for its whole life.
class TaskLauncher::Spawner {
 public:
  Spawner() : thread_([this] { Loop(); }) {}
  ~Spawner() {
    {
      MutexLock lock(mu_);
      stop_ = true;
    }
    cv_.NotifyAll();
    thread_.join();
  }

  void Run(const std::function<void()>& fn) {
    std::packaged_task<void()> job(fn);
    std::future<void> done = job.get_future();
    {
      MutexLock lock(mu_);
      jobs_.push_back(std::move(job));
    }
    cv_.NotifyAll();
    done.get();
  }

 private:
  void Loop() {
    sigset_t all;
    ::sigfillset(&all);
    ::pthread_sigmask(SIG_SETMASK, &all, nullptr);
    while (true) {
      std::packaged_task<void()> job;
      {
        MutexLock lock(mu_);
        cv_.Wait(mu_, [this]() REQUIRES(mu_) { return stop_ || !jobs_.empty(); });
        if (jobs_.empty()) {
          return;
        }
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }

  Mutex mu_;
  CondVar cv_;
  std::deque<std::packaged_task<void()>> jobs_ GUARDED_BY(mu_);
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts after the members above exist
};

TaskLauncher::TaskLauncher() : TaskLauncher(Options{}) {}

TaskLauncher::TaskLauncher(Options options) : options_(std::move(options)) {
  for (const char* key : kBaseEnvKeys) {
    // Read once, at construction, before tasks start.
    if (const char* value = std::getenv(key)) {  // NOLINT(concurrency-mt-unsafe)
      base_env_[key] = value;
    }
  }
  if (base_env_.count("PATH") == 0) {
    base_env_["PATH"] = kDefaultPath;
  }
  if (options_.use_cgroups) {
    cgroups_ = std::make_unique<CgroupTree>(
        CgroupTree::Open(options_.cgroup_parent, options_.cgroups_without_controllers));
    for (const std::string& warning : cgroups_->warnings()) {
      warnings_.push_back(warning);
    }
  }
  spawner_ = std::make_unique<Spawner>();
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

TaskLauncher::~TaskLauncher() {
  spawner_.reset();
  MutexLock lock(mu_);
  RetryCgroupRemovals();
  CloseWatchFds();
}

void TaskLauncher::AddWarning(std::string text) {
  if (std::find(warnings_.begin(), warnings_.end(), text) == warnings_.end()) {
    warnings_.push_back(std::move(text));
  }
}

void TaskLauncher::RetryCgroupRemovals() {
  std::vector<std::string> still;
  for (const std::string& dir : pending_cgroup_removals_) {
    if (CgroupTree::RemoveTaskGroup(dir).code() == StatusCode::kUnavailable) {
      still.push_back(dir);
    }
  }
  pending_cgroup_removals_ = std::move(still);
}

namespace {

// SIGKILLs what is left of a task whose shim is gone; returns how many live processes
// it found. The shim's pid names the task's session only while it is not another
// process's: a pid stays reserved while a session or group uses it.
int KillLeftovers(pid_t shim, uint64_t starttime, const std::string& cgroup_dir) {
  pid_t session = shim;
  ProcStat stat;
  if (ReadProcStat(shim, &stat) && stat.starttime != starttime) {
    session = 0;
  }
  std::string kill_file = cgroup_dir.empty() ? "" : cgroup_dir + "/cgroup.kill";
  std::string procs_file = cgroup_dir.empty() ? "" : cgroup_dir + "/cgroup.procs";
  return KillTaskProcesses(session, 0, 0, kill_file.c_str(), procs_file.c_str());
}

// SIGKILLs a task whose shim runs: its group, its session and orphans (but not the
// shim, which records the end), its cgroup.
void KillLiveTask(pid_t shim, pid_t leader, const std::string& cgroup_dir) {
  if (leader > 1) {
    ::kill(-leader, SIGKILL);
  }
  std::string kill_file = cgroup_dir.empty() ? "" : cgroup_dir + "/cgroup.kill";
  std::string procs_file = cgroup_dir.empty() ? "" : cgroup_dir + "/cgroup.procs";
  (void)KillTaskProcesses(shim, shim, shim, kill_file.c_str(), procs_file.c_str());
}

}  // namespace

bool TaskLauncher::ShimEnded(Task& task) {
  if (task.ended) {
    return true;
  }
  if (task.child ? !ChildExited(task.shim_pid) : Alive(task.shim_pid, task.shim_starttime)) {
    return false;
  }
  task.ended = true;
  if (!ReadExit(task.state_file, &task.outcome)) {
    task.outcome.exit_code = -1;
    task.outcome.signal = 0;
    task.outcome.status_known = false;
    task.leftovers = true;
    task.give_up_at_ms = MonotonicMillis() + kKillWaitMs;
  }
  return true;
}

StatusOr<int> TaskLauncher::Start(const LaunchSpec& spec) {
  TESSERA_RETURN_IF_ERROR(ValidateSpec(spec));
  if (spec.uid >= 0 && ::geteuid() != 0 &&
      (static_cast<uid_t>(spec.uid) != ::getuid() || static_cast<gid_t>(spec.gid) != ::getgid())) {
    return PermissionDeniedError("task " + spec.id + ": cannot run as uid " +
                                 std::to_string(spec.uid) + " gid " + std::to_string(spec.gid) +
                                 ": the agent is not root");
  }
  {
    MutexLock lock(mu_);
    if (tasks_.count(spec.id) != 0 || starting_.count(spec.id) != 0) {
      return AlreadyExistsError("task " + spec.id + " is already running");
    }
    starting_.insert(spec.id);
    if (!options_.use_cgroups && (spec.cpu_milli > 0 || spec.memory_mib > 0)) {
      AddWarning("cgroups are disabled: CPU and memory limits are not enforced");
    }
  }
  std::string cgroup_dir;
  int pty_port = 0;
  ShimPlan plan;
  plan.state_file = Absolute(spec.state_file);
  auto finish = [&](StatusOr<Spawned> result) -> StatusOr<int> {
    MutexLock lock(mu_);
    starting_.erase(spec.id);
    if (!result.ok()) {
      if (!cgroup_dir.empty() &&
          CgroupTree::RemoveTaskGroup(cgroup_dir).code() == StatusCode::kUnavailable) {
        pending_cgroup_removals_.push_back(cgroup_dir);
      }
      return result.status();
    }
    Task task;
    task.shim_pid = result->shim;
    task.leader_pid = result->leader;
    ProcStat stat;
    task.shim_starttime = ReadProcStat(result->shim, &stat) ? stat.starttime : 0;
    task.child = true;
    task.state_file = plan.state_file;
    task.cgroup_dir = cgroup_dir;
    task.outcome.id = spec.id;
    task.outcome.pid = result->leader;
    task.pty_port = pty_port;
    tasks_[spec.id] = std::move(task);
    Interrupt();  // watch it too
    return static_cast<int>(result->leader);
  };

  if (Status prepared = PrepareStateFile(spec, &plan); !prepared.ok()) {
    return finish(prepared);
  }
  if (Status opened = OpenStdio(spec, &plan); !opened.ok()) {
    return finish(opened);
  }
  PlanExec(spec, base_env_, &plan);
  if (Status fenced = PrepareHiddenDevices(spec, &plan); !fenced.ok()) {
    return finish(fenced);
  }
  if (cgroups_ != nullptr && cgroups_->usable()) {
    if (Status grouped = PrepareCgroup(*cgroups_, spec, &plan, &cgroup_dir); !grouped.ok()) {
      return finish(grouped);
    }
  }
  if (!spec.pty_secret.empty()) {
    if (Status pty = OpenPtyEndpoint(spec, &plan, &pty_port); !pty.ok()) {
      return finish(pty);
    }
  }

  StatusOr<Spawned> spawned = InternalError("not spawned");
  if (!options_.shim_program.empty()) {
    spawned = SpawnShim(spec, plan, options_.shim_program);
  } else {
    spawner_->Run([&] { spawned = ForkShim(spec, plan); });
  }
  return finish(std::move(spawned));
}

Status TaskLauncher::Adopt(const std::string& id, const std::string& state_file) {
  if (!ValidId(id)) {
    return InvalidArgumentError("task id '" + id + "' is not valid");
  }
  const std::string path = Absolute(state_file);
  const TaskStateLines state = ReadTaskState(path);
  if (state.shim.empty()) {
    return NotFoundError("task " + id + ": no shim recorded in " + path);
  }
  std::optional<ShimRecord> record = ParseShimRecord(state.shim);
  if (!record) {
    return InvalidArgumentError("task " + id + ": cannot parse the shim line of " + path);
  }
  Task task;
  task.shim_pid = record->shim;
  task.leader_pid = record->leader;
  task.shim_starttime = record->starttime;
  task.state_file = path;
  task.cgroup_dir = state.cgroup;
  task.outcome.id = id;
  task.outcome.pid = record->leader;
  ProcStat stat;
  // A shim this process forked (an earlier launcher of the same agent) is still its child.
  task.child = ReadProcStat(task.shim_pid, &stat) && stat.starttime == task.shim_starttime &&
               stat.ppid == ::getpid();

  MutexLock lock(mu_);
  if (tasks_.count(id) != 0 || starting_.count(id) != 0) {
    return AlreadyExistsError("task " + id + " is already known");
  }
  if (ShimEnded(task) && task.leftovers) {
    (void)KillLeftovers(task.shim_pid, task.shim_starttime, task.cgroup_dir);
  }
  tasks_[id] = std::move(task);
  Interrupt();  // watch it too
  return Status::Ok();
}

int TaskLauncher::PtyPort(std::string_view id) const {
  MutexLock lock(mu_);
  auto it = tasks_.find(id);
  return it == tasks_.end() ? 0 : it->second.pty_port;
}

Status TaskLauncher::Signal(std::string_view id, int signal) {
  if (signal < 0 || signal >= NSIG) {
    return InvalidArgumentError("no such signal " + std::to_string(signal));
  }
  MutexLock lock(mu_);
  auto it = tasks_.find(id);
  if (it == tasks_.end()) {
    return NotFoundError("no running task " + std::string(id));
  }
  // While the shim runs it holds the leader's zombie until it has killed the group, so
  // the group id is not reused under us.
  if (ShimEnded(it->second) || ::kill(-it->second.leader_pid, signal) != 0) {
    if (it->second.ended || errno == ESRCH) {
      return NotFoundError("task " + std::string(id) + " has no processes left");
    }
    return InternalError("cannot signal task " + std::string(id) + ": " + ErrnoText(errno));
  }
  return Status::Ok();
}

Status TaskLauncher::Kill(std::string_view id) {
  MutexLock lock(mu_);
  auto it = tasks_.find(id);
  if (it == tasks_.end()) {
    return NotFoundError("no running task " + std::string(id));
  }
  Task& task = it->second;
  if (ShimEnded(task)) {
    if (task.leftovers) {
      (void)KillLeftovers(task.shim_pid, task.shim_starttime, task.cgroup_dir);
    }
  } else {
    KillLiveTask(task.shim_pid, task.leader_pid, task.cgroup_dir);
  }
  return Status::Ok();
}

void TaskLauncher::KillAll() {
  struct Shim {
    pid_t pid;
    uint64_t starttime;
    bool child;
  };
  std::vector<Shim> shims;
  {
    MutexLock lock(mu_);
    for (auto& [id, task] : tasks_) {
      if (ShimEnded(task)) {
        if (task.leftovers) {
          (void)KillLeftovers(task.shim_pid, task.shim_starttime, task.cgroup_dir);
        }
        continue;
      }
      KillLiveTask(task.shim_pid, task.leader_pid, task.cgroup_dir);
      shims.push_back({task.shim_pid, task.shim_starttime, task.child});
    }
  }
  for (int64_t end = MonotonicMillis() + kKillWaitMs; !shims.empty() && MonotonicMillis() < end;) {
    std::this_thread::sleep_for(kPollPause);
    // A concurrent Reap may reap a child shim: ChildExited then sees ECHILD.
    shims.erase(std::remove_if(shims.begin(), shims.end(),
                               [](const Shim& s) {
                                 return s.child ? ChildExited(s.pid) : !Alive(s.pid, s.starttime);
                               }),
                shims.end());
  }
}

std::vector<TaskExit> TaskLauncher::Reap() {
  std::vector<TaskExit> exits;
  MutexLock lock(mu_);
  for (auto it = tasks_.begin(); it != tasks_.end();) {
    Task& task = it->second;
    if (!ShimEnded(task)) {
      ++it;
      continue;
    }
    // Without an end line the shim did not finish its work: finish it here, holding the
    // shim's zombie (when it is ours) so its pid keeps naming the task's session.
    if (task.leftovers && KillLeftovers(task.shim_pid, task.shim_starttime, task.cgroup_dir) > 0 &&
        MonotonicMillis() < task.give_up_at_ms) {
      ++it;
      continue;
    }
    if (task.child) {
      ReapChild(task.shim_pid);
    }
    if (!task.cgroup_dir.empty()) {
      pending_cgroup_removals_.push_back(task.cgroup_dir);
    }
    exits.push_back(std::move(task.outcome));
    if (task.pidfd >= 0) {
      retired_pidfds_.push_back(task.pidfd);
    }
    it = tasks_.erase(it);
  }
  RetryCgroupRemovals();
  return exits;
}

}  // namespace tessera
