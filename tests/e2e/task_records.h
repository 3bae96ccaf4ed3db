// What tasks really did, for end-to-end tests that break things on purpose (the fault
// suite, high availability): every task runs one shell script, TaskRecords::kScript,
// that appends to its own file in a records directory ($RECORDS/JOB.TASK.ATTEMPT; the
// directory is 1777 because tasks run as their tenant's uid):
//   start JOB TASK ATTEMPT PID GPU_UUIDS    when it starts
//   workers JOB TASK ATTEMPT PID...         the worker processes it forked (FORK=1)
//   clash JOB TASK ATTEMPT GPU HOLDER PID   a live process of another task holds its GPU
//   end JOB TASK ATTEMPT                    when its work is done
// While it runs, a task holds each of its GPU UUIDs by a holder file
// $LOCKS/UUID.JOB.TASK.ATTEMPT listing "PID STARTTIME" of its processes (workers
// included); a starting task looks for other holders of its GPUs whose processes are
// still alive. Unlike a lock directory, a holder file left by a killed task is never
// mistaken for a live one, and needs no other uid to remove it.
//
// The script's environment (TaskRecords::Env): RECORDS, LOCKS; WORK: seconds of work on
// attempt 1; WORK_RETRY: on later attempts (default WORK); FORK=1: the work runs in two
// `sleep` workers under a child shell, as `sh -c 'sleep & sleep & wait'` does.
//
// Thread safety: a TaskRecords only reads its directories after construction; any
// thread may call it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace tessera::e2e {

// One line of a task's records file.
struct Record {
  std::string kind;  // start, workers, clash, end, or "malformed"
  uint64_t job = 0;
  int task = 0;
  int attempt = 0;
  std::vector<std::string> rest;
  std::string line;
};

// Every line of every records file in `dir`.
std::vector<Record> ReadRecords(const std::string& dir);

// Field 22 of /proc/PID/stat (start time in clock ticks): with it, a pid reused by a
// later process is not taken for the one recorded. nullopt: no such process.
std::optional<std::string> StartTime(pid_t pid);

// A recorded process: alive when kill(pid, 0) finds it and /proc shows the same one.
struct Pid {
  pid_t pid = 0;
  std::string start_time;
  bool Alive() const;
};

// The pids, space-separated, for failure messages.
std::string Describe(const std::vector<Pid>& pids);

// How a job ran, from its records: the attempts that started and ended, its clashes.
struct Runs {
  std::vector<int> starts, ends;
  std::vector<std::string> clashes;
};

// "2 start record(s) (attempts 1 2), 1 end record(s) (attempts 2)".
std::string Show(const Runs& runs);

class TaskRecords {
 public:
  // The task: run it as `/bin/sh -c kScript` with Env's variables.
  static const char* const kScript;

  // Makes DIR/records and DIR/locks, mode 01777; ok() tells whether it could.
  explicit TaskRecords(const std::string& dir);

  bool ok() const { return ok_; }
  const std::string& records_dir() const { return records_; }
  const std::string& locks_dir() const { return locks_; }

  // The script's environment: RECORDS, LOCKS, WORK=`work`, and `more`.
  std::map<std::string, std::string> Env(const std::string& work,
                                         const std::map<std::string, std::string>& more = {}) const;

  // A POST /v1/jobs body that runs the script (0.1 CPU, 64 MiB, `gpus` GPUs).
  static nlohmann::json Spec(const std::string& name, const std::string& queue, int gpus,
                             const std::map<std::string, std::string>& env);

  std::vector<Record> Read() const { return ReadRecords(records_); }

  // The processes of the start and workers records that `which` selects.
  std::vector<Pid> RecordedPids(const std::function<bool(const Record&)>& which) const;

  std::map<uint64_t, Runs> RunsByJob() const;

  // Every clash any task recorded, and every malformed line, as GoogleTest failures that
  // name the job and GPU; the number of clashes.
  int ExpectNoClash() const;

  // The first record of `kind` of the job's `attempt`, waiting up to `timeout`.
  std::optional<Record> WaitRecord(uint64_t job, int attempt, const std::string& kind,
                                   std::chrono::milliseconds timeout) const;

  // SIGKILLs the recorded processes still alive that carry this RECORDS in their
  // environment (a pid may have been reused): what a killed agent or a kept task left.
  void KillLeftovers() const;

 private:
  std::string records_, locks_;
  bool ok_ = false;
};

}  // namespace tessera::e2e
