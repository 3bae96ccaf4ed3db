// Slurm batch scripts as Tessera jobs: the directives of a script (`#SBATCH` and
// `#TESSERA` lines in its leading comment block, read as sbatch reads them: up to the
// first line that is neither blank nor a comment) and sbatch's command-line options
// become the JSON job document POST /v1/jobs takes (api/job_codec.h). The command line
// overrides the script; within each, a later option overrides an earlier one.
//
// Slurm's shape onto Tessera's gang (the gang's tasks are Slurm's tasks):
//   replicas   = --ntasks, else --nodes x --ntasks-per-node, else --nodes (default 1).
//   tasks per node (for per-node values) = --ntasks-per-node, else replicas / --nodes
//                (without --nodes: all tasks count as one node's).
//   GPUs per replica: --gpus-per-task; --gres=gpu[:TYPE]:N or --gpus-per-node divided by
//                the tasks per node; --gpus (total) divided by the replicas. The division
//                must be exact, else an error says which option to use.
//   cpu        = --cpus-per-task (default: the job file's, one core).
//   memory per replica: --mem (per node) / tasks per node, rounded down to a MiB;
//                --mem-per-gpu x GPUs per replica; --mem-per-cpu x --cpus-per-task.
//   --nodes=1 with several tasks: topology {scope: node, hard: true}. Several nodes
//                cannot be required (the job file has no "one task per node"); the
//                scheduler places the replicas where they fit, packing them if it can.
//   A GPU type (a100) names every catalog model whose name or alias is the type or
//   starts with "TYPE-" (case-insensitive, '_' as '-'): A100-40GB and A100-80GB.
// The options of each group (GPUs: --gres/--gpus/--gpus-per-node/--gpus-per-task;
// memory: --mem/--mem-per-gpu/--mem-per-cpu) replace one another, the last one winning.
//
// The job's command runs the script with its `#!` interpreter (default /bin/bash)
// through BatchPrelude(), a bash wrapper: $0 is the script's name and $1... its
// arguments; an `srun` on PATH that drops srun's options and runs the command once for
// this task (`-n K`: on tasks 0..K-1 only); output tee'd into Slurm's files (-o/-e
// patterns, default slurm-%j.out, arrays slurm-%A_%a.out) expanded from each task's
// SLURM_* variables, so that `tessera logs` still shows it. See docs/slurm.md.
//
// Bounds: a script is at most kMaxBatchScriptBytes (the job's command carries it whole,
// beside the prelude, and the controller takes kMaxCommandBytes of command in all; Linux
// would not take one argument much larger either); the command as a whole is checked
// against kMaxCommandBytes too. An -o/-e pattern is a path of at most
// kMaxOutputPatternBytes, and pads at most kMaxPatternPadWidth digits (%10a), so the
// file names the prelude builds stay small.
//
// Errors are InvalidArgument and name where: "train.sh:4: #SBATCH --foo: not supported"
// or "--foo: not supported" on the command line. With `lenient`, options Tessera does
// not support are warnings and ignored; bad values are errors still.
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "model/gpu_catalog.h"

namespace tessera {

inline constexpr size_t kMaxBatchScriptBytes = 56 * 1024;
inline constexpr size_t kMaxOutputPatternBytes = 4096;  // PATH_MAX
inline constexpr int kMaxPatternPadWidth = 10;          // as Slurm's

// `tessera sbatch [OPTIONS] SCRIPT [ARGS...]` split up: sbatch options up to the first
// word that is not one (the script), then the script's arguments.
struct SbatchArgs {
  std::vector<std::string> options;  // sbatch options, as typed (values included)
  std::string script;                // "" with --wrap
  std::vector<std::string> script_args;
  std::string wrap;                  // --wrap=CMD: a script of `#!/bin/sh` and CMD
  bool lenient = false;
  bool parsable = false;  // print the job id alone
  bool help = false;
  std::string server;  // the connection flags of every command
  std::string token;
  std::string ca_cert;
  bool insecure = false;
};
StatusOr<SbatchArgs> ParseSbatchArgs(const std::vector<std::string>& args);
// Usage text for `tessera sbatch --help`: the options and how each maps.
std::string SbatchUsage();

struct SlurmJobInput {
  std::string script_name;  // as typed: the wrapper's $0 and the errors' file name
  std::string script_text;
  std::vector<std::string> script_args;
  std::vector<std::string> command_line;  // sbatch options that override the script's
  bool lenient = false;
  std::string submit_dir;  // absolute; "" unknown. Relative -D is taken from it.
  // The submitter's environment, for --export (default ALL).
  std::map<std::string, std::string> environment;
};

struct SlurmJob {
  nlohmann::json spec;                // the job document
  std::vector<std::string> warnings;  // one line each, without a prefix
  std::string account;                // -A: the tenant the caller must check it runs as
};
StatusOr<SlurmJob> TranslateSlurmJob(const SlurmJobInput& input, const GpuCatalog& catalog);
// "a batch script is at most ...": the script limit and why, for messages.
std::string BatchScriptLimit();

// Whether `text` is a batch script: it starts with "#!" or has #SBATCH/#TESSERA lines.
bool LooksLikeBatchScript(std::string_view text);
// Whether `option` ("--mem", "--mem=4G", "-N") is an sbatch option this reads (for
// hints where another command is given one).
bool IsSbatchOption(std::string_view option);

// The catalog models a Slurm GPU type names (see above); empty when none.
std::vector<std::string> GpuModelsForSlurmType(std::string_view type, const GpuCatalog& catalog);

// The bash text of the wrapper: `bash -c PRELUDE NAME OUT ERR MODE SHEBANG TEXT ARGS...`
// runs TEXT with SHEBANG's interpreter (and its one argument) as NAME with ARGS, tee-ing
// its output into the files the patterns OUT and ERR name (MODE: truncate or append).
std::string_view BatchPrelude();

}  // namespace tessera
