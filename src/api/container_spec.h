// What a job runs in when it names an OCI image: the image, host directories mounted
// into it, its working directory and entry point. Read from the job file's `image` and
// `container` keys (job_codec.h), from `--image` and pyxis's `--container-*` flags, and
// carried to the agent with each task (agent_protocol.h).
//
//   image: nvcr.io/nvidia/pytorch:24.05-py3     # or repo@sha256:<64 hex>, or pyxis's
//                                               # nvcr.io#nvidia/pytorch:24.05-py3
//   container:
//     mounts: [/data/imagenet:/data, "/scratch:/scratch:rw"]   # SRC[:DST[:ro|rw]]
//     workdir: /workspace       # absolute; default: the image's
//     entrypoint: [python]      # replaces the image's; [] clears it; default: the image's
//     mount_home: true          # the job's HOME directory is mounted (default true)
//
// References are normalised as Docker and Podman read them, so that a node never
// resolves a short name through its own search list: a first component without a '.'
// or ':' and other than "localhost" is not a registry ("ubuntu" is
// docker.io/library/ubuntu), and a reference without tag or digest gets ":latest".
// Mounts are read-only unless ":rw"; which host paths may be mounted is the node's
// policy (the agent's --container-mount-prefix), checked where the task starts.
// Thread safety: plain values and pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace tessera {

struct ContainerMount {
  std::string source;  // host path, absolute, normalised
  std::string target;  // path in the container, absolute, normalised
  bool read_only = true;
  bool operator==(const ContainerMount&) const = default;
};

struct ContainerSpec {
  std::string image;  // a normalised reference; "": the task is a bare process
  std::vector<ContainerMount> mounts;
  std::string workdir;  // "": the image's
  // With entrypoint_set the image's entry point is replaced by `entrypoint` (possibly
  // empty, which clears it); the job's command is then its arguments, as with
  // `podman run --entrypoint`.
  std::vector<std::string> entrypoint;
  bool entrypoint_set = false;
  bool mount_home = true;

  bool empty() const { return image.empty(); }
  bool operator==(const ContainerSpec&) const = default;
};

inline constexpr size_t kMaxImageReferenceLength = 512;
inline constexpr size_t kMaxContainerMounts = 64;

struct ImageReference {
  std::string registry;    // "docker.io", "nvcr.io", "127.0.0.1:5000"
  std::string repository;  // "library/ubuntu", "nvidia/pytorch"
  std::string tag;         // "" when only a digest names it
  std::string digest;      // "sha256:<64 hex>" or ""
  // registry/repository[:tag][@digest]
  std::string ToString() const;
};

// Parses and normalises a reference (above). InvalidArgument saying what is wrong.
StatusOr<ImageReference> ParseImageReference(std::string_view text);
// ParseImageReference(text)->ToString().
StatusOr<std::string> NormalizeImageReference(std::string_view text);

// "SRC[:DST[:ro|rw]]" (also pyxis's "SRC:DST:ro" and "SRC:DST:rw"): absolute paths
// without "..", ':' or ','; DST may not be "/", /proc, /sys or /dev or under them.
StatusOr<ContainerMount> ParseContainerMount(std::string_view text);
// The mount as ParseContainerMount reads it back.
std::string ContainerMountText(const ContainerMount& mount);

// Checks a spec built by code (the parsers make valid ones): the reference is
// normalised, paths are absolute, at most kMaxContainerMounts mounts, no two with one
// target. InvalidArgument naming the field.
Status ValidateContainerSpec(const ContainerSpec& spec);

}  // namespace tessera
