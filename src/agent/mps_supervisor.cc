#include "agent/mps_supervisor.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>
#include <utility>

#include "agent/task_sandbox.h"

namespace tessera {
namespace {

constexpr char kPidFile[] = "nvidia-cuda-mps-control.pid";
// The pid of the daemon this agent started, beside its pipe and log directories.
constexpr char kStartedPidFile[] = "control.pid";

class SystemMpsProcessOps final : public MpsProcessOps {
 public:
  std::string Find(const std::string& program) override {
    if (program.find('/') != std::string::npos) {
      return ::access(program.c_str(), X_OK) == 0 ? program : "";
    }
    const char* path = std::getenv("PATH");
    std::stringstream dirs(path != nullptr ? path : "/usr/bin:/bin");
    std::string dir;
    while (std::getline(dirs, dir, ':')) {
      std::string p = (dir.empty() ? "." : dir) + "/" + program;
      struct stat st {};
      if (::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0) {
        return p;
      }
    }
    return "";
  }

  StatusOr<int> Start(const std::vector<std::string>& argv,
                      const std::map<std::string, std::string>& env, const std::string& input,
                      const std::string& output) override {
    std::vector<std::string> envs;
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
      std::string_view kv(*e);
      const std::string key(kv.substr(0, kv.find('=')));
      if (env.count(key) == 0) {
        envs.emplace_back(kv);
      }
    }
    for (const auto& [k, v] : env) {
      envs.push_back(k + "=" + v);
    }
    std::vector<char*> cargv;
    for (const std::string& a : argv) {
      cargv.push_back(const_cast<char*>(a.c_str()));
    }
    cargv.push_back(nullptr);
    std::vector<char*> cenv;
    for (std::string& e : envs) {
      cenv.push_back(e.data());
    }
    cenv.push_back(nullptr);

    int in[2] = {-1, -1};
    if (!input.empty() && ::pipe2(in, O_CLOEXEC) != 0) {
      return InternalError(std::string("pipe: ") + std::strerror(errno));
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (input.empty()) {
      posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    } else {
      posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    }
    const std::string out = output.empty() ? "/dev/null" : output;
    posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
    // The daemon outlives an agent that keeps its tasks: none of the agent's descriptors
    // (its connections to the controller) may stay open in it.
    posix_spawn_file_actions_addclosefrom_np(&fa, 3);
#endif
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    // Its own session: a terminal's ^C for the agent does not reach the daemon. Default
    // signal dispositions and an empty mask, whatever the spawning thread blocks.
    sigset_t none;
    sigemptyset(&none);
    sigset_t all;
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setflags(&attr,
                             POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    pid_t pid = -1;
    const int rc = ::posix_spawn(&pid, argv[0].c_str(), &fa, &attr, cargv.data(), cenv.data());
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    if (!input.empty()) {
      ::close(in[0]);
      if (rc == 0) {
        // Commands are a few bytes: they fit the pipe's buffer, so this never blocks.
        (void)!::write(in[1], input.data(), input.size());
      }
      ::close(in[1]);
    }
    if (rc != 0) {
      return FailedPreconditionError("cannot start " + argv[0] + ": " + std::strerror(rc));
    }
    return static_cast<int>(pid);
  }

  bool Ended(int pid) override {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      return true;
    }
    if (r == 0) {
      return false;
    }
    // Not our child (adopted from an earlier agent): is it still there?
    return ::kill(pid, 0) != 0 && errno == ESRCH;
  }

  void Signal(int pid, int signal) override {
    if (pid > 0) {
      ::kill(pid, signal);
    }
  }

  std::string CommandLine(int pid) override {
    std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
    std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    while (!raw.empty() && raw.back() == '\0') {
      raw.pop_back();
    }
    std::replace(raw.begin(), raw.end(), '\0', ' ');
    return raw;
  }

  void Pause(Micros us) override { std::this_thread::sleep_for(std::chrono::microseconds(us)); }
};

}  // namespace

std::unique_ptr<MpsProcessOps> MakeSystemMpsProcessOps() {
  return std::make_unique<SystemMpsProcessOps>();
}

MpsSupervisor::MpsSupervisor(MpsSupervisorOptions options, const Clock* clock,
                             std::unique_ptr<MpsProcessOps> ops)
    : options_(std::move(options)), clock_(clock), ops_(std::move(ops)) {}

MpsDirs MpsSupervisor::DirsOf(int gpu) const {
  const std::string base = options_.root + "/" + std::to_string(gpu);
  return MpsDirs{base + "/pipe", base + "/log"};
}

std::map<std::string, std::string> MpsSupervisor::Env(const Daemon& d) const {
  return {{"CUDA_VISIBLE_DEVICES", d.s.uuid},
          {"CUDA_MPS_PIPE_DIRECTORY", d.s.dirs.pipe},
          {"CUDA_MPS_LOG_DIRECTORY", d.s.dirs.log}};
}

void MpsSupervisor::Refuse(Daemon& d, const std::string& problem) {
  d.s.problem = problem;
  if (d.logged != problem) {
    std::cerr << "tessera agent: MPS: " << problem << "\n";
    d.logged = problem;
  }
}

Status MpsSupervisor::Reconcile(const std::vector<SharedGpu>& shared) {
  std::map<int, const SharedGpu*> wanted;
  for (const SharedGpu& g : shared) {
    wanted[g.index] = &g;
  }
  if (!swept_) {
    swept_ = true;
    StopLeftovers(wanted);
  }
  for (auto it = daemons_.begin(); it != daemons_.end();) {
    auto w = wanted.find(it->first);
    if (w == wanted.end() || w->second->uuid != it->second.s.uuid || w->second->mig) {
      if (it->second.s.pid > 0) {
        std::cerr << "tessera agent: MPS: GPU " << it->first
                  << " left shared mode; stopping its control daemon (pid " << it->second.s.pid
                  << ")\n";
      }
      StopDaemon(it->second);
      it = daemons_.erase(it);
    } else {
      ++it;
    }
  }
  Status first = Status::Ok();
  for (const SharedGpu& g : shared) {
    auto [it, added] = daemons_.try_emplace(g.index);
    Daemon& d = it->second;
    if (added) {
      d.s.gpu = g.index;
      d.s.uuid = g.uuid;
      d.s.dirs = DirsOf(g.index);
      if (g.mig) {
        Refuse(d, "GPU " + std::to_string(g.index) +
                      " is in MIG mode; MPS is not available on MIG instances");
      } else if (Status begun = Begin(d); !begun.ok()) {
        Refuse(d, begun.message());
      }
    } else if (!d.s.problem.empty() && !g.mig && d.s.pid < 0) {
      // Refused before (no program, a directory): tried again at each discovery.
      if (Status begun = Begin(d); !begun.ok()) {
        Refuse(d, begun.message());
      }
    }
    if (!d.s.problem.empty() && first.ok()) {
      first = FailedPreconditionError(d.s.problem);
    }
  }
  return first;
}

void MpsSupervisor::StopLeftovers(const std::map<int, const SharedGpu*>& wanted) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(options_.root, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.size() > 4 ||
        !std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      continue;
    }
    const int gpu = std::stoi(name);
    auto w = wanted.find(gpu);
    if (w != wanted.end() && !w->second->mig) {
      continue;  // adopted (or started) by Begin
    }
    Daemon d;
    d.s.gpu = gpu;
    d.s.dirs = DirsOf(gpu);
    std::ifstream in(d.s.dirs.pipe + "/" + kPidFile);
    int pid = 0;
    if (in >> pid && pid > 0 && !ops_->Ended(pid) &&
        ops_->CommandLine(pid).find("nvidia-cuda-mps-control") != std::string::npos) {
      std::cerr << "tessera agent: MPS: GPU " << gpu
                << " is not shared now; stopping the control daemon an earlier agent left (pid "
                << pid << ")\n";
      d.s.pid = pid;
      StopDaemon(d);
    }
  }
}

Status MpsSupervisor::Begin(Daemon& d) {
  const std::string gpu = "GPU " + std::to_string(d.s.gpu);
  if (ops_->Find(options_.program).empty()) {
    return FailedPreconditionError(gpu + ": " + options_.program +
                                   " is not found (install the NVIDIA utilities or give the "
                                   "agent --mps-control PATH); its shares run without MPS");
  }
  const std::string base = options_.root + "/" + std::to_string(d.s.gpu);
  for (const auto& [dir, mode] : std::vector<std::pair<std::string, unsigned>>{
           {options_.root, 0755}, {base, 0755}, {d.s.dirs.pipe, 0755}, {d.s.dirs.log, 0700}}) {
    if (Status made = MakeDirs(dir, mode); !made.ok()) {
      return FailedPreconditionError(gpu + ": MPS directory: " + made.message());
    }
    ::chmod(dir.c_str(), mode);  // whatever the umask, or an earlier agent, made
  }
  // A daemon an earlier agent left running on this pipe directory is adopted: by the
  // daemon's own pid file, or by the agent's record of the pid it started (an agent
  // stopped just after a start may leave before the daemon writes its file).
  for (const std::string& file : {d.s.dirs.pipe + "/" + kPidFile, base + "/" + kStartedPidFile}) {
    std::ifstream in(file);
    int pid = 0;
    if (!(in >> pid) || pid <= 0 || ops_->Ended(pid) ||
        ops_->CommandLine(pid).find("nvidia-cuda-mps-control") == std::string::npos) {
      continue;
    }
    d.s.pid = pid;
    d.s.adopted = true;
    d.started_at = clock_->NowMicros();
    std::cerr << "tessera agent: MPS: GPU " << d.s.gpu
              << ": adopted the running control daemon (pid " << pid << ")\n";
    return Status::Ok();
  }
  return StartDaemon(d);
}

Status MpsSupervisor::StartDaemon(Daemon& d) {
  const std::string path = ops_->Find(options_.program);
  if (path.empty()) {
    return FailedPreconditionError("GPU " + std::to_string(d.s.gpu) + ": " + options_.program +
                                   " is not found (install the NVIDIA utilities or give the agent "
                                   "--mps-control PATH); its shares run without MPS");
  }
  TESSERA_ASSIGN_OR_RETURN(const int pid,
                           ops_->Start({path, "-f"}, Env(d), "", d.s.dirs.log + "/control.stderr"));
  d.s.pid = pid;
  d.s.adopted = false;
  d.s.problem.clear();
  std::ofstream(options_.root + "/" + std::to_string(d.s.gpu) + "/" + kStartedPidFile) << pid << "\n";
  d.logged.clear();
  d.started_at = clock_->NowMicros();
  std::cerr << "tessera agent: MPS: GPU " << d.s.gpu << " (" << d.s.uuid
            << "): control daemon started (pid " << pid << ", pipe " << d.s.dirs.pipe << ")\n";
  return Status::Ok();
}

void MpsSupervisor::Poll() {
  const Micros now = clock_->NowMicros();
  for (auto& [gpu, d] : daemons_) {
    if (d.s.pid > 0 && ops_->Ended(d.s.pid)) {
      d.backoff = now - d.started_at >= options_.stable_after || d.backoff == 0
                      ? options_.min_backoff
                      : std::min(d.backoff * 2, options_.max_backoff);
      std::cerr << "tessera agent: MPS: GPU " << gpu << ": control daemon (pid " << d.s.pid
                << ") ended; restarting in " << d.backoff / 1000 << " ms (see " << d.s.dirs.log
                << "/control.stderr)\n";
      d.s.pid = -1;
      d.s.adopted = false;
      d.restart_at = now + d.backoff;
    }
    if (d.s.pid < 0 && d.s.problem.empty() && d.restart_at > 0 && now >= d.restart_at) {
      Status started = StartDaemon(d);
      ++d.s.restarts;
      if (!started.ok()) {
        // Tried again later, as if it had ended at once.
        std::cerr << "tessera agent: MPS: " << started.message() << "\n";
        d.backoff = std::min(std::max(d.backoff, options_.min_backoff) * 2, options_.max_backoff);
        d.restart_at = now + d.backoff;
      }
    }
  }
}

void MpsSupervisor::StopDaemon(Daemon& d) {
  if (d.s.pid <= 0) {
    return;
  }
  const int pid = d.s.pid;
  d.s.pid = -1;
  // `quit` through the control client, as an admin would: echo quit | nvidia-cuda-mps-control.
  int client = -1;
  if (std::string path = ops_->Find(options_.program); !path.empty()) {
    StatusOr<int> c = ops_->Start({path}, Env(d), "quit\n", d.s.dirs.log + "/control.stderr");
    client = c.ok() ? *c : -1;
  }
  constexpr Micros kStep = 20'000;
  auto wait = [&](Micros grace) {
    for (Micros waited = 0; waited < grace; waited += kStep) {
      if (client > 0 && ops_->Ended(client)) {
        client = -1;
      }
      if (ops_->Ended(pid)) {
        return true;
      }
      ops_->Pause(kStep);
    }
    return ops_->Ended(pid);
  };
  // Without a client to send quit (no program), SIGTERM at once.
  if (client < 0 || !wait(options_.stop_grace)) {
    ops_->Signal(pid, SIGTERM);
    if (!wait(options_.stop_grace)) {
      std::cerr << "tessera agent: MPS: GPU " << d.s.gpu << ": control daemon (pid " << pid
                << ") ignored quit and SIGTERM; killing it\n";
      ops_->Signal(pid, SIGKILL);
      (void)wait(options_.stop_grace);
    }
  }
  if (client > 0 && !ops_->Ended(client)) {
    ops_->Signal(client, SIGKILL);  // a client stuck on a daemon that is gone
    (void)wait(kStep * 5);
  }
}

void MpsSupervisor::Shutdown(bool stop_daemons) {
  if (stop_daemons) {
    for (auto& [gpu, d] : daemons_) {
      StopDaemon(d);
    }
  }
  daemons_.clear();
}

std::optional<MpsDirs> MpsSupervisor::Running(int gpu) const {
  auto it = daemons_.find(gpu);
  if (it == daemons_.end() || it->second.s.pid <= 0) {
    return std::nullopt;
  }
  return it->second.s.dirs;
}

std::optional<MpsDirs> MpsSupervisor::Serving(int gpu) const {
  auto it = daemons_.find(gpu);
  if (it == daemons_.end() || !it->second.s.problem.empty()) {
    return std::nullopt;
  }
  return it->second.s.dirs;
}

std::vector<MpsDaemonStatus> MpsSupervisor::status() const {
  std::vector<MpsDaemonStatus> out;
  for (const auto& [gpu, d] : daemons_) {
    out.push_back(d.s);
  }
  return out;
}

}  // namespace tessera
