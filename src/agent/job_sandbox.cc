// Spare job directories (task_sandbox.h): an ended job's directories are emptied and
// kept for the next job of the same owner, instead of being removed and made again.
// Everything here works on directory descriptors opened with O_NOFOLLOW, so a link a
// task left in its directories is removed, never followed; a directory is the agent's
// before anything in it is removed.
#include <dirent.h>
#include <stdio.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "agent/launch/task_shim.h"
#include "agent/task_sandbox.h"

namespace tessera {
namespace {

// A task can nest directories deeper than this; such a tree is removed, not emptied.
constexpr int kMaxDepth = 64;

std::string SpareRoot(const std::string& data_dir) { return data_dir + "/jobs/.spare"; }

UniqueFd OpenDir(int at, const char* name) {
  return UniqueFd(::openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
}

// The names in the directory `fd` but "." and ".."; false when it cannot be read.
bool ListNames(int fd, std::vector<std::string>* names) {
  const int copy = ::dup(fd);  // closedir closes it
  if (copy < 0) {
    return false;
  }
  DIR* d = ::fdopendir(copy);
  if (d == nullptr) {
    ::close(copy);
    return false;
  }
  ::rewinddir(d);
  while (const dirent* e = ::readdir(d)) {
    const std::string_view name = e->d_name;
    if (name != "." && name != "..") {
      names->emplace_back(name);
    }
  }
  ::closedir(d);
  return true;
}

bool RemoveContents(int fd, uid_t owner, int depth);

// Removes the entry `name` of the directory `fd`, a directory with all it holds. False
// on an error, and for an entry of another uid than `owner` (removed all the same).
bool RemoveEntry(int fd, const std::string& name, uid_t owner, int depth) {
  struct stat st {};
  if (::fstatat(fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return false;
  }
  const bool own = st.st_uid == owner;
  if (!S_ISDIR(st.st_mode)) {
    return ::unlinkat(fd, name.c_str(), 0) == 0 && own;
  }
  if (depth >= kMaxDepth) {
    return false;
  }
  UniqueFd sub = OpenDir(fd, name.c_str());
  return sub.get() >= 0 && RemoveContents(sub.get(), owner, depth + 1) &&
         ::unlinkat(fd, name.c_str(), AT_REMOVEDIR) == 0 && own;
}

bool RemoveContents(int fd, uid_t owner, int depth) {
  std::vector<std::string> names;
  if (!ListNames(fd, &names)) {
    return false;
  }
  bool all = true;
  for (const std::string& name : names) {
    all = RemoveEntry(fd, name, owner, depth) && all;
  }
  return all;
}

// Whether the directory carries an access or default ACL.
bool HasAcl(int fd) {
  return ::fgetxattr(fd, "system.posix_acl_access", nullptr, 0) >= 0 ||
         ::fgetxattr(fd, "system.posix_acl_default", nullptr, 0) >= 0;
}

// Takes the directory from its owner before anything is removed: the agent's own, 0700,
// without the extended attributes a task may have set (security labels stay). False
// when the directory is not `owner`'s or had been opened to anyone else (group or other
// bits, an ACL): a process of another uid may hold it open, and would see what the next
// job puts there.
bool LockDown(int fd, const struct stat& owner) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_uid != owner.st_uid || st.st_gid != owner.st_gid ||
      (st.st_mode & 077) != 0 || HasAcl(fd)) {
    return false;
  }
  if (::fchown(fd, ::geteuid(), ::getegid()) != 0 || ::fchmod(fd, 0700) != 0) {
    return false;
  }
  std::array<char, 4096> names{};
  const ssize_t size = ::flistxattr(fd, names.data(), names.size());
  if (size < 0 && errno != ENOTSUP) {
    return false;
  }
  for (ssize_t at = 0; at < size;) {
    const char* name = names.data() + at;
    at += static_cast<ssize_t>(std::strlen(name)) + 1;
    if (std::strncmp(name, "security.", 9) != 0 && ::fremovexattr(fd, name) != 0 &&
        errno != ENODATA) {
      return false;
    }
  }
  return true;
}

// Leaves the job directory `fd` with only home/ and tmp/, empty, all three the agent's
// (PrepareJobSandbox gives them to the next job's owner). Each is locked down before it
// is emptied, so nothing can be added meanwhile. False when the directories cannot be
// kept: home or tmp replaced by something else or opened to others, an entry of another
// uid in them, a tree too deep, an error.
bool Empty(int fd, const struct stat& owner) {
  if (!LockDown(fd, owner)) {
    return false;
  }
  std::vector<std::string> names;
  if (!ListNames(fd, &names)) {
    return false;
  }
  int kept = 0;
  bool clean = true;
  for (const std::string& name : names) {
    if (name != "home" && name != "tmp") {
      clean = RemoveEntry(fd, name, owner.st_uid, 0) && clean;
      continue;
    }
    UniqueFd sub = OpenDir(fd, name.c_str());
    if (sub.get() < 0 || !LockDown(sub.get(), owner)) {
      return false;
    }
    clean = RemoveContents(sub.get(), owner.st_uid, 1) && clean;
    ++kept;
  }
  return clean && kept == 2;
}

// Empties `dir` and moves it among the spares; false when it is not kept.
bool KeepAsSpare(const std::string& data_dir, const std::string& dir, uint64_t job) {
  const std::string spares = SpareRoot(data_dir);
  if (::mkdir(spares.c_str(), 0700) != 0 && errno != EEXIST) {
    return false;
  }
  UniqueFd root = OpenDir(AT_FDCWD, spares.c_str());
  std::vector<std::string> kept;
  if (root.get() < 0 || !ListNames(root.get(), &kept) ||
      kept.size() >= static_cast<size_t>(kMaxSpareSandboxes)) {
    return false;
  }
  UniqueFd fd = OpenDir(AT_FDCWD, dir.c_str());
  struct stat owner {};
  if (fd.get() < 0 || ::fstat(fd.get(), &owner) != 0 || !Empty(fd.get(), owner)) {
    return false;
  }
  // Named by the owner it had: only a job of that uid and gid may take it.
  const std::string name =
      std::to_string(owner.st_uid) + "." + std::to_string(owner.st_gid) + "." + std::to_string(job);
  return ::renameat(AT_FDCWD, dir.c_str(), root.get(), name.c_str()) == 0;
}

}  // namespace

void RetireJobSandbox(const std::string& data_dir, uint64_t job) {
  const std::string dir = data_dir + "/jobs/" + std::to_string(job);
  if (!KeepAsSpare(data_dir, dir, job)) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
}

bool TakeSpareSandbox(const std::string& data_dir, const std::string& dir, int64_t uid,
                      int64_t gid) {
  if (uid < 0) {
    uid = ::geteuid();
    gid = ::getegid();
  }
  const std::string prefix = std::to_string(uid) + "." + std::to_string(gid) + ".";
  UniqueFd root = OpenDir(AT_FDCWD, SpareRoot(data_dir).c_str());
  std::vector<std::string> names;
  if (root.get() < 0 || !ListNames(root.get(), &names)) {
    return false;
  }
  for (const std::string& name : names) {
    if (name.rfind(prefix, 0) != 0) {
      continue;
    }
    if (::renameat2(root.get(), name.c_str(), AT_FDCWD, dir.c_str(), RENAME_NOREPLACE) == 0) {
      return true;
    }
    if (errno == EEXIST) {
      return false;  // `dir` was made meanwhile
    }
    // Another caller took this one first: the next.
  }
  return false;
}

}  // namespace tessera
