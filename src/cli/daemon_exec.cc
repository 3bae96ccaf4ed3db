#include "cli/daemon_exec.h"

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

int ExecDaemon(int argc, char** argv) {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) {
    std::cerr << "tessera: cannot find this executable: " << ec.message() << "\n";
    return 127;
  }
  const std::string daemon = (self.parent_path() / "tesserad").string();
  std::vector<char*> args(argv, argv + argc);
  args.push_back(nullptr);
  ::execv(daemon.c_str(), args.data());
  std::cerr << "tessera: cannot run " << daemon << ": " << std::strerror(errno)
            << " (the daemons are in tesserad, installed beside tessera)\n";
  return 127;
}

}  // namespace tessera
