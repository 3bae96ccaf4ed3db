// What a batch script's directives and sbatch's options asked for, before it becomes a
// job document: the step between slurm_script.cc (reading options) and slurm_job.cc
// (mapping them onto a job file). Internal to the batch-script translator.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "api/job_draft.h"
#include "base/clock.h"
#include "base/status.h"
#include "model/gpu_catalog.h"

namespace tessera {

struct SlurmRequest {
  std::string job_name;
  std::optional<int64_t> nodes;
  std::optional<int64_t> ntasks;
  std::optional<int64_t> ntasks_per_node;
  std::optional<int64_t> cpus_per_task;
  std::optional<int64_t> cpus_per_gpu;  // replaces cpus_per_task, and the other way round

  enum class GpuUnit { kNone, kPerNode, kPerTask, kTotal };
  GpuUnit gpu_unit = GpuUnit::kNone;
  int64_t gpu_count = 0;
  std::string gpu_type;
  std::string gpu_origin;  // the option that set them, for messages ("--gres")

  enum class MemUnit { kNone, kPerNode, kPerGpu, kPerCpu };
  MemUnit mem_unit = MemUnit::kNone;
  int64_t mem_mib = 0;
  std::string mem_origin;

  bool time_given = false;
  std::optional<Micros> time;  // nullopt with time_given: no limit

  std::string partition;
  std::optional<IntOrText> priority;  // a number (--priority) or a class name (--qos)
  std::string array;        // canonical (ParseArraySpec)
  std::string dependency;   // canonical (ParseDependencySpec)
  std::string output;       // patterns
  std::string error;
  std::string chdir;
  std::string account;
  std::optional<std::string> export_spec;
  std::optional<bool> requeue;
  std::string signal_name;  // "" none
  int64_t signal_before_s = 60;
  bool hold = false;
  bool open_append = false;

  // Tessera's own, from #TESSERA lines and the command line.
  std::string gpu_model;
  std::string gpu_fraction;
  std::string gpu_memory_mib;  // exact MiB, as text
  std::string mig;
  std::string checkpoint_interval;
  std::string restart_max;
  std::string restart_on;
  std::string restart_backoff;
  std::optional<bool> preemptible;
  bool hold_if_unfit = false;

  // pyxis's (slurm_pyxis.cc), as given.
  std::string container_image;
  std::string container_mounts;
  std::string container_workdir;
  std::optional<bool> container_mount_home;
};

// A pyxis option (`name` without "--", e.g. "container-image") into `request`; `where`
// names it in messages ("train.sh:3: #SBATCH --container-image"). Options that change
// nothing in Tessera are accepted with a warning; --container-remap-root is refused
// (tasks run as their tenant's uid). The values are checked with the job.
Status ApplyPyxis(std::string_view name, const std::string& value, const std::string& where,
                  SlurmRequest* request, std::vector<std::string>* warnings);

// The job for `request` (the fields of the job file; command and env are the caller's),
// values checked as the codec checks them. Warnings about what maps loosely are appended
// to `warnings`.
StatusOr<JobDraft> SlurmRequestToDraft(const SlurmRequest& request, const GpuCatalog& catalog,
                                       std::vector<std::string>* warnings);

struct SlurmJobInput;
struct SlurmJob;
// The rest of the job from the input: name, command (the script through BatchPrelude),
// env (--export), working_dir, submit_dir.
Status FinishSlurmJob(const SlurmJobInput& input, const SlurmRequest& request, JobDraft* draft);

}  // namespace tessera
