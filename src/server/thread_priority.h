// Thread priority for bulk requests: a worker thread building or sending a large answer
// (a page of 1,000 jobs) runs at a lower CPU priority, so that on a busy controller it
// gives the processor to small requests of other tenants first. The worker returns to
// normal priority when it starts its next request (the answer is written after the
// handler returns, so the handler cannot restore it itself).
//
// Lowering happens only where restoring is allowed (root, or RLIMIT_NICE permitting
// nice 0 again); elsewhere both calls do nothing.
// Thread safety: each call affects only the calling thread.
#pragma once

namespace tessera {

void LowerThreadPriority();
void RestoreThreadPriority();

}  // namespace tessera
