#include "agent/task_records.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <system_error>

#include "agent/launch/task_state_file.h"
#include "base/file_util.h"
#include "base/status.h"
#include "base/strings.h"

namespace tessera {
namespace {

constexpr std::string_view kSuffix = ".task";
constexpr std::string_view kSaving = ".task.tmp";
// Retired record files kept for reuse (task_records.h).
constexpr size_t kMaxSpareRecords = 64;

std::string SpareRoot(const std::string& tasks_dir) { return tasks_dir + "/.spare"; }

// The names in `dir` but "." and "..".
std::vector<std::string> Names(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    names.push_back(entry.path().filename().string());
  }
  return names;
}

// Moves a spare record file to `to`; false when there is none.
bool TakeSpare(const std::string& tasks_dir, const std::string& to) {
  const std::string spares = SpareRoot(tasks_dir);
  for (const std::string& name : Names(spares)) {
    // A rename that fails (a concurrent save took it first) tries the next.
    if (::rename((spares + "/" + name).c_str(), to.c_str()) == 0) {
      return true;
    }
  }
  return false;
}


bool IsDirectory(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Written aside, fsynced, renamed, the directory fsynced: a crash leaves the old content
// or the new, never half.
Status WriteAtomically(const std::string& path, const std::string& tmp, const std::string& content) {
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    return InternalError("cannot write " + tmp + ": " + ErrnoText(errno));
  }
  (void)::fchmod(fd, 0600);  // a reused spare keeps its mode otherwise
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      return InternalError("cannot write " + tmp + ": " + ErrnoText(err));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    return InternalError("cannot sync " + tmp + ": " + ErrnoText(err));
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    return InternalError("cannot rename " + tmp + ": " + ErrnoText(errno));
  }
  // The rename itself is durable only once its directory is.
  const std::string dir = path.substr(0, path.rfind('/'));
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
  return Status::Ok();
}

StatusOr<TaskRecord> ParseRecord(const std::string& where, std::string_view text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("launch")) {
    return InvalidArgumentError(where + " holds no task record");
  }
  TaskRecord record;
  TESSERA_ASSIGN_OR_RETURN(record.launch, TaskLaunchFromJson(j["launch"]));
  try {
    record.log_path = j.value("log_path", "");
    for (const auto& e : j.value("gpu_use", nlohmann::json::array())) {
      record.gpu_use.emplace_back(e.at(0).get<int>(), e.at(1).get<int64_t>());
    }
    for (const auto& e : j.value("mig", nlohmann::json::array())) {
      record.mig.emplace_back(e.at(0).get<int>(), e.at(1).get<std::string>());
    }
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgumentError(where + ": " + e.what());
  }
  return record;
}

}  // namespace

std::string TaskRecordId(const TaskKey& key) {
  return std::to_string(key.job) + "." + std::to_string(key.task) + "." +
         std::to_string(key.attempt);
}

std::string TaskRecordsRoot(const std::string& data_dir) { return data_dir + "/tasks"; }

std::string TaskRecordPath(const std::string& data_dir, const std::string& id) {
  const std::string legacy = TaskRecordsRoot(data_dir) + "/" + id;
  return IsDirectory(legacy) ? legacy : legacy + std::string(kSuffix);
}

Status SaveTaskRecord(const std::string& path, const TaskRecord& record) {
  const std::string dir = path.substr(0, path.rfind('/'));
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return InternalError("cannot create " + dir + ": " + ec.message());
  }
  nlohmann::json gpu_use = nlohmann::json::array();
  for (const auto& [gpu, milli] : record.gpu_use) {
    gpu_use.push_back({gpu, milli});
  }
  nlohmann::json mig = nlohmann::json::array();
  for (const auto& [gpu, uuid] : record.mig) {
    mig.push_back({gpu, uuid});
  }
  TaskLaunch launch = record.launch;
  launch.registry_auth.clear();  // a tenant's secret is never on the node's disk
  nlohmann::json j = {{"launch", ToJson(launch)},
                      {"log_path", record.log_path},
                      {"gpu_use", std::move(gpu_use)},
                      {"mig", std::move(mig)}};
  // One line: the dump escapes every newline of the strings it holds.
  const std::string line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  if (IsDirectory(path)) {
    return WriteAtomically(path + "/record.json", path + "/record.json.tmp", line);
  }
  const std::string tmp = path + ".tmp";
  if (TakeSpare(dir, tmp)) {
    // A spare must be no other name's file: after a crash of the machine, an unsynced
    // rename into the spares can leave a record and a spare naming one inode.
    struct stat st {};
    if (::lstat(tmp.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1) {
      ::unlink(tmp.c_str());
    }
  }
  return WriteAtomically(path, tmp, line);
}

StatusOr<TaskRecord> LoadTaskRecord(const std::string& path) {
  if (IsDirectory(path)) {
    std::optional<std::string> text = ReadTextFile(path + "/record.json");
    if (!text) {
      return NotFoundError("no task record in " + path);
    }
    return ParseRecord(path + "/record.json", *text);
  }
  std::optional<std::string> text = ReadTextFile(path);
  if (!text) {
    return NotFoundError("no task record " + path);
  }
  std::vector<std::string_view> lines = StateFileLines(*text);
  if (lines.empty()) {
    return InvalidArgumentError(path + " holds no task record");
  }
  return ParseRecord(path, lines.front());
}

std::vector<std::string> ListTaskRecords(const std::string& data_dir) {
  std::vector<std::string> ids;
  std::error_code ec;
  const std::string root = TaskRecordsRoot(data_dir);
  for (const auto& entry : std::filesystem::directory_iterator(root, ec)) {
    const std::string name = entry.path().filename().string();
    std::error_code type_ec;
    if (name.front() == '.') {
      continue;  // the spares; no task id starts with '.'
    }
    if (entry.is_directory(type_ec)) {
      ids.push_back(name);  // an earlier version's
    } else if (EndsWith(name, kSaving)) {
      ::unlink(entry.path().c_str());
    } else if (name.size() > kSuffix.size() && EndsWith(name, kSuffix)) {
      ids.push_back(name.substr(0, name.size() - kSuffix.size()));
    }
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

Status WriteTaskMarker(const std::string& path, const std::string& name, const std::string& reason) {
  std::string line = reason;
  std::replace(line.begin(), line.end(), '\n', ' ');
  if (IsDirectory(path)) {
    return WriteAtomically(path + "/" + name, path + "/" + name + ".tmp", line + "\n");
  }
  return AppendStateLine(path, name + " " + line, /*durable=*/true);
}

std::optional<std::string> ReadTaskMarker(const std::string& path, const std::string& name) {
  if (IsDirectory(path)) {
    std::optional<std::string> text = ReadTextFile(path + "/" + name);
    if (!text) {
      return std::nullopt;
    }
    return std::string(Trim(*text));
  }
  std::optional<std::string> text = ReadTextFile(path);
  if (!text) {
    return std::nullopt;
  }
  std::optional<std::string> reason;
  for (std::string_view line : StateFileLines(*text)) {
    if (line.size() > name.size() && line.substr(0, name.size()) == name &&
        line[name.size()] == ' ') {
      reason = std::string(Trim(line.substr(name.size() + 1)));
    }
  }
  return reason;
}

void RemoveTaskRecord(const std::string& path) {
  if (!IsDirectory(path)) {
    const std::string tasks_dir = path.substr(0, path.rfind('/'));
    const std::string spares = SpareRoot(tasks_dir);
    const std::string name = path.substr(path.rfind('/') + 1);
    if ((::mkdir(spares.c_str(), 0700) == 0 || errno == EEXIST) &&
        Names(spares).size() < kMaxSpareRecords &&
        ::rename(path.c_str(), (spares + "/" + name).c_str()) == 0) {
      return;
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

}  // namespace tessera
