// A SlurmRequest onto a Tessera job file: the gang's shape and resources, the script's
// command through the batch prelude, and the exported environment.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "api/job_codec.h"
#include "api/job_draft.h"
#include "api/json_fields.h"
#include "api/units.h"
#include "base/strings.h"
#include "cli/slurm_request.h"
#include "cli/slurm_script.h"

namespace tessera {
namespace {


// Runs as `bash -c PRELUDE NAME OUT ERR MODE SHEBANG TEXT ARGS...` (SHEBANG: the `#!`
// line's interpreter and its one argument, if any; no item may be empty in a job's
// command). The script runs as its own `INTERP -c TEXT NAME ARGS` (shells) or from a
// file (other interpreters), so its line numbers and $0 are its own. The wrapper
// outlives the signals the tasks get (they reach every process of the task) to report
// the script's own exit status; tee ignores them so that a checkpointing script's last
// words still reach its files.
constexpr std::string_view kPrelude = R"PRELUDE(set -o pipefail
__ts_out=$1 __ts_err=$2 __ts_mode=$3 __ts_interp=${4%%[[:blank:]]*} __ts_arg= __ts_text=$5
case $4 in *[[:blank:]]*) __ts_arg=${4#*[[:blank:]]} ;; esac
shift 5
# __ts_expand VAR PATTERN: the pattern's %-escapes into VAR (no subshell: a large array
# runs this prelude thousands of times, and every process it starts costs).
__ts_expand() {
  local p=$2 r= d w v c
  while [ -n "$p" ]; do
    c=${p:0:1} p=${p:1}
    if [ "$c" != % ]; then r+=$c; continue; fi
    d=
    while [[ $p == [0-9]* ]]; do d+=${p:0:1} p=${p:1}; done
    # The padding, leading zeros aside: 10 digits at most, as Slurm's (the CLI refuses more).
    w=${d#"${d%%[!0]*}"}
    if ((${#w} > 2)) || ((10#0$w > 10)); then w=10; fi
    c=${p:0:1} p=${p:1}
    case $c in
      j) v=$SLURM_JOB_ID ;;
      A) v=${SLURM_ARRAY_JOB_ID:-$SLURM_JOB_ID} ;;
      a) v=${SLURM_ARRAY_TASK_ID:-4294967294} ;;
      x) v=$SLURM_JOB_NAME ;;
      u) v=${USER:-$(id -un)} ;;
      N) v=${SLURMD_NODENAME:-${HOSTNAME%%.*}} ;;
      n) v=${SLURM_NODEID:-0} ;;
      t) v=${SLURM_PROCID:-0} ;;
      %) v=% ;;
      *) v=%$d$c ;;
    esac
    if [[ -n $w && $v =~ ^[0-9]+$ ]]; then printf -v v '%0*d' "$w" "$((10#$v))"; fi
    r+=$v
  done
  printf -v "$1" '%s' "$r"
}
# A file shared by several tasks is appended to; one that is this task's alone starts empty.
__ts_open() {
  if [ "$__ts_mode" = truncate ] && { [ "${SLURM_NTASKS:-1}" = 1 ] || [[ $2 == *%t* ]]; }; then
    { : > "$1"; } 2>/dev/null
  else
    { : >> "$1"; } 2>/dev/null
  fi || { echo "tessera: cannot write the job's output file $1 (in $PWD)" >&2; return 1; }
}
__ts_tee() { trap '' INT TERM HUP QUIT USR1 USR2; exec tee -a "$1"; }
__ts_run() {
  local shell=${__ts_interp##*/}
  [ "$shell" = env ] && shell=${__ts_arg%% *}
  case ${shell##*/} in
    bash|sh|dash|ksh|zsh)
      # shellcheck disable=SC2086 # the #! argument may hold several options
      exec "$__ts_interp" $__ts_arg -c "$__ts_text" "$0" "$@" ;;
  esac
  __ts_mkdir
  local f=$__ts_dir/${0##*/}
  printf '%s' "$__ts_text" > "$f" && chmod +x "$f" || exit 1
  if [ -n "$__ts_arg" ]; then exec "$__ts_interp" "$__ts_arg" "$f" "$@"; fi
  exec "$__ts_interp" "$f" "$@"
}
# A scratch directory, made only when needed (srun, a script for another interpreter).
__ts_dir=
__ts_mkdir() {
  [ -n "$__ts_dir" ] && return 0
  __ts_dir=$(mktemp -d "${TMPDIR:-/tmp}/tessera-batch.XXXXXX") || exit 1
  trap 'rm -rf "$__ts_dir"' EXIT
}
__ts_srun='#!/bin/bash
# srun in a Tessera batch job: each task is already one Slurm task, so this runs the
# command once here, without the options of srun; -n K runs it on tasks 0..K-1 only.
n=
while [ $# -gt 0 ]; do
  case $1 in
    --) shift; break ;;
    -n|--ntasks) n=$2; shift 2 ;;
    --ntasks=*) n=${1#*=}; shift ;;
    -n*) n=${1#-n}; shift ;;
    --*=*) shift ;;
    -l|-u|-K|-Q|-v|-X|-E|-O|-H|-Z|-s|-k|--label|--unbuffered|--kill-on-bad-exit|--quiet|\
    --verbose|--disable-status|--preserve-env|--overcommit|--hold|--no-allocate|\
    --oversubscribe|--no-kill|--exclusive|--overlap|--pty|--exact|--whole|--contiguous|\
    --spread-job|--test-only|--use-min-nodes|--propagate|--get-user-env) shift ;;
    --*|-?) shift 2 ;;
    -*) shift ;;
    *) break ;;
  esac
done
if [ -n "$n" ] && [ "${SLURM_PROCID:-0}" -ge "$n" ] 2>/dev/null; then exit 0; fi
exec "$@"'
# srun on PATH for a script that names it (a script reaching srun only through another
# file must name it, e.g. in a comment: docs/slurm.md).
if [[ $__ts_text == *srun* ]]; then
  __ts_mkdir
  mkdir "$__ts_dir/bin" && printf '%s\n' "$__ts_srun" > "$__ts_dir/bin/srun" &&
    chmod +x "$__ts_dir/bin/srun" || exit 1
  export PATH="$__ts_dir/bin:$PATH"
fi
__ts_expand __ts_o "$__ts_out"
__ts_expand __ts_e "$__ts_err"
# Output to /dev/null: nothing to copy, the task's log has it all.
if [ "$__ts_o" = /dev/null ] && [ "$__ts_e" = /dev/null ]; then
  # Replaced by the script where nothing is left to clean up after it.
  if [ -z "$__ts_dir" ]; then
    case ${__ts_interp##*/} in bash|sh|dash|ksh|zsh) __ts_run "$@" ;; esac
  fi
  ( __ts_run "$@" )
  exit $?
fi
__ts_open "$__ts_o" "$__ts_out" || exit 1
if [ "$__ts_e" != "$__ts_o" ]; then __ts_open "$__ts_e" "$__ts_err" || exit 1; fi
trap : INT TERM HUP QUIT USR1 USR2
if [ "$__ts_e" = "$__ts_o" ]; then
  __ts_run "$@" 2>&1 | __ts_tee "$__ts_o"
else
  { __ts_run "$@" 2>&1 1>&3 3>&- | __ts_tee "$__ts_e" 1>&2 3>&-; } 3>&1 | __ts_tee "$__ts_o"
fi
__ts_rc=$?
exit $__ts_rc
)PRELUDE";

// A script of the most a script may be, its wrapper and a few KiB of name, patterns and
// arguments fit in the command the controller takes.
static_assert(kMaxBatchScriptBytes + kPrelude.size() + 2048 <= kMaxCommandBytes);

// Variables that --export=ALL leaves behind: the controller's and agent's own (set for
// every task), Tessera's credentials, and the submitting shell's.
bool KeptFromEnvironment(const std::string& key, const std::string& value) {
  for (std::string_view prefix : {"SLURM_", "SBATCH_", "TESSERA_"}) {
    if (StartsWith(key, prefix)) {
      return false;
    }
  }
  for (std::string_view local : {"PWD", "OLDPWD", "SHLVL", "_", "HOME", "TMPDIR"}) {
    if (key == local) {
      return false;
    }
  }
  return IsValidEnvName(key) && IsValidUtf8(value);
}

StatusOr<std::map<std::string, std::string>> ExportedEnv(
    const std::optional<std::string>& spec, const std::map<std::string, std::string>& environment) {
  const std::string text = spec.value_or("ALL");
  std::map<std::string, std::string> env;
  bool all = false;
  bool first = true;
  for (std::string_view item : Split(text, ',')) {
    const std::string word(Trim(item));
    if (first && (word == "ALL" || word == "NONE" || word == "NIL")) {
      all = word == "ALL";
      first = false;
      continue;
    }
    first = false;
    const size_t eq = word.find('=');
    const std::string key = word.substr(0, eq);
    if (!IsValidEnvName(key)) {
      return InvalidArgumentError("--export: '" + key + "' is not a variable name");
    }
    if (eq != std::string::npos) {
      env[key] = word.substr(eq + 1);
    } else if (auto it = environment.find(key); it != environment.end()) {
      env[key] = it->second;
    }
  }
  if (all) {
    for (const auto& [key, value] : environment) {
      if (KeptFromEnvironment(key, value) && !env.contains(key)) {
        env[key] = value;
      }
    }
  }
  size_t bytes = 0;
  for (const auto& [key, value] : env) {
    bytes += key.size() + value.size();
  }
  if (bytes > kMaxEnvBytes) {
    return InvalidArgumentError("--export: the environment is " + std::to_string(bytes) +
                                " bytes, over the job's " + std::to_string(kMaxEnvBytes) +
                                "; use --export=NONE or name the variables");
  }
  return env;
}

// The job name sbatch gives a script: its file name, here in a job name's characters.
std::string DefaultJobName(const std::string& script) {
  std::string base = script.substr(script.rfind('/') + 1);
  for (char& c : base) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) {
      c = '_';
    }
  }
  base = base.substr(0, kMaxNameLength);
  return base.empty() ? "wrap" : base;
}

}  // namespace

std::string_view BatchPrelude() { return kPrelude; }

std::vector<std::string> GpuModelsForSlurmType(std::string_view type, const GpuCatalog& catalog) {
  std::string want = AsciiLower(type);
  for (char& c : want) {
    c = c == '_' ? '-' : c;
  }
  std::vector<std::string> out;
  for (const GpuModel& m : catalog.models()) {
    std::vector<std::string> names = m.aliases;
    names.push_back(m.name);
    for (const std::string& n : names) {
      const std::string lower = AsciiLower(n);
      if (lower == want || StartsWith(lower, want + "-")) {
        out.push_back(m.name);
        break;
      }
    }
  }
  return out;
}

namespace {

// The gang: Slurm's tasks, and how many of them share a node (for per-node values).
struct SlurmGang {
  int64_t tasks = 1;
  int64_t per_node = 0;  // 0: the tasks do not divide evenly over the nodes
};

StatusOr<SlurmGang> GangOf(const SlurmRequest& r) {
  const int64_t nodes = r.nodes.value_or(1);
  SlurmGang gang;
  gang.tasks = r.ntasks.has_value()            ? *r.ntasks
               : r.ntasks_per_node.has_value() ? nodes * *r.ntasks_per_node
                                               : nodes;
  if (gang.tasks > kMaxReplicas) {
    return InvalidArgumentError("the job has " + std::to_string(gang.tasks) + " tasks; at most " +
                                std::to_string(kMaxReplicas));
  }
  if (gang.tasks < nodes) {
    return InvalidArgumentError("--ntasks=" + std::to_string(gang.tasks) +
                                " is fewer than --nodes=" + std::to_string(nodes));
  }
  if (r.ntasks_per_node.has_value()) {
    gang.per_node = *r.ntasks_per_node;
  } else if (gang.tasks % nodes == 0) {
    gang.per_node = gang.tasks / nodes;
  }
  return gang;
}

// `value` (of `what`, given by the option `origin`) shared evenly among `by` tasks.
StatusOr<int64_t> DividePerTask(int64_t value, int64_t by, const std::string& origin,
                                const std::string& what) {
  if (by == 0) {
    return InvalidArgumentError(origin +
                                ": the tasks do not divide evenly over --nodes; give "
                                "--ntasks-per-node");
  }
  if (value % by != 0) {
    return InvalidArgumentError(origin + ": " + std::to_string(value) + " " + what + " over " +
                                std::to_string(by) + " tasks is not a whole number per task; " +
                                "give --gpus-per-task, or --nodes/--ntasks-per-node to match");
  }
  return value / by;
}

StatusOr<int64_t> GpusPerTask(const SlurmRequest& r, const SlurmGang& gang) {
  using GpuUnit = SlurmRequest::GpuUnit;
  switch (r.gpu_unit) {
    case GpuUnit::kNone:
      break;
    case GpuUnit::kPerTask:
      return r.gpu_count;
    case GpuUnit::kPerNode:
      return DividePerTask(r.gpu_count, gang.per_node, r.gpu_origin, "GPUs per node");
    case GpuUnit::kTotal:
      return DividePerTask(r.gpu_count, gang.tasks, r.gpu_origin, "GPUs in all");
  }
  return int64_t{0};
}

// The GPU fields of a task's resources: how many (`gpus` a task), which models, and
// shares of one.
Status AddGpuResources(const SlurmRequest& r, const GpuCatalog& catalog, int64_t gpus,
                       JobDraft::Resources* res) {
  const bool shared = !r.gpu_fraction.empty() || !r.mig.empty();
  if (gpus > 0 && !shared) {
    res->gpus = gpus;
  }
  if (r.gpu_unit != SlurmRequest::GpuUnit::kNone && !r.gpu_type.empty()) {
    res->gpu_model = GpuModelsForSlurmType(r.gpu_type, catalog);
    if (res->gpu_model.empty()) {
      return InvalidArgumentError(r.gpu_origin + ": GPU type '" + r.gpu_type +
                                  "' matches no GPU model in the catalog");
    }
  }
  if (!r.gpu_model.empty()) {
    res->gpu_model.clear();
    for (std::string_view m : Split(r.gpu_model, '|')) {
      res->gpu_model.emplace_back(Trim(m));
    }
  }
  if (!r.gpu_fraction.empty()) {
    TESSERA_ASSIGN_OR_RETURN(res->gpu_fraction, GpuFractionFlag("--gpu-fraction", r.gpu_fraction));
  }
  if (!r.gpu_memory_mib.empty()) {
    res->gpu_memory = FormatMiB(*ParseInt64(r.gpu_memory_mib));
  }
  res->mig = r.mig;
  return Status::Ok();
}

// A task's memory in MiB (0: none asked for), from Slurm's per-node, per-GPU or per-CPU
// amount.
StatusOr<int64_t> MemoryPerTask(const SlurmRequest& r, int64_t per_node, int64_t gpus,
                                int64_t cpus) {
  using MemUnit = SlurmRequest::MemUnit;
  switch (r.mem_unit) {
    case MemUnit::kNone:
      break;
    case MemUnit::kPerNode:
      if (per_node == 0) {
        return InvalidArgumentError(r.mem_origin +
                                    ": the tasks do not divide evenly over "
                                    "--nodes; give --ntasks-per-node");
      }
      return r.mem_mib / per_node;  // rounded down: the node's tasks together fit in it
    case MemUnit::kPerGpu:
      if (gpus == 0) {
        return InvalidArgumentError(r.mem_origin + ": the job asks for no GPUs");
      }
      return r.mem_mib * gpus;
    case MemUnit::kPerCpu:
      return r.mem_mib * cpus;
  }
  return int64_t{0};
}

// The CPU and memory fields of a task's resources (`gpus` a task).
Status AddCpuAndMemory(const SlurmRequest& r, const SlurmGang& gang, int64_t gpus,
                       JobDraft::Resources* res) {
  int64_t cpus = r.cpus_per_task.value_or(1);
  if (r.cpus_per_task.has_value()) {
    res->cpu = *r.cpus_per_task;
  } else if (r.cpus_per_gpu.has_value()) {
    if (gpus == 0) {
      return InvalidArgumentError("--cpus-per-gpu: the job asks for no GPUs");
    }
    cpus = *r.cpus_per_gpu * gpus;
    res->cpu = cpus;
  }
  TESSERA_ASSIGN_OR_RETURN(const int64_t mem, MemoryPerTask(r, gang.per_node, gpus, cpus));
  if (mem > 0) {
    res->memory = FormatMiB(mem);
  }
  return Status::Ok();
}

// The job's restart policy; empty when the request says nothing of it.
StatusOr<JobDraft::Restart> RestartOf(const SlurmRequest& r) {
  JobDraft::Restart restart;
  if (r.requeue.has_value()) {
    // Slurm requeues after a node failure or preemption, never after the script failed.
    if (*r.requeue) {
      restart.on = static_cast<uint8_t>(RestartOn::kNodeLost) |
                   static_cast<uint8_t>(RestartOn::kGpuFault);
    } else {
      restart.max = 0;
    }
  }
  if (!r.restart_max.empty()) {
    StatusOr<int64_t> max = ParseInt64(r.restart_max);
    if (!max.ok()) {
      return InvalidArgumentError("--restart-max: expected a number, got '" + r.restart_max + "'");
    }
    restart.max = *max;  // the range is the codec's
  }
  if (!r.restart_on.empty()) {
    TESSERA_ASSIGN_OR_RETURN(restart.on, RestartOnFlag("--restart-on", r.restart_on));
  }
  if (!r.restart_backoff.empty()) {
    TESSERA_ASSIGN_OR_RETURN(restart.backoff, DurationFlag("--restart-backoff", r.restart_backoff));
  }
  return restart;
}

// The fields that say when the job may run and how it is stopped: array, dependency,
// hold, signal, checkpoint, preemption.
Status AddRunConditions(const SlurmRequest& r, JobDraft* d, std::vector<std::string>* warnings) {
  d->array = r.array;
  d->dependency = r.dependency;
  d->hold = r.hold;
  if (!r.signal_name.empty()) {
    d->signal_name = r.signal_name;
    d->signal_before = r.signal_before_s * 1'000'000;
    if (!r.time_given || !r.time.has_value()) {
      warnings->push_back(
          "--signal: the job has no time limit (--time), so the signal is never sent");
    }
  }
  if (!r.checkpoint_interval.empty()) {
    TESSERA_ASSIGN_OR_RETURN(d->checkpoint_interval,
                             DurationFlag("--checkpoint-interval", r.checkpoint_interval));
  }
  d->preemptible = r.preemptible;
  d->hold_if_unfit = r.hold_if_unfit;
  return Status::Ok();
}

}  // namespace

StatusOr<JobDraft> SlurmRequestToDraft(const SlurmRequest& r, const GpuCatalog& catalog,
                                       std::vector<std::string>* warnings) {
  JobDraft d;
  d.queue = r.partition;
  d.priority = r.priority;
  TESSERA_ASSIGN_OR_RETURN(const SlurmGang gang, GangOf(r));
  if (gang.tasks != 1) {
    d.replicas = gang.tasks;
  }
  if (r.nodes.has_value() && *r.nodes == 1 && gang.tasks > 1) {
    d.topology = TopologyPolicy{TopologyScope::kNode, /*hard=*/true};
  }
  TESSERA_ASSIGN_OR_RETURN(const int64_t gpus, GpusPerTask(r, gang));
  TESSERA_RETURN_IF_ERROR(AddGpuResources(r, catalog, gpus, &d.resources));
  TESSERA_RETURN_IF_ERROR(AddCpuAndMemory(r, gang, gpus, &d.resources));
  if (r.time_given && r.time.has_value()) {
    d.runtime_limit = FormatDuration(*r.time);
  }
  TESSERA_ASSIGN_OR_RETURN(d.restart, RestartOf(r));
  TESSERA_RETURN_IF_ERROR(AddRunConditions(r, &d, warnings));
  TESSERA_ASSIGN_OR_RETURN(d.container, ContainerFlags("--container-image", r.container_image,
                                                       r.container_mounts, r.container_workdir));
  if (r.container_mount_home.has_value()) {
    if (d.container.empty()) {
      return InvalidArgumentError("--container-mount-home needs --container-image");
    }
    d.container.mount_home = *r.container_mount_home;
  }
  return d;
}

Status FinishSlurmJob(const SlurmJobInput& in, const SlurmRequest& r, JobDraft* d) {
  if (!r.job_name.empty()) {
    if (!IsValidJobName(r.job_name)) {
      return InvalidArgumentError("--job-name: '" + r.job_name +
                                  "' is not a job name (1 to 128 of A-Za-z0-9._-)");
    }
    d->name = r.job_name;
  } else {
    d->name = DefaultJobName(in.script_name);
  }
  // The interpreter of the `#!` line: a path and at most one argument, as Linux reads it.
  std::string shebang = "/bin/bash";
  if (StartsWith(in.script_text, "#!")) {
    std::string_view line = in.script_text;
    line = Trim(line.substr(2, line.find('\n') == std::string_view::npos ? std::string_view::npos
                                                                          : line.find('\n') - 2));
    const size_t blank = line.find_first_of(" \t");
    if (!line.empty()) {
      shebang = std::string(line.substr(0, blank));
      if (blank != std::string_view::npos) {
        shebang += " " + std::string(Trim(line.substr(blank)));
      }
    }
  }
  if (Trim(in.script_text).empty()) {
    return InvalidArgumentError((in.script_name.empty() ? "--wrap" : in.script_name) + " is empty");
  }
  const std::string out = !r.output.empty()  ? r.output
                          : !r.array.empty() ? "slurm-%A_%a.out"
                                             : "slurm-%j.out";
  std::vector<std::string> command = {"/bin/bash",
                                      "-c",
                                      std::string(kPrelude),
                                      in.script_name.empty() ? "wrap" : in.script_name,
                                      out,
                                      r.error.empty() ? out : r.error,
                                      r.open_append ? "append" : "truncate",
                                      shebang,
                                      in.script_text};
  command.insert(command.end(), in.script_args.begin(), in.script_args.end());
  size_t bytes = 0;
  for (const std::string& a : command) {
    bytes += a.size();
  }
  if (bytes > kMaxCommandBytes) {
    return InvalidArgumentError(
        "the job's command (the script, its arguments and -o/-e patterns, with Tessera's " +
        std::to_string(kPrelude.size()) + "-byte wrapper) is " + std::to_string(bytes) +
        " bytes, over the " + std::to_string(kMaxCommandBytes) + " bytes the controller takes");
  }
  d->command = std::move(command);
  TESSERA_ASSIGN_OR_RETURN(d->env, ExportedEnv(r.export_spec, in.environment));
  if (!r.chdir.empty()) {
    if (r.chdir[0] == '/') {
      d->working_dir = r.chdir;
    } else if (!in.submit_dir.empty()) {
      d->working_dir = in.submit_dir + "/" + r.chdir;
    } else {
      return InvalidArgumentError("--chdir: '" + r.chdir +
                                  "' is relative and the submit directory is not known");
    }
  }
  d->submit_dir = in.submit_dir;
  return Status::Ok();
}

}  // namespace tessera
