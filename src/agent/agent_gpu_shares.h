// AgentGpuShares: what the agent does for GPUs in `shared` mode. It runs the MPS
// control daemons (agent/mps_supervisor.h) of the GPUs the inventory reports shared,
// finds and installs the CUDA limiter, and adds both to share tasks' environments
// (agent/gpu_share_env.h).
//
// Options: mps_control "" (nvidia-cuda-mps-control on PATH), a path, or "none" (no
// MPS); cuda_limiter "" (the defaults beside the binary), a path, or "none". A limiter
// that is missing or cannot be installed is a warning: shares then run with MPS only.
// Problems (no limiter, no MPS program, a GPU in MIG mode) are logged once and listed
// by problems(), and the agent writes them to <data dir>/mps/status.
//
// Thread safety: every method takes the object's own lock.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "agent/gpu/gpu_backend.h"
#include "agent/gpu_share_env.h"
#include "agent/mps_supervisor.h"
#include "base/clock.h"
#include "base/mutex.h"

namespace tessera {

struct AgentGpuSharesOptions {
  std::string data_dir;                // required
  std::string mps_control;             // "", a path, or "none"
  std::string cuda_limiter;            // "", a path, or "none"
  // The admin's word that this node's MPS serves clients of several Unix users at once
  // (a multi-user MPS set up through mps_control, e.g. a wrapper; newer drivers offer
  // one). Default false: NVIDIA's control daemon runs one server per GPU for one uid at
  // a time, so the controller keeps shares of different tenants off one shared GPU.
  // Reported as the node label mps-multi-user=on; it must match how MPS really runs.
  bool mps_multi_user = false;
  const Clock* clock = nullptr;        // required
  std::unique_ptr<MpsProcessOps> ops;  // nullptr: real processes
  std::string exe_dir;  // where the limiter is looked for by default; "": this program's
};

class AgentGpuShares {
 public:
  explicit AgentGpuShares(AgentGpuSharesOptions options);
  ~AgentGpuShares();

  // After each inventory discovery: the modes for AddEnv, and the daemons to run.
  void OnInventory(const std::vector<DiscoveredGpu>& gpus);
  void Poll();  // restarts daemons that ended, after their backoff
  // Stops the daemons when the agent also kills its tasks; else leaves them to the next
  // agent on this data directory. Idempotent.
  void Stop(bool stop_daemons);
  void AddEnv(const TaskLaunch& launch, std::map<std::string, std::string>* env) const;

  const std::string& limiter() const { return limiter_; }  // "": none
  // Node labels for the controller (`tessera nodes`), on nodes with shared GPUs only:
  // "mps" = "on" (a daemon serves every shared GPU), "off" (--mps-control none) or
  // "unavailable" (see problems()); "cuda-limiter" = "on" or "off"; with mps on and
  // mps_multi_user, "mps-multi-user" = "on" (model/node.h MpsServesOneUser).
  std::vector<std::pair<std::string, std::string>> Labels() const;
  std::vector<MpsDaemonStatus> mps_status() const;
  std::vector<std::string> problems() const;

 private:
  void WriteStatus() REQUIRES(mu_);

  mutable Mutex mu_;
  // data_dir_, limiter_, limiter_problem_, mps_enabled_ and mps_multi_user_ are set by
  // the constructor and only read after.
  std::string data_dir_;
  std::string limiter_;
  std::string limiter_problem_;
  std::vector<SharingMode> modes_ GUARDED_BY(mu_);
  std::unique_ptr<MpsSupervisor> mps_ PT_GUARDED_BY(mu_);  // runs no daemon when MPS is off
  bool mps_enabled_ = false;
  bool mps_multi_user_ = false;
  bool stopped_ GUARDED_BY(mu_) = false;
  std::string written_status_ GUARDED_BY(mu_);
};

}  // namespace tessera
