// The flag checks of job_draft.h: the codec's parsers, the flag's name in the error.
#include "api/job_draft.h"

#include <string>

#include "api/restart_policy.h"
#include "api/units.h"
#include "base/strings.h"
#include "base/time_format.h"

namespace tessera {
namespace {

Status FlagError(std::string_view flag, const Status& s) {
  return InvalidArgumentError(std::string(flag) + ": " + s.message());
}

}  // namespace

bool JobDraft::Resources::empty() const {
  return !gpus.has_value() && gpu_model.empty() && gpu_fraction.empty() && gpu_memory.empty() &&
         mig.empty() && !cpu.has_value() && memory.empty();
}

StatusOr<ContainerSpec> ContainerFlags(std::string_view image_flag, std::string_view image,
                                       std::string_view mounts, std::string_view workdir) {
  ContainerSpec c;
  if (image.empty()) {
    if (!mounts.empty() || !workdir.empty()) {
      return InvalidArgumentError(
          std::string(mounts.empty() ? "a container working directory" : "container mounts") +
          " need an image (" + std::string(image_flag) + ")");
    }
    return c;
  }
  StatusOr<std::string> ref = NormalizeImageReference(image);
  if (!ref.ok()) {
    return InvalidArgumentError(std::string(image_flag) + ": " + ref.status().message());
  }
  c.image = *ref;
  for (std::string_view item : Split(mounts, ',')) {
    if (item.empty()) {
      continue;
    }
    StatusOr<ContainerMount> m = ParseContainerMount(item);
    if (!m.ok()) {
      return InvalidArgumentError("--container-mounts: " + m.status().message());
    }
    c.mounts.push_back(*m);
  }
  c.workdir = std::string(workdir);
  if (Status s = ValidateContainerSpec(c); !s.ok()) {
    return InvalidArgumentError(s.message());
  }
  return c;
}

StatusOr<int64_t> IntFlag(std::string_view flag, std::string_view text, int64_t min) {
  StatusOr<int64_t> v = ParseInt64(text);
  if (!v.ok() || *v < min) {
    return InvalidArgumentError(std::string(flag) + " expects an integer >= " +
                                std::to_string(min) + ", got '" + std::string(text) + "'");
  }
  return *v;
}

StatusOr<std::string> DurationFlag(std::string_view flag, std::string_view text) {
  if (Status s = ParseDurationMicros(text).status(); !s.ok()) {
    return FlagError(flag, s);
  }
  return std::string(text);
}

StatusOr<std::optional<std::string>> RuntimeLimitFlag(std::string_view flag,
                                                      std::string_view text) {
  StatusOr<int64_t> tessera = ParseDurationMicros(text);
  if (tessera.ok()) {
    return std::optional<std::string>(std::string(text));
  }
  StatusOr<std::optional<Micros>> slurm = ParseSlurmTime(text);
  if (!slurm.ok()) {
    // Tessera's message: its forms are the ones documented for the flag.
    return FlagError(flag, tessera.status());
  }
  if (!slurm->has_value()) {
    return std::optional<std::string>();
  }
  return std::optional<std::string>(FormatDuration(**slurm));
}

StatusOr<std::string> MemoryFlag(std::string_view flag, std::string_view text) {
  StatusOr<int64_t> tessera = ParseMemoryMiB(text);
  if (tessera.ok()) {
    return std::string(text);
  }
  StatusOr<int64_t> slurm = ParseSlurmMemoryMiB(text);
  if (!slurm.ok()) {
    return FlagError(flag, tessera.status());
  }
  return FormatMiB(*slurm);
}

StatusOr<std::string> CpuFlag(std::string_view flag, std::string_view text) {
  if (Status s = ParseCpuMilli(text).status(); !s.ok()) {
    return FlagError(flag, s);
  }
  return std::string(text);
}

StatusOr<std::string> GpuFractionFlag(std::string_view flag, std::string_view text) {
  if (!ParseGpuMilli(text).ok()) {
    return InvalidArgumentError(std::string(flag) +
                                " expects a share of one GPU in (0, 1], got '" +
                                std::string(text) + "'");
  }
  return std::string(text);
}

StatusOr<uint8_t> RestartOnFlag(std::string_view flag, std::string_view text) {
  return ParseRestartOnList(text, flag);
}

}  // namespace tessera
