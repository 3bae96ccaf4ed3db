// The job file's keys for arrays, dependencies, holds and priority classes
// (job_codec.h), read and written beside the codec's own.
// Thread safety: pure functions.
#pragma once

#include "api/job_codec.h"
#include "api/json_fields.h"

namespace tessera {

// Reads `array`, `array_index`, `dependency`, `hold`, `signal`, `priority_class` and a `priority`
// written as a name into `job`, each checked (InvalidArgument naming the key).
Status ReadJobRelations(const Json& j, FieldReader& reader, JobSubmission* job);
// A signal by name ("USR1", "SIGUSR1", "usr1") or number (1..64).
StatusOr<int> ParseSignalName(std::string_view text);
// The name without "SIG" ("USR1"), or the number for a signal without one here.
std::string SignalName(int sig);
// Writes them into `out` (absent when unset), so that they read back equal.
void WriteJobRelations(const JobSubmission& job, Json& out);

}  // namespace tessera
