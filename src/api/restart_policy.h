// The job file's `restart` block (the policy itself: model/restart_policy.h):
//
//   restart: {max: 2, on: [failure, node-lost, gpu-fault], backoff: 30s}
//
// Read by job_codec.cc with the job file's other fields; this header adds the parsing
// of `on` lists that the CLI's flags share.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string_view>

#include "base/status.h"
#include "model/restart_policy.h"

namespace tessera {

// "failure,gpu-fault" (commas, spaces allowed) into bits; InvalidArgument naming `field`
// for an empty list or an unknown name.
StatusOr<uint8_t> ParseRestartOnList(std::string_view text, std::string_view field);

}  // namespace tessera
