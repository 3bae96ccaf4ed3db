// What `tessera jobs --start` and `tessera show` print of pending jobs' ETAs (the
// controller's start forecast: "eta", "position", "queue_position", "blocking" in a
// pending job's JSON), like Slurm's `squeue --start`.
// Thread safety: pure functions.
#pragma once

#include <string>

#include "base/clock.h"
#include <nlohmann/json.hpp>

namespace tessera {

// "2027-01-15T08:30:00Z (in 12m)", or why there is none ("no estimate before ...").
std::string EtaText(const nlohmann::json& job, Micros now);
// "GPUs (H100-80GB)", "quota of queue team-a", "reservation for job 12", ...; "-" none.
std::string BlockingText(const nlohmann::json& job);
// The jobs sorted by "position" (stable; jobs without one last).
nlohmann::json ByPosition(const nlohmann::json& jobs);
// POS QPOS ID NAME QUEUE GPUS ETA BLOCKING, by position (jobs without one last).
std::string JobsStartTable(const nlohmann::json& jobs, Micros now);

}  // namespace tessera
