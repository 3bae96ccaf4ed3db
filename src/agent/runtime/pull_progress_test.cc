#include "agent/runtime/pull_progress.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "base/mutex.h"

namespace tessera {
namespace {

TEST(PullProgressTest, AManifestsSizeIsItsLayersAndConfig) {
  const auto size = ReadManifestSize(
      R"({"schemaVersion": 2, "config": {"size": 409},
          "layers": [{"size": 316867787}, {"size": 1000}]})",
      "linux", "amd64");
  ASSERT_TRUE(size.ok()) << size.status().ToString();
  EXPECT_EQ(size->bytes, 316867787 + 1000 + 409);
  EXPECT_EQ(size->child_digest, "");
}

TEST(PullProgressTest, AListNamesTheEntryOfThisPlatform) {
  const std::string index = R"({"schemaVersion": 2, "manifests": [
      {"digest": "sha256:aaa", "platform": {"os": "linux", "architecture": "arm64"}},
      {"digest": "sha256:bbb", "platform": {"os": "linux", "architecture": "amd64"}}]})";
  auto size = ReadManifestSize(index, "linux", "amd64");
  ASSERT_TRUE(size.ok());
  EXPECT_EQ(size->child_digest, "sha256:bbb");
  size = ReadManifestSize(index, "linux", "s390x");
  ASSERT_TRUE(size.ok());
  EXPECT_EQ(size->child_digest, "");
  EXPECT_EQ(size->bytes, -1);
  // Schema 1 has no sizes; what is no manifest is refused.
  size = ReadManifestSize(R"({"schemaVersion": 1, "fsLayers": []})", "linux", "amd64");
  ASSERT_TRUE(size.ok());
  EXPECT_EQ(size->bytes, -1);
  EXPECT_FALSE(ReadManifestSize("{\"errors\": []}", "linux", "amd64").ok());
  EXPECT_FALSE(ReadManifestSize("not json", "linux", "amd64").ok());
}

TEST(PullProgressTest, NotesSayHowFarInTheUnitsOfTheSize) {
  EXPECT_EQ(PullProgressNote("r/i:1", 1'234'000'000, 4'800'000'000, false),
            "pulling image r/i:1: 1.2 of 4.8 GB");
  EXPECT_EQ(PullProgressNote("r/i:1", 310'000'000, 420'000'000, false),
            "pulling image r/i:1: 310 of 420 MB");
  EXPECT_EQ(PullProgressNote("r/i:1", 12'000'000, -1, false), "pulling image r/i:1: 12 MB so far");
  EXPECT_EQ(PullProgressNote("r/i:1", 9'000'000'000, 4'800'000'000, false),
            "pulling image r/i:1: 4.8 of 4.8 GB");  // never past the size
  EXPECT_EQ(PullProgressNote("r/i:1", 0, 4'800'000'000, true),
            "pulling image r/i:1: unpacking (4.8 GB)");
}

TEST(PullProgressTest, AWatchReportsTheBytesUnderItsDirectoryThenUnpacking) {
  const std::string root =
      ::testing::TempDir() + "pull_progress_test_" + std::to_string(::getpid());
  const std::string tmp = root + "/pull";
  std::filesystem::create_directories(tmp + "/storage1");
  EXPECT_EQ(BytesUnder(tmp), 0);
  EXPECT_EQ(BytesUnder(root + "/gone"), 0);
  Mutex mu;
  std::vector<std::string> notes;
  auto seen = [&](const std::string& want) {
    for (int i = 0; i < 500; ++i) {  // up to 5 s
      {
        MutexLock lock(mu);
        if (!notes.empty() && notes.back() == want) {
          return true;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    MutexLock lock(mu);
    return false;
  };
  {
    PullWatch watch(
        "r/i:1", tmp, [] { return int64_t{4'000'000}; },
        [&](const std::string& note) {
          MutexLock lock(mu);
          notes.push_back(note);
        },
        std::chrono::milliseconds(5));
    std::ofstream(tmp + "/storage1/1") << std::string(1'000'000, 'x');
    EXPECT_TRUE(seen("pulling image r/i:1: 1 of 4 MB"));
    std::ofstream(tmp + "/storage1/2") << std::string(2'000'000, 'x');
    EXPECT_TRUE(seen("pulling image r/i:1: 3 of 4 MB"));
    std::filesystem::remove_all(tmp + "/storage1");  // unpacked into the store
    EXPECT_TRUE(seen("pulling image r/i:1: unpacking (4 MB)"));
  }
  MutexLock lock(mu);
  for (size_t i = 1; i < notes.size(); ++i) {
    EXPECT_NE(notes[i], notes[i - 1]) << "a note repeated";
  }
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace tessera
