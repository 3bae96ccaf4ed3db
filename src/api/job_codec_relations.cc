#include "api/job_codec_relations.h"

#include <algorithm>

#include "api/job_relations.h"
#include "base/strings.h"

namespace tessera {

Status ReadJobRelations(const Json& j, FieldReader& r, JobSubmission* job) {
  constexpr size_t kMaxText = 64 * 1024;
  if (const Json* v = FindField(j, "array")) {
    TESSERA_ASSIGN_OR_RETURN(std::string text, r.ScalarText(*v, "array", kMaxText));
    StatusOr<ArraySpec> spec = ParseArraySpec(text);
    if (!spec.ok()) {
      return r.Error("array", spec.status().message());
    }
    job->array = ArraySpecText(*spec);
    if (const Json* i = FindField(j, "array_index")) {
      TESSERA_ASSIGN_OR_RETURN(job->array_index, r.Int(*i, "array_index", 0, kMaxArrayIndex));
      if (!std::binary_search(spec->indices.begin(), spec->indices.end(), job->array_index)) {
        return r.Error("array_index", "is not one of the array's indices (" + job->array + ")");
      }
    }
  } else if (FindField(j, "array_index") != nullptr) {
    return r.Error("array_index", "is set only on the elements of an array");
  }
  if (const Json* v = FindField(j, "dependency")) {
    TESSERA_ASSIGN_OR_RETURN(std::string text, r.ScalarText(*v, "dependency", kMaxText));
    StatusOr<DependencySpec> spec = ParseDependencySpec(text);
    if (!spec.ok()) {
      return r.Error("dependency", spec.status().message());
    }
    job->dependency = DependencySpecText(*spec);
  }
  if (const Json* v = FindField(j, "hold")) {
    TESSERA_ASSIGN_OR_RETURN(job->hold, r.Bool(*v, "hold"));
  }
  // A priority written as a name (the codec read it as 0) is a class for the server.
  std::string from_priority;
  if (const Json* v = FindField(j, "priority");
      v != nullptr && v->is_string() && !ParseInt64(v->get_ref<const std::string&>()).ok()) {
    from_priority = v->get_ref<const std::string&>();
  }
  if (const Json* v = FindField(j, "priority_class")) {
    TESSERA_ASSIGN_OR_RETURN(job->priority_class, r.ScalarText(*v, "priority_class", 128));
    if (!from_priority.empty() && from_priority != job->priority_class) {
      return r.Error("priority_class", "names '" + job->priority_class + "' but priority names '" +
                                           ToValidUtf8(from_priority.substr(0, 80)) + "'");
    }
  } else if (!from_priority.empty()) {
    if (from_priority.size() > 128) {
      return r.Error("priority", "a priority class name has at most 128 characters");
    }
    job->priority_class = from_priority;
  }
  if (!job->priority_class.empty() && !IsValidJobName(job->priority_class)) {
    return r.Error("priority_class", "'" + ToValidUtf8(job->priority_class.substr(0, 80)) +
                                         "' is not a valid name");
  }
  return Status::Ok();
}

void WriteJobRelations(const JobSubmission& job, Json& out) {
  if (!job.array.empty()) {
    out["array"] = job.array;
    if (job.array_index >= 0) {
      out["array_index"] = job.array_index;
    }
  }
  if (!job.dependency.empty()) {
    out["dependency"] = job.dependency;
  }
  if (job.hold) {
    out["hold"] = true;
  }
  if (!job.priority_class.empty()) {
    out["priority_class"] = job.priority_class;
  }
}

}  // namespace tessera
