// Test-only helpers shared by the tests of src/sim: where the public traces are, the
// requests of a pod list, and comparing two FGD runs. Header-only and part of no
// target: include it from *_test.cc files only.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "model/request.h"
#include "sim/fgd_experiment.h"
#include "sim/openb_trace.h"

namespace tessera::testing {

// The folder `subdir` of the traces, through TESSERA_TRACES_DIR (set by CMake for every
// test: the repository's data/traces unless configured otherwise). Fails the calling
// test (never skips it) and returns "" when the variable is unset or the folder is
// missing.
inline std::string TracesDir(std::string_view subdir) {
  const char* root = std::getenv("TESSERA_TRACES_DIR");
  if (root == nullptr || *root == '\0') {
    ADD_FAILURE() << "TESSERA_TRACES_DIR is not set; run through ctest or set it to the "
                     "repository's data/traces";
    return "";
  }
  std::filesystem::path dir = std::filesystem::path(root) / subdir;
  if (!std::filesystem::is_directory(dir)) {
    ADD_FAILURE() << "trace folder " << dir << " is missing (TESSERA_TRACES_DIR=" << root << ")";
    return "";
  }
  return dir.string();
}

// A fresh directory under ::testing::TempDir() for one test's fixture files,
// removed after the test.
class ScratchDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = ::testing::TempDir() + "tessera_test_XXXXXX";
    ASSERT_NE(mkdtemp(templ.data()), nullptr)
        << "cannot create a directory under " << ::testing::TempDir();
    dir_ = templ;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // Writes `text` to <dir>/<name> (folders created) and returns the path.
  std::string Write(const std::string& name, const std::string& text) {
    std::filesystem::path path = std::filesystem::path(dir_) / name;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream out(path, std::ios::binary);
    out << text;
    return path.string();
  }

  std::string dir_;
};

// The openb trace folder (node and pod lists of the FGD experiment); as TracesDir.
inline std::string OpenbDir() { return TracesDir("alibaba-gpu-v2023-fgd"); }

// Vectors equal element by element, NaN equal to NaN.
inline bool SameValues(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) {
    return false;
  }
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) != std::isnan(b[i]) || (!std::isnan(a[i]) && a[i] != b[i])) {
      return false;
    }
  }
  return true;
}

// Every field of two runs but the time they took.
inline void ExpectSameRun(const FgdRunResult& a, const FgdRunResult& b) {
  EXPECT_EQ(a.trace, b.trace);
  EXPECT_EQ(a.policy, b.policy);
  EXPECT_EQ(a.seed, b.seed);
  EXPECT_EQ(a.total_gpus, b.total_gpus);
  EXPECT_EQ(a.pods_tried, b.pods_tried);
  EXPECT_EQ(a.pods_placed, b.pods_placed);
  EXPECT_EQ(a.gpu_pods_failed, b.gpu_pods_failed);
  EXPECT_TRUE(SameValues(a.alloc_pct, b.alloc_pct));
  EXPECT_TRUE(SameValues(a.frag_pct, b.frag_pct));
  EXPECT_TRUE(SameValues(a.frag_ratio_pct, b.frag_ratio_pct));
}

}  // namespace tessera::testing
