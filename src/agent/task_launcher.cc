#include "agent/task_launcher.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <functional>
#include <future>
#include <system_error>
#include <thread>
#include <utility>

#include "agent/cpu_topology.h"
#include "base/strings.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

namespace tessera {
namespace {

constexpr const char* kDefaultPath = "/usr/local/bin:/usr/bin:/bin";
constexpr std::array<const char*, 6> kBaseEnvKeys = {"PATH", "HOME", "USER",
                                                     "LANG", "TZ",   "TMPDIR"};

// Thread-safe, unlike std::strerror.
std::string ErrnoText(int err) { return std::generic_category().message(err); }

// An owned file descriptor.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) {
      Reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { Reset(); }
  int get() const { return fd_; }
  void Reset() {
    if (fd_ >= 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }

 private:
  int fd_ = -1;
};

// Where the child failed before exec; sent through the error pipe with its errno.
enum ChildStage : int32_t {
  kStageGroup = 1,
  kStageDeathSignal,
  kStageCgroup,
  kStageStdio,
  kStageAffinity,
  kStageWorkingDir,
  kStageExec,
};

struct ChildError {
  int32_t stage;
  int32_t err;
};

// Everything the child needs, prepared before fork: between fork and exec the child of a
// multi-threaded process may only make async-signal-safe calls (no allocation).
struct ExecPlan {
  std::vector<std::string> argv_storage;
  std::vector<std::string> env_storage;
  std::vector<std::string> candidates;  // program paths to try, in order
  std::vector<char*> argv;
  std::vector<char*> envp;
  std::string working_dir;
  std::vector<unsigned long> cpu_mask;  // empty: inherit affinity
  UniqueFd log_fd;
  UniqueFd null_fd;
  UniqueFd cgroup_procs_fd;
};

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
  return Status::Ok();
}

// The decimal text of a pid, made without allocating (the child may not allocate).
struct PidText {
  std::array<char, 24> chars{};
  size_t size = 0;
};

PidText FormatPid(pid_t value) {
  std::array<char, 24> reversed{};
  size_t n = 0;
  auto v = static_cast<unsigned long>(value);
  do {
    reversed[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0 && n < reversed.size());
  PidText text;
  for (size_t i = 0; i < n; ++i) {
    text.chars[i] = reversed[n - 1 - i];
  }
  text.size = n;
  return text;
}

[[noreturn]] void ChildFail(int err_fd, ChildStage stage, int err) {
  ChildError report{stage, err};
  ssize_t ignored = ::write(err_fd, &report, sizeof(report));
  (void)ignored;
  ::_exit(127);
}

// Runs in the forked child. Only async-signal-safe calls from here on.
[[noreturn]] void ChildMain(const ExecPlan& plan, int err_fd, pid_t agent_pid) {
  if (::setpgid(0, 0) != 0) {
    ChildFail(err_fd, kStageGroup, errno);
  }
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) {
    ChildFail(err_fd, kStageDeathSignal, errno);
  }
  if (::getppid() != agent_pid) {
    ::_exit(127);  // the agent died before the death signal was armed
  }
  if (plan.cgroup_procs_fd.get() >= 0) {
    PidText pid = FormatPid(::getpid());
    if (::write(plan.cgroup_procs_fd.get(), pid.chars.data(), pid.size) < 0) {
      ChildFail(err_fd, kStageCgroup, errno);
    }
  }
  if (::dup2(plan.null_fd.get(), STDIN_FILENO) < 0 ||
      ::dup2(plan.log_fd.get(), STDOUT_FILENO) < 0 ||
      ::dup2(plan.log_fd.get(), STDERR_FILENO) < 0) {
    ChildFail(err_fd, kStageStdio, errno);
  }
  if (!plan.cpu_mask.empty()) {
    size_t bytes = plan.cpu_mask.size() * sizeof(unsigned long);
    if (::sched_setaffinity(0, bytes, reinterpret_cast<const cpu_set_t*>(plan.cpu_mask.data())) !=
        0) {
      ChildFail(err_fd, kStageAffinity, errno);
    }
  }
  if (::chdir(plan.working_dir.c_str()) != 0) {
    ChildFail(err_fd, kStageWorkingDir, errno);
  }
  // Descriptors another thread opened without O_CLOEXEC must not leak into the task.
  ::syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC);
  // Handlers and ignored signals of the agent must not reach the task. The forking thread
  // blocks every signal, so none can run a handler of the agent in here.
  struct sigaction dfl {};
  dfl.sa_handler = nullptr;  // SIG_DFL
  ::sigemptyset(&dfl.sa_mask);
  for (int sig = 1; sig < NSIG; ++sig) {
    ::sigaction(sig, &dfl, nullptr);  // fails harmlessly for SIGKILL, SIGSTOP
  }
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);  // NOLINT(concurrency-mt-unsafe): one thread here

  int err = ENOENT;
  bool denied = false;
  for (const std::string& path : plan.candidates) {
    ::execve(path.c_str(), plan.argv.data(), plan.envp.data());
    err = errno;
    if (err == EACCES) {
      denied = true;
    } else if (err != ENOENT && err != ENOTDIR && err != ESTALE && err != ELOOP &&
               err != ENAMETOOLONG) {
      break;
    }
  }
  ChildFail(err_fd, kStageExec, denied && err != ENOEXEC ? EACCES : err);
}

Status ChildErrorStatus(const LaunchSpec& spec, const ChildError& error) {
  std::string task = "task " + spec.id + ": ";
  std::string text = ErrnoText(error.err);
  switch (error.stage) {
    case kStageExec:
      if (error.err == ENOENT) {
        return NotFoundError(task + "cannot run '" + spec.argv[0] + "': no such program");
      }
      if (error.err == EACCES) {
        return PermissionDeniedError(task + "cannot run '" + spec.argv[0] + "': permission denied");
      }
      return FailedPreconditionError(task + "cannot run '" + spec.argv[0] + "': " + text);
    case kStageWorkingDir:
      if (error.err == ENOENT || error.err == ENOTDIR) {
        return NotFoundError(task + "no working directory " + spec.working_dir);
      }
      return FailedPreconditionError(task + "cannot enter working directory: " + text);
    case kStageAffinity:
      if (error.err == EINVAL) {
        return InvalidArgumentError(task + "none of cpus " + FormatCpuList(spec.cpus) +
                                    " is usable on this machine");
      }
      return InternalError(task + "cannot set the CPU affinity: " + text);
    case kStageCgroup:
      return InternalError(task + "cannot enter its cgroup: " + text);
    case kStageStdio:
      return InternalError(task + "cannot redirect stdio: " + text);
    case kStageGroup:
      return InternalError(task + "cannot create its process group: " + text);
    case kStageDeathSignal:
      return InternalError(task + "cannot set its parent-death signal: " + text);
    default:
      return InternalError(task + "failed before exec: " + text);
  }
}

// Forks and execs `plan`; runs on the Spawner thread. Returns the pid or the child's error.
StatusOr<int> ForkExec(const LaunchSpec& spec, const ExecPlan& plan) {
  std::array<int, 2> fds{};
  if (::pipe2(fds.data(), O_CLOEXEC) != 0) {
    return InternalError("task " + spec.id + ": pipe: " + ErrnoText(errno));
  }
  UniqueFd read_end(fds[0]);
  UniqueFd write_end(fds[1]);
  pid_t agent_pid = ::getpid();
  pid_t pid = ::fork();
  if (pid == 0) {
    ChildMain(plan, write_end.get(), agent_pid);
  }
  write_end.Reset();
  if (pid < 0) {
    return ResourceExhaustedError("task " + spec.id + ": fork: " + ErrnoText(errno));
  }
  // Also from this side, so Signal works even before the child got to its setpgid; fails
  // harmlessly (EACCES) once the child has exec'd.
  ::setpgid(pid, pid);

  ChildError error{};
  size_t got = 0;
  while (got < sizeof(error)) {
    ssize_t n = ::read(read_end.get(), reinterpret_cast<char*>(&error) + got, sizeof(error) - got);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      break;
    }
    got += static_cast<size_t>(n);
  }
  if (got == 0) {
    return static_cast<int>(pid);  // the pipe closed on exec: the program runs
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (got < sizeof(error)) {
    return InternalError("task " + spec.id + ": lost the child's error report");
  }
  return ChildErrorStatus(spec, error);
}

}  // namespace

// The thread that forks every task, alive as long as the launcher: PR_SET_PDEATHSIG
// fires when the forking thread exits, so forking on callers' (possibly short-lived)
// threads would kill tasks early. It blocks all signals, which the children inherit
// until they reset them.
class TaskLauncher::Spawner {
 public:
  Spawner() : thread_([this] { Loop(); }) {}
  ~Spawner() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  StatusOr<int> Run(const std::function<StatusOr<int>()>& fn) {
    std::packaged_task<StatusOr<int>()> job(fn);
    std::future<StatusOr<int>> result = job.get_future();
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.push_back(std::move(job));
    }
    cv_.notify_all();
    return result.get();
  }

 private:
  void Loop() {
    sigset_t all;
    ::sigfillset(&all);
    ::pthread_sigmask(SIG_SETMASK, &all, nullptr);
    while (true) {
      std::packaged_task<StatusOr<int>()> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
        if (jobs_.empty()) {
          return;
        }
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::packaged_task<StatusOr<int>()>> jobs_;
  bool stop_ = false;
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
}

TaskLauncher::~TaskLauncher() {
  spawner_.reset();
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [id, task] : tasks_) {
    ::kill(-task.pid, SIGKILL);
    int status = 0;
    while (::waitpid(task.pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!task.cgroup_dir.empty()) {
      pending_cgroup_removals_.push_back(task.cgroup_dir);
    }
  }
  tasks_.clear();
  // Bounded: processes killed in a cgroup leave it within milliseconds.
  for (int attempt = 0; attempt < 200 && !pending_cgroup_removals_.empty(); ++attempt) {
    if (attempt > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    RetryCgroupRemovals();
  }
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

StatusOr<int> TaskLauncher::Start(const LaunchSpec& spec) {
  TESSERA_RETURN_IF_ERROR(ValidateSpec(spec));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (tasks_.count(spec.id) != 0 || starting_.count(spec.id) != 0) {
      return AlreadyExistsError("task " + spec.id + " is already running");
    }
    starting_.insert(spec.id);
    if (!options_.use_cgroups && (spec.cpu_milli > 0 || spec.memory_mib > 0)) {
      AddWarning("cgroups are disabled: CPU and memory limits are not enforced");
    }
  }
  std::string cgroup_dir;
  auto finish = [&](StatusOr<int> result) -> StatusOr<int> {
    std::lock_guard<std::mutex> lock(mu_);
    starting_.erase(spec.id);
    if (result.ok()) {
      tasks_[spec.id] = Task{*result, cgroup_dir};
    } else if (!cgroup_dir.empty()) {
      if (CgroupTree::RemoveTaskGroup(cgroup_dir).code() == StatusCode::kUnavailable) {
        pending_cgroup_removals_.push_back(cgroup_dir);
      }
    }
    return result;
  };

  ExecPlan plan;
  // Log file, appended; its directory is the default working directory.
  std::filesystem::path log_path(spec.log_path);
  std::error_code ec;
  if (log_path.has_parent_path()) {
    std::filesystem::create_directories(log_path.parent_path(), ec);
    if (ec) {
      return finish(InternalError("task " + spec.id + ": cannot create the log directory " +
                                  log_path.parent_path().string() + ": " + ec.message()));
    }
  }
  plan.log_fd =
      UniqueFd(::open(spec.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (plan.log_fd.get() < 0) {
    return finish(InternalError("task " + spec.id + ": cannot open log " + spec.log_path + ": " +
                                ErrnoText(errno)));
  }
  plan.null_fd = UniqueFd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (plan.null_fd.get() < 0) {
    return finish(
        InternalError("task " + spec.id + ": cannot open /dev/null: " + ErrnoText(errno)));
  }
  plan.working_dir = spec.working_dir;
  if (plan.working_dir.empty()) {
    plan.working_dir = log_path.has_parent_path() ? log_path.parent_path().string() : ".";
  }

  // Environment: the base, then the task's own variables.
  std::map<std::string, std::string> env = base_env_;
  for (const auto& [key, value] : spec.env) {
    env[key] = value;
  }
  for (const auto& [key, value] : env) {
    plan.env_storage.push_back(key + "=" + value);
  }
  plan.argv_storage = spec.argv;
  for (std::string& s : plan.argv_storage) {
    plan.argv.push_back(s.data());
  }
  plan.argv.push_back(nullptr);
  for (std::string& s : plan.env_storage) {
    plan.envp.push_back(s.data());
  }
  plan.envp.push_back(nullptr);

  // Program candidates, searched in the task's PATH like execvp, but in this process.
  const std::string& program = spec.argv[0];
  if (program.find('/') != std::string::npos) {
    plan.candidates.push_back(program);
  } else {
    for (std::string_view dir : Split(env["PATH"], ':')) {
      if (!dir.empty()) {
        plan.candidates.push_back(std::string(dir) + "/" + program);
      }
    }
  }

  if (!spec.cpus.empty()) {
    constexpr size_t kBits = 8 * sizeof(unsigned long);
    int max_cpu = *std::max_element(spec.cpus.begin(), spec.cpus.end());
    // At least the size of cpu_set_t, as the kernel expects whole words.
    size_t words = std::max(static_cast<size_t>(max_cpu) / kBits + 1,
                            sizeof(cpu_set_t) / sizeof(unsigned long));
    plan.cpu_mask.assign(words, 0);
    for (int cpu : spec.cpus) {
      plan.cpu_mask[static_cast<size_t>(cpu) / kBits] |= 1UL << (static_cast<size_t>(cpu) % kBits);
    }
  }

  if (cgroups_ != nullptr && cgroups_->usable()) {
    auto dir = cgroups_->CreateTaskGroup(spec.id, spec.cpu_milli, spec.memory_mib);
    if (!dir.ok()) {
      return finish(dir.status());
    }
    cgroup_dir = *dir;
    plan.cgroup_procs_fd =
        UniqueFd(::open((cgroup_dir + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC));
    if (plan.cgroup_procs_fd.get() < 0) {
      return finish(InternalError("task " + spec.id + ": cannot open " + cgroup_dir +
                                  "/cgroup.procs: " + ErrnoText(errno)));
    }
  }

  return finish(spawner_->Run([&] { return ForkExec(spec, plan); }));
}

Status TaskLauncher::Signal(std::string_view id, int signal) {
  if (signal < 0 || signal >= NSIG) {
    return InvalidArgumentError("no such signal " + std::to_string(signal));
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = tasks_.find(id);
  if (it == tasks_.end()) {
    return NotFoundError("no running task " + std::string(id));
  }
  // The leader is not reaped before Reap holds mu_, so its pid still names the group.
  if (::kill(-it->second.pid, signal) != 0) {
    if (errno == ESRCH) {
      return NotFoundError("task " + std::string(id) + " has no processes left");
    }
    return InternalError("cannot signal task " + std::string(id) + ": " + ErrnoText(errno));
  }
  return Status::Ok();
}

std::vector<TaskExit> TaskLauncher::Reap() {
  std::vector<TaskExit> exits;
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = tasks_.begin(); it != tasks_.end();) {
    const pid_t pid = it->second.pid;
    siginfo_t info;
    std::memset(&info, 0, sizeof(info));
    // WNOWAIT: learn of the exit but keep the zombie, which keeps the process group id
    // from being reused while the rest of the group is killed.
    int rc = ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT);
    TaskExit exit{it->first, pid, -1, 0};
    if (rc != 0 && errno == EINTR) {
      ++it;
      continue;
    }
    if (rc == 0) {
      if (info.si_pid == 0) {
        ++it;  // still running
        continue;
      }
      if (info.si_code == CLD_EXITED) {
        exit.exit_code = info.si_status;
      } else {
        exit.signal = info.si_status;
      }
      ::kill(-pid, SIGKILL);  // what is left of the task
      int status = 0;
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
    }
    // rc != 0 (ECHILD): someone else reaped it; the exit status is unknown (-1, 0).
    if (!it->second.cgroup_dir.empty()) {
      pending_cgroup_removals_.push_back(it->second.cgroup_dir);
    }
    exits.push_back(std::move(exit));
    it = tasks_.erase(it);
  }
  RetryCgroupRemovals();
  return exits;
}

bool TaskLauncher::Running(std::string_view id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return tasks_.find(id) != tasks_.end();
}

std::string TaskLauncher::CgroupOf(std::string_view id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = tasks_.find(id);
  return it == tasks_.end() ? std::string() : it->second.cgroup_dir;
}

std::vector<std::string> TaskLauncher::Warnings() const {
  std::lock_guard<std::mutex> lock(mu_);
  return warnings_;
}

}  // namespace tessera
