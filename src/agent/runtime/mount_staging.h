// Mount sources bound before Podman sees them, so that what was checked is what the
// container gets.
//
// A job's mount source is checked (under an allowed prefix, reachable by the tenant)
// and then mounted by Podman as root, later. A path could change in between: a tenant
// who owns a directory under the prefix could replace a component with a symbolic link
// to anywhere. StageMount opens the source from the prefix's directory with openat2,
// following no symbolic link and staying beneath the prefix, and bind-mounts that very
// directory (through its descriptor) onto a staging directory of the agent's; Podman is
// given the staging path. Later renames or links change nothing of the bound directory.
// Thread safety: functions of the file system and the mount table; no shared state.
#pragma once

#include <string>

#include "base/status.h"

namespace tessera {

// Binds `source` onto `staging` (made here, mode 0700; its parent must exist), resolving
// `source` from `prefix` (both absolute, `source` at or below `prefix`) with no symbolic
// link followed and nothing outside `prefix` reached. PermissionDenied when a component
// is a link or escapes; NotFound when it does not exist; FailedPrecondition when the
// kernel has no openat2 (Linux 5.6) or the bind fails (the agent is not root).
Status StageMount(const std::string& prefix, const std::string& source, const std::string& staging);

// Unmounts every mount at or below `dir` (detached) and removes `dir`'s tree. Idempotent.
void UnstageMounts(const std::string& dir);

}  // namespace tessera
