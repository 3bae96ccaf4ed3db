// What a task on a GPU in `shared` mode gets in its environment beyond the
// controller's, and where the agent finds the CUDA limiter it injects.
//
// A task is a share task when it has exactly one GPU, no MIG instance, and that GPU is
// in shared mode. Such a task gets:
//   - LD_PRELOAD=<the limiter> (before the task's own LD_PRELOAD, if any), unless the
//     agent runs without the limiter;
//   - TESSERA_CUDA_MEMORY_LIMIT_MIB: the controller's value, else the grant's memory
//     (launch.gpu_memory_mib; 0 is no cap, and the variable is left out);
//   - TESSERA_CUDA_COMPUTE_PERCENT: the controller's value, else gpu_milli / 10 (at least 1);
//   - CUDA_MPS_PIPE_DIRECTORY / CUDA_MPS_LOG_DIRECTORY of its GPU's MPS control daemon,
//     while the agent runs one (agent/mps_supervisor.h: Serving).
// Other tasks get nothing from here.
//
// The limiter: --cuda-limiter PATH, "none" for no limiter, or by default
// <directory of the tessera binary>/lib/libtessera_cuda_limiter.so, then
// <that directory>/../lib/tessera/libtessera_cuda_limiter.so. The agent copies it into
// <data dir>/lib/ with mode 0755 (directory 0755), replacing the copy by rename, so that
// tasks of every uid can map it wherever it was installed and running tasks keep the copy
// they loaded.
// Thread safety: pure functions, apart from the file system.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "agent/mps_supervisor.h"
#include "api/agent_protocol.h"
#include "base/status.h"

namespace tessera {

// The limiter's variables (as src/limiter/limiter_env.h names them).
inline constexpr char kCudaMemoryLimitEnv[] = "TESSERA_CUDA_MEMORY_LIMIT_MIB";
inline constexpr char kCudaComputePercentEnv[] = "TESSERA_CUDA_COMPUTE_PERCENT";
inline constexpr char kCudaLimiterFileName[] = "libtessera_cuda_limiter.so";

// Whether `launch` is a share task, given each GPU's mode (indexed by GPU).
bool IsShareTask(const TaskLaunch& launch, const std::vector<SharingMode>& modes);

// Adds the variables above to `env` (which starts as the controller's). `limiter`: the
// library's path, "" for none; `mps`: the task's GPU's daemon directories, nullopt when
// the agent runs no daemon for it. Does nothing unless the task is a share task.
void AddGpuShareEnv(const TaskLaunch& launch, const std::vector<SharingMode>& modes,
                    const std::string& limiter, const std::optional<MpsDirs>& mps,
                    std::map<std::string, std::string>* env);

// The limiter the option names: "none" gives "", a path must exist (NotFound naming it),
// "" searches the defaults beside `exe_dir` and gives NotFound listing them when none is there.
StatusOr<std::string> FindCudaLimiter(const std::string& option, const std::string& exe_dir);

// Copies `source` to <data_dir>/lib/libtessera_cuda_limiter.so (0755) as above; its path.
StatusOr<std::string> InstallCudaLimiter(const std::string& source, const std::string& data_dir);

// The running executable's directory ("" when unknown).
std::string ThisExecutableDir();

}  // namespace tessera
