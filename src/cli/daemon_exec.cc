#include "cli/daemon_exec.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <system_error>
#include <vector>

namespace tessera {

bool IsDaemonCommand(std::string_view name) {
  return name == "server" || name == "agent" || name == "up" || name == "gpu-probe" ||
         name == "store";
}

std::string ThisExecutable() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : self.string();
}

int ExecDaemon(int argc, char** argv) {
  const std::string self = ThisExecutable();
  if (self.empty()) {
    std::cerr << "tessera: cannot find this executable (/proc/self/exe)\n";
    return 127;
  }
  const std::string daemon = (std::filesystem::path(self).parent_path() / "tesserad").string();
  std::vector<char*> args(argv, argv + argc);
  args.push_back(nullptr);
  ::execv(daemon.c_str(), args.data());
  std::cerr << "tessera: cannot run " << daemon << ": " << std::strerror(errno)
            << " (the daemons are in tesserad, installed beside tessera)\n";
  return 127;
}

int RunDaemon(const std::vector<std::string>& args) {
  const std::string self = ThisExecutable();
  const std::string daemon =
      self.empty() ? "" : (std::filesystem::path(self).parent_path() / "tesserad").string();
  std::vector<std::string> words = args;
  words.insert(words.begin(), "tesserad");
  std::vector<char*> argv;
  argv.reserve(words.size() + 1);
  for (std::string& w : words) {
    argv.push_back(w.data());
  }
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = daemon.empty()
                     ? ENOENT
                     : ::posix_spawn(&pid, daemon.c_str(), nullptr, nullptr, argv.data(), environ);
  if (rc != 0) {
    std::cerr << "tessera: cannot run " << (daemon.empty() ? "tesserad" : daemon) << ": "
              << std::generic_category().message(rc)
              << " (the daemons are in tesserad, installed beside tessera)\n";
    return 127;
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      return 127;
    }
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace tessera
