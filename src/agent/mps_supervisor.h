// MpsSupervisor: one NVIDIA MPS control daemon per GPU in `shared` mode, started and
// watched by the agent.
//
// For each shared GPU the agent runs `nvidia-cuda-mps-control -f` (foreground, so the
// agent is its parent and notices its end) with CUDA_VISIBLE_DEVICES=<the GPU's UUID>,
// CUDA_MPS_PIPE_DIRECTORY=<root>/<gpu index>/pipe (0755: tasks run as other uids and
// must reach it) and CUDA_MPS_LOG_DIRECTORY=<root>/<gpu index>/log (0700, the agent's).
// The daemon's stdout and stderr go to <log>/control.stderr. Limits are per client:
// a task's CUDA_MPS_ACTIVE_THREAD_PERCENTAGE and CUDA_MPS_PINNED_DEVICE_MEM_LIMIT (set
// by the controller); the daemon's own defaults are left as they are.
//
// Restarts: a daemon that exits or is killed is started again after a backoff that
// doubles from min_backoff to max_backoff, and returns to min_backoff once a daemon
// has run for stable_after. Each exit is logged.
// Stops: a GPU that leaves shared mode (Reconcile without it), and Shutdown(true), send
// `quit` through the control client (`nvidia-cuda-mps-control` with the same pipe
// directory), then SIGTERM and SIGKILL after stop_grace each. Shutdown(false) leaves the
// daemons running; the next supervisor on the same root adopts a daemon whose pid file
// (<pipe>/nvidia-cuda-mps-control.pid, written by the daemon) names a live
// nvidia-cuda-mps-control; the daemons it finds there for GPUs that are not shared now
// are stopped.
// Refusals (no daemon, a problem that status() reports and the log says once): the GPU
// is in MIG mode, or the program is not found (looked for again at each Reconcile).
//
// Thread safety: none; the caller serialises (the agent holds its own lock).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/status.h"

namespace tessera {

// The processes the supervisor starts and watches: the real ones, or a test's.
class MpsProcessOps {
 public:
  virtual ~MpsProcessOps() = default;
  // The program's path when `program` (a path, or a name looked up on PATH) is an
  // executable file; "" when not.
  virtual std::string Find(const std::string& program) = 0;
  // Starts argv (argv[0] a path) in its own session, with the agent's environment plus
  // `env`, `input` on its stdin (then closed; "" gives /dev/null) and stdout/stderr
  // appended to `output` ("": /dev/null). Its pid.
  virtual StatusOr<int> Start(const std::vector<std::string>& argv,
                              const std::map<std::string, std::string>& env,
                              const std::string& input, const std::string& output) = 0;
  // Whether `pid` has ended (a child is reaped; another process is looked up). Never blocks.
  virtual bool Ended(int pid) = 0;
  virtual void Signal(int pid, int signal) = 0;
  // The process's command line, arguments joined by spaces; "" when it is gone.
  virtual std::string CommandLine(int pid) = 0;
  // Waits `us` before a stop looks again (real: sleeps).
  virtual void Pause(Micros us) = 0;
};

std::unique_ptr<MpsProcessOps> MakeSystemMpsProcessOps();

struct MpsSupervisorOptions {
  std::string program = "nvidia-cuda-mps-control";  // a path, or a name on PATH
  std::string root;                                 // <agent data>/mps; required
  Micros min_backoff = 1'000'000;
  Micros max_backoff = 30'000'000;
  Micros stable_after = 60'000'000;  // a daemon up this long restarts after min_backoff
  Micros stop_grace = 2'000'000;     // after quit, and again after SIGTERM
};

struct SharedGpu {
  int index = 0;
  std::string uuid;  // "GPU-..."
  bool mig = false;  // in MIG mode: MPS is refused
};

struct MpsDirs {
  std::string pipe;
  std::string log;
};

struct MpsDaemonStatus {
  int gpu = 0;
  std::string uuid;
  MpsDirs dirs;
  int pid = -1;          // -1: not running
  bool adopted = false;  // left by an earlier agent
  int restarts = 0;      // starts after the first
  std::string problem;   // why it does not run ("" while it runs or waits to restart)
};

class MpsSupervisor {
 public:
  MpsSupervisor(MpsSupervisorOptions options, const Clock* clock,
                std::unique_ptr<MpsProcessOps> ops);
  ~MpsSupervisor() = default;
  MpsSupervisor(const MpsSupervisor&) = delete;
  MpsSupervisor& operator=(const MpsSupervisor&) = delete;

  // Makes the daemons match `shared` (after each inventory discovery): starts or adopts
  // the new ones, stops those of GPUs no longer listed (or with another UUID). The
  // first refusal (MIG mode, no program, a directory or start failure) as
  // FailedPrecondition naming the GPU; the other GPUs are handled all the same.
  Status Reconcile(const std::vector<SharedGpu>& shared);
  // Notices ended daemons and starts those whose backoff has passed.
  void Poll();
  // Stops every daemon (stop_daemons), or leaves them for the next agent to adopt.
  void Shutdown(bool stop_daemons);

  // The GPU's directories while its daemon runs; nullopt otherwise.
  std::optional<MpsDirs> Running(int gpu) const;
  // The GPU's directories while its daemon is supervised (running, or restarting after
  // a backoff: a client that starts CUDA later finds the new daemon); nullopt for a GPU
  // not shared or refused.
  std::optional<MpsDirs> Serving(int gpu) const;
  std::vector<MpsDaemonStatus> status() const;
  MpsDirs DirsOf(int gpu) const;

 private:
  struct Daemon {
    MpsDaemonStatus s;
    Micros started_at = 0;
    Micros restart_at = 0;  // when pid < 0 and no problem
    Micros backoff = 0;
    std::string logged;  // the last problem logged
  };
  Status Begin(Daemon& d);  // directories, adoption or a first start
  Status StartDaemon(Daemon& d);
  // Stops the daemons an earlier agent left for GPUs not in `wanted` (or in MIG mode).
  void StopLeftovers(const std::map<int, const SharedGpu*>& wanted);
  void StopDaemon(Daemon& d);
  void Refuse(Daemon& d, const std::string& problem);
  std::map<std::string, std::string> Env(const Daemon& d) const;

  MpsSupervisorOptions options_;
  const Clock* clock_;
  std::unique_ptr<MpsProcessOps> ops_;
  std::map<int, Daemon> daemons_;  // by GPU index
  bool swept_ = false;             // leftovers of an earlier agent looked for (first Reconcile)
};

}  // namespace tessera
