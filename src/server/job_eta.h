// Job ETAs as the API shows them: the last start forecast (sim/start_forecast.h) of
// every pending job, published by the controller's ETA module (modules/eta_module.h)
// and read by PublishedJobs without the controller's lock.
//
// A pending job's view gets "eta" (RFC 3339, or null with "eta_note" saying why),
// "position" and "queue_position" (its rank in the scheduler's order, overall and
// within its queue, 1-based) and "blocking" (what it waits for at the snapshot, as an
// object: {"kind": "gpus", "model": ...}, {"kind": "quota", "queue": ...},
// {"kind": "reservation", "job": ...}, {"kind": "preemption"}, {"kind": "cpu"}). A job
// behind a gate gets no estimate: "eta" null, "eta_note" and {"kind": "gate", "reason"}.
// Thread safety: an EtaTable is immutable once published; EtaFieldsJson is pure.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "base/clock.h"
#include "server/job_number.h"

namespace tessera {

struct JobEta {
  std::optional<Micros> eta;  // none: no estimate before the table's horizon
  int64_t position = 0;
  int64_t queue_position = 0;
  std::string blocking;  // ForecastBlocking kind name; "none" when it starts now
  std::string blocking_queue, blocking_model;
  JobNumber blocking_job;  // "reservation": the job resources are reserved for
};

struct EtaTable {
  Micros computed_at = 0;  // the snapshot's time
  Micros horizon_end = 0;  // no estimate beyond this
  int64_t pending = 0;     // pending jobs at the snapshot
  // What the refresh cost (wall time): the copy under the core lock, and the forecast.
  double snapshot_seconds = 0, forecast_seconds = 0;
  std::unordered_map<uint64_t, JobEta> jobs;  // by JobNumber value
  // Pending jobs that wait for a gate (a hold, a dependency, an array's throttle) and so
  // get no estimate: why, by JobNumber value. The forecast leaves them out.
  std::unordered_map<uint64_t, std::string> gated;
};

// The ETA fields of a pending job's JSON object, each with a leading comma. A job the
// table does not hold (none published yet, or submitted since) gets nulls and a note.
std::string EtaFieldsJson(const EtaTable* table, JobNumber id);

}  // namespace tessera
