#include "api/job_codec_container.h"

#include <array>
#include <span>

#include "api/container_spec.h"
#include "api/job_keys.h"

namespace tessera {
namespace {

namespace keys = job_keys;

constexpr size_t kMaxArgBytes = 64 * 1024;

Status ReadEntrypoint(const Json& v, FieldReader& r, const std::string& at, ContainerSpec* c) {
  c->entrypoint_set = true;
  if (v.is_string()) {
    TESSERA_ASSIGN_OR_RETURN(std::string one, r.String(v, at, kMaxArgBytes));
    c->entrypoint = {std::move(one)};
    return Status::Ok();
  }
  TESSERA_RETURN_IF_ERROR(r.CheckArray(v, at, 64));
  for (size_t i = 0; i < v.size(); ++i) {
    TESSERA_ASSIGN_OR_RETURN(std::string arg, r.ScalarText(v[i], IndexPath(at, i), kMaxArgBytes));
    c->entrypoint.push_back(std::move(arg));
  }
  return Status::Ok();
}

// The keys of the `container` block at `path`; `allowed` lists them (and, in the
// agent protocol, the image).
Status ReadContainerBlock(const Json& v, FieldReader& r, const std::string& path,
                          std::span<const std::string_view> allowed, ContainerSpec* c) {
  TESSERA_RETURN_IF_ERROR(r.CheckObject(v, path, allowed));
  if (const Json* f = FindField(v, keys::kMounts)) {
    const std::string at = ChildPath(path, keys::kMounts);
    TESSERA_RETURN_IF_ERROR(r.CheckArray(*f, at, kMaxContainerMounts));
    for (size_t i = 0; i < f->size(); ++i) {
      const std::string item = IndexPath(at, i);
      TESSERA_ASSIGN_OR_RETURN(std::string text, r.String((*f)[i], item, 2 * 4096 + 8));
      StatusOr<ContainerMount> m = ParseContainerMount(text);
      if (!m.ok()) {
        return r.Error(item, m.status().message());
      }
      c->mounts.push_back(std::move(*m));
    }
  }
  if (const Json* f = FindField(v, keys::kWorkdir)) {
    TESSERA_ASSIGN_OR_RETURN(c->workdir, r.String(*f, ChildPath(path, keys::kWorkdir), 4096));
  }
  if (const Json* f = FindField(v, keys::kEntrypoint)) {
    TESSERA_RETURN_IF_ERROR(ReadEntrypoint(*f, r, ChildPath(path, keys::kEntrypoint), c));
  }
  if (const Json* f = FindField(v, keys::kMountHome)) {
    TESSERA_ASSIGN_OR_RETURN(c->mount_home, r.Bool(*f, ChildPath(path, keys::kMountHome)));
  }
  return Status::Ok();
}

// The block's keys as the job file writes them.
Json ContainerBlock(const ContainerSpec& c) {
  Json block = Json::object();
  if (!c.mounts.empty()) {
    Json mounts = Json::array();
    for (const ContainerMount& m : c.mounts) {
      mounts.push_back(ContainerMountText(m));
    }
    block[keys::kMounts] = std::move(mounts);
  }
  if (!c.workdir.empty()) {
    block[keys::kWorkdir] = c.workdir;
  }
  if (c.entrypoint_set) {
    block[keys::kEntrypoint] = c.entrypoint;
  }
  if (!c.mount_home) {
    block[keys::kMountHome] = false;
  }
  return block;
}

StatusOr<std::string> ImageField(const Json& v, FieldReader& r, const std::string& path) {
  TESSERA_ASSIGN_OR_RETURN(std::string text, r.String(v, path, kMaxImageReferenceLength));
  StatusOr<std::string> normal = NormalizeImageReference(text);
  if (!normal.ok()) {
    return r.Error(path, normal.status().message());
  }
  return *normal;
}

}  // namespace

Status ReadJobContainer(const Json& j, FieldReader& r, JobSubmission* job) {
  ContainerSpec c;
  const Json* image = FindField(j, keys::kImage);
  if (image != nullptr) {
    TESSERA_ASSIGN_OR_RETURN(c.image, ImageField(*image, r, "image"));
  }
  if (const Json* v = FindField(j, keys::kContainer)) {
    if (image == nullptr) {
      return r.Error("container", "needs an image to run in (`image:`)");
    }
    TESSERA_RETURN_IF_ERROR(ReadContainerBlock(*v, r, "container", keys::kContainerKeys, &c));
  }
  if (Status s = ValidateContainerSpec(c); !s.ok()) {
    return r.Error("", s.message());
  }
  job->container = std::move(c);
  return Status::Ok();
}

void WriteJobContainer(const JobSubmission& job, Json& out) { WriteContainer(job.container, out); }

void WriteContainer(const ContainerSpec& c, Json& out) {
  if (c.empty()) {
    return;
  }
  out[keys::kImage] = c.image;
  if (Json block = ContainerBlock(c); !block.empty()) {
    out[keys::kContainer] = std::move(block);
  }
}

Json ContainerSpecToJson(const ContainerSpec& c) {
  Json out = ContainerBlock(c);
  out[keys::kImage] = c.image;
  return out;
}

StatusOr<ContainerSpec> ContainerSpecFromJson(const Json& v, FieldReader& r,
                                              const std::string& path) {
  static constexpr std::array kKeys = {keys::kImage, keys::kMounts, keys::kWorkdir,
                                       keys::kEntrypoint, keys::kMountHome};
  ContainerSpec c;
  TESSERA_RETURN_IF_ERROR(ReadContainerBlock(v, r, path, kKeys, &c));
  const Json* image = FindField(v, keys::kImage);
  if (image == nullptr) {
    return r.Error(ChildPath(path, keys::kImage), "is required");
  }
  TESSERA_ASSIGN_OR_RETURN(c.image, ImageField(*image, r, ChildPath(path, keys::kImage)));
  if (Status s = ValidateContainerSpec(c); !s.ok()) {
    return r.Error(path, s.message());
  }
  return c;
}

}  // namespace tessera
