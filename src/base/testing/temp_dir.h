// TempDir: a scratch directory for tests, made with mkdtemp under the system temp
// directory ($TMPDIR or /tmp) and removed with everything in it on destruction.
// Thread safety: a value owned by one test.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace tessera::testing {

class TempDir {
 public:
  // `prefix`: the start of the directory's name, which says whose it is.
  explicit TempDir(const std::string& prefix = "tessera_test_") {
    std::string pattern =
        (std::filesystem::temp_directory_path() / (prefix + "XXXXXX")).string();
    if (mkdtemp(pattern.data()) != nullptr) {
      path_ = pattern;
    }
  }
  ~TempDir() {
    if (!path_.empty()) {
      std::error_code ignored;
      std::filesystem::remove_all(path_, ignored);
    }
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  bool ok() const { return !path_.empty(); }
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace tessera::testing
