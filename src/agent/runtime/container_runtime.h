// ContainerRuntime: the agent's component that runs tasks in OCI images, beside the bare
// launcher. It drives Debian's Podman (4.3) with runc, rootful, through its command line.
//
// Why Podman and runc: Podman pulls from registries with per-call credentials
// (--authfile), keeps an image store with layers shared by digest, reads CDI specs for
// devices, and runs a container in the foreground with its output on its own stdout
// and signals forwarded (--sig-proxy), so a container task is, to the launcher, one
// more process tree under a shim: the same state file, lease fencing, adoption after an
// agent restart and exit record as a bare task. runc because Debian's crun 1.8 refuses
// cgroup v1/hybrid hosts; runc works on v1 and v2.
//
// How a container task runs (ContainerRunArgs): the shim's leader is
// `podman run --rm --replace --name tessera-<task id> ... IMAGE [COMMAND]`, run as root
// (Podman needs it) while the container's process runs as the task's uid:gid
// (`--user`), with no capabilities, no-new-privileges, a private PID namespace (it can
// signal only its own processes), the host network and IPC namespace, as a bare task has
// them (ranks rendezvous, and NCCL's shared memory and CUDA IPC between the ranks of one
// node work; a private one would also leave /dev/shm at 64 MiB), catatonit as PID 1
// (`--init`, so SIGTERM reaches the command with its default action), only the task's devices (CDI
// names, cdi_spec.h), the job's sandbox (HOME, TMPDIR) and checkpoint directory mounted at their
// host paths, the user's mounts (read-only unless asked, only under the node's allowed prefixes,
// and only directories the task's uid could reach itself), the task's memory and CPU limits and CPU
// set, explicit rlimits (Podman's defaults exceed some hosts' hard limits), and its environment
// from a 0600 file the agent writes (never on a command line). Podman is given a fixed environment
// of its own: nothing of the task's reaches it. Exit: Podman exits with the container's code; 128+N
// when signal N ended the command, which the agent reports as that signal (ContainerExit), as for a
// bare task.
//
// Images: Pull fetches a reference into the node's store (`<storage>/root`), with the
// tenant's registry credentials when given (a 0600 auth file that lives only for the
// pull); concurrent pulls of one reference make one download. Plain-HTTP registries must
// be listed (insecure_registries). KeepWithin bounds the store, least recently used first.
// Thread safety: the methods may be called from several threads; Pull serialises pulls
// of one reference.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/container_spec.h"
#include "base/mutex.h"
#include "base/status.h"

namespace tessera {

struct ContainerRuntimeOptions {
  std::string podman = "podman";  // the program, on PATH or absolute
  std::string runtime = "runc";   // --runtime
  // The node's image store (<storage_dir>/root) and the agent's files for Podman.
  std::string storage_dir;
  // Podman's run-time state (sockets, locks; Podman wants it under 50 characters, and
  // it belongs on a tmpfs); "": RunRootFor(storage_dir).
  std::string run_root;
  // Host directories a job may mount (absolute; a mount's source must be one of them
  // or below); empty: no user mounts.
  std::vector<std::string> mount_prefixes;
  // Registries reached over plain HTTP ("127.0.0.1:5000"): a test's loopback registry.
  std::vector<std::string> insecure_registries;
  // rlimits given to every container ("nofile" -> {soft, hard}); empty: the agent's
  // own nofile and nproc limits, nproc capped at 32768 (Podman's own ceiling for the
  // processes it starts).
  std::map<std::string, std::pair<int64_t, int64_t>> ulimits;
  std::chrono::milliseconds pull_deadline{std::chrono::minutes(30)};
  // Reads an image's manifest for a pull's progress (its size); "": no progress sizes.
  std::string skopeo = "skopeo";
  std::chrono::milliseconds progress_period{std::chrono::seconds(1)};
};

// What one container task needs; the agent fills it from the launch.
struct ContainerTask {
  std::string id;  // the launcher's task id: the container is tessera-<id>
  ContainerSpec container;
  std::vector<std::string> command;  // after the entry point; empty: the image's
  int64_t uid = -1;
  int64_t gid = -1;
  std::string env_file;                  // written by WriteContainerEnv
  std::vector<std::string> cdi_devices;  // CdiDeviceName()s
  // Host directories mounted read-write at the same path (the job's sandbox, the
  // checkpoint directory), after the user's mounts.
  std::vector<std::string> own_dirs;
  std::vector<std::string> host_files;  // mounted read-only at the same path (the limiter)
  std::vector<int> cpus;                // --cpuset-cpus; empty: any
  int64_t cpu_milli = 0;                // --cpus; 0: no limit
  int64_t memory_mib = 0;               // --memory; 0: no limit
};

// /run/tessera-podman/<16 hex digits of a hash of storage_dir>.
std::string RunRootFor(const std::string& storage_dir);

// The container's name for a task.
std::string ContainerName(const std::string& task_id);

// Where the task's environment file is kept: <storage_dir>/env/<task id>.env.
std::string ContainerEnvFile(const std::string& storage_dir, const std::string& task_id);

// The last `max_bytes` of a file ("" when it cannot be read).
std::string ReadFileTail(const std::string& path, size_t max_bytes);

// Why Podman itself failed, from its exit code and the end of the task's output; "" when
// the code is the command's. 125 is always Podman's (it could not create or start the
// container); 126 and 127 are when the output ends with Podman's "Error: " line; any
// code is when it ends with catatonit's "failed to exec pid1" (the command could not be
// executed, which catatonit reports with 1). Otherwise the command's own.
std::string PodmanFailure(int exit_code, std::string_view output_tail);

// Writes the task's environment for --env-file (mode 0600, owned by the agent):
// InvalidArgument for a value with a newline, which that format cannot carry.
Status WriteContainerEnv(const std::string& path, const std::map<std::string, std::string>& env);

// Whether `source` may be mounted: it exists and, with symbolic links resolved, is one
// of `prefixes` or below one (whole path components). The resolved path, and the
// prefix (resolved) in *matched_prefix; NotFound or PermissionDenied saying why. (The
// agent also checks that the task's uid could reach it, since a mount must not bypass a
// directory closed to the tenant, and then binds it with StageMount.)
StatusOr<std::string> CheckMountSource(const std::string& source,
                                       const std::vector<std::string>& prefixes,
                                       std::string* matched_prefix = nullptr);

// How a container task's end reads as a bare task's: Podman's 128+N for signal N (the
// command was killed; catatonit reports it so) becomes {-1, N}; other codes stay. 125-127
// are Podman's own failures (it could not create or start the container) and stay codes.
std::pair<int, int> ContainerExit(int exit_code);

class ContainerRuntime {
 public:
  // Checks that Podman runs (`podman --version`); Unavailable with the reason when not.
  static StatusOr<std::unique_ptr<ContainerRuntime>> Create(ContainerRuntimeOptions options);

  // "podman 4.3.1, runc".
  const std::string& description() const { return description_; }

  // The shim leader's argv for `task` (podman run ...). The mounts' sources are taken as
  // given: the caller checked and staged them (CheckMountSource, mount_staging.h).
  StatusOr<std::vector<std::string>> RunArgs(const ContainerTask& task) const;
  // The environment Podman runs with (the leader's, and every podman call's).
  std::map<std::string, std::string> PodmanEnv() const;

  // Pulls `image` into the node's store; `auth_json` (a registry auth file's content,
  // "" for none) is written to a 0600 file for this pull only. NotFound for a missing
  // image or an unknown repository, PermissionDenied for refused credentials,
  // Unavailable for a registry that cannot be reached or a pull past pull_deadline;
  // each message ends with Podman's last line.
  // `tenant` names whose pull it is: a tenant's first pull of an image asks the
  // registry with its credential even when the store holds the image (only the manifest
  // is fetched then), so that an image another tenant pulled with its own credential is
  // not served to one without; later pulls of it by the same tenant, and one that waited
  // for another of the same tenant, find it in the store and ask no one. An image the
  // registry gave without a credential is any tenant's. What was allowed is kept in
  // <storage_dir>/allowed.json (0600) across the agent's restarts.
  // `progress` (may be empty) is told how far a pull that asks the registry has come,
  // at most once per progress_period (pull_progress.h), on another thread.
  Status Pull(const std::string& image, const std::string& auth_json, const std::string& tenant,
              const std::function<void(const std::string& note)>& progress = {});
  // Whether `tenant` (or anyone, for an image pulled without a credential) has had
  // `image` from the registry and the store still holds it.
  bool AllowedFromStore(const std::string& tenant, const std::string& image);
  // Whether the store holds `image`.
  bool HasImage(const std::string& image) const;
  // Records a use of `image` (a task starts in it): the cache keeps recent ones.
  void Used(const std::string& image);
  // Removes the least recently used images no task uses (`in_use`: references) until the
  // store's images sum to at most `bound_bytes` (image_cache.h); how many it removed.
  // Unavailable when Podman cannot list the store.
  StatusOr<int> KeepWithin(int64_t bound_bytes, const std::set<std::string>& in_use);
  // Removes the task's container if Podman still lists it (its end was not clean).
  void Remove(const std::string& task_id) const;
  // The names of every task container Podman lists (tessera-<task id>), running or not.
  std::vector<std::string> ListTaskContainers() const;

 private:
  explicit ContainerRuntime(ContainerRuntimeOptions options);
  std::vector<std::string> Podman() const;  // the program and its global options
  // The bytes a pull of `image` downloads, from its manifest (skopeo); -1: not known.
  int64_t ImageDownloadSize(const std::string& image, const std::string& auth_file) const;

  ContainerRuntimeOptions options_;
  std::string description_;
  std::string run_root_;
  std::string registries_conf_;  // written by Create when insecure registries are listed
  Mutex mu_;
  std::map<std::string, std::shared_ptr<Mutex>> pulls_ GUARDED_BY(mu_);  // per reference
  std::map<std::string, uint64_t> last_use_ GUARDED_BY(mu_);             // reference -> use_seq_
  uint64_t use_seq_ GUARDED_BY(mu_) = 0;
  std::set<std::pair<std::string, std::string>> allowed_ GUARDED_BY(mu_);  // tenant, reference
  std::set<std::string> public_ GUARDED_BY(mu_);  // pulled without a credential
  void LoadAllowed() EXCLUDES(mu_);
  void SaveAllowed() const REQUIRES(mu_);
};

}  // namespace tessera
