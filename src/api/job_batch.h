// A batch of job specs in one document, as POST /v1/jobs/batch takes it:
//
//   {"jobs": [{"command": ["python", "a.py"]}, ...], "submit_dir": "/path"}   JSON
//
//   jobs:                                                                     YAML
//     - name: a
//       command: [python, a.py]
//   submit_dir: /path
//
// Each job is read as a job file is (job_codec.h: the same fields, defaults, checks and
// messages, `command` required), and every error names the job's place from the root
// of the document ("jobs[3].resources.gpus: must be between 0 and 64, got 65"; YAML
// errors end with the position). The first bad job refuses the whole batch.
// `submit_dir` (optional; the CLI sends its current directory) is the default for the
// jobs that set none of their own.
//
// Bounds, so that one request cannot cost the controller more than a fixed amount:
// 1..max_jobs jobs, at most kMaxBatchTasks tasks (replicas) in all and, since YAML
// aliases may repeat a node, at most kMaxBatchExpandedBytes of commands, environments
// and paths in all. A batch over a bound is OutOfRange naming it; every other error is
// InvalidArgument.
// Thread safety: pure functions; the catalog is only read.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include "api/job_codec.h"
#include "base/status.h"
#include "model/gpu_catalog.h"

namespace tessera {

inline constexpr size_t kMaxBatchJobs = 10'000;
inline constexpr size_t kMaxBatchTasks = 100'000;
inline constexpr size_t kMaxBatchExpandedBytes = 16 << 20;

enum class BatchFormat : uint8_t { kJson, kYaml };

StatusOr<std::vector<JobSubmission>> ParseJobBatch(std::string_view text, BatchFormat format,
                                                   const GpuCatalog& catalog,
                                                   size_t max_jobs = kMaxBatchJobs);

// Whether `text` (JSON or YAML, told apart as ParseJobText does) is a batch document, a
// map with a "jobs" key, rather than one job file. False for text that does not parse.
bool LooksLikeJobBatch(std::string_view text);

}  // namespace tessera
