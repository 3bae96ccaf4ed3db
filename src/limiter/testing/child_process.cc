#include "limiter/testing/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>

namespace tessera_limiter_testing {
namespace {

long long NowMs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

void ParseValues(ChildResult& result) {
  result.values.clear();
  std::istringstream lines(result.out);
  std::string line;
  while (std::getline(lines, line)) {
    const size_t eq = line.find('=');
    if (eq != std::string::npos) result.values[line.substr(0, eq)] = line.substr(eq + 1);
  }
}

pid_t Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env,
            int* stdin_fd, int* stdout_fd, int* stderr_fd) {
  int in[2];
  int out[2];
  int err[2];
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
    return -1;
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> envp;
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    execve(args[0], args.data(), envp.data());
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  close(err[1]);
  *stdin_fd = in[1];
  *stdout_fd = out[0];
  *stderr_fd = err[0];
  return pid;
}

// Reads both pipes until `done` says so, both close, or the deadline passes.
template <typename Done>
void Drain(int& out_fd, int& err_fd, ChildResult& result, long long deadline, Done done) {
  while ((out_fd >= 0 || err_fd >= 0) && !done() && NowMs() < deadline) {
    pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
    if (poll(fds, 2, 50) <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      int& fd = i == 0 ? out_fd : err_fd;
      if (fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      char buffer[4096];
      const ssize_t n = read(fd, buffer, sizeof(buffer));
      if (n <= 0) {
        close(fd);
        fd = -1;
      } else {
        (i == 0 ? result.out : result.err).append(buffer, static_cast<size_t>(n));
      }
    }
  }
}

int Reap(pid_t pid, long long deadline) {
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (NowMs() >= deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    usleep(2000);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

long long ChildResult::Value(const std::string& key) const {
  const auto it = values.find(key);
  return it == values.end() ? -1 : std::atoll(it->second.c_str());
}

ChildResult RunChild(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                     int timeout_ms) {
  ChildResult result;
  int in = -1;
  int out = -1;
  int err = -1;
  const pid_t pid = Spawn(argv, env, &in, &out, &err);
  if (pid < 0) return result;
  close(in);
  const long long deadline = NowMs() + timeout_ms;
  Drain(out, err, result, deadline, [] { return false; });
  if (out >= 0) close(out);
  if (err >= 0) close(err);
  result.exit_code = Reap(pid, deadline);
  ParseValues(result);
  return result;
}

HeldChild::HeldChild(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  pid_ = Spawn(argv, env, &stdin_fd_, &stdout_fd_, &stderr_fd_);
}

HeldChild::~HeldChild() {
  if (pid_ > 0) Finish(5000);
}

ChildResult HeldChild::WaitReady(const std::string& ready_key, int timeout_ms) {
  const std::string marker = ready_key + "=";
  Drain(stdout_fd_, stderr_fd_, result_, NowMs() + timeout_ms, [&] {
    const size_t at = result_.out.find(marker);
    return at != std::string::npos && result_.out.find('\n', at) != std::string::npos;
  });
  ParseValues(result_);
  return result_;
}

ChildResult HeldChild::Finish(int timeout_ms) {
  if (pid_ <= 0) return result_;
  if (stdin_fd_ >= 0) close(stdin_fd_);
  stdin_fd_ = -1;
  const long long deadline = NowMs() + timeout_ms;
  Drain(stdout_fd_, stderr_fd_, result_, deadline, [] { return false; });
  if (stdout_fd_ >= 0) close(stdout_fd_);
  if (stderr_fd_ >= 0) close(stderr_fd_);
  stdout_fd_ = stderr_fd_ = -1;
  result_.exit_code = Reap(pid_, deadline);
  pid_ = -1;
  ParseValues(result_);
  return result_;
}

}  // namespace tessera_limiter_testing
