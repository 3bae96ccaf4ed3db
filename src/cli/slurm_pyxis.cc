// pyxis's options in Slurm scripts and on `tessera sbatch` (docs/slurm.md has the
// mapping): the image and its container settings of a SlurmRequest.
#include "api/container_spec.h"
#include "cli/slurm_request.h"

namespace tessera {

Status ApplyPyxis(std::string_view name, const std::string& value, const std::string& where,
                  SlurmRequest* r, std::vector<std::string>* warnings) {
  if (name == "container-image") {
    r->container_image = value;
  } else if (name == "container-mounts") {
    r->container_mounts = value;
  } else if (name == "container-workdir") {
    r->container_workdir = value;
  } else if (name == "container-mount-home") {
    r->container_mount_home = true;
  } else if (name == "no-container-mount-home") {
    r->container_mount_home = false;
  } else if (name == "container-remap-root") {
    return InvalidArgumentError(where +
                                ": tasks run as their tenant's uid in the container, "
                                "never as root");
  } else if (name == "container-env") {
    warnings->push_back(where +
                        ": every exported variable (--export) reaches the container "
                        "and overrides the image's; nothing more to name");
  } else if (name == "container-name") {
    warnings->push_back(where +
                        ": ignored: each task runs in a container of its own, which "
                        "ends with it");
  }
  // --container-writable, --no-container-remap-root: Tessera's defaults already.
  return Status::Ok();
}

}  // namespace tessera
