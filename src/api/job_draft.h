// A job file as a client states it from flags (`tessera submit`, the Slurm translator),
// before the server reads it: only the fields given, each value already checked by
// the codec's own parser (units.h, restart_policy.h) with errors that name the flag.
// JobDraftToJson writes it with the codec's keys (job_keys.h), values as they were
// given ("24h" stays "24h"), so the server reads it exactly as the same job file;
// JobSubmissionToJson (job_codec.h) is for a whole, resolved submission instead.
// What needs the server's state (GPU models, MIG profiles, limits, queues) is left to
// the server's codec, which reports it by field path.
// Thread safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "api/container_spec.h"
#include "api/json_fields.h"
#include "base/clock.h"
#include "base/status.h"
#include "model/job.h"

namespace tessera {

// A value a job file takes as a number or as text (priority: a number or a class
// name; cpu: 8 or "500m").
using IntOrText = std::variant<int64_t, std::string>;

struct JobDraft {
  // "" / nullopt / empty: not given (left out of the document).
  std::string name;
  std::string queue;
  std::optional<IntOrText> priority;
  std::vector<std::string> command;
  std::optional<std::map<std::string, std::string>> env;  // {} is written
  std::string working_dir;
  std::string submit_dir;
  std::optional<int64_t> replicas;
  std::optional<TopologyPolicy> topology;

  struct Resources {
    std::optional<int64_t> gpus;
    std::vector<std::string> gpu_model;  // one model is written as a string
    std::string gpu_fraction;            // as given: "0.25" is read exactly
    std::string gpu_memory;
    std::string mig;
    std::optional<IntOrText> cpu;
    std::string memory;
    bool empty() const;
  } resources;

  std::string checkpoint_interval;
  std::string runtime_limit;
  std::optional<bool> preemptible;
  bool hold_if_unfit = false;

  struct Restart {
    std::optional<int64_t> max;  // the range is the codec's
    uint8_t on = 0;              // RestartOn bits; 0: not given
    std::string backoff;
    bool empty() const { return !max.has_value() && on == 0 && backoff.empty(); }
  } restart;

  std::string array;       // canonical ArraySpecText
  std::string dependency;  // canonical DependencySpecText
  bool hold = false;
  std::string signal_name;  // "": no signal
  Micros signal_before = 0;
  ContainerSpec container;  // empty: a bare process
};

// The job document: the given fields under the codec's keys.
Json JobDraftToJson(const JobDraft& draft);

// Flag values, checked as the codec checks the same field in a file. Errors are
// InvalidArgument and start with `flag` ("--time expects a duration ..., got 'x'").

// An image and its container settings from flags (pyxis's or Tessera's): `image_flag`
// names the image's flag in errors; `mounts` is SRC[:DST[:ro|rw]] joined by ','. Empty
// when `image` is; InvalidArgument naming the flag otherwise.
StatusOr<ContainerSpec> ContainerFlags(std::string_view image_flag, std::string_view image,
                                       std::string_view mounts, std::string_view workdir);

// An integer >= min ("--replicas expects an integer >= 1, got '0'").
StatusOr<int64_t> IntFlag(std::string_view flag, std::string_view text, int64_t min);
// A duration (runtime_limit, checkpoint.interval, restart.backoff): 90, 30s, 1h30m.
StatusOr<std::string> DurationFlag(std::string_view flag, std::string_view text);
// A runtime limit in Tessera's form or Slurm's (1:00:00, 2-0); nullopt for Slurm's
// UNLIMITED. A bare number stays seconds.
StatusOr<std::optional<std::string>> RuntimeLimitFlag(std::string_view flag,
                                                      std::string_view text);
// A memory size in Tessera's units as given, or Slurm's (4G is 4 GiB) as exact MiB.
StatusOr<std::string> MemoryFlag(std::string_view flag, std::string_view text);
// CPU cores: "4", "0.5", "500m".
StatusOr<std::string> CpuFlag(std::string_view flag, std::string_view text);
// A share of one GPU in (0, 1].
StatusOr<std::string> GpuFractionFlag(std::string_view flag, std::string_view text);
// A restart `on` list: "failure,gpu-fault" (RestartOn bits).
StatusOr<uint8_t> RestartOnFlag(std::string_view flag, std::string_view text);

}  // namespace tessera
