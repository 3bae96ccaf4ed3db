#include "server/pty_sessions.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(PtySessionsTest, AJobAsksForATerminalInItsEnvironment) {
  EXPECT_TRUE(PtySessions::Wanted({{"TESSERA_PTY", "1"}}));
  EXPECT_FALSE(PtySessions::Wanted({{"TESSERA_PTY", "0"}}));
  EXPECT_FALSE(PtySessions::Wanted({{"TERM", "xterm"}}));
}

TEST(PtySessionsTest, SecretsAreStablePerAttemptAndDifferAcrossAttemptsAndKeys) {
  PtySessions a("key-a");
  const std::string s = a.Secret(TaskKey{7, 0, 1});
  EXPECT_EQ(s.size(), 64u);
  EXPECT_EQ(a.Secret(TaskKey{7, 0, 1}), s);  // a resent launch
  EXPECT_NE(a.Secret(TaskKey{7, 0, 2}), s);
  EXPECT_NE(a.Secret(TaskKey{7, 1, 1}), s);
  EXPECT_NE(PtySessions("key-b").Secret(TaskKey{7, 0, 1}), s);
  EXPECT_NE(PtySessions().Secret(TaskKey{7, 0, 1}), PtySessions().Secret(TaskKey{7, 0, 1}));
}

TEST(PtySessionsTest, EndpointsAreThoseOfTheAttemptAsked) {
  PtySessions p("k");
  EXPECT_FALSE(p.Find(7, 0, 1).has_value());
  p.Reported(TaskKey{7, 0, 1}, "10.0.0.5", 40001, 1);
  ASSERT_TRUE(p.Find(7, 0, 1).has_value());
  EXPECT_EQ(p.Find(7, 0, 1)->address, "10.0.0.5");
  EXPECT_EQ(p.Find(7, 0, 1)->port, 40001);
  EXPECT_FALSE(p.Find(7, 0, 2).has_value());  // a later attempt has not said yet
  p.Reported(TaskKey{7, 0, 2}, "10.0.0.6", 40002, 2);
  EXPECT_FALSE(p.Find(7, 0, 1).has_value());
  EXPECT_EQ(p.Find(7, 0, 2)->port, 40002);
}

TEST(PtySessionsTest, OldEndpointsAreDroppedOnceThereAreMany) {
  PtySessions p("k");
  for (uint64_t job = 1; job <= kPtyEndpointsKept; ++job) {
    p.Reported(TaskKey{job, 0, 1}, "n", 1, 0);
  }
  EXPECT_EQ(p.size(), kPtyEndpointsKept);
  p.Reported(TaskKey{999'999, 0, 1}, "n", 1, kPtyForgetAfter + 1);
  EXPECT_EQ(p.size(), 1u);
  EXPECT_TRUE(p.Find(999'999, 0, 1).has_value());
}

TEST(PtySessionsTest, ATerminalIsTheAttemptsEndpointWithItsSecret) {
  PtySessions p("k");
  EXPECT_FALSE(p.TerminalOf(7, 0, 1).has_value());
  p.Reported(TaskKey{7, 0, 1}, "10.0.0.5", 40001, 1);
  std::optional<PtyTerminal> at = p.TerminalOf(7, 0, 1);
  ASSERT_TRUE(at.has_value());
  EXPECT_EQ(at->address, "10.0.0.5");
  EXPECT_EQ(at->port, 40001);
  EXPECT_EQ(at->secret, p.Secret(TaskKey{7, 0, 1}));
  EXPECT_FALSE(p.TerminalOf(7, 0, 2).has_value());  // another attempt
  EXPECT_FALSE(p.TerminalOf(7, 1, 1).has_value());  // another task
}

}  // namespace
}  // namespace tessera
