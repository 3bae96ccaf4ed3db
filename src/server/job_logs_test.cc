#include "server/job_logs.h"

#include <gtest/gtest.h>

#include <string>

#include "server/http/server_fixture.h"

namespace tessera {
namespace {

class JobLogsTest : public ScratchDirTest {
 protected:
  JobLogsTest() : ScratchDirTest("job-logs") {}
};

TEST_F(JobLogsTest, AppendsInOrderAndReadsFromAnyOffset) {
  JobLogs logs(dir_ + "/logs");
  // Nothing yet: an empty chunk at the offset asked.
  StatusOr<LogChunk> none = logs.Read(JobNumber(7), 0, 5, 100);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->data, "");
  EXPECT_EQ(none->next_offset, 5);

  ASSERT_TRUE(logs.Append({{JobNumber(7), 0, "attempt 1\n"},
                           {JobNumber(7), 1, "other task\n"},
                           {JobNumber(7), 0, "attempt 2\n"}})
                  .ok());
  StatusOr<LogChunk> all = logs.Read(JobNumber(7), 0, 0, 1000);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->data, "attempt 1\nattempt 2\n");
  EXPECT_EQ(all->next_offset, 20);
  StatusOr<LogChunk> part = logs.Read(JobNumber(7), 0, 8, 4);
  ASSERT_TRUE(part.ok());
  EXPECT_EQ(part->data, "1\nat");
  EXPECT_EQ(part->next_offset, 12);
  StatusOr<LogChunk> past = logs.Read(JobNumber(7), 0, 50, 4);
  ASSERT_TRUE(past.ok());
  EXPECT_EQ(past->data, "");
  EXPECT_EQ(past->next_offset, 50);
  EXPECT_EQ(logs.Read(JobNumber(7), 1, 0, 100)->data, "other task\n");
  EXPECT_EQ(logs.Read(JobNumber(7), 0, -1, 10).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(JobLogsTest, AnUnwritableLogIsReportedAndTheOthersStillWritten) {
  JobLogs logs(dir_ + "/logs");
  ASSERT_TRUE(logs.Append({{JobNumber(1), 0, "x"}}).ok());
  // A directory where task 1's file would be.
  std::filesystem::create_directories(dir_ + "/logs/1/1.log");
  Status s = logs.Append({{JobNumber(1), 1, "lost"}, {JobNumber(1), 0, "y"}});
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("1/1.log"), std::string::npos) << s.message();
  EXPECT_EQ(logs.Read(JobNumber(1), 0, 0, 10)->data, "xy");
}

}  // namespace
}  // namespace tessera
