// The job file a user submits (JSON or YAML), read into a JobSubmission.
//
//   name: train                  # optional; 1..128 of [A-Za-z0-9._-]; "" lets the server name it
//   queue: team-a                # optional; "" lets the server choose the tenant's default queue
//   user: alice                  # optional; the server may override it from the credentials
//   priority: 0
//   command: [python, train.py]  # required: argv, or one string run as /bin/sh -c TEXT
//   env: {NCCL_DEBUG: INFO}      # keys are shell names; at most 64 KiB in all
//   working_dir: /path           # optional, absolute
//   submit_dir: /path            # optional, absolute: where `tessera submit` ran (sent by the CLI)
//   replicas: 2                  # gang size, 1..1024, default 1
//   resources:                   # per replica
//     gpus: 8                    # 0..64, default 0 (1 when gpu_fraction, gpu_milli or mig is set)
//     gpu_model: H100-80GB       # or a list: [A100-80GB, H100-80GB]; default any
//     gpu_fraction: 0.25         # a software share of one GPU, (0, 1]; or gpu_milli: 250
//     gpu_memory: 20GiB          # per GPU
//     mig: 1g.10gb               # one MIG instance (implies gpus 1)
//     cpu: 4                     # cores, "0.5" or "500m"; default 1
//     memory: 64GiB              # default 1GiB; a bare number is MiB
//     gpu_topology: prefer-local # prefer-local | require-local | any
//   topology: {scope: nvlink, hard: false}   # node | nvlink | rack | any
//   checkpoint: {interval: 30m, on_signal: true, dir: /shared/ckpt}
//   runtime_limit: 4h            # durations: 90 (seconds), 30s, 5m, 4h, 1d, 1h30m, 250ms
//   preemptible: true
//   restart: {max: 2, on: [failure, node-lost, gpu-fault], backoff: 30s}   # restart_policy.h
//   array: "0-999%50"            # a job array (job_relations.h): one job per index
//   dependency: "afterok:12"     # starts only once this holds (job_relations.h)
//   hold: true                   # submitted held: it waits for `tessera release`
//   signal: {name: USR1, before: 90s}   # sent that long before runtime_limit (default 60s)
//   priority_class: high         # a priority class of the queue configuration (also
//                                # `priority: high`); the server sets `priority` from it
//   image: nvcr.io/nvidia/pytorch:24.05-py3    # run in this OCI image (container_spec.h);
//   container: {mounts: [/data:/data], workdir: /w, entrypoint: [python], mount_home: true}
//                                # with an image, `command` may be left out (the image's)
//
// Quantities may be numbers or strings (0.25 and "0.25" read the same, exactly); null
// means "not given". Unknown keys are errors, with a suggestion for a likely typo. Every
// error is InvalidArgument and starts with the field path ("resources.gpus: must be
// between 0 and 64, got -1"); YAML errors end with the source position ("(line 7,
// column 11)"). After the fields, the request is checked with ValidateTaskRequest and
// ValidateJobSpec (GPU models, MIG profiles, limits).
//
// The parsers never throw and never assert on input: text is capped at 1 MiB and
// nesting at 32 levels, YAML aliases cannot expand a document past fixed budgets, and
// strings are checked to be valid UTF-8 without NUL bytes. JobSubmissionToJson writes a
// document that reads back to an equal submission.
// Thread safety: pure functions; the catalog is only read.
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/container_spec.h"
#include "api/restart_policy.h"
#include "base/status.h"
#include "model/gpu_catalog.h"
#include "model/job.h"

namespace YAML {
class Node;
}

namespace tessera {

// What a user submits: the schedulable JobSpec plus what the agent needs to run it.
struct JobSubmission {
  JobSpec spec;                      // spec.tasks = `replicas` copies of the one task request
  std::vector<std::string> command;  // argv; a string command becomes {"/bin/sh", "-c", text}
  std::map<std::string, std::string> env;
  std::string working_dir;     // "": the agent's default
  // The submitter's current directory; the default working directory where it exists on
  // the node, so that relative paths in a command mean what they meant to the submitter.
  std::string submit_dir;      // "": not sent
  std::string checkpoint_dir;  // "": the controller assigns one
  // A job that could never run on the current nodes is refused at submission unless
  // this is set: then it is kept pending with its "never fits" reason (nodes may come).
  bool hold_if_unfit = false;
  // The job file's `restart` block (restart_policy.h); none: DefaultRestartPolicy().
  std::optional<RestartPolicy> restart;
  // A job array's indices (canonical ArraySpecText; "": not an array). The server makes
  // one job per index, each with this text and its own array_index; an element's array
  // id is its own id less its position in the indices (the ids are consecutive).
  std::string array;
  int64_t array_index = -1;  // set by the server on each element; -1: none
  std::string dependency;    // canonical DependencySpecText; "": none
  bool hold = false;         // submitted held
  std::string priority_class;  // a priority class name the server resolves; "": none
  // A signal the tasks get `limit_signal_before` ahead of the runtime limit; 0: none.
  int limit_signal = 0;
  Micros limit_signal_before = 0;
  // The spec named no `resources.cpu` / `resources.memory`: its tasks hold 1 core and
  // 1 GiB until the server applies the per-GPU defaults (queue_resource_defaults.h),
  // which it stores as stated values. Not part of equality: what ran is what counts.
  bool cpu_defaulted = false;
  bool memory_defaulted = false;
  // `image` and `container` (container_spec.h); empty: the tasks are bare processes.
  ContainerSpec container;
};

// Field-by-field equality, JobSpec included (submit_time too; the *_defaulted marks not).
bool operator==(const JobSubmission& a, const JobSubmission& b);

inline constexpr size_t kMaxJobTextBytes = 1 << 20;
inline constexpr int kMaxJobNesting = 32;
inline constexpr int kMaxReplicas = 1024;
inline constexpr size_t kMaxEnvBytes = 64 * 1024;      // sum of key and value sizes
inline constexpr size_t kMaxCommandBytes = 64 * 1024;  // sum of argv item sizes
inline constexpr size_t kMaxCommandItems = 4096;
inline constexpr size_t kMaxNameLength = 128;
inline constexpr size_t kMaxPathLength = 4096;

StatusOr<JobSubmission> JobSubmissionFromJson(const nlohmann::json& j, const GpuCatalog& catalog);
// The job at `path` inside a larger document ("jobs[3]"): JobSubmissionFromJson's
// checks, each error naming its field from the document's root ("jobs[3].replicas: ...").
StatusOr<JobSubmission> JobSubmissionFromJsonAt(const nlohmann::json& j, const GpuCatalog& catalog,
                                                const std::string& path);
StatusOr<JobSubmission> ParseJobJson(std::string_view text, const GpuCatalog& catalog);
StatusOr<JobSubmission> ParseJobYaml(std::string_view text, const GpuCatalog& catalog);
// JSON or YAML, told apart by the first non-blank character ('{' is JSON).
StatusOr<JobSubmission> ParseJobText(std::string_view text, const GpuCatalog& catalog);

// How ReadEmbeddedJob reads a job spec that sits inside another YAML format.
struct EmbeddedJobOptions {
  // The job's path in its document ("jobs[3]"), prefixing every error's path.
  std::string path;
  // The enclosing format's own keys beside the job's (read by the caller, ignored here).
  std::vector<std::string_view> extra_keys;
  // Resolves a priority written as a name (a queue tree's priority class); null: numbers
  // only.
  std::function<std::optional<int32_t>(const std::string& name)> priority_class;
  // Whether `command` is required, as in a job file (a batch of jobs to run).
  bool require_command = false;
};

// The job spec at `node`, a map inside another YAML document (a scenario file's jobs):
// the fields, defaults, checks and messages of a job file, so that one job-request
// language serves the API and the simulator. `command` may be left out unless
// options.require_command (such a job is scheduled, never run). InvalidArgument "path: message
// (line L, column C)", the path starting with options.path.
StatusOr<JobSubmission> ReadEmbeddedJob(const YAML::Node& node, const GpuCatalog& catalog,
                                        const EmbeddedJobOptions& options);

// The submission in the format above: quantities as exact strings ("64GiB", "500m",
// "1h30m"), a software share as gpu_milli, models by canonical name. Reads back with
// JobSubmissionFromJson to an equal submission when spec.tasks are copies of one
// request (as the parsers make them); otherwise the first task stands for all.
// submit_time is not part of the file and is left out.
nlohmann::json JobSubmissionToJson(const JobSubmission& job, const GpuCatalog& catalog);

// Whether `name` is 1..128 characters of [A-Za-z0-9._-] (job and queue names).
bool IsValidJobName(std::string_view name);
// Whether `key` is a shell variable name: [A-Za-z_][A-Za-z0-9_]*.
bool IsValidEnvName(std::string_view key);

}  // namespace tessera
