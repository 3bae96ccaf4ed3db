// The job file's `image` and `container` keys (container_spec.h), read and written
// beside the codec's own (job_codec.h).
// Thread safety: pure functions.
#pragma once

#include "api/job_codec.h"
#include "api/json_fields.h"

namespace tessera {

// Reads `image` and `container` into job->container, checked and normalised
// (InvalidArgument naming the key). `container` without `image` is an error.
Status ReadJobContainer(const Json& j, FieldReader& reader, JobSubmission* job);
// Writes them into `out` (absent for a bare process), so that they read back equal.
void WriteJobContainer(const JobSubmission& job, Json& out);
void WriteContainer(const ContainerSpec& container, Json& out);

// A ContainerSpec as one object (the `container` block's keys and `image`), for the
// agent protocol; read back by ContainerSpecFromJson, errors naming fields under `path`.
Json ContainerSpecToJson(const ContainerSpec& spec);
StatusOr<ContainerSpec> ContainerSpecFromJson(const Json& value, FieldReader& reader,
                                              const std::string& path);

}  // namespace tessera
