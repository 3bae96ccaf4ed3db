// The checkpoint-on-preemption protocol between the node agent and a task, through
// files in the task's checkpoint directory.
//
// A task learns its checkpoint directory from the environment variable
// TESSERA_CHECKPOINT_DIR (kCheckpointDirEnv). The agent owns the subdirectory
// `<dir>/.tessera/`; everything else in `<dir>` is the task's checkpoint data, which the
// agent never touches.
//
// 1. Start. Before (re)starting a task the agent calls ClearMarkers(dir): it removes
//    the markers of an earlier attempt and keeps the checkpoint data, so the new attempt
//    can resume from it.
// 2. Preemption request. To ask a task to stop, the agent writes `<dir>/.tessera/preempt`
//    (WritePreemptMarker) and then sends SIGTERM to the task's process group. The file is
//    replaced atomically (written aside, then renamed) and holds two lines:
//        <deadline as Unix time in microseconds>
//        <reason, one line>
//    e.g. "1767225600000000\npreempted by job 77 of queue prod\n". A shell task reads it
//    with `{ read deadline; read reason; } < "$TESSERA_CHECKPOINT_DIR/.tessera/preempt"`.
//    A task may also poll for the file instead of handling SIGTERM.
// 3. Checkpoint report. When a task has written a consistent checkpoint it creates or
//    touches `<dir>/.tessera/checkpointed` (its content is ignored; only its
//    modification time counts). It may do so at any time, not only when asked: the
//    agent uses the latest report to price the work a preemption would lose. The same
//    report can also go through the agent's API.
// 4. Outcome. The agent calls CheckpointReportedSince(dir, t) with t = when it asked.
//    A task that reported and exited before the deadline is evicted cleanly; one still
//    running at the deadline gets SIGKILL, and its work since its last report is lost.
//    Exit status alone does not prove a checkpoint: only the report does.
//
// File times come from the kernel's coarse clock, which can lag the microsecond clock
// by a scheduler tick; CheckpointReportedSince therefore accepts a report up to
// kCheckpointClockSlackUs older than `since` (a checkpoint that finished a few
// milliseconds before the request is just as fresh).
//
// Thread safety: the functions keep no state; concurrent calls on the same directory
// race only as the underlying file operations do.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace tessera {

inline constexpr std::string_view kCheckpointDirEnv = "TESSERA_CHECKPOINT_DIR";
inline constexpr std::string_view kProtocolDirName = ".tessera";
inline constexpr std::string_view kPreemptFileName = "preempt";
inline constexpr std::string_view kCheckpointedFileName = "checkpointed";
inline constexpr int64_t kCheckpointClockSlackUs = 50'000;

// `<dir>/.tessera/preempt` and `<dir>/.tessera/checkpointed`.
std::string PreemptMarkerPath(const std::string& dir);
std::string CheckpointedMarkerPath(const std::string& dir);

// Writes the preempt marker (creating `<dir>/.tessera` and `<dir>` if needed).
// Newlines in `reason` become spaces. InvalidArgument for an empty dir or a negative
// deadline; Internal (with the errno text) when the file cannot be written.
Status WritePreemptMarker(const std::string& dir, int64_t deadline_unix_us,
                          std::string_view reason);

struct PreemptNotice {
  int64_t deadline_unix_us = 0;
  std::string reason;
};

// Reads the preempt marker back (the task side of step 2, and tests). NotFound when
// there is none; InvalidArgument when it is malformed.
StatusOr<PreemptNotice> ReadPreemptMarker(const std::string& dir);

// Removes both markers; keeps the checkpoint data. OK when they are already absent.
Status ClearMarkers(const std::string& dir);

// True when `<dir>/.tessera/checkpointed` exists and its modification time is at or
// after since_unix_us - kCheckpointClockSlackUs.
bool CheckpointReportedSince(const std::string& dir, int64_t since_unix_us);

}  // namespace tessera
