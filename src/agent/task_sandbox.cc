#include "agent/task_sandbox.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <system_error>

#include "agent/checkpoint_protocol.h"

namespace tessera {
namespace {

std::string ErrnoText(int err) { return std::generic_category().message(err); }

// Owns a directory this agent made (or one of its own), never following a link.
Status ChownDir(const std::string& dir, int64_t uid, int64_t gid, unsigned mode) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    return InternalError("cannot open " + dir + ": " + ErrnoText(errno));
  }
  Status s = Status::Ok();
  if (uid >= 0 && ::fchown(fd, static_cast<uid_t>(uid), static_cast<gid_t>(gid)) != 0) {
    s = InternalError("cannot give " + dir + " to uid " + std::to_string(uid) + ": " +
                      ErrnoText(errno));
  } else if (::fchmod(fd, mode) != 0) {
    s = InternalError("cannot set the mode of " + dir + ": " + ErrnoText(errno));
  }
  ::close(fd);
  return s;
}

// Makes `dir` (not its parents) when missing; true when this call made it.
StatusOr<bool> MakeDir(const std::string& dir, unsigned mode) {
  if (::mkdir(dir.c_str(), mode) == 0) {
    return true;
  }
  if (errno != EEXIST) {
    return InternalError("cannot create " + dir + ": " + ErrnoText(errno));
  }
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return FailedPreconditionError(dir + " exists and is not a directory");
  }
  return false;
}

}  // namespace

Status MakeDirs(const std::string& dir, unsigned mode) {
  std::filesystem::path p(dir);
  std::filesystem::path at;
  for (const auto& part : p) {
    at /= part;
    if (at == p.root_path()) {
      continue;
    }
    TESSERA_ASSIGN_OR_RETURN(bool made, MakeDir(at.string(), mode));
    if (made) {
      ::chmod(at.c_str(), mode);  // not narrowed by the umask
    }
  }
  return Status::Ok();
}

StatusOr<JobSandbox> PrepareJobSandbox(const std::string& data_dir, uint64_t job, int64_t uid,
                                       int64_t gid) {
  const std::string jobs = data_dir + "/jobs";
  TESSERA_RETURN_IF_ERROR(MakeDirs(jobs, 0711));
  ::chmod(data_dir.c_str(), 0711);
  ::chmod(jobs.c_str(), 0711);
  JobSandbox box;
  box.dir = jobs + "/" + std::to_string(job);
  box.home = box.dir + "/home";
  box.tmp = box.dir + "/tmp";
  for (const std::string& d : {box.dir, box.home, box.tmp}) {
    TESSERA_ASSIGN_OR_RETURN(bool made, MakeDir(d, 0700));
    (void)made;
    TESSERA_RETURN_IF_ERROR(ChownDir(d, uid, gid, 0700));
  }
  return box;
}

void RemoveJobSandbox(const std::string& data_dir, uint64_t job) {
  std::error_code ec;
  std::filesystem::remove_all(data_dir + "/jobs/" + std::to_string(job), ec);
}

ScopedFsIdentity::ScopedFsIdentity(int64_t uid, int64_t gid) {
  if (uid < 0 || gid < 0) {
    return;
  }
  // Raw syscalls: they act on this thread alone; each returns the previous value.
  old_gid_ = static_cast<unsigned>(::syscall(SYS_setfsgid, static_cast<gid_t>(gid)));
  old_uid_ = static_cast<unsigned>(::syscall(SYS_setfsuid, static_cast<uid_t>(uid)));
  active_ = true;
}

ScopedFsIdentity::~ScopedFsIdentity() {
  if (active_) {
    ::syscall(SYS_setfsuid, static_cast<uid_t>(old_uid_));
    ::syscall(SYS_setfsgid, static_cast<gid_t>(old_gid_));
  }
}

Status PrepareCheckpointDir(const std::string& dir, bool managed, int64_t uid, int64_t gid) {
  std::filesystem::path p(dir);
  if (managed) {
    if (p.has_parent_path()) {
      // Parents the agent makes are traversable only: tasks reach their own directory.
      TESSERA_RETURN_IF_ERROR(MakeDirs(p.parent_path().string(), 0711));
    }
    TESSERA_ASSIGN_OR_RETURN(bool made, MakeDir(dir, 0700));
    if (made) {
      TESSERA_RETURN_IF_ERROR(ChownDir(dir, uid, gid, 0700));
    } else if (uid >= 0) {
      struct stat st {};
      if (::lstat(dir.c_str(), &st) != 0 || static_cast<int64_t>(st.st_uid) != uid) {
        return PermissionDeniedError(dir + " exists and does not belong to uid " +
                                     std::to_string(uid));
      }
    }
  }
  ScopedFsIdentity as_task(uid, gid);
  if (!managed) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) {
      return PermissionDeniedError("cannot create " + dir + " as uid " + std::to_string(uid) +
                                   ": " + ec.message());
    }
  }
  return ClearMarkers(dir);
}

bool Reachable(const std::string& dir, int64_t uid, int64_t gid) {
  if (uid < 0) {
    return true;
  }
  std::filesystem::path p = std::filesystem::path(dir).lexically_normal();
  std::filesystem::path at;
  for (const auto& part : p) {
    at /= part;
    struct stat st {};
    if (::stat(at.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return false;
    }
    const mode_t bit = static_cast<int64_t>(st.st_uid) == uid   ? S_IXUSR
                       : static_cast<int64_t>(st.st_gid) == gid ? S_IXGRP
                                                                : S_IXOTH;
    if ((st.st_mode & bit) == 0) {
      return false;
    }
  }
  return true;
}

std::vector<std::string> HiddenGpuDevices(const std::string& device_dir, int gpu_count,
                                          const std::set<int>& granted) {
  std::vector<std::string> hidden;
  for (int g = 0; g < gpu_count; ++g) {
    if (granted.count(g) > 0) {
      continue;
    }
    std::string path = device_dir + "/nvidia" + std::to_string(g);
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0) {
      hidden.push_back(std::move(path));
    }
  }
  return hidden;
}

}  // namespace tessera
