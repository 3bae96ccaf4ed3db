// Shared by the limiter's process tests and its benchmark: the environment that runs
// the test client under the limiter against the fake driver.
#ifndef TESSERA_LIMITER_LIMITER_ENV_H_
#define TESSERA_LIMITER_LIMITER_ENV_H_

#include <string>
#include <vector>

namespace tessera_limiter_testing {

// LD_PRELOAD=limiter (when non-empty), LD_LIBRARY_PATH=fake driver, plus `extra`.
inline std::vector<std::string> LimiterEnv(const std::string& limiter, const std::string& fake_dir,
                                           const std::vector<std::string>& extra) {
  std::vector<std::string> env = {"LD_LIBRARY_PATH=" + fake_dir};
  if (!limiter.empty()) env.push_back("LD_PRELOAD=" + limiter);
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

}  // namespace tessera_limiter_testing

#endif  // TESSERA_LIMITER_LIMITER_ENV_H_
