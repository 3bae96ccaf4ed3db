#include "agent/task_sandbox.h"

#include <fcntl.h>
#include <stdio.h>  // renameat2
#include <stdlib.h>  // mkdtemp
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <system_error>

#include "agent/launch/checkpoint_protocol.h"
#include "base/status.h"

namespace tessera {
namespace {

// "0700": a directory's permission bits as `ls` and chmod spell them.
std::string ModeText(mode_t mode) {
  char buf[8] = {'0'};
  const char* end = std::to_chars(buf + 1, buf + sizeof(buf), mode & 07777, 8).ptr;
  return std::string(static_cast<const char*>(buf), end);
}


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

// Makes `dir` already owned by uid:gid with `mode`: built under a temporary name and
// renamed into place (never over an existing one), so that another agent sharing the
// checkpoint root (a gang's tasks on several nodes) never sees it before its owner is
// set. True when this call made it; false when it existed.
StatusOr<bool> MakeOwnedDir(const std::string& dir, int64_t uid, int64_t gid, unsigned mode) {
  std::string tmp = dir + ".new-XXXXXX";
  if (::mkdtemp(tmp.data()) == nullptr) {
    return InternalError("cannot create a directory beside " + dir + ": " + ErrnoText(errno));
  }
  if (Status s = ChownDir(tmp, uid, gid, mode); !s.ok()) {
    ::rmdir(tmp.c_str());
    return s;
  }
  if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, dir.c_str(), RENAME_NOREPLACE) == 0) {
    return true;
  }
  const int err = errno;
  ::rmdir(tmp.c_str());
  if (err != EEXIST) {
    return InternalError("cannot create " + dir + ": " + ErrnoText(err));
  }
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return FailedPreconditionError(dir + " exists and is not a directory");
  }
  return false;
}

// Makes `dir` (not its parents) with exactly `mode` when missing; true when this call
// made it. It is made aside, given its mode and renamed into place, so that it never
// appears under its name with the mode the daemon's umask (077) narrowed it to: another
// process that finds it there (the agent of another node on a shared checkpoint root)
// goes on at once, as a task's uid, through it.
StatusOr<bool> MakeDirWithMode(const std::string& dir, unsigned mode) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) {
      return FailedPreconditionError(dir + " exists and is not a directory");
    }
    return false;
  }
  if (errno != ENOENT) {
    return InternalError("cannot create " + dir + ": " + ErrnoText(errno));
  }
  std::string tmp = dir + ".new-XXXXXX";
  if (::mkdtemp(tmp.data()) == nullptr) {
    return InternalError("cannot create a directory beside " + dir + ": " + ErrnoText(errno));
  }
  if (::chmod(tmp.c_str(), mode) != 0) {
    const int err = errno;
    ::rmdir(tmp.c_str());
    return InternalError("cannot set the mode of " + tmp + ": " + ErrnoText(err));
  }
  int moved = ::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, dir.c_str(), RENAME_NOREPLACE);
  if (moved != 0 && errno == EINVAL) {
    // A file system without RENAME_NOREPLACE (NFS): rename(2) replaces only an empty
    // directory, one that another process made the same way a moment ago.
    moved = ::rename(tmp.c_str(), dir.c_str());
  }
  if (moved == 0) {
    return true;
  }
  const int err = errno;
  ::rmdir(tmp.c_str());
  if (err != EEXIST && err != ENOTEMPTY && err != ENOTDIR && err != EISDIR) {
    return InternalError("cannot create " + dir + ": " + ErrnoText(err));
  }
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return FailedPreconditionError(dir + " exists and is not a directory");
  }
  return false;  // made by another process meanwhile
}

bool Exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// The N of "DeviceFileMinor: N" in a capability's access file.
StatusOr<int> CapabilityMinor(const std::string& access_file) {
  std::ifstream in(access_file);
  if (!in) {
    return NotFoundError("cannot read " + access_file);
  }
  for (std::string line; std::getline(in, line);) {
    constexpr std::string_view kKey = "DeviceFileMinor:";
    if (line.rfind(kKey, 0) != 0) {
      continue;
    }
    int minor = -1;
    std::string_view rest = std::string_view(line).substr(kKey.size());
    while (!rest.empty() && rest.front() == ' ') {
      rest.remove_prefix(1);
    }
    auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), minor);
    if (ec == std::errc() && end == rest.data() + rest.size() && minor >= 0) {
      return minor;
    }
  }
  return InvalidArgumentError(access_file + " has no DeviceFileMinor line");
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
    TESSERA_RETURN_IF_ERROR(MakeDirWithMode(at.string(), mode).status());
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
  struct stat st {};
  if (::lstat(box.dir.c_str(), &st) != 0 && errno == ENOENT) {
    (void)TakeSpareSandbox(data_dir, box.dir, uid, gid);
  }
  for (const std::string& d : {box.dir, box.home, box.tmp}) {
    TESSERA_ASSIGN_OR_RETURN(bool made, MakeDir(d, 0700));
    (void)made;
    TESSERA_RETURN_IF_ERROR(ChownDir(d, uid, gid, 0700));
  }
  return box;
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
    TESSERA_ASSIGN_OR_RETURN(bool made, MakeOwnedDir(dir, uid, gid, 0700));
    if (!made && uid >= 0) {
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

Status DataDirReachableByTasks(const std::string& data_dir) {
  if (::geteuid() != 0) {
    return Status::Ok();
  }
  std::filesystem::path p = std::filesystem::absolute(data_dir).lexically_normal();
  for (std::filesystem::path at = p.parent_path(); !at.empty(); at = at.parent_path()) {
    struct stat st {};
    if (::stat(at.c_str(), &st) == 0 && (st.st_mode & S_IXOTH) == 0) {
      return FailedPreconditionError(
          "tasks run as their tenants' uids and could not reach the data directory " +
          p.string() + ": " + at.string() + " (mode " + ModeText(st.st_mode) +
          ") is not searchable by others. Choose a data directory they can reach, e.g. "
          "--data /var/lib/tessera/" + p.filename().string() + ", or allow them in with "
          "`chmod o+x " + at.string() + "`");
    }
    if (at == at.root_path()) {
      break;
    }
  }
  return Status::Ok();
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

StatusOr<std::vector<std::string>> MigCapabilityNodes(const std::string& caps_dir,
                                                      const GpuDeviceGrant& g) {
  if (g.gpu_instance < 0 && g.compute_instance < 0) {
    return std::vector<std::string>{};  // a whole card needs no capability
  }
  const std::string where = "MIG instance (GPU instance " + std::to_string(g.gpu_instance) +
                            ", compute instance " + std::to_string(g.compute_instance) +
                            ") of /dev/nvidia" + std::to_string(g.minor);
  if (g.gpu_instance < 0 || g.compute_instance < 0) {
    return FailedPreconditionError(where + ": the driver did not say its ids");
  }
  const std::string gi =
      caps_dir + "/gpu" + std::to_string(g.minor) + "/mig/gi" + std::to_string(g.gpu_instance);
  std::vector<std::string> out;
  for (const std::string& access :
       {gi + "/access", gi + "/ci" + std::to_string(g.compute_instance) + "/access"}) {
    StatusOr<int> minor = CapabilityMinor(access);
    if (!minor.ok()) {
      return FailedPreconditionError(where + ": " + minor.status().message());
    }
    out.push_back("nvidia-cap" + std::to_string(*minor));
  }
  return out;
}

StatusOr<std::vector<std::string>> HiddenGpuDevices(const std::string& device_dir,
                                                    const std::string& caps_dir,
                                                    const std::vector<int>& all_minors,
                                                    const std::vector<GpuDeviceGrant>& granted) {
  std::set<int> granted_minors;
  for (const GpuDeviceGrant& g : granted) {
    granted_minors.insert(g.minor);
  }
  std::vector<std::string> hidden;
  for (int minor : all_minors) {
    std::string path = device_dir + "/nvidia" + std::to_string(minor);
    if (granted_minors.count(minor) == 0 && Exists(path)) {
      hidden.push_back(std::move(path));
    }
  }
  const std::string caps_nodes = device_dir + "/nvidia-caps";
  std::error_code ec;
  if (!std::filesystem::is_directory(caps_nodes, ec)) {
    return hidden;  // no MIG capabilities on this machine
  }
  std::set<std::string> own;
  for (const GpuDeviceGrant& g : granted) {
    TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> names, MigCapabilityNodes(caps_dir, g));
    own.insert(names.begin(), names.end());
  }
  for (const auto& entry : std::filesystem::directory_iterator(caps_nodes, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("nvidia-cap", 0) == 0 && own.count(name) == 0) {
      hidden.push_back(entry.path().string());
    }
  }
  std::sort(hidden.begin(), hidden.end());
  return hidden;
}

}  // namespace tessera
