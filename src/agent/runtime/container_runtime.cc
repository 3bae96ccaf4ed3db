#include "agent/runtime/container_runtime.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "agent/runtime/cdi_spec.h"
#include "agent/runtime/image_cache.h"
#include "agent/runtime/pull_progress.h"
#include "agent/runtime/tool_process.h"
#include "base/strings.h"

namespace tessera {
namespace {

constexpr int64_t kPodmanNprocCeiling = 32768;
constexpr auto kQuickDeadline = std::chrono::seconds(60);
constexpr auto kManifestDeadline = std::chrono::seconds(20);  // a pull's size, for progress

// mkstemp or mkdtemp of `pattern` (ending in XXXXXX): the path made.
StatusOr<std::string> MakeTemp(const std::string& pattern, bool directory) {
  std::vector<char> path(pattern.begin(), pattern.end());
  path.push_back('\0');
  if (directory) {
    if (::mkdtemp(path.data()) == nullptr) {
      return InternalError("cannot make " + pattern + ": " + std::strerror(errno));
    }
  } else {
    const int fd = ::mkstemp(path.data());
    if (fd < 0) {
      return InternalError("cannot make " + pattern + ": " + std::strerror(errno));
    }
    ::close(fd);
  }
  return std::string(path.data());
}

bool Contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

// Writes `text` to `path` with mode 0600, replacing it.
Status WritePrivateFile(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    return InternalError("cannot write " + path + ": " + std::strerror(errno));
  }
  ::fchmod(fd, 0600);
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      ::close(fd);
      return InternalError("cannot write " + path + ": " + std::strerror(errno));
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return Status::Ok();
}

std::string CpuList(const std::vector<int>& cpus) {
  std::string out;
  for (int c : cpus) {
    out += (out.empty() ? "" : ",") + std::to_string(c);
  }
  return out;
}

std::string MilliText(int64_t milli) {
  std::string frac = std::to_string(milli % 1000);
  return std::to_string(milli / 1000) + "." + std::string(3 - frac.size(), '0') + frac;
}

bool UnderOrAt(const std::string& path, const std::string& dir) {
  return path == dir || dir == "/" ||
         (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 &&
          path[dir.size()] == '/');
}

// A failed pull's status, by what Podman said.
Status PullError(const std::string& image, const ToolResult& r) {
  const std::string line = LastToolLine(r.output);
  const std::string text = AsciiLower(r.output);
  if (r.timed_out) {
    return UnavailableError("pulling image " + image + " took too long");
  }
  if (Contains(text, "unauthorized") || Contains(text, "authentication required") ||
      Contains(text, "requested access to the resource is denied") ||
      Contains(text, "invalid username/password")) {
    return PermissionDeniedError("image " + image +
                                 ": the registry refused the credentials: " + line);
  }
  if (Contains(text, "manifest unknown") || Contains(text, "name unknown") ||
      (Contains(text, "manifest") && Contains(text, "not found"))) {
    return NotFoundError("image not found: " + image + ": " + line);
  }
  if (Contains(text, "connection refused") || Contains(text, "no such host") ||
      Contains(text, "i/o timeout") || Contains(text, "server gave http response") ||
      Contains(text, "connection reset")) {
    return UnavailableError("image " + image + ": the registry cannot be reached: " + line);
  }
  return InternalError("pulling image " + image + " failed: " + line);
}

}  // namespace

std::string ContainerName(const std::string& task_id) { return "tessera-" + task_id; }

std::string ContainerEnvFile(const std::string& storage_dir, const std::string& task_id) {
  return storage_dir + "/env/" + task_id + ".env";
}

std::string ReadFileTail(const std::string& path, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) {
    return "";
  }
  const std::streamoff size = in.tellg();
  const std::streamoff from =
      std::max<std::streamoff>(0, size - static_cast<std::streamoff>(max_bytes));
  in.seekg(from);
  std::string out(static_cast<size_t>(size - from), '\0');
  in.read(out.data(), static_cast<std::streamsize>(out.size()));
  out.resize(static_cast<size_t>(in.gcount()));
  return out;
}

std::string PodmanFailure(int exit_code, std::string_view output_tail) {
  const size_t end = output_tail.find_last_not_of("\r\n \t");
  const std::string_view trimmed =
      end == std::string_view::npos ? std::string_view() : output_tail.substr(0, end + 1);
  const size_t start = trimmed.find_last_of('\n');
  const std::string_view last =
      start == std::string_view::npos ? trimmed : trimmed.substr(start + 1);
  // catatonit, PID 1, exits 1 when it cannot execute the command.
  const bool init = last.substr(0, 16) == "ERROR (catatonit" &&
                    last.find("failed to exec pid1") != std::string_view::npos;
  const bool podman = (exit_code == 126 || exit_code == 127) && last.substr(0, 7) == "Error: ";
  if (exit_code != 125 && !init && !podman) {
    return "";
  }
  std::string why = LastToolLine(last);
  return why.empty() ? "podman exited with " + std::to_string(exit_code) : why;
}

Status WriteContainerEnv(const std::string& path, const std::map<std::string, std::string>& env) {
  std::string text;
  for (const auto& [k, v] : env) {
    if (v.find('\n') != std::string::npos || v.find('\r') != std::string::npos) {
      return InvalidArgumentError("the environment variable " + k +
                                  " holds a line break, which cannot be passed into a container");
    }
    text += k + "=" + v + "\n";
  }
  return WritePrivateFile(path, text);
}

StatusOr<std::string> CheckMountSource(const std::string& source,
                                       const std::vector<std::string>& prefixes,
                                       std::string* matched) {
  std::error_code ec;
  const std::string real = std::filesystem::canonical(source, ec).string();
  if (ec) {
    return NotFoundError("mount source " + source + " does not exist on this node");
  }
  for (const std::string& prefix : prefixes) {
    const std::string p = std::filesystem::weakly_canonical(prefix, ec).string();
    if (!ec && UnderOrAt(real, p)) {
      if (matched != nullptr) {
        *matched = p;
      }
      return real;
    }
  }
  return PermissionDeniedError(
      "mount source " + source +
      (prefixes.empty()
           ? " refused: this node allows no host mounts"
           : " is not under a directory this node allows to mount (" + Join(prefixes, ", ") + ")"));
}

std::pair<int, int> ContainerExit(int exit_code) {
  if (exit_code > 128 && exit_code <= 128 + 64) {
    return {-1, exit_code - 128};
  }
  return {exit_code, 0};
}

ContainerRuntime::ContainerRuntime(ContainerRuntimeOptions options)
    : options_(std::move(options)) {}

StatusOr<std::unique_ptr<ContainerRuntime>> ContainerRuntime::Create(
    ContainerRuntimeOptions options) {
  if (options.storage_dir.empty()) {
    return InvalidArgumentError("the container runtime needs a storage directory");
  }
  if (options.ulimits.empty()) {
    rlimit files{};
    rlimit procs{};
    ::getrlimit(RLIMIT_NOFILE, &files);
    ::getrlimit(RLIMIT_NPROC, &procs);
    const auto cap = [](rlim_t v) {
      return v == RLIM_INFINITY ? kPodmanNprocCeiling
                                : std::min<int64_t>(static_cast<int64_t>(v), kPodmanNprocCeiling);
    };
    options.ulimits["nofile"] = {static_cast<int64_t>(files.rlim_cur),
                                 static_cast<int64_t>(files.rlim_max)};
    options.ulimits["nproc"] = {cap(procs.rlim_cur), cap(procs.rlim_max)};
  }
  std::unique_ptr<ContainerRuntime> rt(new ContainerRuntime(std::move(options)));
  const ContainerRuntimeOptions& o = rt->options_;
  std::error_code ec;
  rt->run_root_ = o.run_root.empty() ? RunRootFor(o.storage_dir) : o.run_root;
  for (const char* sub : {"/root", "/tmp", "/auth", "/env"}) {
    std::filesystem::create_directories(o.storage_dir + sub, ec);
  }
  ::chmod(o.storage_dir.c_str(), 0700);
  if (!o.insecure_registries.empty()) {
    std::string conf;
    for (const std::string& r : o.insecure_registries) {
      conf += "[[registry]]\nlocation = \"" + r + "\"\ninsecure = true\n\n";
    }
    rt->registries_conf_ = o.storage_dir + "/registries.conf";
    TESSERA_RETURN_IF_ERROR(WritePrivateFile(rt->registries_conf_, conf));
  }
  std::vector<std::string> argv = {o.podman, "--version"};
  StatusOr<ToolResult> version = RunTool(argv, rt->PodmanEnv(), kQuickDeadline);
  if (!version.ok()) {
    return UnavailableError("containers: " + version.status().message());
  }
  if (version->exit_code != 0) {
    return UnavailableError("containers: `" + o.podman +
                            " --version` failed: " + LastToolLine(version->output));
  }
  std::string v = LastToolLine(version->output);  // "podman version 4.3.1"
  if (v.rfind("podman version ", 0) == 0) {
    v = "podman " + v.substr(15);
  }
  rt->description_ = v + ", " + o.runtime;
  rt->LoadAllowed();
  return rt;
}

std::string RunRootFor(const std::string& storage_dir) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a: short, stable per storage directory
  for (unsigned char c : storage_dir) {
    h = (h ^ c) * 1099511628211ULL;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return std::string("/run/tessera-podman/") + hex;
}

std::vector<std::string> ContainerRuntime::Podman() const {
  return {options_.podman,
          "--root",
          options_.storage_dir + "/root",
          "--runroot",
          run_root_,
          "--runtime",
          options_.runtime,
          "--cgroup-manager",
          "cgroupfs",
          "--events-backend",
          "file"};
}

std::map<std::string, std::string> ContainerRuntime::PodmanEnv() const {
  std::map<std::string, std::string> env = {
      {"PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
      {"HOME", options_.storage_dir},
      {"TMPDIR", options_.storage_dir + "/tmp"},
      {"LANG", "C.UTF-8"}};
  if (!registries_conf_.empty()) {
    env["CONTAINERS_REGISTRIES_CONF"] = registries_conf_;
  }
  return env;
}

StatusOr<std::vector<std::string>> ContainerRuntime::RunArgs(const ContainerTask& task) const {
  const ContainerSpec& c = task.container;
  std::vector<std::string> a = Podman();
  auto add = [&a](std::initializer_list<std::string> items) {
    a.insert(a.end(), items.begin(), items.end());
  };
  add({"run",
       "--rm",
       "--replace",
       "--name",
       ContainerName(task.id),
       "--pull",
       "never",
       "--init",
       "--sig-proxy=true",
       "--log-driver",
       "none",
       "--cap-drop",
       "all",
       "--security-opt",
       "no-new-privileges",
       "--network",
       "host",
       "--ipc",
       "host",
       "--pid",
       "private"});
  if (task.uid >= 0) {
    add({"--user", std::to_string(task.uid) + ":" + std::to_string(task.gid)});
  }
  if (!task.env_file.empty()) {
    add({"--env-file", task.env_file});
  }
  for (const auto& [name, limits] : options_.ulimits) {
    add({"--ulimit",
         name + "=" + std::to_string(limits.first) + ":" + std::to_string(limits.second)});
  }
  for (const std::string& d : task.cdi_devices) {
    add({"--device", d});
  }
  for (const ContainerMount& m : c.mounts) {  // staged by the caller (mount_staging.h)
    add({"--volume", m.source + ":" + m.target + (m.read_only ? ":ro" : ":rw") + ",nosuid,nodev"});
  }
  for (const std::string& dir : task.own_dirs) {
    add({"--volume", dir + ":" + dir + ":rw,nosuid,nodev"});
  }
  for (const std::string& file : task.host_files) {
    add({"--volume", file + ":" + file + ":ro,nosuid,nodev"});
  }
  if (!c.workdir.empty()) {
    add({"--workdir", c.workdir});
  }
  if (c.entrypoint_set) {
    add({"--entrypoint", nlohmann::json(c.entrypoint).dump()});
  }
  if (!task.cpus.empty()) {
    add({"--cpuset-cpus", CpuList(task.cpus)});
  }
  if (task.cpu_milli > 0) {
    add({"--cpus", MilliText(task.cpu_milli)});
  }
  if (task.memory_mib > 0) {
    add({"--memory", std::to_string(task.memory_mib) + "m"});
  }
  a.push_back(c.image);
  a.insert(a.end(), task.command.begin(), task.command.end());
  return a;
}

int64_t ContainerRuntime::ImageDownloadSize(const std::string& image,
                                            const std::string& auth_file) const {
  if (options_.skopeo.empty()) {
    return -1;
  }
  StatusOr<ImageReference> ref = ParseImageReference(image);
  std::string target = image;
  for (int hop = 0; hop < 2 && ref.ok(); ++hop) {  // a manifest list, then its entry
    std::vector<std::string> argv = {options_.skopeo};
    if (!registries_conf_.empty()) {  // skopeo reads no CONTAINERS_REGISTRIES_CONF
      argv.insert(argv.end(), {"--registries-conf", registries_conf_});
    }
    argv.insert(argv.end(), {"inspect", "--raw"});
    if (!auth_file.empty()) {
      argv.insert(argv.end(), {"--authfile", auth_file});
    }
    argv.push_back("docker://" + target);
    StatusOr<ToolResult> r = RunTool(argv, PodmanEnv(), kManifestDeadline);
    if (!r.ok() || r->exit_code != 0) {
      return -1;
    }
    StatusOr<ManifestSize> size = ReadManifestSize(r->output, "linux", GoArch());
    if (!size.ok() || size->child_digest.empty()) {
      return size.ok() ? size->bytes : -1;
    }
    target = ref->registry + "/" + ref->repository + "@" + size->child_digest;
  }
  return -1;
}

bool ContainerRuntime::AllowedFromStore(const std::string& tenant, const std::string& image) {
  {
    MutexLock lock(mu_);
    if (public_.count(image) == 0 && allowed_.count({tenant, image}) == 0) {
      return false;
    }
  }
  return HasImage(image);
}

void ContainerRuntime::LoadAllowed() {
  std::ifstream in(options_.storage_dir + "/allowed.json");
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (!j.is_object()) {
    return;  // none yet (or unreadable: each tenant asks the registry once again)
  }
  MutexLock lock(mu_);
  for (const nlohmann::json& image : j.value("public", nlohmann::json::array())) {
    if (image.is_string()) {
      public_.insert(image.get<std::string>());
    }
  }
  for (const nlohmann::json& pair : j.value("tenants", nlohmann::json::array())) {
    if (pair.is_array() && pair.size() == 2 && pair[0].is_string() && pair[1].is_string()) {
      allowed_.insert({pair[0].get<std::string>(), pair[1].get<std::string>()});
    }
  }
}

void ContainerRuntime::SaveAllowed() const {
  nlohmann::json j = {{"public", public_}, {"tenants", nlohmann::json::array()}};
  for (const auto& [tenant, image] : allowed_) {
    j["tenants"].push_back({tenant, image});
  }
  // Lost on a failed write: each tenant then asks the registry once more.
  (void)WritePrivateFile(options_.storage_dir + "/allowed.json", j.dump());
}

Status ContainerRuntime::Pull(const std::string& image, const std::string& auth_json,
                              const std::string& tenant,
                              const std::function<void(const std::string& note)>& progress) {
  std::shared_ptr<Mutex> one;
  {
    MutexLock lock(mu_);
    std::shared_ptr<Mutex>& slot = pulls_[image];
    if (!slot) {
      slot = std::make_shared<Mutex>();
    }
    one = slot;
  }
  MutexLock pulling(*one);  // a second pull of one reference waits for the first
  // The slot goes once no pull of the reference waits on it (the map stays small).
  struct Release {
    ContainerRuntime* rt;
    const std::string& image;
    ~Release() {
      MutexLock lock(rt->mu_);
      auto it = rt->pulls_.find(image);
      if (it != rt->pulls_.end() && it->second.use_count() <= 2) {  // the map's and ours
        rt->pulls_.erase(it);
      }
    }
  } release{this, image};
  if (AllowedFromStore(tenant, image)) {
    return Status::Ok();  // the pull this one waited for was this tenant's
  }
  std::vector<std::string> argv = Podman();
  argv.insert(argv.end(), {"pull", "--quiet"});
  std::string auth_file;
  if (!auth_json.empty()) {
    TESSERA_ASSIGN_OR_RETURN(auth_file,
                             MakeTemp(options_.storage_dir + "/auth/pull-XXXXXX", false));
    TESSERA_RETURN_IF_ERROR(WritePrivateFile(auth_file, auth_json));
    argv.insert(argv.end(), {"--authfile", auth_file});
  }
  argv.push_back(image);
  // A TMPDIR of this pull's own: the blobs it downloads are its progress (pull_progress.h).
  StatusOr<std::string> tmpdir = MakeTemp(options_.storage_dir + "/tmp/pull-XXXXXX", true);
  std::map<std::string, std::string> env = PodmanEnv();
  if (tmpdir.ok()) {
    env["TMPDIR"] = *tmpdir;
  }
  StatusOr<ToolResult> r = InternalError("not run");
  {
    std::optional<PullWatch> watch;
    if (progress && tmpdir.ok()) {
      watch.emplace(
          image, *tmpdir, [&] { return ImageDownloadSize(image, auth_file); }, progress,
          options_.progress_period);
    }
    r = RunTool(argv, env, options_.pull_deadline);
  }  // the watch ends before its files go
  std::error_code ec;
  if (tmpdir.ok()) {
    std::filesystem::remove_all(*tmpdir, ec);
  }
  if (!auth_file.empty()) {
    ::unlink(auth_file.c_str());
  }
  if (!r.ok()) {
    return UnavailableError("containers: " + r.status().message());
  }
  if (r->exit_code != 0) {
    return PullError(image, *r);
  }
  MutexLock lock(mu_);
  if (auth_json.empty()) {
    public_.insert(image);  // the registry gave it to anyone: any tenant may use it
  } else {
    allowed_.insert({tenant, image});
  }
  SaveAllowed();
  return Status::Ok();
}

bool ContainerRuntime::HasImage(const std::string& image) const {
  std::vector<std::string> argv = Podman();
  argv.insert(argv.end(), {"image", "exists", image});
  StatusOr<ToolResult> r = RunTool(argv, PodmanEnv(), kQuickDeadline);
  return r.ok() && r->exit_code == 0;
}

void ContainerRuntime::Used(const std::string& image) {
  MutexLock lock(mu_);
  last_use_[image] = ++use_seq_;
}

StatusOr<int> ContainerRuntime::KeepWithin(int64_t bound_bytes,
                                           const std::set<std::string>& in_use) {
  std::vector<std::string> argv = Podman();
  argv.insert(argv.end(), {"images", "--format", "json"});
  StatusOr<ToolResult> r = RunTool(argv, PodmanEnv(), kQuickDeadline);
  if (!r.ok() || r->exit_code != 0) {
    return UnavailableError("listing the image store: " +
                            (r.ok() ? LastToolLine(r->output) : r.status().message()));
  }
  // The list is the output's JSON array; a warning Podman printed on stderr around it
  // is left out.
  const size_t open = r->output.find('[');
  const size_t close = r->output.rfind(']');
  const nlohmann::json list =
      open == std::string::npos || close == std::string::npos || close < open
          ? nlohmann::json()
          : nlohmann::json::parse(r->output.substr(open, close - open + 1), nullptr,
                                  /*allow_exceptions=*/false);
  if (!list.is_array()) {
    return UnavailableError("listing the image store: not a JSON list");
  }
  std::vector<CachedImage> images;
  for (const nlohmann::json& item : list) {
    if (!item.is_object() || !item.value("Id", nlohmann::json()).is_string()) {
      continue;
    }
    CachedImage image{item["Id"].get<std::string>(), {}, 0};
    if (const auto size = item.find("Size"); size != item.end() && size->is_number_integer()) {
      image.size_bytes = size->get<int64_t>();
    }
    for (const char* key : {"Names", "RepoDigests"}) {  // by tag, and by digest
      if (const auto names = item.find(key); names != item.end() && names->is_array()) {
        for (const nlohmann::json& n : *names) {
          if (n.is_string()) {
            image.names.push_back(n.get<std::string>());
          }
        }
      }
    }
    images.push_back(std::move(image));
  }
  std::vector<std::string> remove;
  {
    MutexLock lock(mu_);
    remove = PlanImageEvictions(images, last_use_, in_use, bound_bytes);
  }
  int removed = 0;
  for (const std::string& id : remove) {
    std::vector<std::string> rmi = Podman();
    rmi.insert(rmi.end(), {"rmi", id});  // without --force: an image a container uses stays
    StatusOr<ToolResult> done = RunTool(rmi, PodmanEnv(), kQuickDeadline);
    if (done.ok() && done->exit_code == 0) {
      ++removed;
      MutexLock lock(mu_);
      for (const CachedImage& image : images) {
        if (image.id == id) {
          for (const std::string& name : image.names) {
            last_use_.erase(name);
            public_.erase(name);
            for (auto a = allowed_.begin(); a != allowed_.end();) {
              a = a->second == name ? allowed_.erase(a) : std::next(a);
            }
            SaveAllowed();
          }
        }
      }
    }
  }
  return removed;
}

std::vector<std::string> ContainerRuntime::ListTaskContainers() const {
  std::vector<std::string> argv = Podman();
  argv.insert(argv.end(), {"ps", "--all", "--noheading", "--format", "{{.Names}}"});
  StatusOr<ToolResult> r = RunTool(argv, PodmanEnv(), kQuickDeadline);
  std::vector<std::string> out;
  if (!r.ok() || r->exit_code != 0) {
    return out;
  }
  std::istringstream lines(r->output);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("tessera-", 0) == 0) {
      out.push_back(line);
    }
  }
  return out;
}

void ContainerRuntime::Remove(const std::string& task_id) const {
  std::vector<std::string> argv = Podman();
  argv.insert(argv.end(), {"rm", "--force", "--ignore", "--time", "0", ContainerName(task_id)});
  (void)RunTool(argv, PodmanEnv(), kQuickDeadline);
}

}  // namespace tessera
