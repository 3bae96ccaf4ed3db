#include "agent/launch/task_state_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include "base/file_util.h"
#include "base/strings.h"

namespace tessera {
namespace {

// The rest of `line` after "key " when it starts so.
bool Value(std::string_view line, std::string_view key, std::string* value) {
  if (line.size() <= key.size() || line.substr(0, key.size()) != key ||
      line[key.size()] != ' ') {
    return false;
  }
  *value = std::string(line.substr(key.size() + 1));
  return true;
}

TaskStateLines ReadLegacyDirectory(const std::string& dir) {
  TaskStateLines state;
  if (std::optional<std::string> shim = ReadTextFile(dir + "/shim")) {
    state.shim = std::string(Trim(*shim));
  }
  if (std::optional<std::string> cgroup = ReadTextFile(dir + "/cgroup")) {
    state.cgroup = std::string(Trim(*cgroup));
  }
  if (std::optional<std::string> end = ReadTextFile(dir + "/exit")) {
    // Only a whole line counts, as in the file layout.
    if (!end->empty() && end->back() == '\n') {
      state.end = std::string(Trim(*end));
    }
  }
  state.any = !state.shim.empty() || !state.cgroup.empty() || !state.end.empty();
  return state;
}

}  // namespace

std::vector<std::string_view> StateFileLines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = text.find('\n', at);
    if (end == std::string_view::npos) {
      break;  // cut off
    }
    std::string_view line = text.substr(at, end - at);
    const size_t start = line.find_first_not_of('\0');
    line.remove_prefix(start == std::string_view::npos ? line.size() : start);
    lines.push_back(line);
    at = end + 1;
  }
  return lines;
}

Status AppendStateLine(const std::string& path, std::string_view line, bool durable) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    const int err = errno;
    const std::string why = "cannot append to " + path + ": " + std::generic_category().message(err);
    return err == ENOENT ? NotFoundError(why) : InternalError(why);
  }
  std::string text(line);
  text += '\n';
  // One write: appends of whole lines by the shim and the agent do not interleave.
  const ssize_t n = ::write(fd, text.data(), text.size());
  int err = 0;
  if (n != static_cast<ssize_t>(text.size())) {
    err = n < 0 ? errno : EIO;
  } else if (durable && ::fdatasync(fd) != 0) {
    err = errno;
  }
  ::close(fd);
  if (err != 0) {
    return InternalError("cannot append to " + path + ": " + std::generic_category().message(err));
  }
  return Status::Ok();
}

TaskStateLines ReadTaskState(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return ReadLegacyDirectory(path);
  }
  TaskStateLines state;
  std::optional<std::string> text = ReadTextFile(path);
  if (!text) {
    return state;
  }
  for (std::string_view line : StateFileLines(*text)) {
    std::string end;
    if (line == "clear") {
      state = TaskStateLines{};
    } else if (Value(line, "cgroup", &state.cgroup) || Value(line, "shim", &state.shim)) {
      state.any = true;
    } else if (line == "fenced" || Value(line, "exit", &end) || Value(line, "signal", &end)) {
      state.end = std::string(line);
      state.any = true;
    }
  }
  return state;
}

}  // namespace tessera
