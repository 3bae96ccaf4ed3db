#include "base/mutex.h"
#include "server/job_logs.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <utility>

namespace tessera {

std::string JobLogs::Path(JobNumber job, int task) const {
  return dir_ + "/" + ToString(job) + "/" + std::to_string(task) + ".log";
}

Status JobLogs::Append(const std::vector<LogAppend>& appends) {
  MutexLock lock(append_mu_);
  Status result = Status::Ok();
  for (const LogAppend& a : appends) {
    const std::string path = Path(a.job, a.task);
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
    std::ofstream out(path, std::ios::binary | std::ios::app);
    out.write(a.data.data(), static_cast<std::streamsize>(a.data.size()));
    if (!out) {
      result = UnavailableError("cannot write the task log " + path);
    }
  }
  return result;
}

StatusOr<LogChunk> JobLogs::Read(JobNumber job, int task, int64_t offset, int64_t max_bytes) const {
  if (offset < 0) {
    return InvalidArgumentError("offset must be >= 0");
  }
  LogChunk chunk;
  chunk.next_offset = offset;
  std::ifstream in(Path(job, task), std::ios::binary);
  if (!in) {
    return chunk;  // no output yet
  }
  in.seekg(0, std::ios::end);
  const int64_t size = in.tellg();
  if (offset >= size) {
    chunk.next_offset = std::max(offset, size);
    return chunk;
  }
  const int64_t n = std::min(max_bytes, size - offset);
  chunk.data.resize(static_cast<size_t>(n));
  in.seekg(offset);
  in.read(chunk.data.data(), n);
  chunk.next_offset = offset + n;
  return chunk;
}

}  // namespace tessera
