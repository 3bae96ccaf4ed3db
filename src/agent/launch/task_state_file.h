// TaskStateFile: the one file in which a task attempt's state is kept on the node, so
// that a restarted agent can report or re-adopt the task (task_records.h) and a later
// launcher can find its shim (task_launcher.h).
//
// The file is a log of lines, each appended whole and ended by '\n':
//   {...}                the agent's record of the launch (JSON on one line), first
//   clear                what the launcher appended before no longer holds (a new start
//                        of the same attempt, or a start that failed)
//   cgroup DIR           the task's cgroup, appended before the task exists
//   shim PID LEADER ST   the shim's pid, its leader's and the shim's start time (field 22
//                        of /proc/PID/stat), appended by the shim before Start returns
//   exit CODE | signal SIG | fenced
//                        how the task ended, appended by the shim (fdatasync) once nothing
//                        of the task is left
//   failed REASON | lost REASON
//                        the agent's markers (task_records.h)
// Only whole lines count: a last line without its '\n' (a write cut off by a crash) is
// ignored, and so are NUL bytes that such a crash can leave before a line.
//
// Why one appended file and not a directory of files renamed into place: on a file
// system that does not soon reuse a freed inode (ext4 without a journal) every inode a
// task makes and frees slows each later creation; this way a task makes one, and its
// writes are appends, durable with one fdatasync.
//
// A directory given as a state file is the layout of earlier versions (files `shim`,
// `cgroup` and `exit`, each holding its line without the key for `shim`), read the same.
//
// Thread safety: stateless functions; appends of whole lines by several writers (the
// agent, the shim) interleave line by line.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace tessera {

// The whole lines of a state file's text, without their '\n' and leading NUL bytes.
std::vector<std::string_view> StateFileLines(std::string_view text);

// Appends `line` and a '\n' (the line must hold no '\n'); `durable`: fdatasync before it
// returns. NotFound when the file does not exist: it is never created here.
Status AppendStateLine(const std::string& path, std::string_view line, bool durable);

// The launcher's lines of a state file since its last "clear" (for a directory, the
// files of the earlier layout). The value of each key's last line; "" where there is none.
struct TaskStateLines {
  std::string cgroup;  // DIR
  std::string shim;    // "PID LEADER ST"
  std::string end;     // "exit CODE", "signal SIG" or "fenced"
  bool any = false;    // a launcher line after the last "clear"
};
TaskStateLines ReadTaskState(const std::string& path);

}  // namespace tessera
