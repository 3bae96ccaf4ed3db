// The job file's keys (job_codec.h), spelled once: the codec reads them, the encoders
// (JobSubmissionToJson, JobDraftToJson) write them, and clients that build job
// documents in other languages are checked against JobSpecKeyPaths() (a misspelled key
// would otherwise surface only as the server's "unknown key" error).
// Thread safety: constants and a pure function.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::job_keys {

// Top level.
inline constexpr std::string_view kName = "name";
inline constexpr std::string_view kQueue = "queue";
inline constexpr std::string_view kUser = "user";
inline constexpr std::string_view kPriority = "priority";
inline constexpr std::string_view kCommand = "command";
inline constexpr std::string_view kEnv = "env";
inline constexpr std::string_view kWorkingDir = "working_dir";
inline constexpr std::string_view kSubmitDir = "submit_dir";
inline constexpr std::string_view kReplicas = "replicas";
inline constexpr std::string_view kResources = "resources";
inline constexpr std::string_view kTopology = "topology";
inline constexpr std::string_view kCheckpoint = "checkpoint";
inline constexpr std::string_view kRuntimeLimit = "runtime_limit";
inline constexpr std::string_view kPreemptible = "preemptible";
inline constexpr std::string_view kHoldIfUnfit = "hold_if_unfit";
inline constexpr std::string_view kRestart = "restart";
inline constexpr std::string_view kArray = "array";
inline constexpr std::string_view kArrayIndex = "array_index";
inline constexpr std::string_view kDependency = "dependency";
inline constexpr std::string_view kHold = "hold";
inline constexpr std::string_view kPriorityClass = "priority_class";
inline constexpr std::string_view kSignal = "signal";
inline constexpr std::string_view kImage = "image";
inline constexpr std::string_view kContainer = "container";

// resources.*
inline constexpr std::string_view kGpus = "gpus";
inline constexpr std::string_view kGpuModel = "gpu_model";
inline constexpr std::string_view kGpuFraction = "gpu_fraction";
inline constexpr std::string_view kGpuMilli = "gpu_milli";
inline constexpr std::string_view kGpuMemory = "gpu_memory";
inline constexpr std::string_view kMig = "mig";
inline constexpr std::string_view kCpu = "cpu";
inline constexpr std::string_view kMemory = "memory";
inline constexpr std::string_view kGpuTopology = "gpu_topology";
// topology.*
inline constexpr std::string_view kScope = "scope";
inline constexpr std::string_view kHard = "hard";
// checkpoint.*
inline constexpr std::string_view kInterval = "interval";
inline constexpr std::string_view kOnSignal = "on_signal";
inline constexpr std::string_view kDir = "dir";
// restart.*
inline constexpr std::string_view kMax = "max";
inline constexpr std::string_view kOn = "on";
inline constexpr std::string_view kBackoff = "backoff";
// container.* (container_spec.h)
inline constexpr std::string_view kMounts = "mounts";
inline constexpr std::string_view kWorkdir = "workdir";
inline constexpr std::string_view kEntrypoint = "entrypoint";
inline constexpr std::string_view kMountHome = "mount_home";
// signal.* (and kName)
inline constexpr std::string_view kBefore = "before";
// A batch document (job_batch.h): its jobs, and a submit_dir for all of them.
inline constexpr std::string_view kJobs = "jobs";

// The keys each object of a job file accepts: the codec refuses any other.
inline constexpr std::array kTopLevel = {
    kName,         kQueue,       kUser,          kPriority,  kCommand,  kEnv,
    kWorkingDir,   kSubmitDir,   kReplicas,      kResources, kTopology, kCheckpoint,
    kRuntimeLimit, kPreemptible, kHoldIfUnfit,   kRestart,   kArray,    kArrayIndex,
    kDependency,   kHold,        kPriorityClass, kSignal,    kImage,    kContainer};
inline constexpr std::array kResourceKeys = {kGpus,      kGpuModel, kGpuFraction,
                                             kGpuMilli,  kGpuMemory, kMig,
                                             kCpu,       kMemory,   kGpuTopology};
inline constexpr std::array kTopologyKeys = {kScope, kHard};
inline constexpr std::array kCheckpointKeys = {kInterval, kOnSignal, kDir};
inline constexpr std::array kRestartKeys = {kMax, kOn, kBackoff};
inline constexpr std::array kSignalKeys = {kName, kBefore};
inline constexpr std::array kContainerKeys = {kMounts, kWorkdir, kEntrypoint, kMountHome};
inline constexpr std::array kBatchKeys = {kJobs, kSubmitDir};

// Every key a job file accepts, as a path from the job's root: "name", "resources",
// "resources.gpus", ... (the lists above, nested objects under their key).
inline std::vector<std::string> JobSpecKeyPaths() {
  std::vector<std::string> out(kTopLevel.begin(), kTopLevel.end());
  auto nested = [&out](std::string_view parent, auto keys) {
    for (std::string_view k : keys) {
      out.push_back(std::string(parent) + "." + std::string(k));
    }
  };
  nested(kResources, kResourceKeys);
  nested(kTopology, kTopologyKeys);
  nested(kCheckpoint, kCheckpointKeys);
  nested(kRestart, kRestartKeys);
  nested(kSignal, kSignalKeys);
  nested(kContainer, kContainerKeys);
  return out;
}

}  // namespace tessera::job_keys
