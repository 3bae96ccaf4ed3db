#include "server/modules/task_start_notes.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(TaskStartNotesTest, TheLowestTasksNoteOfTheCurrentAttemptWithHowManyOthers) {
  TaskStartNotes notes;
  const JobNumber job(7);
  EXPECT_EQ(notes.Reason(job, 0), "");
  EXPECT_TRUE(notes.Report({7, 1, 0}, "pulling image a"));
  EXPECT_FALSE(notes.Report({7, 1, 0}, "pulling image a"));  // unchanged
  EXPECT_TRUE(notes.Report({7, 0, 0}, "pulling image b"));
  EXPECT_EQ(notes.Reason(job, 0), "task 0: pulling image b (and 1 more task starting)");
  EXPECT_EQ(notes.Reason(job, 1), "");       // another attempt's
  EXPECT_TRUE(notes.Report({7, 0, 0}, ""));  // started
  EXPECT_EQ(notes.Reason(job, 0), "task 1: pulling image a");
  EXPECT_TRUE(notes.Ended({7, 1, 0}));
  EXPECT_EQ(notes.jobs(), 0u);  // nothing kept once no task has a note
}

TEST(TaskStartNotesTest, ALaterAttemptReplacesAnEarlierOnesNotesAndIgnoresItsLateReports) {
  TaskStartNotes notes;
  const JobNumber job(7);
  EXPECT_TRUE(notes.Report({7, 0, 0}, "pulling image a"));
  EXPECT_TRUE(notes.Report({7, 0, 1}, "pulling image a: 1 of 4 MB"));
  EXPECT_EQ(notes.Reason(job, 0), "");
  EXPECT_EQ(notes.Reason(job, 1), "task 0: pulling image a: 1 of 4 MB");
  EXPECT_FALSE(notes.Report({7, 0, 0}, "pulling image a: 2 of 4 MB"));  // late
  EXPECT_FALSE(notes.Ended({7, 0, 0}));
  EXPECT_EQ(notes.Reason(job, 1), "task 0: pulling image a: 1 of 4 MB");
  notes.Forget(job);
  EXPECT_EQ(notes.jobs(), 0u);
}

}  // namespace
}  // namespace tessera
