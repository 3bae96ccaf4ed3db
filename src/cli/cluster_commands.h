// The cluster commands of `tessera`, clients of the controller's HTTP/JSON API:
//
//   submit [-f job.yaml | flags] [-- command args...]   POST /v1/jobs
//   jobs [--state S] [--queue Q] [--tenant T] [--all]    GET /v1/jobs
//   show JOB                                             GET /v1/jobs/{id}
//   cancel JOB...                                        POST /v1/jobs/{id}/cancel
//   logs [-f] [--task N] JOB                             GET /v1/jobs/{id}/logs
//   nodes [--gpus]                                       GET /v1/nodes
//   queues | queues set -f queues.yaml                   GET | PUT /v1/queues
//   usage [--since T] [--until T] [--by tenant|queue|job] GET /v1/usage
//
// Each Run* function writes its result to `out` and errors ("tessera: <message>") to
// `err`, and returns the exit code: 0 ok, 1 server or unexpected error, 2 bad input,
// 3 not found, 4 not authenticated or not allowed, 5 controller unreachable, 6
// conflict or rate limited (see api_client.h). `output` selects the format: "" (a
// table), "json" (the server's JSON, indented), and where noted "wide" or "csv".
// Times shown as ages are taken against `clock`. Thread safety: the functions share
// no state; each makes its own ApiClient.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "api/job_draft.h"
#include "base/clock.h"
#include "base/status.h"
#include "cli/api_client.h"

namespace tessera {

// `tessera submit`. Either `file` (a YAML or JSON job spec sent as is; "-" reads
// stdin) or the flags and `command`; flag values are kept as typed and checked by
// JobDraftFromFlags. Empty strings are "not given". A file holding a batch (a `jobs:` list,
// api/job_batch.h) goes to POST /v1/jobs/batch and prints the ids one a line.
struct SubmitOptions {
  std::string file;
  std::string name;
  std::string queue;
  std::string replicas;             // positive integer
  std::string gpus;                 // GPUs per replica, integer >= 0
  std::string gpu_model;            // e.g. H100-80GB
  std::string gpu_fraction;         // a share of one GPU, in (0, 1]
  std::string gpu_memory;           // e.g. 20GiB
  std::string mig;                  // MIG profile, e.g. 3g.40gb
  std::string cpu;                  // e.g. 8 or 500m
  std::string memory;               // e.g. 64GiB
  std::string priority;             // integer
  std::string checkpoint_interval;  // e.g. 30m
  std::string runtime_limit;        // e.g. 24h
  // Sent as restart: {max, on, backoff}; any of them given makes the block (the rest
  // take the job file's defaults: max 3, on all three, backoff 30s).
  std::string restart_max;          // 0..100
  std::string restart_on;           // failure,node-lost,gpu-fault
  std::string restart_backoff;      // e.g. 10s
  std::vector<std::string> env;     // K=V
  std::string idempotency_key;
  std::vector<std::string> command;
  std::string output;      // "" or json
  std::string submit_dir;  // sent as the job's submit_dir (the CLI's current directory)
  // Sent as hold_if_unfit: a job that could never run on the current nodes is kept
  // pending with its reason instead of refused.
  bool hold_if_unfit = false;
  std::string image;              // an OCI image reference; "": a bare process
  std::string container_mounts;   // SRC[:DST[:ro|rw]] joined by ','
  std::string container_workdir;  // absolute
};

// The job for the flags of `options` (not for `file`): only the given fields, command
// and env always. Values are checked as the codec checks a file's (api/job_draft.h);
// InvalidArgument naming the flag on a bad value, or on a missing command.
StatusOr<JobDraft> JobDraftFromFlags(const SubmitOptions& options);
// Its job document (JobDraftToJson), as POST /v1/jobs takes it.
StatusOr<nlohmann::json> BuildJobSpec(const SubmitOptions& options);

int RunSubmit(const ClientConfig& config, const SubmitOptions& options, std::ostream& out,
              std::ostream& err);

// `tessera jobs`: a table ID NAME TENANT QUEUE STATE GPUS AGE NODES REASON, newest
// first, of the non-terminal jobs unless `all` or `state` says otherwise.
struct JobsOptions {
  std::string state;  // comma-separated states; "" and !all: pending,running,stopping
  std::string queue;
  std::string tenant;
  std::string user;
  bool all = false;
  int64_t limit = 0;   // 0: the server's default
  std::string output;  // "", wide or json
  // Pending jobs with their expected start, like `squeue --start`: POS QPOS ID NAME
  // QUEUE GPUS ETA BLOCKING, in the scheduler's order (cli/eta_views.h).
  bool start = false;
  // Every array element a row of its own (squeue -r); else pending ones fold into one.
  bool expand_arrays = false;
};
int RunJobs(const ClientConfig& config, const JobsOptions& options, const Clock& clock,
            std::ostream& out, std::ostream& err);

// `tessera show JOB`: state and why, times, attempts, the spec, placement per task.
// `tessera wait JOB...`: polls until every job has reached the state asked for.
// Exit 0 when they did (for "done": all succeeded), 1 when one failed or was
// cancelled, 124 on timeout, like timeout(1).
struct WaitOptions {
  std::vector<std::string> jobs;
  std::string until = "done";  // done (any terminal state) or running (started)
  Micros timeout = 600'000'000;
  int poll_interval_ms = 200;
  std::function<void(int ms)> sleep;  // "": std::this_thread::sleep_for
};
int RunWait(const ClientConfig& config, const WaitOptions& options, const Clock& clock,
            std::ostream& out, std::ostream& err);

struct ShowOptions {
  std::string job;
  std::string output;  // "" or json
};
int RunShow(const ClientConfig& config, const ShowOptions& options, const Clock& clock,
            std::ostream& out, std::ostream& err);

// `tessera cancel JOB...`: asks for each; the exit code is the first failure's.
struct CancelOptions {
  std::vector<std::string> jobs;
  std::string output;  // "" or json
};
int RunCancel(const ClientConfig& config, const CancelOptions& options, std::ostream& out,
              std::ostream& err);

// `tessera logs [-f] [--task N] JOB`: copies the task's log to `out`. Without follow it
// reads until no more bytes come; with follow it polls every `poll_interval_ms` until
// the job is terminal and no more bytes come.
struct LogsOptions {
  std::string job;
  int64_t task = 0;
  int64_t offset = 0;  // first byte to show
  bool follow = false;
  int64_t poll_interval_ms = 500;
  int64_t max_requests = 0;                   // 0: no limit (tests bound their loops with it)
  std::function<void(int64_t millis)> sleep;  // null: sleeps the thread
};
int RunLogs(const ClientConfig& config, const LogsOptions& options, std::ostream& out,
            std::ostream& err);

// `tessera nodes [--gpus]`: NAME STATE GPUS MODEL CPU MEMORY HEARTBEAT REASON, and with
// `gpus` a map: per node one cell per GPU, `[###.......]` (tenths used), `[m:3g,1g...]`
// (MIG instances), followed by the holders' job ids; then which tenant each job is.
// `tessera drain NODE [--gpu N] --reason TEXT` and `tessera resume NODE [--gpu N]`
// (admin): no new work lands on a drained node or GPU; what runs there keeps running.
struct DrainOptions {
  bool drain = true;  // false: resume
  std::string node;
  int gpu = -1;  // -1: the whole node
  std::string reason;
  std::string output;  // "" or json
};
int RunDrain(const ClientConfig& config, const DrainOptions& options, std::ostream& out,
             std::ostream& err);

struct NodesOptions {
  bool gpus = false;
  std::string output;  // "" or json
};
int RunNodes(const ClientConfig& config, const NodesOptions& options, const Clock& clock,
             std::ostream& out, std::ostream& err);

// `tessera queues`: one row per queue and resource; GPU and CPU quantities (milli in
// the API) as decimals, memory as MiB/GiB/TiB.
struct QueuesOptions {
  std::string output;  // "" or json
};
int RunQueues(const ClientConfig& config, const QueuesOptions& options, std::ostream& out,
              std::ostream& err);

// `tessera queues set -f queues.yaml`: replaces the queue configuration (admin).
struct QueuesSetOptions {
  std::string file;    // "-": stdin
  std::string output;  // "" or json
};
int RunQueuesSet(const ClientConfig& config, const QueuesSetOptions& options, std::ostream& out,
                 std::ostream& err);

// `tessera usage`: GPU-hours and jobs per tenant, queue or job over [since, until).
struct UsageOptions {
  std::string since = "24h";  // see ParseTimeArgument (table.h)
  std::string until = "now";
  std::string by = "tenant";  // tenant, queue, job or user (keyed TENANT/USER)
  std::string output;         // "", json or csv
};
int RunUsage(const ClientConfig& config, const UsageOptions& options, const Clock& clock,
             std::ostream& out, std::ostream& err);

// `tessera nodes remove NODE` / `revoke` (admin): forgets the node, or cuts its
// credential off at once.
int RunNodesRemove(const ClientConfig& config, const std::string& node, std::ostream& out,
                   std::ostream& err, bool revoke);

// The directory `tessera submit` runs in, as the shell names it ($PWD when it is this
// directory); "" when it cannot be sent.
std::string CurrentDirForJobs();

// The job flags of `tessera submit` (--name ... --env, --hold-if-unfit) into `o`, shared
// by `tessera run`; and the connection flags every cluster command takes.
void AddJobFlags(CLI::App* cmd, SubmitOptions* o);
void AddConnectionFlags(CLI::App* cmd, ConnectionFlags* flags);

// Registers submit, jobs, show, cancel, logs, nodes, queues and usage on `app`; the one
// that runs sets `exit_code`. Each takes --server, --token, --ca-cert and --insecure.
void AddClusterCommands(CLI::App& app, int* exit_code);

}  // namespace tessera
