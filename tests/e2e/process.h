// Child processes for end-to-end tests: the `tessera` binary as controller, agent or
// CLI, with output captured to a file, killed and waited for with deadlines.
// Thread safety: one owner per Process.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace tessera::e2e {

// A TCP port free on loopback now (bound and released).
inline int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// Polls `done` every 50 ms until it holds or `timeout` passes; its last answer.
inline bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return done();
}

// Without trailing whitespace (token files end with a newline).
inline std::string Trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) {
    s.pop_back();
  }
  return s;
}

class Process {
 public:
  // Starts argv[0] (a path) with stdout and stderr appended to `log`.
  Process(std::vector<std::string> argv, std::string log) : log_(std::move(log)) {
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setpgid(0, 0);
      FILE* out = std::fopen(log_.c_str(), "a");
      if (out != nullptr) {
        ::dup2(fileno(out), 1);
        ::dup2(fileno(out), 2);
      }
      std::vector<char*> args;
      for (std::string& a : argv) {
        args.push_back(a.data());
      }
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      std::_Exit(127);
    }
  }
  ~Process() {
    if (running()) {
      Signal(SIGKILL);
      (void)Wait(std::chrono::seconds(10));
    }
  }
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0 && !status_.has_value(); }
  void Signal(int sig) const {
    if (running()) {
      ::kill(pid_, sig);
    }
  }
  // The exit status (128 + signal when killed), or nullopt after `timeout`.
  std::optional<int> Wait(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!status_) {
      int st = 0;
      pid_t r = ::waitpid(pid_, &st, WNOHANG);
      if (r == pid_) {
        status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        break;
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        return std::nullopt;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return status_;
  }
  std::string Output() const { return ReadFile(log_); }

  static std::string ReadFile(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

 private:
  std::string log_;
  pid_t pid_ = -1;
  std::optional<int> status_;
};

}  // namespace tessera::e2e
