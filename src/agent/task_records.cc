#include "agent/task_records.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <system_error>

#include "base/file_util.h"
#include "base/strings.h"

namespace tessera {
namespace {

std::string ErrnoText(int err) { return std::generic_category().message(err); }

// Written aside, fsynced, renamed: a crash leaves the old content or the new, never half.
Status WriteAtomically(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    return InternalError("cannot write " + tmp + ": " + ErrnoText(errno));
  }
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

}  // namespace

std::string TaskRecordId(const TaskKey& key) {
  return std::to_string(key.job) + "." + std::to_string(key.task) + "." +
         std::to_string(key.attempt);
}

std::string TaskRecordsRoot(const std::string& data_dir) { return data_dir + "/tasks"; }

std::string TaskRecordDir(const std::string& data_dir, const std::string& id) {
  return TaskRecordsRoot(data_dir) + "/" + id;
}

Status SaveTaskRecord(const std::string& dir, const TaskRecord& record) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return InternalError("cannot create " + dir + ": " + ec.message());
  }
  ::chmod(dir.c_str(), 0700);
  nlohmann::json gpu_use = nlohmann::json::array();
  for (const auto& [gpu, milli] : record.gpu_use) {
    gpu_use.push_back({gpu, milli});
  }
  nlohmann::json mig = nlohmann::json::array();
  for (const auto& [gpu, uuid] : record.mig) {
    mig.push_back({gpu, uuid});
  }
  nlohmann::json j = {{"launch", ToJson(record.launch)},
                      {"log_path", record.log_path},
                      {"gpu_use", std::move(gpu_use)},
                      {"mig", std::move(mig)}};
  return WriteAtomically(dir + "/record.json",
                         j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

StatusOr<TaskRecord> LoadTaskRecord(const std::string& dir) {
  std::optional<std::string> text = ReadTextFile(dir + "/record.json");
  if (!text) {
    return NotFoundError("no task record in " + dir);
  }
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("launch")) {
    return InvalidArgumentError(dir + "/record.json is not a task record");
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
    return InvalidArgumentError(dir + "/record.json: " + e.what());
  }
  return record;
}

std::vector<std::string> ListTaskRecords(const std::string& data_dir) {
  std::vector<std::string> ids;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(TaskRecordsRoot(data_dir), ec)) {
    if (entry.is_directory(ec)) {
      ids.push_back(entry.path().filename().string());
    }
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

Status WriteTaskMarker(const std::string& dir, const std::string& name, const std::string& reason) {
  std::string line = reason;
  std::replace(line.begin(), line.end(), '\n', ' ');
  return WriteAtomically(dir + "/" + name, line + "\n");
}

std::optional<std::string> ReadTaskMarker(const std::string& dir, const std::string& name) {
  std::optional<std::string> text = ReadTextFile(dir + "/" + name);
  if (!text) {
    return std::nullopt;
  }
  return std::string(Trim(*text));
}

void RemoveTaskRecord(const std::string& dir) {
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

}  // namespace tessera
