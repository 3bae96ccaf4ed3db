#include "api/container_spec.h"

#include <filesystem>
#include <set>

#include "api/json_fields.h"
#include "base/strings.h"

namespace tessera {
namespace {

constexpr size_t kMaxMountPath = 4096;

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool IsAlnum(char c) { return IsLowerAlnum(c) || (c >= 'A' && c <= 'Z'); }

std::string Quoted(std::string_view text) {
  return "'" + ToValidUtf8(std::string(text.substr(0, 120))) + "'";
}

// A registry host: dot-separated labels of [A-Za-z0-9-] (no '-' at either end), or
// "localhost", with an optional :port.
bool IsRegistry(std::string_view text) {
  const size_t colon = text.find(':');
  std::string_view host = text.substr(0, colon);
  if (colon != std::string_view::npos) {
    std::string_view port = text.substr(colon + 1);
    if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != port.npos) {
      return false;
    }
  }
  if (host.empty()) {
    return false;
  }
  for (std::string_view label : Split(host, '.')) {
    if (label.empty() || label.front() == '-' || label.back() == '-') {
      return false;
    }
    for (char c : label) {
      if (!IsAlnum(c) && c != '-') {
        return false;
      }
    }
  }
  return true;
}

// One path component: [a-z0-9]+ joined by '.', '_', "__" or runs of '-'.
bool IsPathComponent(std::string_view text) {
  if (text.empty() || !IsLowerAlnum(text.front()) || !IsLowerAlnum(text.back())) {
    return false;
  }
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (IsLowerAlnum(c)) {
      continue;
    }
    if (c == '.' || c == '_') {
      const bool double_underscore = c == '_' && text[i + 1] == '_';
      const size_t next = i + (double_underscore ? 2 : 1);
      if (!IsLowerAlnum(text[next])) {
        return false;
      }
      i = next - 1;
      continue;
    }
    if (c != '-') {
      return false;
    }
  }
  return true;
}

bool IsTag(std::string_view text) {
  if (text.empty() || text.size() > 128 || text.front() == '.' || text.front() == '-') {
    return false;
  }
  for (char c : text) {
    if (!IsAlnum(c) && c != '_' && c != '.' && c != '-') {
      return false;
    }
  }
  return true;
}

bool IsDigest(std::string_view text) {
  constexpr std::string_view kAlgorithm = "sha256:";
  if (text.substr(0, kAlgorithm.size()) != kAlgorithm) {
    return false;
  }
  std::string_view hex = text.substr(kAlgorithm.size());
  return hex.size() == 64 && hex.find_first_not_of("0123456789abcdef") == hex.npos;
}

StatusOr<std::string> MountPath(std::string_view text, std::string_view what) {
  if (text.empty() || text.front() != '/') {
    return InvalidArgumentError(std::string(what) + " must be an absolute path, got " +
                                Quoted(text));
  }
  if (text.size() > kMaxMountPath) {
    return InvalidArgumentError(std::string(what) + " is longer than " +
                                std::to_string(kMaxMountPath) + " bytes");
  }
  for (char c : text) {
    if (c == ',' || c == ':' || c == '\0' || c == '\n') {
      return InvalidArgumentError(std::string(what) + " " + Quoted(text) +
                                  " may not hold ',', ':', a newline or NUL");
    }
  }
  for (std::string_view part : Split(text, '/')) {
    if (part == "..") {
      return InvalidArgumentError(std::string(what) + " " + Quoted(text) + " may not hold '..'");
    }
  }
  std::string normal = std::filesystem::path(std::string(text)).lexically_normal().string();
  if (normal.size() > 1 && normal.back() == '/') {
    normal.pop_back();
  }
  return normal;
}

bool UnderOrAt(std::string_view path, std::string_view dir) {
  return path == dir ||
         (path.size() > dir.size() && path.substr(0, dir.size()) == dir && path[dir.size()] == '/');
}

}  // namespace

std::string ImageReference::ToString() const {
  std::string out = registry + "/" + repository;
  if (!tag.empty()) {
    out += ":" + tag;
  }
  if (!digest.empty()) {
    out += "@" + digest;
  }
  return out;
}

StatusOr<ImageReference> ParseImageReference(std::string_view text) {
  const auto bad = [&](const std::string& why) {
    return InvalidArgumentError(Quoted(text) + " is not an image reference: " + why);
  };
  if (text.empty()) {
    return InvalidArgumentError("an image reference must not be empty");
  }
  if (text.size() > kMaxImageReferenceLength) {
    return bad("longer than " + std::to_string(kMaxImageReferenceLength) + " characters");
  }
  std::string ref(text);
  // pyxis and enroot write the registry apart with '#': nvcr.io#nvidia/pytorch:24.05.
  if (const size_t hash = ref.find('#'); hash != std::string::npos) {
    if (ref.find('/') < hash || ref.find('#', hash + 1) != std::string::npos) {
      return bad("'#' may only separate the registry from the rest");
    }
    ref[hash] = '/';
  }
  ImageReference out;
  if (const size_t at = ref.find('@'); at != std::string::npos) {
    out.digest = ref.substr(at + 1);
    ref.resize(at);
    if (!IsDigest(out.digest)) {
      return bad("the digest must be sha256: and 64 lower-case hex digits");
    }
  }
  const size_t last_slash = ref.rfind('/');
  if (const size_t colon = ref.rfind(':');
      colon != std::string::npos && (last_slash == std::string::npos || colon > last_slash)) {
    out.tag = ref.substr(colon + 1);
    ref.resize(colon);
    if (!IsTag(out.tag)) {
      return bad("a tag is 1-128 of A-Z a-z 0-9 _ . - and starts with a letter, digit or _");
    }
  }
  std::vector<std::string_view> parts = Split(ref, '/');
  const std::string_view first = parts.front();
  const bool has_registry =
      parts.size() > 1 && (first.find('.') != std::string_view::npos ||
                           first.find(':') != std::string_view::npos || first == "localhost");
  if (has_registry) {
    if (!IsRegistry(first)) {
      return bad("the registry " + Quoted(first) + " is not a host name with an optional port");
    }
    out.registry = std::string(first);
    parts.erase(parts.begin());
  } else {
    out.registry = "docker.io";
  }
  for (std::string_view part : parts) {
    if (!IsPathComponent(part)) {
      return bad(
          "each name component is lower-case letters and digits, joined by '.', '_', "
          "'__' or '-'; got " +
          Quoted(part));
    }
    if (!out.repository.empty()) {
      out.repository += "/";
    }
    out.repository += std::string(part);
  }
  if (out.registry == "docker.io" && parts.size() == 1) {
    out.repository = "library/" + out.repository;
  }
  if (out.tag.empty() && out.digest.empty()) {
    out.tag = "latest";
  }
  return out;
}

StatusOr<std::string> NormalizeImageReference(std::string_view text) {
  TESSERA_ASSIGN_OR_RETURN(ImageReference ref, ParseImageReference(text));
  return ref.ToString();
}

StatusOr<ContainerMount> ParseContainerMount(std::string_view text) {
  std::vector<std::string_view> parts = Split(text, ':');
  if (parts.size() > 3) {
    return InvalidArgumentError("mount " + Quoted(text) + ": expected SRC[:DST[:ro|rw]]");
  }
  ContainerMount m;
  TESSERA_ASSIGN_OR_RETURN(m.source, MountPath(parts[0], "a mount's source"));
  TESSERA_ASSIGN_OR_RETURN(
      m.target, MountPath(parts.size() > 1 ? parts[1] : parts[0], "a mount's destination"));
  if (parts.size() == 3) {
    if (parts[2] == "rw") {
      m.read_only = false;
    } else if (parts[2] != "ro") {
      return InvalidArgumentError("mount " + Quoted(text) + ": the flag must be ro or rw, got " +
                                  Quoted(parts[2]));
    }
  }
  for (std::string_view reserved : {"/proc", "/sys", "/dev"}) {
    if (UnderOrAt(m.target, reserved)) {
      return InvalidArgumentError("mount " + Quoted(text) + ": " + std::string(reserved) +
                                  " is the container's own");
    }
  }
  if (m.target == "/") {
    return InvalidArgumentError("mount " + Quoted(text) + ": cannot replace the image's root");
  }
  return m;
}

std::string ContainerMountText(const ContainerMount& mount) {
  return mount.source + ":" + mount.target + (mount.read_only ? ":ro" : ":rw");
}

Status ValidateContainerSpec(const ContainerSpec& spec) {
  if (spec.empty()) {
    if (!spec.mounts.empty() || !spec.workdir.empty() || spec.entrypoint_set) {
      return InvalidArgumentError("container: needs an image");
    }
    return Status::Ok();
  }
  StatusOr<std::string> normal = NormalizeImageReference(spec.image);
  if (!normal.ok()) {
    return InvalidArgumentError("image: " + normal.status().message());
  }
  if (*normal != spec.image) {
    return InvalidArgumentError("image: " + Quoted(spec.image) + " is not normalised (" + *normal +
                                ")");
  }
  if (spec.mounts.size() > kMaxContainerMounts) {
    return InvalidArgumentError("container.mounts: more than " +
                                std::to_string(kMaxContainerMounts));
  }
  std::set<std::string> targets;
  for (const ContainerMount& m : spec.mounts) {
    StatusOr<ContainerMount> again = ParseContainerMount(ContainerMountText(m));
    if (!again.ok()) {
      return InvalidArgumentError("container.mounts: " + again.status().message());
    }
    if (!(*again == m)) {
      return InvalidArgumentError("container.mounts: " + Quoted(ContainerMountText(m)) +
                                  " is not normalised");
    }
    if (!targets.insert(m.target).second) {
      return InvalidArgumentError("container.mounts: two mounts at " + m.target);
    }
  }
  if (!spec.workdir.empty()) {
    StatusOr<std::string> w = MountPath(spec.workdir, "container.workdir");
    if (!w.ok()) {
      return w.status();
    }
  }
  return Status::Ok();
}

}  // namespace tessera
