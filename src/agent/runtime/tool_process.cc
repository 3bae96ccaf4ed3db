#include "agent/runtime/tool_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tessera {

StatusOr<ToolResult> RunTool(const std::vector<std::string>& argv,
                             const std::map<std::string, std::string>& env,
                             std::chrono::milliseconds deadline,
                             const std::function<void(std::string_view line)>& on_line) {
  if (argv.empty()) {
    return InvalidArgumentError("RunTool: no program");
  }
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    return InternalError(std::string("pipe: ") + std::strerror(errno));
  }
  std::vector<char*> cargv;
  for (const std::string& a : argv) {
    cargv.push_back(const_cast<char*>(a.c_str()));
  }
  cargv.push_back(nullptr);
  std::vector<std::string> env_storage;
  for (const auto& [k, v] : env) {
    env_storage.push_back(k + "=" + v);
  }
  std::vector<char*> cenv;
  for (std::string& e : env_storage) {
    cenv.push_back(e.data());
  }
  cenv.push_back(nullptr);

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, out[1], 2);
  posix_spawn_file_actions_addclosefrom_np(&fa, 3);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigset_t all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, argv[0].c_str(), &fa, &attr, cargv.data(), cenv.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  ::close(out[1]);
  if (rc != 0) {
    ::close(out[0]);
    return InternalError("cannot run " + argv[0] + ": " + std::strerror(rc));
  }

  ToolResult result;
  const auto until = std::chrono::steady_clock::now() + deadline;
  std::string pending;  // an unfinished line, for on_line
  char buf[8192];
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      ::kill(-pid, SIGKILL);
      break;
    }
    pollfd p{out[0], POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (ready < 0 && errno != EINTR) {
      break;
    }
    if (ready <= 0) {
      continue;
    }
    const ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
      continue;
    }
    if (n <= 0) {
      break;  // every writer is gone
    }
    result.output.append(buf, static_cast<size_t>(n));
    if (result.output.size() > kMaxToolOutput) {
      result.output.erase(0, result.output.size() - kMaxToolOutput);
    }
    if (on_line) {
      pending.append(buf, static_cast<size_t>(n));
      for (size_t nl; (nl = pending.find_first_of("\r\n")) != std::string::npos;) {
        if (nl > 0) {
          on_line(std::string_view(pending).substr(0, nl));
        }
        pending.erase(0, nl + 1);
      }
      if (pending.size() > kMaxToolOutput) {
        pending.clear();
      }
    }
  }
  ::close(out[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  }
  return result;
}

std::string LastToolLine(std::string_view output) {
  while (!output.empty()) {
    const size_t end = output.find_last_not_of("\r\n \t");
    if (end == std::string_view::npos) {
      return "";
    }
    output = output.substr(0, end + 1);
    const size_t start = output.find_last_of("\r\n");
    std::string_view line = start == std::string_view::npos ? output : output.substr(start + 1);
    constexpr std::string_view kError = "Error: ";
    if (line.substr(0, kError.size()) == kError) {
      line.remove_prefix(kError.size());
    }
    if (!line.empty()) {
      return std::string(line);
    }
    output = start == std::string_view::npos ? std::string_view() : output.substr(0, start);
  }
  return "";
}

}  // namespace tessera
