// The job file's keys for arrays, dependencies, holds and priority classes
// (job_codec.h), read and written beside the codec's own.
// Thread safety: pure functions.
#pragma once

#include "api/job_codec.h"
#include "api/json_fields.h"

namespace tessera {

// Reads `array`, `array_index`, `dependency`, `hold`, `priority_class` and a `priority`
// written as a name into `job`, each checked (InvalidArgument naming the key).
Status ReadJobRelations(const Json& j, FieldReader& reader, JobSubmission* job);
// Writes them into `out` (absent when unset), so that they read back equal.
void WriteJobRelations(const JobSubmission& job, Json& out);

}  // namespace tessera
