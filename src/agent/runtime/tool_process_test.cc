#include "agent/runtime/tool_process.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

using namespace std::chrono_literals;

TEST(RunToolTest, CollectsOutputAndExitCodeWithOnlyTheGivenEnvironment) {
  std::vector<std::string> lines;
  StatusOr<ToolResult> r = RunTool(
      {"/bin/sh", "-c", "echo one; echo two >&2; printf 'x=%s\\n' \"$X\"; env | wc -l; exit 3"},
      {{"X", "42"}}, 10s, [&](std::string_view l) { lines.emplace_back(l); });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_FALSE(r->timed_out);
  ASSERT_EQ(lines.size(), 4U) << r->output;
  EXPECT_EQ(lines[0], "one");
  EXPECT_EQ(lines[1], "two");
  EXPECT_EQ(lines[2], "x=42");
  // X, and what the shell sets itself (PWD, SHLVL, _): nothing of this process's.
  EXPECT_LE(std::stoi(lines[3]), 4);
  EXPECT_EQ(LastToolLine(r->output), lines[3]);
}

TEST(RunToolTest, KillsTheWholeGroupAtTheDeadline) {
  const auto start = std::chrono::steady_clock::now();
  StatusOr<ToolResult> r = RunTool({"/bin/sh", "-c", "sleep 30 & sleep 30"}, {}, 300ms);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(r->signal, SIGKILL);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);  // the background sleep died too
}

TEST(RunToolTest, AProgramThatCannotRunIsAnError) {
  EXPECT_FALSE(RunTool({"/nonexistent/tool"}, {}, 1s).ok());
  EXPECT_FALSE(RunTool({}, {}, 1s).ok());
}

TEST(RunToolTest, LastToolLineDropsPodmansErrorPrefix) {
  EXPECT_EQ(LastToolLine("Trying to pull x...\nError: initializing source: manifest unknown\n\n"),
            "initializing source: manifest unknown");
  EXPECT_EQ(LastToolLine(""), "");
  EXPECT_EQ(LastToolLine("only\r\n"), "only");
}

}  // namespace
}  // namespace tessera
