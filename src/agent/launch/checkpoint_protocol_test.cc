#include "agent/launch/checkpoint_protocol.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "agent/launch/task_launcher_test_util.h"

namespace tessera {
namespace {

using launcher_testing::NowUs;
using launcher_testing::ReadAll;

void SetMtime(const std::string& path, int64_t unix_us) {
  struct timespec times[2];
  times[0].tv_sec = unix_us / 1'000'000;
  times[0].tv_nsec = (unix_us % 1'000'000) * 1000;
  times[1] = times[0];
  ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
}

class CheckpointProtocolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tessera-ckpt-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    dir_ = root_ + "/ckpt";
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  void Touch(const std::string& path) {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream(path, std::ios::app) << "";
    ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), nullptr, 0), 0);  // like touch(1)
  }
  std::string root_;
  std::string dir_;
};

TEST_F(CheckpointProtocolTest, PreemptMarkerFormatAndRoundTrip) {
  ASSERT_TRUE(WritePreemptMarker(dir_, 1767225600000000, "preempted by job 77").ok());
  EXPECT_EQ(PreemptMarkerPath(dir_), dir_ + "/.tessera/preempt");
  EXPECT_EQ(ReadAll(PreemptMarkerPath(dir_)), "1767225600000000\npreempted by job 77\n");
  auto notice = ReadPreemptMarker(dir_);
  ASSERT_TRUE(notice.ok()) << notice.status().ToString();
  EXPECT_EQ(notice->deadline_unix_us, 1767225600000000);
  EXPECT_EQ(notice->reason, "preempted by job 77");
  // Replaced, not appended; no temporary file stays behind.
  ASSERT_TRUE(WritePreemptMarker(dir_, 5, "line one\nline two").ok());
  EXPECT_EQ(ReadAll(PreemptMarkerPath(dir_)), "5\nline one line two\n");
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir_ + "/.tessera")) {
    (void)entry;
    ++files;
  }
  EXPECT_EQ(files, 1);
}

TEST_F(CheckpointProtocolTest, RejectsBadArgumentsAndMalformedMarker) {
  EXPECT_EQ(WritePreemptMarker("", 1, "x").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(WritePreemptMarker(dir_, -1, "x").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadPreemptMarker(dir_).status().code(), StatusCode::kNotFound);
  Touch(PreemptMarkerPath(dir_));
  std::ofstream(PreemptMarkerPath(dir_)) << "soon\nreason\n";
  EXPECT_EQ(ReadPreemptMarker(dir_).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(CheckpointProtocolTest, ClearMarkersKeepsCheckpointData) {
  EXPECT_TRUE(ClearMarkers(dir_).ok());  // nothing there yet
  ASSERT_TRUE(WritePreemptMarker(dir_, 10, "r").ok());
  Touch(CheckpointedMarkerPath(dir_));
  std::ofstream(dir_ + "/model.pt") << "weights";
  ASSERT_TRUE(ClearMarkers(dir_).ok());
  EXPECT_FALSE(std::filesystem::exists(PreemptMarkerPath(dir_)));
  EXPECT_FALSE(std::filesystem::exists(CheckpointedMarkerPath(dir_)));
  EXPECT_EQ(ReadAll(dir_ + "/model.pt"), "weights");
  EXPECT_TRUE(ClearMarkers(dir_).ok());
}

TEST_F(CheckpointProtocolTest, CheckpointReportedSinceComparesMtime) {
  int64_t now = NowUs();
  EXPECT_FALSE(CheckpointReportedSince(dir_, now - 3'600'000'000));  // no report at all
  std::string marker = CheckpointedMarkerPath(dir_);
  Touch(marker);
  EXPECT_TRUE(CheckpointReportedSince(dir_, now - 1'000'000));

  int64_t at = now - 10'000'000;  // a report 10 s ago
  SetMtime(marker, at);
  EXPECT_TRUE(CheckpointReportedSince(dir_, at));
  EXPECT_TRUE(CheckpointReportedSince(dir_, at - 1));
  EXPECT_TRUE(CheckpointReportedSince(dir_, at + kCheckpointClockSlackUs));  // clock slack
  EXPECT_FALSE(CheckpointReportedSince(dir_, at + kCheckpointClockSlackUs + 1));
  EXPECT_FALSE(CheckpointReportedSince(dir_, now));

  Touch(marker);  // touched again: fresh
  EXPECT_TRUE(CheckpointReportedSince(dir_, now));
}

}  // namespace
}  // namespace tessera
