#include "agent/gpu_share_env.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "agent/task_sandbox.h"

namespace tessera {

bool IsShareTask(const TaskLaunch& l, const std::vector<SharingMode>& modes) {
  return l.gpus.size() == 1 && l.mig.empty() && l.gpus[0] >= 0 &&
         static_cast<size_t>(l.gpus[0]) < modes.size() &&
         modes[static_cast<size_t>(l.gpus[0])] == SharingMode::kShared;
}

void AddGpuShareEnv(const TaskLaunch& l, const std::vector<SharingMode>& modes,
                    const std::string& limiter, const std::optional<MpsDirs>& mps,
                    std::map<std::string, std::string>* env) {
  if (!IsShareTask(l, modes)) {
    return;
  }
  if (!limiter.empty()) {
    auto it = env->find("LD_PRELOAD");
    const std::string own = it == env->end() ? "" : it->second;
    (*env)["LD_PRELOAD"] = own.empty() ? limiter : limiter + ":" + own;
    if (env->count(kCudaComputePercentEnv) == 0) {
      (*env)[kCudaComputePercentEnv] =
          std::to_string(std::clamp<int64_t>(l.gpu_milli / 10, 1, 100));
    }
    if (env->count(kCudaMemoryLimitEnv) == 0 && l.gpu_memory_mib > 0) {
      (*env)[kCudaMemoryLimitEnv] = std::to_string(l.gpu_memory_mib);
    }
  }
  if (mps) {
    (*env)["CUDA_MPS_PIPE_DIRECTORY"] = mps->pipe;
    (*env)["CUDA_MPS_LOG_DIRECTORY"] = mps->log;
  }
}

std::string ThisExecutableDir() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "" : self.parent_path().string();
}

StatusOr<std::string> FindCudaLimiter(const std::string& option, const std::string& exe_dir) {
  if (option == "none") {
    return std::string();
  }
  if (!option.empty()) {
    if (::access(option.c_str(), R_OK) != 0) {
      return NotFoundError("--cuda-limiter " + option + ": no readable file there");
    }
    return option;
  }
  const std::vector<std::string> candidates = {
      exe_dir + "/lib/" + kCudaLimiterFileName,
      exe_dir + "/../lib/tessera/" + kCudaLimiterFileName,
  };
  for (const std::string& c : candidates) {
    if (!exe_dir.empty() && ::access(c.c_str(), R_OK) == 0) {
      return std::filesystem::path(c).lexically_normal().string();
    }
  }
  return NotFoundError("the CUDA limiter " + std::string(kCudaLimiterFileName) + " is not in " +
                       candidates[0] + " nor " + candidates[1] +
                       " (give the agent --cuda-limiter PATH, or --cuda-limiter none)");
}

StatusOr<std::string> InstallCudaLimiter(const std::string& source, const std::string& data_dir) {
  const std::string dir = data_dir + "/lib";
  TESSERA_RETURN_IF_ERROR(MakeDirs(dir, 0755));
  ::chmod(dir.c_str(), 0755);
  const std::string dest = dir + "/" + kCudaLimiterFileName;
  const std::string tmp = dest + ".new";
  std::error_code ec;
  std::filesystem::remove(tmp, ec);
  std::filesystem::copy_file(source, tmp, std::filesystem::copy_options::overwrite_existing, ec);
  if (ec) {
    return FailedPreconditionError("copying the CUDA limiter " + source + " to " + tmp + ": " +
                                   ec.message());
  }
  // Renamed into place: a task that already mapped the old copy keeps it intact.
  if (::chmod(tmp.c_str(), 0755) != 0 || ::rename(tmp.c_str(), dest.c_str()) != 0) {
    std::filesystem::remove(tmp, ec);
    return FailedPreconditionError("installing the CUDA limiter at " + dest);
  }
  return dest;
}

}  // namespace tessera
