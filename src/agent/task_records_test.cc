// The agent's task records: one state file per attempt, and the directories of earlier
// versions still listed, loaded, marked and removed.
#include "agent/task_records.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "agent/launch/task_state_file.h"
#include "base/file_util.h"
#include "base/testing/temp_dir.h"

namespace tessera {
namespace {

class TaskRecordsTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(tmp_.ok()); }

  static TaskRecord Record(uint64_t job) {
    TaskRecord r;
    r.launch.key = TaskKey{job, 0, 1};
    r.launch.command = {"sh", "-c", "echo 'two\nlines'"};
    r.log_path = "/logs/" + std::to_string(job) + ".log";
    r.gpu_use = {{0, 1000}, {3, 500}};
    r.mig = {{1, "MIG-abc"}};
    return r;
  }

  testing::TempDir tmp_{"tessera-task-records-test-"};
  const std::string data_ = tmp_.path();
};

TEST_F(TaskRecordsTest, ARecordIsOneFileWhoseFirstLineIsTheLaunch) {
  const std::string path = TaskRecordPath(data_, "5.0.1");
  EXPECT_EQ(path, data_ + "/tasks/5.0.1.task");
  ASSERT_TRUE(SaveTaskRecord(path, Record(5)).ok());
  ASSERT_TRUE(AppendStateLine(path, "shim 1 2 3", false).ok());
  ASSERT_TRUE(WriteTaskMarker(path, "lost", "the agent\nstopped").ok());

  StatusOr<TaskRecord> loaded = LoadTaskRecord(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_EQ(loaded->launch.key.job, 5u);
  EXPECT_EQ(loaded->launch.command, Record(5).launch.command);
  EXPECT_EQ(loaded->log_path, "/logs/5.log");
  EXPECT_EQ(loaded->gpu_use, Record(5).gpu_use);
  EXPECT_EQ(loaded->mig, Record(5).mig);
  EXPECT_EQ(ReadTaskMarker(path, "lost"), "the agent stopped");
  EXPECT_EQ(ReadTaskMarker(path, "failed"), std::nullopt);
  EXPECT_EQ(ReadTaskState(path).shim, "1 2 3");
  // Only the file: no directory, no file beside it.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(data_ + "/tasks"),
                          std::filesystem::directory_iterator()),
            1);
  RemoveTaskRecord(path);
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST_F(TaskRecordsTest, ARemovedRecordsFileServesTheNextRecordEmptied) {
  const std::string first = TaskRecordPath(data_, "5.0.1");
  ASSERT_TRUE(SaveTaskRecord(first, Record(5)).ok());
  ASSERT_TRUE(AppendStateLine(first, "shim 1 2 3", false).ok());
  ASSERT_TRUE(AppendStateLine(first, "exit 0", true).ok());
  struct stat st {};
  ASSERT_EQ(::stat(first.c_str(), &st), 0);
  const ino_t inode = st.st_ino;
  RemoveTaskRecord(first);
  EXPECT_FALSE(std::filesystem::exists(first));
  EXPECT_TRUE(ListTaskRecords(data_).empty()) << "a spare was listed as a record";

  const std::string next = TaskRecordPath(data_, "6.0.1");
  ASSERT_TRUE(SaveTaskRecord(next, Record(6)).ok());
  ASSERT_EQ(::stat(next.c_str(), &st), 0);
  EXPECT_EQ(st.st_ino, inode) << "the spare was not reused";
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  const TaskStateLines state = ReadTaskState(next);
  EXPECT_EQ(state.shim, "") << "a line of the last task survived";
  EXPECT_EQ(state.end, "");
  EXPECT_EQ(StateFileLines(ReadTextFile(next).value_or("")).size(), 1u);
  StatusOr<TaskRecord> loaded = LoadTaskRecord(next);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_EQ(loaded->launch.key.job, 6u);
  EXPECT_EQ(ListTaskRecords(data_), std::vector<std::string>{"6.0.1"});
}

TEST_F(TaskRecordsTest, ASpareThatIsAlsoALiveRecordIsNotReused) {
  // What a crash can leave of an unsynced rename: a record and a spare naming one file.
  const std::string live = TaskRecordPath(data_, "5.0.1");
  ASSERT_TRUE(SaveTaskRecord(live, Record(5)).ok());
  std::filesystem::create_directories(data_ + "/tasks/.spare");
  ASSERT_EQ(::link(live.c_str(), (data_ + "/tasks/.spare/4.0.1.task").c_str()), 0);
  ASSERT_TRUE(SaveTaskRecord(TaskRecordPath(data_, "6.0.1"), Record(6)).ok());
  StatusOr<TaskRecord> kept = LoadTaskRecord(live);
  ASSERT_TRUE(kept.ok()) << kept.status().message();
  EXPECT_EQ(kept->launch.key.job, 5u) << "the live record was overwritten through its spare";
}

TEST_F(TaskRecordsTest, ARecordSavedAgainReplacesTheFirst) {
  const std::string path = TaskRecordPath(data_, "5.0.1");
  ASSERT_TRUE(SaveTaskRecord(path, Record(5)).ok());
  ASSERT_TRUE(AppendStateLine(path, "shim 1 2 3", false).ok());
  TaskRecord again = Record(5);
  again.gpu_use.clear();
  ASSERT_TRUE(SaveTaskRecord(path, again).ok());
  ASSERT_TRUE(WriteTaskMarker(path, "failed", "no such program").ok());
  StatusOr<TaskRecord> loaded = LoadTaskRecord(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_TRUE(loaded->gpu_use.empty());
  EXPECT_EQ(ReadTaskState(path).shim, "");
  EXPECT_EQ(ReadTaskMarker(path, "failed"), "no such program");
}

TEST_F(TaskRecordsTest, AtMostSixtyFourSparesAreKept) {
  for (int job = 1; job <= 70; ++job) {
    ASSERT_TRUE(SaveTaskRecord(TaskRecordPath(data_, std::to_string(job) + ".0.1"), Record(job)).ok());
  }
  for (int job = 1; job <= 70; ++job) {
    RemoveTaskRecord(TaskRecordPath(data_, std::to_string(job) + ".0.1"));
  }
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(data_ + "/tasks/.spare"),
                          std::filesystem::directory_iterator()),
            64);
  EXPECT_TRUE(ListTaskRecords(data_).empty());
}

TEST_F(TaskRecordsTest, ListingFindsBothLayoutsAndDropsCutOffSaves) {
  ASSERT_TRUE(SaveTaskRecord(TaskRecordPath(data_, "7.0.1"), Record(7)).ok());
  const std::string legacy = data_ + "/tasks/6.0.1";
  std::filesystem::create_directories(legacy);
  std::ofstream(data_ + "/tasks/8.0.1.task.tmp") << "{\"launch\"";  // a crash while saving
  std::ofstream(data_ + "/tasks/hidden-device");
  EXPECT_EQ(ListTaskRecords(data_), (std::vector<std::string>{"6.0.1", "7.0.1"}));
  EXPECT_FALSE(std::filesystem::exists(data_ + "/tasks/8.0.1.task.tmp"));
  EXPECT_EQ(TaskRecordPath(data_, "6.0.1"), legacy);
}

TEST_F(TaskRecordsTest, AnEarlierVersionsDirectoryIsLoadedAndMarkedInPlace) {
  const std::string legacy = data_ + "/tasks/6.0.1";
  std::filesystem::create_directories(legacy);
  ASSERT_TRUE(SaveTaskRecord(legacy, Record(6)).ok());
  EXPECT_TRUE(std::filesystem::exists(legacy + "/record.json"));
  StatusOr<TaskRecord> loaded = LoadTaskRecord(legacy);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_EQ(loaded->launch.key.job, 6u);
  ASSERT_TRUE(WriteTaskMarker(legacy, "failed", "no such program").ok());
  EXPECT_EQ(ReadTextFile(legacy + "/failed"), "no such program\n");
  EXPECT_EQ(ReadTaskMarker(legacy, "failed"), "no such program");
  RemoveTaskRecord(legacy);
  EXPECT_FALSE(std::filesystem::exists(legacy));
}

TEST_F(TaskRecordsTest, ARecordThatDoesNotParseIsSaidSo) {
  const std::string path = TaskRecordPath(data_, "9.0.1");
  EXPECT_EQ(LoadTaskRecord(path).status().code(), StatusCode::kNotFound);
  std::filesystem::create_directories(data_ + "/tasks");
  std::ofstream(path) << "shim 1 2 3\n";
  EXPECT_EQ(LoadTaskRecord(path).status().code(), StatusCode::kInvalidArgument);
  std::ofstream(path) << "{\"launch\":{\"key\"";  // cut off
  EXPECT_EQ(LoadTaskRecord(path).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera
