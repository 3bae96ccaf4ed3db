// cgroup v2 support for the task launcher: find the agent's own cgroup, prepare a parent
// cgroup for tasks with the cpu and memory controllers enabled, and create one child per
// task with its cpu.max and memory.max.
//
// Contract: cgroups are an optional enforcement layer. CgroupTree::Open never fails: on a
// machine without a usable cgroup v2 tree (no cgroup2 mount, cpu and memory bound to
// cgroup v1, no write permission, a parent that holds processes) it returns a tree with
// usable() == false and a warning that says why; the launcher then runs tasks without
// limits. A usable tree that lacks the cpu or the memory controller (or both, when opened
// `without_controllers`) carries a warning for each missing one.
//
// Layout in auto mode: the agent's own cgroup A gets a child "tessera" for the tasks, and
// that one a child "task-<id>" per task. cgroup v2 forbids enabling controllers for the
// children of a cgroup that holds processes, so when A holds only the agent itself, the
// agent first moves into the leaf "A/agent" (as slurmd does with its "system" leaf). A
// parent given explicitly is used as is and must not hold processes. Open removes the empty
// task cgroups an earlier agent left in the parent; those that still hold processes
// belong to tasks that survived it (see TaskLauncher::Adopt) and are left alone. Use one
// CgroupTree per parent.
//
// Thread safety: the free functions are pure; a CgroupTree is immutable after Open and its
// methods may be called concurrently for different task names.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace tessera {

// cpu.max period used for every task cgroup, in microseconds.
inline constexpr int64_t kCpuMaxPeriodUs = 100'000;
// The kernel rejects a cpu.max quota below 1 ms.
inline constexpr int64_t kCpuMaxMinQuotaUs = 1'000;

// The cgroup v2 path of the process from the text of /proc/self/cgroup: the "0::<path>"
// line, e.g. "/system.slice/tessera-agent.service". NotFound when there is no v2 line;
// FailedPrecondition when the cgroup lies outside this cgroup namespace ("/..").
StatusOr<std::string> ParseCgroupV2Path(std::string_view proc_self_cgroup);

struct Cgroup2Mount {
  std::string mount_point;  // e.g. "/sys/fs/cgroup"
  std::string root;         // the cgroup the mount shows at its top, usually "/"
};

// The cgroup2 mount from the text of /proc/self/mountinfo, preferring /sys/fs/cgroup
// when there are several (octal escapes such as \040 in paths are decoded). NotFound
// when there is none.
StatusOr<Cgroup2Mount> FindCgroup2Mount(std::string_view mountinfo);

// The directory of cgroup `cgroup_path` (from ParseCgroupV2Path) under `mount`.
// FailedPrecondition when the mount does not show that cgroup.
StatusOr<std::string> CgroupDirectory(const Cgroup2Mount& mount, const std::string& cgroup_path);

// Controller names from cgroup.controllers or cgroup.subtree_control text ("cpu io memory").
std::vector<std::string> ParseControllers(std::string_view text);

// cpu.max text for a quota in milli-CPUs over kCpuMaxPeriodUs: 0 (or less) is "max 100000",
// 1500 is "150000 100000"; tiny quotas are raised to kCpuMaxMinQuotaUs.
std::string CpuMaxText(int64_t cpu_milli);

// memory.max text: 0 (or less) is "max", otherwise the limit in bytes.
std::string MemoryMaxText(int64_t memory_mib);

class CgroupTree {
 public:
  // `parent`: the cgroup directory that receives task cgroups, or "" for auto mode
  // (a "tessera" child of the agent's own cgroup, found through /proc/self).
  // `without_controllers`: use the tree even when neither the cpu nor the memory
  // controller is available (e.g. the cgroup2 half of a hybrid v1/v2 host), for
  // containment only: a task's cgroup still catches every process it spawned.
  static CgroupTree Open(const std::string& parent, bool without_controllers = false);

  // Not copyable, movable.
  CgroupTree(CgroupTree&&) = default;
  CgroupTree& operator=(CgroupTree&&) = default;

  bool usable() const { return usable_; }
  bool cpu_enabled() const { return cpu_; }
  bool memory_enabled() const { return memory_; }
  const std::string& parent_dir() const { return parent_dir_; }
  // Why limits are not (all) enforced; empty when everything works.
  const std::vector<std::string>& warnings() const { return warnings_; }

  // Creates <parent>/task-<name> (replacing a stale one) and writes cpu.max and
  // memory.max for the non-zero limits whose controller is enabled. Returns the
  // directory. FailedPrecondition when the tree is not usable; InvalidArgument for a
  // name that is not [A-Za-z0-9._-]+; Internal with the errno text otherwise.
  StatusOr<std::string> CreateTaskGroup(std::string_view name, int64_t cpu_milli,
                                        int64_t memory_mib) const;

  // Kills whatever still runs in `dir` (cgroup.kill, or SIGKILL to each pid on kernels
  // before 5.14) and removes it. OK when it is already gone; Unavailable when processes
  // are still exiting (call again a little later).
  static Status RemoveTaskGroup(const std::string& dir);

 private:
  CgroupTree() = default;
  void Warn(std::string text) { warnings_.push_back(std::move(text)); }
  void SetUp(const std::string& parent);
  void SetUpParent(const std::string& dir);

  bool without_controllers_ = false;
  bool usable_ = false;
  bool cpu_ = false;
  bool memory_ = false;
  std::string parent_dir_;
  std::vector<std::string> warnings_;
};

}  // namespace tessera
