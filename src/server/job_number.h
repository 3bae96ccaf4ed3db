// JobNumber: a job's id as users, the API and agents know it ("job 42"). The controller
// assigns it at submission and never reuses it, so it only grows. It is not the core's
// JobId, which numbers jobs by their slot in memory and is reused once a job is
// archived; the two do not mix. Rows in the store, the agent protocol and JSON carry
// the plain integer (value()); the controller's services take a JobNumber.
// Thread safety: a value.
#pragma once

#include <cstdint>
#include <string>

#include "base/strong_id.h"

namespace tessera {

struct JobNumberTag {};
using JobNumber = StrongId<JobNumberTag, uint64_t>;

inline std::string ToString(JobNumber id) { return std::to_string(id.value()); }

}  // namespace tessera
