#include "agent/launch/checkpoint_protocol.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "base/status.h"
#include "base/strings.h"

namespace tessera {
namespace {

std::string ProtocolDir(const std::string& dir) {
  return dir + "/" + std::string(kProtocolDirName);
}

// Writes all of `data` to `fd`, retrying short writes and EINTR. Returns 0 or an errno.
int WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return errno;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return 0;
}

}  // namespace

std::string PreemptMarkerPath(const std::string& dir) {
  return ProtocolDir(dir) + "/" + std::string(kPreemptFileName);
}

std::string CheckpointedMarkerPath(const std::string& dir) {
  return ProtocolDir(dir) + "/" + std::string(kCheckpointedFileName);
}

Status WritePreemptMarker(const std::string& dir, int64_t deadline_unix_us,
                          std::string_view reason) {
  if (dir.empty()) {
    return InvalidArgumentError("checkpoint directory is empty");
  }
  if (deadline_unix_us < 0) {
    return InvalidArgumentError("preemption deadline must not be negative, got " +
                                std::to_string(deadline_unix_us));
  }
  std::error_code ec;
  std::filesystem::create_directories(ProtocolDir(dir), ec);
  if (ec) {
    return InternalError("cannot create " + ProtocolDir(dir) + ": " + ec.message());
  }
  if (std::filesystem::is_symlink(ProtocolDir(dir), ec)) {
    return FailedPreconditionError(ProtocolDir(dir) + " is a symbolic link: not writing through it");
  }
  std::string one_line(reason);
  for (char& c : one_line) {
    if (c == '\n' || c == '\r') {
      c = ' ';
    }
  }
  std::string content = std::to_string(deadline_unix_us) + "\n" + one_line + "\n";

  static std::atomic<uint64_t> counter{0};
  std::string final_path = PreemptMarkerPath(dir);
  std::string tmp_path = ProtocolDir(dir) + "/.preempt.tmp." + std::to_string(::getpid()) + "." +
                         std::to_string(counter.fetch_add(1));
  // O_EXCL | O_NOFOLLOW: the directory is shared with the task, which must not be able
  // to plant a link that this (root) write would follow.
  int fd = ::open(tmp_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    return InternalError("cannot create " + tmp_path + ": " + ErrnoText(errno));
  }
  int err = WriteAll(fd, content);
  if (::close(fd) != 0 && err == 0) {
    err = errno;
  }
  if (err == 0 && ::rename(tmp_path.c_str(), final_path.c_str()) != 0) {
    err = errno;
  }
  if (err != 0) {
    ::unlink(tmp_path.c_str());
    return InternalError("cannot write " + final_path + ": " + ErrnoText(err));
  }
  return Status::Ok();
}

StatusOr<PreemptNotice> ReadPreemptMarker(const std::string& dir) {
  std::string path = PreemptMarkerPath(dir);
  std::ifstream in(path);
  if (!in) {
    return NotFoundError("no preemption marker at " + path);
  }
  std::string deadline_line;
  std::string reason_line;
  std::getline(in, deadline_line);
  std::getline(in, reason_line);
  auto deadline = ParseInt64(deadline_line);
  if (!deadline.ok() || *deadline < 0) {
    return InvalidArgumentError("malformed preemption marker " + path +
                                ": first line must be the deadline in Unix microseconds");
  }
  return PreemptNotice{*deadline, std::string(Trim(reason_line))};
}

Status ClearMarkers(const std::string& dir) {
  for (const std::string& path : {PreemptMarkerPath(dir), CheckpointedMarkerPath(dir)}) {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT && errno != ENOTDIR) {
      return InternalError("cannot remove " + path + ": " + ErrnoText(errno));
    }
  }
  return Status::Ok();
}

bool CheckpointReportedSince(const std::string& dir, int64_t since_unix_us) {
  struct stat st {};
  if (::stat(CheckpointedMarkerPath(dir).c_str(), &st) != 0) {
    return false;
  }
  int64_t mtime_us = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000 +
                     static_cast<int64_t>(st.st_mtim.tv_nsec) / 1000;
  return mtime_us >= since_unix_us - kCheckpointClockSlackUs;
}

}  // namespace tessera
