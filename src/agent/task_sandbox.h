// TaskSandbox: what a task may see of the node besides its own processes: its own
// directories, owned by the Unix identity it runs as, and only its own GPUs' device
// nodes.
//
// - Each job gets `<data_dir>/jobs/<job>/` (mode 0700, owned by the task's uid), with
//   `home/` and `tmp/` inside (HOME and TMPDIR), empty when its first task starts.
//   `<data_dir>` and `<data_dir>/jobs` are 0711: a task can reach its own job directory
//   but cannot list anyone's, and the rest of the agent's data (logs, task records, its
//   credential) is root's, 0700/0600.
// - Spares: on a file system that will not soon reuse a freed inode (ext4 without a
//   journal), making and removing three directories per job was the largest cost of a
//   short job. So when a job ends its three directories are first taken back (the
//   agent's, 0700, extended attributes but security labels dropped), then emptied, and
//   kept under `<data_dir>/jobs/.spare` (0700; at most kMaxSpareSandboxes) for the next
//   job of the same uid:gid only. They are removed instead when home or tmp was replaced
//   or had been opened to others (group or other bits, an ACL: a process of another uid
//   might hold it open), or held an entry of another uid. What remains possible: a
//   process of another uid that opened the directory while its owner allowed that, and
//   the owner closed it again before the job ended, can still list (not open) the names
//   in it during the owner's next job.
// - The checkpoint directory: the controller's own (`managed`: under its checkpoint
//   root, named by job id) is made by the agent and given to the task's uid; one that
//   exists must already be that uid's. A directory the job's spec named is made, and
//   everything in it touched, only with the task's own file-system identity
//   (ScopedFsIdentity), so a path the tenant chose reaches nothing the tenant could
//   not reach itself. The `.tessera/` protocol files are written the same way.
// - GPU device nodes: `<device_dir>/nvidia<minor>` per GPU, and for MIG the capability
//   nodes `<device_dir>/nvidia-caps/nvidia-cap<N>` that open a GPU instance and a
//   compute instance. Every GPU node of this machine that the task was not given, and
//   every capability node but its own instances' (the MIG config and monitor
//   capabilities too), is hidden from it (TaskLauncher's hidden_devices: an unreadable
//   file is mounted over it in the task's own mount namespace), so CUDA_VISIBLE_DEVICES
//   is not the only fence.
//
// Thread safety: stateless functions.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"

namespace tessera {

struct JobSandbox {
  std::string dir;   // <data_dir>/jobs/<job>: the default working directory
  std::string home;  // HOME
  std::string tmp;   // TMPDIR
};

// Makes the job's directories, owned by uid:gid when uid >= 0 (else the agent's): the
// job's own when another of its tasks made them, else a spare one of the same identity
// (job_sandbox.cc), else new ones.
StatusOr<JobSandbox> PrepareJobSandbox(const std::string& data_dir, uint64_t job, int64_t uid,
                                       int64_t gid);
// When no task of the job is left on the node: empties the job's directories and keeps
// them as a spare for the next job of the same owner, or removes them (job_sandbox.cc).
void RetireJobSandbox(const std::string& data_dir, uint64_t job);

// How many emptied job directories the agent keeps for reuse.
inline constexpr int kMaxSpareSandboxes = 32;
// Moves a spare job directory owned by uid:gid (uid < 0: the agent's own identity) to
// `dir`, which must not exist; false when there is none.
bool TakeSpareSandbox(const std::string& data_dir, const std::string& dir, int64_t uid,
                      int64_t gid);

// Makes the checkpoint directory for uid:gid (see above) and clears the markers of an
// earlier attempt.
Status PrepareCheckpointDir(const std::string& dir, bool managed, int64_t uid, int64_t gid);

// While it lives, this thread's file accesses are checked as uid:gid (setfsuid and
// setfsgid, which act on the calling thread only) and what it creates is theirs. No-op
// for uid < 0.
class ScopedFsIdentity {
 public:
  ScopedFsIdentity(int64_t uid, int64_t gid);
  ~ScopedFsIdentity();
  ScopedFsIdentity(const ScopedFsIdentity&) = delete;
  ScopedFsIdentity& operator=(const ScopedFsIdentity&) = delete;

 private:
  bool active_ = false;
  unsigned old_uid_ = 0;
  unsigned old_gid_ = 0;
};

// A GPU a task was given, as its device nodes name it.
struct GpuDeviceGrant {
  int minor = 0;  // <device_dir>/nvidia<minor>
  // A MIG instance of that GPU: the driver's GPU and compute instance ids; -1: the card.
  int gpu_instance = -1;
  int compute_instance = -1;
};

// The existing device nodes under `device_dir` that a task given `granted` must not
// open: nvidia<minor> of every GPU in `all_minors` it was not given, and every
// nvidia-caps/nvidia-cap<N> but its MIG instances' own. Their capability minors come
// from the driver's `caps_dir` (/proc/driver/nvidia/capabilities): the files
// gpu<minor>/mig/gi<G>/access and gpu<minor>/mig/gi<G>/ci<C>/access hold a line
// "DeviceFileMinor: N". FailedPrecondition when capability nodes exist and a granted
// instance's cannot be found: the task could not use its instance, and nothing would
// say why.
StatusOr<std::vector<std::string>> HiddenGpuDevices(const std::string& device_dir,
                                                    const std::string& caps_dir,
                                                    const std::vector<int>& all_minors,
                                                    const std::vector<GpuDeviceGrant>& granted);

// The capability nodes (names under <device_dir>/nvidia-caps/, "nvidia-cap<N>") that
// open a MIG instance's GPU and compute instances, from the driver's `caps_dir`; none
// for a whole card. FailedPrecondition as for HiddenGpuDevices.
StatusOr<std::vector<std::string>> MigCapabilityNodes(const std::string& caps_dir,
                                                      const GpuDeviceGrant& grant);

// Whether uid:gid can search every directory down to `dir` and `dir` itself (mode
// bits only; ACLs are not read). True for uid < 0 (the agent's own identity).
bool Reachable(const std::string& dir, int64_t uid, int64_t gid);

// Run as root, the agent's tasks run as other uids: every directory above `data_dir`
// (each job's HOME and working directory live in it) must be searchable by others.
// FailedPrecondition naming the directory and the fix when one is not; Ok when not root.
Status DataDirReachableByTasks(const std::string& data_dir);

// Makes `dir` and its missing parents with `mode`; the ones it creates get `mode`, and
// appear under their names with it (made aside and renamed into place, whatever the
// umask), so another process never finds one narrower.
Status MakeDirs(const std::string& dir, unsigned mode);

}  // namespace tessera
