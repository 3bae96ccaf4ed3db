// Runs a program as a child process with exactly the environment given (nothing
// inherited), for the limiter's tests: LD_PRELOAD and the TESSERA_CUDA_* variables
// must be what the test says. Output is captured; every wait is bounded.
#ifndef TESSERA_LIMITER_TESTING_CHILD_PROCESS_H_
#define TESSERA_LIMITER_TESTING_CHILD_PROCESS_H_

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

namespace tessera_limiter_testing {

struct ChildResult {
  int exit_code = -1;  // -1: killed or did not start
  std::string out;
  std::string err;
  // The key=value lines of `out`.
  std::map<std::string, std::string> values;
  long long Value(const std::string& key) const;  // -1 when absent
};

ChildResult RunChild(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                     int timeout_ms = 20000);

// A child that keeps running after it has printed a line starting with `ready_key=`
// (its stdin open); Finish() closes stdin and collects the rest.
class HeldChild {
 public:
  HeldChild(const std::vector<std::string>& argv, const std::vector<std::string>& env);
  ~HeldChild();
  HeldChild(const HeldChild&) = delete;
  HeldChild& operator=(const HeldChild&) = delete;

  // Output so far once `ready_key=` has been printed (or the timeout passed).
  ChildResult WaitReady(const std::string& ready_key, int timeout_ms = 20000);
  ChildResult Finish(int timeout_ms = 20000);

 private:
  pid_t pid_ = -1;
  int stdin_fd_ = -1;
  int stdout_fd_ = -1;
  int stderr_fd_ = -1;
  ChildResult result_;
};

}  // namespace tessera_limiter_testing

#endif  // TESSERA_LIMITER_TESTING_CHILD_PROCESS_H_
