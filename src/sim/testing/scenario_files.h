// The scenario suite's files for the tests that run it (scenario_test,
// scenario_controller_test): every *.yaml of a folder, and a test name per file.
// Thread safety: functions.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <string>
#include <vector>

namespace tessera::testing {

// The .yaml files of `dir`, sorted; empty when it cannot be read.
inline std::vector<std::string> ScenarioFiles(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.is_regular_file() && entry.path().extension() == ".yaml") {
      files.push_back(entry.path().string());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

// A test name from the file's stem ("no-preemption-loop" -> "no_preemption_loop").
inline std::string ScenarioTestName(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = std::filesystem::path(info.param).stem().string();
  for (char& c : name) {
    if (std::isalnum(static_cast<unsigned char>(c)) == 0) {
      c = '_';
    }
  }
  return name;
}

}  // namespace tessera::testing
