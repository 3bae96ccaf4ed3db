#include "agent/launch/cgroups.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <system_error>

#include "base/file_util.h"
#include "base/status.h"
#include "base/strings.h"

namespace tessera {
namespace {

constexpr std::string_view kTasksChild = "tessera";
constexpr std::string_view kAgentLeaf = "agent";
constexpr std::string_view kTaskPrefix = "task-";
constexpr const char* kLimitsOff = ": CPU and memory limits are not enforced";

// Writes `value` to an existing control file. Returns 0 or an errno.
int WriteControl(const std::string& path, std::string_view value) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    return errno;
  }
  int err = 0;
  ssize_t n;
  do {
    n = ::write(fd, value.data(), value.size());
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    err = errno;
  } else if (static_cast<size_t>(n) != value.size()) {
    err = EIO;
  }
  ::close(fd);
  return err;
}

bool IsCgroup2(const std::string& dir) {
  struct statfs fs {};
  return ::statfs(dir.c_str(), &fs) == 0 && fs.f_type == CGROUP2_SUPER_MAGIC;
}

bool Contains(const std::vector<std::string>& items, std::string_view item) {
  return std::find(items.begin(), items.end(), item) != items.end();
}

// Decodes the octal escapes (\040 and friends) of /proc/self/mountinfo fields.
std::string UnescapeMountField(std::string_view field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size()) {
      std::string_view digits = field.substr(i + 1, 3);
      if (digits.size() == 3 &&
          std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '7'; })) {
        out +=
            static_cast<char>((digits[0] - '0') * 64 + (digits[1] - '0') * 8 + (digits[2] - '0'));
        i += 3;
        continue;
      }
    }
    out += field[i];
  }
  return out;
}

std::vector<std::string_view> Fields(std::string_view line) {
  std::vector<std::string_view> fields;
  for (std::string_view f : Split(line, ' ')) {
    if (!f.empty()) {
      fields.push_back(f);
    }
  }
  return fields;
}

// The pids listed in a cgroup.procs file.
std::vector<pid_t> ReadPids(const std::string& dir) {
  std::vector<pid_t> pids;
  auto text = ReadTextFile(dir + "/cgroup.procs");
  if (!text) {
    return pids;
  }
  for (std::string_view line : Split(*text, '\n')) {
    auto pid = ParseInt64(line);
    if (pid.ok() && *pid > 0) {
      pids.push_back(static_cast<pid_t>(*pid));
    }
  }
  return pids;
}

bool ValidName(std::string_view name) {
  if (name.empty() || name.size() > 200) {
    return false;
  }
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
  });
}

// Enables `wanted` in dir/cgroup.subtree_control (one controller per write, so a
// failure names its controller). Returns 0 or the first errno.
int EnableControllers(const std::string& dir, const std::vector<std::string>& wanted) {
  auto current = ReadTextFile(dir + "/cgroup.subtree_control");
  std::vector<std::string> enabled =
      current ? ParseControllers(*current) : std::vector<std::string>{};
  for (const std::string& controller : wanted) {
    if (Contains(enabled, controller)) {
      continue;
    }
    int err = WriteControl(dir + "/cgroup.subtree_control", "+" + controller);
    if (err != 0) {
      return err;
    }
  }
  return 0;
}

}  // namespace

StatusOr<std::string> ParseCgroupV2Path(std::string_view proc_self_cgroup) {
  for (std::string_view line : Split(proc_self_cgroup, '\n')) {
    line = Trim(line);
    if (!StartsWith(line, "0::")) {
      continue;
    }
    std::string_view path = line.substr(3);
    if (path.empty() || path.front() != '/') {
      return InvalidArgumentError("malformed cgroup v2 line '" + std::string(line) + "'");
    }
    if (path == "/.." || StartsWith(path, "/../")) {
      return FailedPreconditionError("the process's cgroup " + std::string(path) +
                                     " lies outside this cgroup namespace");
    }
    return std::string(path);
  }
  return NotFoundError("no cgroup v2 entry (\"0::/...\") in /proc/self/cgroup");
}

StatusOr<Cgroup2Mount> FindCgroup2Mount(std::string_view mountinfo) {
  std::optional<Cgroup2Mount> found;
  for (std::string_view line : Split(mountinfo, '\n')) {
    // id parent major:minor root mount_point options [optional...] - fstype source super
    std::vector<std::string_view> fields = Fields(line);
    auto dash = std::find(fields.begin(), fields.end(), std::string_view("-"));
    if (fields.size() < 5 || dash == fields.end() || dash + 1 == fields.end() ||
        dash - fields.begin() < 6) {
      continue;
    }
    if (*(dash + 1) != "cgroup2") {
      continue;
    }
    Cgroup2Mount mount{UnescapeMountField(fields[4]), UnescapeMountField(fields[3])};
    if (mount.mount_point == "/sys/fs/cgroup") {
      return mount;
    }
    if (!found) {
      found = std::move(mount);
    }
  }
  if (!found) {
    return NotFoundError("no cgroup2 file system is mounted");
  }
  return *found;
}

StatusOr<std::string> CgroupDirectory(const Cgroup2Mount& mount, const std::string& cgroup_path) {
  std::string root = mount.root;
  while (root.size() > 1 && root.back() == '/') {
    root.pop_back();
  }
  std::string rest;
  if (root == "/") {
    rest = cgroup_path;
  } else if (cgroup_path == root) {
    rest = "";
  } else if (StartsWith(cgroup_path, root + "/")) {
    rest = cgroup_path.substr(root.size());
  } else {
    return FailedPreconditionError("the cgroup2 mount at " + mount.mount_point + " shows " +
                                   mount.root + ", not the process's cgroup " + cgroup_path);
  }
  std::string dir = mount.mount_point;
  while (dir.size() > 1 && dir.back() == '/') {
    dir.pop_back();
  }
  if (rest == "/") {
    rest = "";
  }
  return dir + rest;
}

std::vector<std::string> ParseControllers(std::string_view text) {
  std::vector<std::string> out;
  for (std::string_view f : Fields(Trim(text))) {
    f = Trim(f);
    if (!f.empty()) {
      out.emplace_back(f);
    }
  }
  return out;
}

std::string CpuMaxText(int64_t cpu_milli) {
  if (cpu_milli <= 0) {
    return "max " + std::to_string(kCpuMaxPeriodUs);
  }
  // Milli-CPUs beyond a million CPUs are nonsense; cap before multiplying.
  int64_t milli = std::min<int64_t>(cpu_milli, int64_t{1'000'000'000});
  int64_t quota = std::max(kCpuMaxMinQuotaUs, milli * kCpuMaxPeriodUs / 1000);
  return std::to_string(quota) + " " + std::to_string(kCpuMaxPeriodUs);
}

std::string MemoryMaxText(int64_t memory_mib) {
  if (memory_mib <= 0) {
    return "max";
  }
  int64_t mib = std::min<int64_t>(memory_mib, int64_t{1} << 40);  // no overflow below
  return std::to_string(mib * 1024 * 1024);
}

CgroupTree CgroupTree::Open(const std::string& parent, bool without_controllers) {
  CgroupTree tree;
  tree.without_controllers_ = without_controllers;
  tree.SetUp(parent);
  return tree;
}

void CgroupTree::SetUp(const std::string& parent) {
  if (!parent.empty()) {
    SetUpParent(parent);
    return;
  }
  auto mountinfo = ReadTextFile("/proc/self/mountinfo");
  auto self = ReadTextFile("/proc/self/cgroup");
  if (!mountinfo || !self) {
    Warn(std::string("cannot read /proc/self/mountinfo or /proc/self/cgroup") + kLimitsOff);
    return;
  }
  auto mount = FindCgroup2Mount(*mountinfo);
  if (!mount.ok()) {
    Warn("cgroup v2 is not mounted" + std::string(kLimitsOff));
    return;
  }
  auto path = ParseCgroupV2Path(*self);
  if (!path.ok()) {
    Warn("cannot find the agent's cgroup v2: " + path.status().message() + kLimitsOff);
    return;
  }
  auto own = CgroupDirectory(*mount, *path);
  if (!own.ok()) {
    Warn(own.status().message() + kLimitsOff);
    return;
  }
  const std::string& own_dir = *own;
  auto controllers_text = ReadTextFile(own_dir + "/cgroup.controllers");
  if (!controllers_text) {
    Warn("cgroup v2 not readable at " + own_dir + kLimitsOff);
    return;
  }
  std::vector<std::string> available = ParseControllers(*controllers_text);
  std::vector<std::string> wanted;
  for (const char* c : {"cpu", "memory"}) {
    if (Contains(available, c)) {
      wanted.emplace_back(c);
    }
  }
  if (wanted.empty() && !without_controllers_) {
    Warn("cgroup v2 at " + own_dir + " offers neither the cpu nor the memory controller" +
         " (available: '" + std::string(Trim(*controllers_text)) + "')" + kLimitsOff);
    return;
  }
  std::string tasks_dir = own_dir + "/" + std::string(kTasksChild);
  int err = EnableControllers(own_dir, wanted);
  if (err == EBUSY) {
    // cgroup v2's "no internal processes" rule: move the agent into a leaf first, but
    // only when it is alone in its cgroup (never move processes that are not ours).
    std::vector<pid_t> pids = ReadPids(own_dir);
    if (pids.size() == 1 && pids[0] == ::getpid()) {
      std::string leaf = own_dir + "/" + std::string(kAgentLeaf);
      if (::mkdir(leaf.c_str(), 0755) == 0 || errno == EEXIST) {
        if (WriteControl(leaf + "/cgroup.procs", std::to_string(::getpid())) == 0) {
          err = EnableControllers(own_dir, wanted);
        }
      }
    }
    if (err == EBUSY) {
      Warn("cgroup v2 at " + own_dir +
           " holds other processes, so it cannot delegate controllers to task cgroups"
           " (run the agent in a cgroup of its own, or set cgroup_parent)" +
           kLimitsOff);
      return;
    }
  }
  if (err != 0) {
    Warn("cgroup v2 not writable at " + own_dir + "/cgroup.subtree_control (" + ErrnoText(err) +
         ")" + kLimitsOff);
    return;
  }
  SetUpParent(tasks_dir);
}

void CgroupTree::SetUpParent(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    Warn("cgroup v2 not writable at " + dir + " (" + ErrnoText(errno) + ")" + kLimitsOff);
    return;
  }
  if (!IsCgroup2(dir)) {
    Warn(dir + " is not in a cgroup v2 file system" + kLimitsOff);
    return;
  }
  auto controllers_text = ReadTextFile(dir + "/cgroup.controllers");
  std::vector<std::string> available =
      controllers_text ? ParseControllers(*controllers_text) : std::vector<std::string>{};
  std::vector<std::string> wanted;
  for (const char* c : {"cpu", "memory"}) {
    if (Contains(available, c)) {
      wanted.emplace_back(c);
    }
  }
  if (wanted.empty() && !without_controllers_) {
    Warn("cgroup v2 at " + dir + " offers neither the cpu nor the memory controller" + kLimitsOff);
    return;
  }
  int err = EnableControllers(dir, wanted);
  if (err != 0) {
    Warn("cgroup v2 not writable at " + dir + "/cgroup.subtree_control (" + ErrnoText(err) +
         (err == EBUSY ? "; the cgroup holds processes" : "") + ")" + kLimitsOff);
    return;
  }
  auto subtree = ReadTextFile(dir + "/cgroup.subtree_control");
  std::vector<std::string> enabled =
      subtree ? ParseControllers(*subtree) : std::vector<std::string>{};
  cpu_ = Contains(enabled, "cpu");
  memory_ = Contains(enabled, "memory");
  if (!cpu_) {
    Warn("the cgroup v2 cpu controller is not available at " + dir +
         ": CPU limits are not enforced");
  }
  if (!memory_) {
    Warn("the cgroup v2 memory controller is not available at " + dir +
         ": memory limits are not enforced");
  }
  if (!cpu_ && !memory_ && !without_controllers_) {
    return;
  }
  // Empty task cgroups left by an earlier agent. One that still holds processes belongs
  // to a task that outlived that agent, for TaskLauncher::Adopt to take over.
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    if (StartsWith(name, kTaskPrefix) && entry.is_directory(ec)) {
      ::rmdir(entry.path().c_str());
    }
  }
  parent_dir_ = dir;
  usable_ = true;
}

StatusOr<std::string> CgroupTree::CreateTaskGroup(std::string_view name, int64_t cpu_milli,
                                                  int64_t memory_mib) const {
  if (!usable_) {
    return FailedPreconditionError("cgroups are not usable on this machine");
  }
  if (!ValidName(name)) {
    return InvalidArgumentError("task cgroup name '" + std::string(name) +
                                "' must be 1-200 characters of [A-Za-z0-9._-]");
  }
  std::string dir = parent_dir_ + "/" + std::string(kTaskPrefix) + std::string(name);
  if (::mkdir(dir.c_str(), 0755) != 0) {
    if (errno != EEXIST) {
      return InternalError("cannot create cgroup " + dir + ": " + ErrnoText(errno));
    }
    TESSERA_RETURN_IF_ERROR(RemoveTaskGroup(dir));
    if (::mkdir(dir.c_str(), 0755) != 0) {
      return InternalError("cannot create cgroup " + dir + ": " + ErrnoText(errno));
    }
  }
  if (cpu_ && cpu_milli > 0) {
    int err = WriteControl(dir + "/cpu.max", CpuMaxText(cpu_milli));
    if (err != 0) {
      ::rmdir(dir.c_str());
      return InternalError("cannot write " + dir + "/cpu.max: " + ErrnoText(err));
    }
  }
  if (memory_ && memory_mib > 0) {
    int err = WriteControl(dir + "/memory.max", MemoryMaxText(memory_mib));
    if (err != 0) {
      ::rmdir(dir.c_str());
      return InternalError("cannot write " + dir + "/memory.max: " + ErrnoText(err));
    }
  }
  return dir;
}

Status CgroupTree::RemoveTaskGroup(const std::string& dir) {
  if (::rmdir(dir.c_str()) == 0 || errno == ENOENT) {
    return Status::Ok();
  }
  if (errno != EBUSY) {
    return InternalError("cannot remove cgroup " + dir + ": " + ErrnoText(errno));
  }
  if (WriteControl(dir + "/cgroup.kill", "1") != 0) {
    for (pid_t pid : ReadPids(dir)) {
      ::kill(pid, SIGKILL);
    }
  }
  if (::rmdir(dir.c_str()) == 0 || errno == ENOENT) {
    return Status::Ok();
  }
  if (errno == EBUSY) {
    return UnavailableError("cgroup " + dir + " still has exiting processes");
  }
  return InternalError("cannot remove cgroup " + dir + ": " + ErrnoText(errno));
}

}  // namespace tessera
