// A job's attempts: each attempt that ended (start, end, where it ran, how it ended),
// kept in the job's stored placement (JobRow::placement_json, key "attempts") so that
// an attempt is recorded in the same store batch as the transition that ended it and
// needs no schema change. A finished job keeps its placement this way.
//
// Stored attempt: {"attempt": n, "start": us, "end": us, "ended": "succeeded" |
// "failed" | "cancelled" | "preempted" | "node lost" | "task lost" | "gpu-fault", "exit_code": c,
// "signal": s, "detail": "XID 79 (...) on node n1 GPU 0" (gpu-fault), "restarts": n (the
// restart policy's count after it; a requeued attempt only), "restart_at": us (a
// failure's backoff end),
// "tasks": [{"node": name, "exit_code", "signal",
// "gpus": [{"index", "model", "uuid", "milli", "mig_profile"}]}]}
//
// Thread safety: functions, no shared state.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/clock.h"
#include "sched/attempt_machine.h"

namespace tessera {

struct LiveJob;
class NodeRegistry;
class GpuCatalog;

// At most this many ended attempts are kept (the oldest are dropped).
inline constexpr size_t kMaxStoredAttempts = 64;

// The ended attempts in a stored placement; [] when none or unreadable.
nlohmann::json StoredAttempts(const std::string& placement_json);

// `placement` (an object) with the ended attempts of `old_placement_json` carried over,
// as text; "" when that leaves an empty object.
std::string WithStoredAttempts(nlohmann::json placement, const std::string& old_placement_json);

// `old_placement_json`'s attempts plus `ended`, as the stored text of a job that holds
// nothing now (pending again or finished).
std::string AppendAttempt(const std::string& old_placement_json, nlohmann::json ended);

// The attempts as the API shows them: times in RFC 3339, "run_seconds" per attempt.
nlohmann::json AttemptsView(const nlohmann::json& stored);

// The sum of the stored attempts' run times, in seconds.
double StoredRunSeconds(const nlohmann::json& stored);

// The restarts counted so far: the newest requeued attempt's "restarts" (an attempt that
// finished the job stores none, and the count before it stands); 0 when none was requeued.
int StoredRestarts(const nlohmann::json& stored);

// The stored record of `job`'s attempt that just ended (the format above), with its GPUs
// named (model, UUID, MIG profile) from `nodes` while they are still known.
nlohmann::json StoredEndedAttempt(const LiveJob& job, const EndedAttempt& ended, Micros now,
                                  const NodeRegistry& nodes, const GpuCatalog& catalog);

}  // namespace tessera
