// ControllerCounters: what the controller counts of its own work for /metrics: cycles
// and their wall time, the decisions applied, submissions and finished jobs by queue,
// and the reports and cycles that something was wrong with (tenants' GPU-seconds:
// modules/accounting.h).
//
// Invariants: counters only grow; each map's keys are named beside it.
//
// Thread safety: the atomic members and the Histogram (thread-safe itself) may be
// updated and read from any thread; every other member is guarded by the controller's
// core lock (Controller::mu_).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "metrics/exposition.h"

namespace tessera {

struct ControllerCounters {
  // Wall time of each scheduling cycle, in seconds.
  Histogram cycle_seconds{
      {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}};
  std::atomic<uint64_t> cycles{0};
  uint64_t report_cycles = 0;  // core cycles run on an agent's report of an exit (mu_)
  std::map<std::string, uint64_t> decisions;                         // start, preempt, requeue
  std::map<std::string, uint64_t> preemptions;                       // by victim queue
  std::map<std::string, uint64_t> submitted;                         // by queue
  std::map<std::pair<std::string, std::string>, uint64_t> finished;  // (queue, state)
  uint64_t invariant_breaches = 0;  // cycles after which CheckInvariants found any
  // Task reports dropped because they named a task not placed on the reporting node.
  std::atomic<uint64_t> foreign_reports{0};
};

}  // namespace tessera
