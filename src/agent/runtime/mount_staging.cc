#include "agent/runtime/mount_staging.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace tessera {
namespace {

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) {
      ::close(fd_);
    }
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

Status StageMount(const std::string& prefix, const std::string& source,
                  const std::string& staging) {
  if (source != prefix && source.rfind(prefix + "/", 0) != 0) {
    return PermissionDeniedError("mount source " + source + " is not under " + prefix);
  }
  Fd base(::open(prefix.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (base.get() < 0) {
    return NotFoundError("mount prefix " + prefix + ": " + std::strerror(errno));
  }
  std::string rel = source == prefix ? "." : source.substr(prefix.size() + 1);
  open_how how{};
  how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  Fd dir(static_cast<int>(::syscall(SYS_openat2, base.get(), rel.c_str(), &how, sizeof how)));
  if (dir.get() < 0) {
    const int err = errno;
    if (err == ENOSYS) {
      return FailedPreconditionError(
          "this kernel has no openat2 (Linux 5.6): host mounts into "
          "containers are refused");
    }
    if (err == ENOENT || err == ENOTDIR) {
      return NotFoundError("mount source " + source + " is not a directory on this node");
    }
    return PermissionDeniedError("mount source " + source + " is refused (" + std::strerror(err) +
                                 "): a component is a symbolic link or leaves " + prefix);
  }
  if (::mkdir(staging.c_str(), 0700) != 0 && errno != EEXIST) {
    return InternalError("staging " + staging + ": " + std::strerror(errno));
  }
  const std::string via = "/proc/self/fd/" + std::to_string(dir.get());
  if (::mount(via.c_str(), staging.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
    const int err = errno;
    ::rmdir(staging.c_str());
    return FailedPreconditionError("binding " + source +
                                   " for the container: " + std::strerror(err));
  }
  return Status::Ok();
}

void UnstageMounts(const std::string& dir) {
  std::vector<std::string> points;
  std::ifstream in("/proc/self/mountinfo");
  for (std::string line; std::getline(in, line);) {
    std::istringstream w(line);
    std::string id, parent, devno, root, point;
    w >> id >> parent >> devno >> root >> point;
    if (point == dir || point.rfind(dir + "/", 0) == 0) {
      points.push_back(point);
    }
  }
  std::sort(points.rbegin(), points.rend());  // the deepest first
  for (const std::string& p : points) {
    ::umount2(p.c_str(), MNT_DETACH);
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);  // empty directories once nothing is mounted
}

}  // namespace tessera
